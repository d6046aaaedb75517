"""Arrays in and out of the exact backend: NumPy on the host, back to the caller's kind."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import Array, ArrayNamespace
from rope_ref._core.compat import device, dtype_name, to_numpy

__all__ = ["back_to", "on_host"]


def on_host(x: Array) -> NDArray[Any]:
    """`x` as a NumPy array of its own dtype (bfloat16 through ml_dtypes)."""
    if dtype_name(x.dtype) == "bfloat16" and not isinstance(x, np.ndarray):
        import ml_dtypes

        wide = x.float() if hasattr(x, "float") else x
        return np.asarray(to_numpy(wide)).astype(ml_dtypes.bfloat16)
    return np.asarray(to_numpy(x))


def back_to(result: NDArray[Any], x: Array, xp: ArrayNamespace) -> Array:
    """`result` (host, x's dtype) in x's namespace and on its device."""
    if isinstance(x, np.ndarray):
        return result
    carrier = np.float64 if dtype_name(x.dtype) == "float64" else np.float32
    moved = xp.asarray(result.astype(carrier), device=device(x))
    return xp.astype(moved, x.dtype)
