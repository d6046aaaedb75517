"""One row of the Numba CPU kernel, shared by the loops of every dtype.

`_row` rotates the pairs of one row by one table row (`rope_ref.backends.numba.cpu` calls
it); it reads each element through `widen` and writes each result through `narrow`
(`rope_ref.backends.numba.convert`), which are the identity for float32 and float64 and
the 16-bit conversions for the bit patterns of float16 and bfloat16, so the same loop,
vectorised, serves them all. `_first_row` and `_next_row` walk the rows of a 4-D view
without a division per row.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .convert import narrow, widen

__all__: list[str] = []


@njit(inline="always", cache=True)
def _row(x, out, a, b, c, cos, sin, t, start, interleaved, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rotate the pairs of row ``x[a, b, c]`` into ``out[a, b, c]`` by table row `t`.

    Feature and table indices are unsigned, so numba emits no negative-index wrap-around
    for them: the pair loop is then plain strided loads and stores, which LLVM vectorises
    when the feature axis is contiguous, and no view is made per row. (Features outside
    the rotary slice are copied by `_copy_rest`, in a loop of its own: inside this one it
    kept LLVM from vectorising.)
    """
    n = np.uint64(cos.shape[1])
    tu = np.uint64(t)
    first = np.uint64(start)
    if interleaved >= 2:  # pairs written in the other layout (`cpu._MODES`)
        _row_crossed(x, out, a, b, c, cos, sin, tu, first, n, interleaved == 2, sign)
    # The commonest pair counts (head_dim 128 and 64) get loops of a length known when
    # compiled: no remainder loop and no trip-count arithmetic, 7 % less time per row
    # (`docs/kernels/numba.md`).
    elif interleaved:
        if n == 64:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(64), sign)
        elif n == 32:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(32), sign)
        else:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign)
    elif n == 64:
        _half_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(64), sign)
    elif n == 32:
        _half_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(32), sign)
    else:
        _half_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign)


@njit(inline="always", cache=True)
def _half_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row`'s pairs ``(first + j, first + j + n)``, `n` of them."""
    for j in range(n):
        cj = cos[tu, j]
        sj = sign * sin[tu, j]
        i = first + j
        u = widen(x[a, b, c, i])
        v = widen(x[a, b, c, i + n])
        out[a, b, c, i] = narrow(u * cj - v * sj, out)
        out[a, b, c, i + n] = narrow(v * cj + u * sj, out)


@njit(inline="always", cache=True)
def _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row`'s pairs ``(first + 2j, first + 2j + 1)``, `n` of them."""
    one, two = np.uint64(1), np.uint64(2)
    for j in range(n):
        cj = cos[tu, j]
        sj = sign * sin[tu, j]
        i = first + two * j
        u = widen(x[a, b, c, i])
        v = widen(x[a, b, c, i + one])
        out[a, b, c, i] = narrow(u * cj - v * sj, out)
        out[a, b, c, i + one] = narrow(v * cj + u * sj, out)


@njit(inline="always", cache=True)
def _row_crossed(x, out, a, b, c, cos, sin, tu, first, n, from_interleaved, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row` for pairs read in one layout and written in the other (`out` is not `x`)."""
    one, two = np.uint64(1), np.uint64(2)
    if from_interleaved:
        for j in range(n):
            cj = cos[tu, j]
            sj = sign * sin[tu, j]
            u = widen(x[a, b, c, first + two * j])
            v = widen(x[a, b, c, first + two * j + one])
            out[a, b, c, first + j] = narrow(u * cj - v * sj, out)
            out[a, b, c, first + j + n] = narrow(v * cj + u * sj, out)
    else:
        for j in range(n):
            cj = cos[tu, j]
            sj = sign * sin[tu, j]
            u = widen(x[a, b, c, first + j])
            v = widen(x[a, b, c, first + j + n])
            out[a, b, c, first + two * j] = narrow(u * cj - v * sj, out)
            out[a, b, c, first + two * j + one] = narrow(v * cj + u * sj, out)


@njit(inline="always", cache=True)
def _next_row(a, b, c, b_size, c_size):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The row after ``(a, b, c)``, counting without a division per row."""
    c += 1
    if c == c_size:
        c = 0
        b += 1
        if b == b_size:
            b = 0
            a += 1
    return a, b, c


@njit(inline="always", cache=True)
def _first_row(r, b_size, c_size):  # type: ignore[no-untyped-def]  # pragma: no cover
    ab = r // c_size
    return ab // b_size, ab % b_size, r % c_size
