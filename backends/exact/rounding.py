"""Correct rounding for the exact backend: formats, rounding of exact values, the Ziv test.

A binary format is its precision ``p`` (bits, the leading one included) and the exponents
of its smallest and largest normal binades. Every value of every format here is a float64,
so results are carried as float64 until the final cast, which is then exact.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.rounding import FORMATS16, to_grid

__all__ = [
    "FORMATS",
    "Format",
    "round_dyadic",
    "round_fraction",
    "round_scaled",
    "rounded_and_certain",
    "ulp",
]

F64 = NDArray[np.float64]


class Format(NamedTuple):
    """A binary floating-point format: precision and normal exponent range."""

    name: str
    precision: int
    min_exponent: int
    max_exponent: int


FORMATS: dict[str, Format] = {
    "float64": Format("float64", 53, -1022, 1023),
    "float32": Format("float32", 24, -126, 127),
    "float16": Format("float16", 11, -14, 15),
    "bfloat16": Format("bfloat16", 8, -126, 127),
}


def round_dyadic(negative: bool, mantissa: int, exponent: int, fmt: Format) -> float:
    """``(-1)**negative * mantissa * 2**exponent`` rounded once, to nearest even, to `fmt`.

    Subnormals and overflow (to infinity) follow IEEE 754. The result is a float64 holding
    a value of `fmt` exactly.

    Examples
    --------
    >>> round_dyadic(False, 3, -1, FORMATS["float16"])   # 1.5 is representable
    1.5
    >>> round_dyadic(False, (1 << 11) + 1, -11, FORMATS["float16"])   # a tie: to even
    1.0
    >>> round_dyadic(True, 1, -25, FORMATS["float16"])   # half the least subnormal: to -0
    -0.0
    """
    sign = -1.0 if negative else 1.0
    if mantissa == 0:
        return sign * 0.0
    top = exponent + mantissa.bit_length() - 1
    quantum = max(top, fmt.min_exponent) - (fmt.precision - 1)
    if exponent >= quantum:
        rounded, quantum = mantissa, exponent
    else:
        shift = quantum - exponent
        rounded = mantissa >> shift
        rest = mantissa - (rounded << shift)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and rounded & 1):
            rounded += 1
    if rounded.bit_length() + quantum > fmt.max_exponent + 1:
        return sign * math.inf
    return sign * math.ldexp(rounded, quantum)


def round_fraction(value: Fraction, fmt: Format) -> float:
    """The rational `value` rounded once, to nearest even, to `fmt` (as `round_dyadic`).

    Examples
    --------
    >>> round_fraction(Fraction(1, 3), FORMATS["float64"]) == 1 / 3
    True
    >>> round_fraction(Fraction(-1, 2**25), FORMATS["float16"])   # half the least subnormal
    -0.0
    """
    num, den = abs(value.numerator), value.denominator
    sign = -1.0 if value < 0 else 1.0
    if num == 0:
        return sign * 0.0
    top = num.bit_length() - den.bit_length()  # floor(log2 |value|) is top or top - 1
    if num < den << top if top >= 0 else (num << -top) < den:
        top -= 1
    quantum = max(top, fmt.min_exponent) - (fmt.precision - 1)
    scaled_num, scaled_den = (num, den << quantum) if quantum >= 0 else (num << -quantum, den)
    rounded, rest = divmod(scaled_num, scaled_den)
    if 2 * rest > scaled_den or (2 * rest == scaled_den and rounded & 1):
        rounded += 1
    if rounded.bit_length() + quantum > fmt.max_exponent + 1:
        return sign * math.inf
    return sign * math.ldexp(rounded, quantum)


def ulp(y: F64, fmt: Format, shift: NDArray[np.int64] | int = 0) -> tuple[F64, F64]:
    """Distances from each `fmt` value `y` to its neighbours: (toward zero, away from zero).

    At the largest finite value the distance away from zero is the spacing of the last
    binade, so that half of it is the threshold of overflow. With `shift`, `y` and the
    distances are those of the values ``y * 2**shift``, scaled back by ``2**-shift``.
    """
    magnitude = np.abs(y)
    mantissa, exponent = np.frexp(magnitude)
    lowest = fmt.min_exponent - np.asarray(shift)
    top = np.maximum(exponent - 1, lowest)
    away = np.ldexp(1.0, top - (fmt.precision - 1))
    at_binade_start = (mantissa == 0.5) & (exponent - 1 > lowest)
    toward = np.where(at_binade_start, away / 2, away)
    toward = np.where(magnitude == 0, away, toward)
    return np.asarray(toward, dtype=np.float64), np.asarray(away, dtype=np.float64)


def to_format(values: F64, fmt: Format) -> F64:
    """Float64 `values` rounded once (nearest even) to `fmt`, returned as float64."""
    if fmt.name == "float64":
        return values
    if fmt.name in FORMATS16:
        with np.errstate(over="ignore", invalid="ignore"):
            grid = to_grid(values, fmt.name, xp=np)
        top = math.ldexp(2.0 - 2.0 ** (1 - fmt.precision), fmt.max_exponent)
        return np.asarray(np.where(np.abs(grid) > top, np.copysign(math.inf, grid), grid))
    with np.errstate(over="ignore"):
        return values.astype(np.float32).astype(np.float64)


def round_scaled(values: F64, fmt: Format, shift: NDArray[np.int64]) -> F64:
    """``y`` with ``y * 2**shift`` the rounding (nearest even) of ``values * 2**shift`` to `fmt`.

    The scaled values may lie far outside float64 (``shift`` of thousands): the rounding
    works on exponents, so nothing overflows or underflows on the way.
    """
    _, exponent = np.frexp(np.abs(values))
    quantum = np.maximum(exponent - 1, fmt.min_exponent - shift) - (fmt.precision - 1)
    with np.errstate(over="ignore", under="ignore"):
        y = np.ldexp(np.rint(np.ldexp(values, -quantum)), quantum)  # the scaled mantissa <= 2**p
    _, top = np.frexp(np.abs(y))
    overflow = (y != 0) & (top - 1 + shift > fmt.max_exponent)
    return np.asarray(np.where(overflow, np.copysign(math.inf, values), y), dtype=np.float64)


def rounded_and_certain(
    hi: F64, lo: F64, err: F64, fmt: Format, shift: NDArray[np.int64] | None = None
) -> tuple[F64, NDArray[np.bool_]]:
    """Round ``(hi + lo) * 2**shift`` to `fmt`; say where every value within `err` rounds alike.

    This is Ziv's rounding test (`err` bounds the error of ``hi + lo``, before the shift).
    ``hi + lo`` must be a normalised pair (``hi`` the float64 rounding of the sum). The test
    is strict: a value that may lie on a rounding boundary (a tie, or the threshold of
    overflow) is never certain, nor is a result of zero whose sign is in doubt. The
    rounded values are returned times ``2**shift``, exactly (each is a value of `fmt`).
    """
    shift = np.zeros(np.shape(hi), dtype=np.int64) if shift is None else shift
    y = round_scaled(hi, fmt, shift)
    finite = np.isfinite(y) & np.isfinite(hi)
    y_safe = np.where(finite, y, 0.0)
    hi_safe = np.where(finite, hi, 0.0)
    d = (hi_safe - y_safe) + np.where(finite, lo, 0.0)  # the first difference is exact
    slack = err + np.abs(d) * 2.0**-52 + 2.0**-1074
    toward, away = ulp(y_safe, fmt, shift)
    positive = y_safe > 0
    below = np.where(positive, toward, away) / 2  # room below y (toward -inf)
    above = np.where(positive, away, toward) / 2
    certain = finite & (d - slack > -below) & (d + slack < above)
    zero = y_safe == 0
    certain &= ~zero | (d - slack > 0) | (d + slack < 0)
    y = np.where(zero, np.copysign(0.0, d), y)
    with np.errstate(over="ignore", under="ignore"):  # exact where certain: values of `fmt`
        return np.asarray(np.ldexp(y, shift), dtype=np.float64), certain
