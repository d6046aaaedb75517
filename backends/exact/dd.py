"""Double-double arithmetic for the exact backend's fast pass, with rigorous error bounds.

A double-double is an unevaluated sum ``hi + lo`` of two float64 values. Products are
exact through Dekker's splitting (no fused multiply-add in NumPy), sums through Knuth's
two-sum; inputs must keep every product between about 2**-600 and 2**600 so that nothing
overflows or underflows (the caller screens them).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["combine", "two_product", "two_sum"]

F64 = NDArray[np.float64]
_SPLITTER = 134217729.0  # 2**27 + 1


def _split(a: F64) -> tuple[F64, F64]:
    c = _SPLITTER * a
    high = c - (c - a)
    return high, a - high


def two_product(a: F64, b: F64) -> tuple[F64, F64]:
    """``a * b`` exactly, as the float64 product and its rounding error."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, err


def two_sum(a: F64, b: F64) -> tuple[F64, F64]:
    """``a + b`` exactly, as the float64 sum and its rounding error."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def combine(
    u: F64, v: F64, c_hi: F64, c_lo: F64, s_hi: F64, s_lo: F64, table_err: F64
) -> tuple[F64, F64, F64]:
    """``u C - v S`` as a normalised double-double ``(hi, lo)`` and a bound on its error.

    `table_err` bounds ``|C - c_hi - c_lo|`` and ``|S - s_hi - s_lo|``.
    """
    p, p_err = two_product(u, c_hi)
    q, q_err = two_product(v, s_hi)
    s, t = two_sum(p, -q)
    tails = (p_err - q_err) + (u * c_lo - v * s_lo)
    hi, lo = two_sum(s, t + tails)
    # four rounded operations on terms each below 2**-52 (|p| + |q|) (1 + 2**-52)
    magnitude = np.abs(p) + np.abs(q)
    err = (np.abs(u) + np.abs(v)) * table_err + magnitude * 2.0**-100 + 2.0**-1060
    return hi, lo, err * (1 + 2.0**-40)
