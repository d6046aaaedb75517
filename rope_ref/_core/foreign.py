"""Arrays of frameworks outside the array API: MLX (``mlx.core.array``).

MLX arrays announce ``__array_namespace__`` but ``mlx.core`` is not an array-API namespace
(no ``device`` attribute, no ``isdtype``), and NumPy cannot read their bfloat16 buffers.
`on_host` lets `rope_ref.apply_rope` and `apply_rope_qk` take them: the inputs are read on
the host (bfloat16 as float64, exactly), the engine's runner (handed in as a function) runs
in NumPy, and the result comes back as an MLX array of the input's dtype, rounded once
(bfloat16 results are rounded from float64 onto the bfloat16 grid, then cast, which keeps
them).
`host_array` reads one for the testing kit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rope_ref._core.compat import host_namespace
from rope_ref._core.rounding import to_grid

__all__ = ["host_array", "is_mlx_array", "on_host"]


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


def _compute_array(a: Any) -> np.ndarray:
    """An MLX array for the computation: bfloat16 as float64, so the result rounds once."""
    host = host_array(a)
    return host.astype(np.float64) if _is_bfloat16(a) else host


def _to_mlx(result: Any, like: Any) -> Any:
    import mlx.core as mx

    if isinstance(result, tuple):  # queries and keys: each back in its own dtype
        return tuple(_to_mlx(r, one) for r, one in zip(result, like, strict=False))
    values = np.asarray(result)
    if _is_bfloat16(like):  # float64 onto the bfloat16 grid: the casts below are exact
        values = to_grid(values, "bfloat16", xp=host_namespace()).astype(np.float32)
    return mx.array(values).astype(like.dtype)


def on_host(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with its MLX arguments read on the host, the result as MLX.

    `rope_ref.apply_rope` and `apply_rope_qk` call it when ``is_mlx_array(x)``, with a road
    of the engine's runner as `fn`, after their short roads (which take NumPy arrays and
    tensors alone), so those pay nothing for it. An `out` for MLX arrays (immutable) is
    refused before, by the engine, as for JAX arrays.
    """
    host = [_compute_array(a) if is_mlx_array(a) else a for a in args]
    moved = {k: _compute_array(v) if is_mlx_array(v) else v for k, v in kwargs.items()}
    result = fn(*host, **moved)
    like = args[: len(result)] if isinstance(result, tuple) else args[0]
    return _to_mlx(result, like)
