"""Context-extension rules for `rope_ref.RopeSpec.scaling`."""

__all__: list[str] = []
