"""Independent computations for the bad-input, fuzz and thread tests.

Nothing here calls rope_ref's positions, tables or rotation code: positions are shifted
with Python integers by the documented rule, and RoPE is the textbook formula in NumPy
float64. The inverse frequencies come from `rr.inv_freq`, which other tests check against
mpmath and HF.
"""

from __future__ import annotations

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EPS64 = 2.0**-52


def fits_int64(*values: int) -> bool:
    return all(INT64_MIN <= v <= INT64_MAX for v in values)


def shifted(position: int | float, offset: int | float) -> float:
    """The documented shift of one position, as a float64.

    Integers (and integer-valued offsets) add exactly while position, offset and sum all fit
    int64; the exact sum is then rounded once. Otherwise both are rounded to float64 and
    added in float64.
    """
    if isinstance(position, int) and float(offset).is_integer():
        total = position + int(offset)
        if fits_int64(position, int(offset), total):
            return float(total)
    with np.errstate(over="ignore"):  # an overflow gives infinity: the call must refuse it
        return float(np.float64(float(position)) + np.float64(float(offset)))


def shifted_grid(positions: np.ndarray, offset: int | float) -> np.ndarray:
    """`shifted` of every element (NumPy integers read as Python integers)."""
    values = [shifted(v, offset) for v in positions.ravel().tolist()]
    return np.array(values, dtype=np.float64).reshape(positions.shape)


def rope_half(x: np.ndarray, positions: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """RoPE in the half layout, rotating the first 2 * len(theta) features, in float64.

    `positions` broadcasts against ``x.shape[:-1]``.
    """
    n = theta.shape[0]
    positions = np.asarray(positions, dtype=np.float64)
    lead = np.broadcast_shapes(x.shape[:-1], positions.shape)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), (*lead, x.shape[-1]))
    angles = positions[..., None] * theta
    c, s = np.cos(angles), np.sin(angles)
    a, b = x[..., :n], x[..., n : 2 * n]
    return np.concatenate([a * c - b * s, b * c + a * s, x[..., 2 * n :]], axis=-1)


def rotate_pairs(x: np.ndarray, angles: np.ndarray, layout: str = "half") -> np.ndarray:
    """Turn the pairs of `x` by `angles` (shape ``x.shape[:-1] + (n,)``), in float64.

    The pairs are features ``(j, j + n)`` (``"half"``) or ``(2j, 2j + 1)``
    (``"interleaved"``) of the first ``2n``; features past them are copied.
    """
    n = angles.shape[-1]
    head, rest = x[..., : 2 * n], x[..., 2 * n :]
    a, b = (
        (head[..., :n], head[..., n:]) if layout == "half" else (head[..., 0::2], head[..., 1::2])
    )
    cos, sin = np.cos(angles), np.sin(angles)
    a2, b2 = a * cos - b * sin, b * cos + a * sin
    turned = np.concatenate([a2, b2], axis=-1) if layout == "half" else np.stack([a2, b2], axis=-1)
    return np.concatenate([turned.reshape(head.shape), rest], axis=-1)


def rope_tolerance(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Per-element bound for a float64 rotation rounded once to `dtype`.

    Each output is a * c -/+ b * s of its own pair (a, b): float64 adds a few ulp of
    |a| + |b|; rounding to `dtype` adds half an ulp of the value itself, bounded by
    eps(dtype) * (|a| + |b|).
    """
    n = x.shape[-1] // 2
    x = np.abs(np.asarray(x, dtype=np.float64))
    pair = x[..., :n] + x[..., n : 2 * n]
    eps = float(np.finfo(dtype).eps)
    size = np.concatenate([pair, pair, x[..., 2 * n :]], axis=-1)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    return (4 * EPS64 + eps) * size + tiny


def assert_rope_equal(got: np.ndarray, expected: np.ndarray, x: np.ndarray) -> None:
    """`got` (in x.dtype) equals the float64 `expected` within each element's own bound."""
    assert got.dtype == x.dtype, (got.dtype, x.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    tol = rope_tolerance(np.broadcast_to(x, expected.shape), x.dtype)
    error = np.abs(got.astype(np.float64) - expected)
    assert np.all(error <= tol), float(np.max(error - tol))
