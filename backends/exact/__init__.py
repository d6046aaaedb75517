"""``backend="exact"``: each element the correctly rounded real rotation (mpmath)."""
