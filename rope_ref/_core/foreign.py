"""Arrays of frameworks outside the array API: MLX (``mlx.core.array``).

MLX arrays announce ``__array_namespace__`` but ``mlx.core`` is not an array-API namespace
(no ``device`` attribute, no ``isdtype``), and NumPy cannot read their bfloat16 buffers.
The MLX adapter of the engine (``rope_ref._engine.kinds``) lets `rope_ref.apply_rope` and
`apply_rope_qk` take them: the inputs are read on the host (`compute_array`: bfloat16 as
float64, exactly), the engine's runner runs in NumPy, and the result comes back as an MLX
array of the input's dtype (`to_mlx`), rounded once (bfloat16 results are rounded from
float64 onto the bfloat16 grid, then cast, which keeps them).
`host_array` reads one for the testing kit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rope_ref._core.compat import host_namespace
from rope_ref._core.rounding import to_grid

__all__ = ["compute_array", "host_array", "is_mlx_array", "to_mlx"]


def is_mlx_array(obj: object) -> bool:
    """Whether `obj` is an ``mlx.core.array`` (checked without importing MLX)."""
    kind = type(obj)
    return kind.__name__ == "array" and kind.__module__.startswith("mlx")


def host_array(a: Any) -> np.ndarray:
    """An MLX array as a NumPy array: float16/float32 as they are, bfloat16 as float32."""
    if _is_bfloat16(a):
        import mlx.core as mx

        a = a.astype(mx.float32)  # exact: every bfloat16 is a float32
    return np.array(a, copy=True)


def _is_bfloat16(a: Any) -> bool:
    return "bfloat16" in str(a.dtype)


def compute_array(a: Any) -> np.ndarray:
    """An MLX array for the computation: bfloat16 as float64, so the result rounds once."""
    host = host_array(a)
    return host.astype(np.float64) if _is_bfloat16(a) else host


def to_mlx(result: Any, like: Any) -> Any:
    """`result` as an MLX array of `like`'s dtype (a pair: each of `like`'s pair)."""
    import mlx.core as mx

    if isinstance(result, tuple):  # queries and keys: each back in its own dtype
        return tuple(to_mlx(r, one) for r, one in zip(result, like, strict=False))
    values = np.asarray(result)
    if _is_bfloat16(like):  # float64 onto the bfloat16 grid: the casts below are exact
        values = to_grid(values, "bfloat16", xp=host_namespace()).astype(np.float32)
    return mx.array(values).astype(like.dtype)
