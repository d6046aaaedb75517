"""The pytest plugin that installing rope-ref registers (entry point ``pytest11``)."""
