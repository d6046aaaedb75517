"""rope_ref as an oracle in other projects' tests."""

__all__: list[str] = []
