"""Small helpers shared by the tests (not fixtures)."""

from __future__ import annotations

import numpy as np

from rope_ref._compat import to_numpy


def host(a) -> np.ndarray:
    """Any array (torch, jax, dask, cupy, array-api-strict) as a NumPy array."""
    return to_numpy(a)


def max_abs(a, b) -> float:
    a, b = host(a), host(b)
    return float(np.max(np.abs(a - b))) if a.size else 0.0
