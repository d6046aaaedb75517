"""bfloat16 rows for the Numba CPU kernel (`rope_ref.backends.numba_cpu`).

bfloat16 is the top half of a float32, so a load is exact: the 16 stored bits shifted
left by 16 are the float32 bit pattern. Each row is widened into a float32 buffer,
rotated there by the float32 tables (the float32 kernel's own loop, `_row`), and rounded once
back to bfloat16, to nearest even: add ``0x7FFF`` plus the lowest kept bit and drop the
low 16 bits (a carry into the exponent rounds up to the next binade or to infinity, as
it should); NaN stays NaN (quiet). The arrays arrive as uint16 views of the bit patterns.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .numba_rows import _first_row, _next_row, _row

__all__ = ["bf16_parallel", "bf16_serial"]


_LOW = np.uint32(0x7FFF)
_ONE = np.uint32(1)
_SIXTEEN = np.uint32(16)
_ABS = np.uint32(0x7FFFFFFF)
_INF = np.uint32(0x7F800000)
_QUIET = np.uint32(0x40)


@njit(inline="always", cache=True)
def _f32_bits_to_bf16(bits: np.uint32) -> np.uint16:  # pragma: no cover - numba
    """float32 bits to bfloat16 bits, round to nearest even; NaN stays a quiet NaN."""
    rounded = (bits + _LOW + ((bits >> _SIXTEEN) & _ONE)) >> _SIXTEEN
    quiet = (bits >> _SIXTEEN) | _QUIET
    return np.uint16(quiet if (bits & _ABS) > _INF else rounded)


@njit(inline="always", cache=True)
def _row_bf16(x, out, a, b, c, cos, sin, t, start, interleaved, sign, lo, hi, wide, buf):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rotate bfloat16 row ``x[a, b, c]`` into features ``lo..hi-1`` of ``out[a, b, c]``.

    `wide` is a uint32 array of two rows of ``head_dim``, flat, and `buf` its float32 view,
    ``(2, 1, 1, d)``. Pairs written in the other layout rotate into the second row.
    """
    d = np.uint64(x.shape[3])
    for i in range(d):
        wide[i] = np.uint32(x[a, b, c, i]) << _SIXTEEN
    r = 1 if interleaved >= 2 else 0  # pairs written elsewhere: rotate into a second row
    if r:
        for i in range(d):
            wide[d + i] = wide[i]
    _row(buf[0:1], buf[r : r + 1], 0, 0, 0, cos, sin, t, start, interleaved, sign)
    row = np.uint64(r) * d
    for i in range(np.uint64(lo), np.uint64(hi)):
        out[a, b, c, i] = _f32_bits_to_bf16(wide[row + i])


@njit(inline="always", cache=True)
def _rows_range_bf16(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, lo, hi):  # type: ignore[no-untyped-def]  # pragma: no cover  # fmt: skip
    _, b_size, c_size, d = x.shape
    ta, tb, tc = steps
    wide = np.empty(2 * d, dtype=np.uint32)
    buf = wide.view(np.float32).reshape((2, 1, 1, d))
    first = 0 if copy_rest else start
    last = d if copy_rest else start + 2 * cos.shape[1]
    a, b, c = _first_row(lo, b_size, c_size)
    for _ in range(lo, hi):
        t = t0 + a * ta + b * tb + c * tc
        _row_bf16(x, out, a, b, c, cos, sin, t, start, interleaved, sign, first, last, wide, buf)
        a, b, c = _next_row(a, b, c, b_size, c_size)


@njit(cache=True, nogil=True)
def bf16_serial(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rotate every row of the uint16 views `x` into `out` on the calling thread."""
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    _rows_range_bf16(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, 0, rows)


@njit(cache=True, nogil=True, parallel=True)
def bf16_parallel(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, chunks):  # type: ignore[no-untyped-def]  # pragma: no cover  # fmt: skip
    """`bf16_serial` on numba's threads, in `chunks` equal runs of rows."""
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    for k in prange(chunks):
        lo, hi = rows * k // chunks, rows * (k + 1) // chunks
        _rows_range_bf16(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, lo, hi)
