"""The pair-wise extremes of `rope_ref.testing._extremes` as one compiled loop (Numba).

Imported only where Numba is: `_extremes` falls back to its NumPy passes otherwise. The
loop reads each pair of the oracle's result and of the result under test once, keeps the
largest error and the largest ``max(e_a, e_b) / (|pair| * per_row)``, and allocates
nothing; it computes each number with the operations of the NumPy route, in the same
order (``sqrt(a * a + b * b)``, no fused multiply-add: Numba compiles without
``fastmath``), so both give the same bits. Compiled on first call and cached on disk
(``cache=True``): a test session pays the compilation once per machine, then a load.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["BAD", "pair_extremes"]

#: What `pair_extremes` returns for its ratio when the NumPy route must decide instead.
BAD = -1.0


@njit(cache=True, nogil=True)
def pair_extremes(
    expected: np.ndarray,
    actual: np.ndarray,
    per_row: np.ndarray,
    start: int,
    n_pairs: int,
    half: bool,
    low: float,
    high: float,
) -> tuple[float, float]:
    """Largest error and ratio over the rotated pairs of 2-D `expected` and `actual`.

    Pair ``j`` of a row is features ``(start + j, start + n_pairs + j)`` when `half`,
    else ``(start + 2j, start + 2j + 1)``. Returns ``(0, BAD)`` where an error is not
    finite or a pair norm lies outside ``(low, high)``.
    """
    top_error = 0.0
    top_ratio = 0.0
    for i in range(expected.shape[0]):
        scale = per_row[i]
        for j in range(n_pairs):
            if half:
                p = start + j
                q = p + n_pairs
            else:
                p = start + 2 * j
                q = p + 1
            first = expected[i, p]
            second = expected[i, q]
            first_error = abs(np.float64(actual[i, p]) - first)
            second_error = abs(np.float64(actual[i, q]) - second)
            if not (first_error < math.inf and second_error < math.inf):  # NaN too
                return 0.0, BAD
            worse = max(first_error, second_error)
            norm = math.sqrt(first * first + second * second)
            if not (norm > low and norm < high):
                return 0.0, BAD
            ratio = worse / (norm * scale)
            top_error = max(top_error, worse)
            top_ratio = max(top_ratio, ratio)
    return top_error, top_ratio
