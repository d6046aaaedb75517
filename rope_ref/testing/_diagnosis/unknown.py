"""What is known when no cause explains the mismatch."""

from __future__ import annotations

import numpy as np

from rope_ref.testing._compare import Comparison
from rope_ref.testing._diagnosis.shared import failing_pairs, fmt, ranges, row_failed

__all__ = ["unknown_message"]


def _span(grid: np.ndarray) -> str:
    """``a to b`` per position axis (``(t, h, w)`` ranges for a multi-axis grid)."""
    if grid.ndim == 1:
        return f"{fmt(float(np.min(grid)))} to {fmt(float(np.max(grid)))}"
    return ", ".join(f"axis {a}: {_span(grid[:, a])}" for a in range(grid.shape[-1]))


def unknown_message(c: Comparison) -> str:
    s = c.setup
    rows = row_failed(c)
    multi = s.spec.sections is not None
    grid = s.grid.reshape(-1, s.grid.shape[-1]) if multi else s.grid.reshape(-1)
    flat = rows.reshape(-1)
    parts = ["no single known cause explains the mismatch"]
    if np.any(flat) and np.any(~flat):
        parts.append(
            f"failing rows sit at positions {_span(grid[flat])}; passing rows at "
            f"{_span(grid[~flat])}"
        )
    pairs = _failing_pairs(c)
    if pairs is not None:
        parts.append(f"only pairs {pairs} differ")
    return "; ".join(parts) + "."


def _failing_pairs(c: Comparison) -> str | None:
    """The failing pairs when only some fail, as ranges."""
    bad = failing_pairs(c) if c.setup.spec.n_pairs else np.zeros(0, dtype=bool)
    if not np.any(bad) or np.all(bad):
        return None
    return f"{ranges(np.flatnonzero(bad).tolist())} (of {c.setup.spec.n_pairs})"
