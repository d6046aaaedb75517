"""The tables of one exact call and the element-wise correct rounding against them.

`Problem` holds, for every distinct position row and pair, the double-double products
``A s cos`` and ``A s sin`` (attention factor, xPos scale, angle as real numbers), and
rounds ``u C - v S`` of given members correctly (`Problem.rotate`); the exact backend's
module docstring (`rope_ref.backends.exact.api`) says how and why every element is decided.
The angle of a pair is a sum of terms ``sign * p * w`` (one term for RoPE, two for a
re-rotation), so that it stays an exact product of the position and real frequencies.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext
from numpy.typing import NDArray

from rope_ref._core.aliases import ROLES, Role
from rope_ref._core.frequencies import check_seq_len, inferred_seq_len, max_plus_one, pair_axes
from rope_ref._core.spec import RopeSpec
from rope_ref._core.validation import check_choice
from rope_ref._core.xpos import XPos

from . import frequencies as freq
from .dd import combine
from .rounding import Format, round_dyadic, round_fraction, rounded_and_certain, to_format

__all__ = [
    "AngleTerms",
    "Problem",
    "distinct_rows",
    "exact_value",
    "rational_zeta",
    "raw_parts",
    "xpos_sign",
]

F64 = NDArray[np.float64]
#: Per pair: the terms ``(sign, w)`` whose sum ``sum(sign * p * w)`` is the angle.
AngleTerms = list[list[tuple[int, Any]]]
#: Table values and inputs outside this range (and not zero) go to the interval path.
_SAFE = (2.0**-300, 2.0**300)
_FIRST_BITS, _LAST_BITS = 128, 1 << 16


class Problem:
    """The tables of one call and the element-wise rounding against them."""

    def __init__(
        self, spec: RopeSpec, grid: NDArray[Any], seq_len: float | None, role: Role | None,
        inverse: bool, *, offset: int | float = 0, length_grid: NDArray[Any] | None = None,
    ) -> None:  # fmt: skip
        """`grid` holds the positions, each shifted by `offset` exactly (a real sum).

        `length_grid` (default `grid`) gives the length inferred where `seq_len` is None,
        and xPos's center: the positions after the reference's own shift.
        """
        self.spec, self.inverse = spec, inverse
        self.offset = Fraction(offset)
        self._offset_raw = _dyadic_raw(self.offset)
        seq_len = check_seq_len(seq_len)
        length_grid = grid if length_grid is None else length_grid
        top = max_plus_one(length_grid, np) if seq_len is None else seq_len
        self.seq_len = inferred_seq_len(top) if spec.scaling is not None else seq_len
        self.center_len = top
        self.sign = xpos_sign(spec, role)
        self.rows, self.row_of_grid = distinct_rows(spec, grid)
        self.axes = pair_axes(spec)
        self._interval_terms: dict[int, tuple[Any, AngleTerms, Any, list[Any] | None]] = {}
        self.tables = self._tables()

    # -- the real numbers of the call (overridden by a re-rotation) ---------------------------

    def _terms(self, ctx: Any) -> tuple[AngleTerms, Any, list[Any] | None]:
        """Angle terms per pair, the attention factor and the xPos ``ln zeta`` (or None)."""
        w = freq.omegas(ctx, self.spec, self.seq_len)
        sign = -1 if self.inverse else 1
        factor = freq.attention_factor(ctx, self.spec, self.seq_len)
        log_zeta = None if self.spec.xpos is None else freq.log_zetas(ctx, self.spec)
        return [[(sign, v)] for v in w], factor, log_zeta

    def _scale(self, ctx: Any, factor: Any, log_zeta: list[Any] | None, row: Any, j: int) -> Any:
        if log_zeta is None:
            return factor
        xpos = self.spec.xpos
        assert xpos is not None
        center = ctx.mpf(xpos.center(self.center_len))
        power = (self._position(ctx, row[0]) - center) / ctx.mpf(xpos.scale_base)
        return factor * ctx.exp(self.sign * power * log_zeta[j])

    def _rational_scale(self, row: Any, j: int) -> Fraction | None:
        """``A s`` as a fraction where it is rational by its formula, else None."""
        factor = freq.rational_attention_factor(self.spec, self.seq_len)
        xpos = self.spec.xpos
        if factor is None or xpos is None:
            return factor
        position = Fraction(row[0].item()) + self.offset
        power = (position - Fraction(xpos.center(self.center_len))) / Fraction(xpos.scale_base)
        zeta = rational_zeta(self.spec, j)
        if zeta is None or power.denominator != 1:
            return None
        return factor * zeta ** (self.sign * power.numerator)

    def _position(self, ctx: Any, value: Any) -> Any:
        """The position `value` plus the offset, as a number of `ctx`."""
        if not self.offset:
            return exact_value(ctx, value)
        return exact_value(ctx, value) + ctx.mpf(self.offset.numerator) / self.offset.denominator

    def _position_raw(self, value: Any) -> tuple[int, int, int, int]:
        """The position `value` plus the offset, exactly, as a raw mpf."""
        raw: tuple[int, int, int, int] = (
            libmp.from_int(int(value)) if isinstance(value, np.integer)
            else libmp.from_float(float(value))
        )  # fmt: skip
        if self.offset:
            raw = libmp.mpf_add(raw, self._offset_raw, 0)  # precision 0: the exact sum
        return raw

    def _position_float(self, value: Any) -> float:
        """The position plus the offset in float64 (only its sign of zero is used)."""
        return float(value) + float(self.offset) if self.offset else float(value)

    # -- tables ---------------------------------------------------------------------------------

    def _angle(self, ctx: Any, terms: AngleTerms, row: Any, j: int) -> Any:
        p = self._position(ctx, row[self.axes[j]])
        total = ctx.mpf(0)
        for sign, w in terms[j]:
            total += sign * p * w
        return total

    def _tables(self) -> dict[str, F64]:
        """Double-double ``A s cos`` and ``A s sin`` per distinct position row and pair.

        Works on mpmath's raw numbers (``libmp``): the products ``p w`` and their sum are
        exact, cos and sin are rounded to the working precision, which covers the angle's
        integer bits.
        """
        n, n_rows = self.spec.n_pairs, len(self.rows)
        top = float(np.max(np.abs(self.rows.astype(np.float64)))) if n_rows else 0.0
        top += abs(float(self.offset))
        rough = mpmath.MPContext()  # 53 bits, whatever the global mpmath precision
        rough_terms = self._terms(rough)[0]
        w_float = [[(sign, float(w)) for sign, w in pair] for pair in rough_terms]
        reach = top * max((sum(abs(w) for _, w in pair) for pair in w_float), default=0.0)
        self.reach_bits = max(0, math.frexp(reach)[1])
        ctx = mpmath.MPContext()
        prec = ctx.prec = _FIRST_BITS + 16 + self.reach_bits
        terms, factor, log_zeta = self._terms(ctx)
        raw_terms = [[(sign, w._mpf_) for sign, w in pair] for pair in terms]
        cos = np.empty((n_rows, n, 2))
        sin = np.empty((n_rows, n, 2))
        scale = np.empty((n_rows, n))
        shift = np.zeros((n_rows, n), dtype=np.int64)
        zero_angle = np.zeros((n_rows, n), dtype=bool)
        zero_sin = np.zeros((n_rows, n))
        axes = [int(a) for a in self.axes]
        for r, row in enumerate(self.rows):
            values = [self._position_raw(v) for v in row]
            for j in range(n):
                angle = libmp.fzero
                for sign, w in raw_terms[j]:
                    product = libmp.mpf_mul(values[axes[j]], w)  # exact
                    angle = libmp.mpf_add(angle, product if sign > 0 else libmp.mpf_neg(product))
                c_, s_ = libmp.mpf_cos_sin(angle, prec)
                k = self._scale(ctx, factor, log_zeta, row, j)._mpf_
                if k != libmp.fone:
                    c_, s_ = libmp.mpf_mul(k, c_, prec), libmp.mpf_mul(k, s_, prec)
                # |A s| is 2**t times a number in [1/2, 1): the tables hold the values / 2**t
                t = k[2] + k[3] if k[1] else 0
                cos[r, j] = _double_double(libmp.mpf_shift(c_, -t))
                sin[r, j] = _double_double(libmp.mpf_shift(s_, -t))
                scale[r, j] = abs(libmp.to_float(libmp.mpf_shift(k, -t)))
                shift[r, j] = t
                if angle == libmp.fzero:  # keeps the sign of zero float64 arithmetic gives it
                    zero_angle[r, j] = True
                    zero_sin[r, j] = math.sin(_float_angle(self._position_float(row[axes[j]]),
                                                           w_float[j]))  # fmt: skip
        tables = {"scale": scale * (1 + 2.0**-40), "zero_angle": zero_angle, "shift": shift}
        tables["c_hi"], tables["c_lo"] = cos[..., 0], cos[..., 1]
        tables["s_hi"], tables["s_lo"] = sin[..., 0], sin[..., 1]
        tables["s_hi"] = np.where(zero_angle, zero_sin, tables["s_hi"])
        return tables

    # -- rounding -------------------------------------------------------------------------------

    def rotate(self, u: F64, v: F64, rows: NDArray[np.intp], fmt: Format) -> F64:
        """``u C - v S`` of every element, correctly rounded to `fmt`.

        The members of each element are scaled by a power of two that brings the larger to
        ``[1/2, 1)``, the tables are held divided by the power of two of ``|A s|``, and the
        rounding takes both powers back: extreme magnitudes cost no more than others.
        """
        t = {name: table[rows, np.arange(u.shape[-1])] for name, table in self.tables.items()}
        c_hi, s_hi = t["c_hi"], t["s_hi"]
        finite = np.isfinite(u) & np.isfinite(v)
        _, members = np.frexp(np.where(finite, np.maximum(np.abs(u), np.abs(v)), 0.0))
        with np.errstate(all="ignore"):
            plain = u * c_hi - v * s_hi  # signs of exact zeros; inf and nan propagate
            su, sv = np.ldexp(u, -members), np.ldexp(v, -members)
            # a member below 2**-300 of its partner counts as zero, its share as error
            tiny = (np.abs(su) < _SAFE[0]) | (np.abs(sv) < _SAFE[0])
            dropped = np.where(np.abs(su) < _SAFE[0], np.abs(su), 0.0) + np.where(
                np.abs(sv) < _SAFE[0], np.abs(sv), 0.0
            )
            su = np.where(np.abs(su) < _SAFE[0], 0.0, su)
            sv = np.where(np.abs(sv) < _SAFE[0], 0.0, sv)
            table_err = t["scale"] * 2.0**-100
            hi, lo, err = combine(su, sv, c_hi, t["c_lo"], s_hi, t["s_lo"], table_err)
            err = np.where(tiny, err + 2 * dropped * t["scale"], err)
            shift = np.asarray(members + t["shift"], dtype=np.int64)
            y, certain = rounded_and_certain(hi, lo, err, fmt, shift)
        safe = _in_range(c_hi) & _in_range(s_hi) & np.isfinite(hi)
        exact_zero = (u == 0) & ((v == 0) | t["zero_angle"])
        settled = exact_zero | ~finite
        y = np.where(settled, to_format(plain, fmt), y)
        todo = np.argwhere(~settled & ~(certain & safe))
        for index in todo:
            at = tuple(index)
            pair = int(index[-1])
            y[at] = self._by_intervals(u[at], v[at], int(rows[(*at[:-1], 0)]), pair, fmt)
        return np.asarray(y, dtype=np.float64)

    def _by_intervals(self, u: float, v: float, row: int, j: int, fmt: Format) -> float:
        if self.tables["zero_angle"][row, j]:
            scale = self._rational_scale(self.rows[row], j)
            if scale is not None:  # u * scale exactly: ties decided by exact arithmetic
                return round_fraction(Fraction(float(u)) * scale, fmt)
        bits = _FIRST_BITS
        while bits <= _LAST_BITS:
            ctx, terms, factor, log_zeta = self._interval_context(bits)
            values = self.rows[row]
            s = self._scale(ctx, factor, log_zeta, values, j)
            angle = self._angle(ctx, terms, values, j)
            value = s * (ctx.mpf(float(u)) * ctx.cos(angle) - ctx.mpf(float(v)) * ctx.sin(angle))
            low, high = (float(round_dyadic(*raw_parts(end), fmt)) for end in value._mpi_)
            if low == high and math.copysign(1.0, low) == math.copysign(1.0, high):
                return low
            bits *= 2
        msg = (
            f"backend='exact' could not decide the rounding of an element at {_LAST_BITS} bits "
            f"(pair {j}, members {u!r}, {v!r}); no value is returned unproven."
        )
        raise ArithmeticError(msg)

    def _interval_context(self, bits: int) -> tuple[Any, AngleTerms, Any, list[Any] | None]:
        if bits not in self._interval_terms:
            ctx = MPIntervalContext()
            ctx.prec = bits + self.reach_bits
            self._interval_terms[bits] = (ctx, *self._terms(ctx))
        return self._interval_terms[bits]


def distinct_rows(spec: RopeSpec, grid: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """The distinct position rows of `grid`, and the index of each grid point's row."""
    width = 1 if spec.sections is None else len(spec.sections)
    flat = grid.reshape(-1, width)
    # by bits: -0.0 and 0.0 give sin(angle) zeros of different signs
    keys = flat.astype(np.float64).view(np.int64) if flat.dtype.kind == "f" else flat
    _, first, index = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    shape = grid.shape if spec.sections is None else grid.shape[:-1]
    return flat[first], np.asarray(index, dtype=np.intp).reshape(shape)


def exact_value(ctx: Any, value: Any) -> Any:
    """The exact value of a NumPy integer or float as a number of `ctx`."""
    return ctx.mpf(int(value)) if isinstance(value, np.integer) else ctx.mpf(float(value))


def rational_zeta(spec: RopeSpec, j: int) -> Fraction | None:
    """The xPos decay base of pair `j` as a fraction (`rope_ref.XPos`), else None."""
    d = spec.rotary_dim
    if type(spec.xpos) is not XPos or d is None:
        return None
    return Fraction(10 * j + 2 * d, 7 * d)


def _float_angle(p: float, terms: list[tuple[int, float]]) -> float:
    """The angle's terms summed in float64 (only its sign of zero is used)."""
    total = None
    for sign, w in terms:
        term = sign * (p * w)
        total = term if total is None else total + term
    return 0.0 if total is None else total


def _double_double(raw: tuple[int, int, int, int]) -> tuple[float, float]:
    """Return ``(hi, lo)``, ``hi + lo`` the raw mpf `raw` (of magnitude below 2) to 106 bits.

    The mantissa is first cut to 128 bits (a relative error below 2**-127); Python rounds
    an int to float to nearest, so ``hi`` is the float64 rounding of what is left.
    """
    sign, mantissa, exponent, _ = raw
    if mantissa == 0:
        return 0.0, 0.0
    extra = mantissa.bit_length() - 128
    if extra > 0:
        mantissa, exponent = mantissa >> extra, exponent + extra
    top = float(mantissa)
    rest = float(mantissa - int(top))
    hi, lo = math.ldexp(top, exponent), math.ldexp(rest, exponent)
    return (-hi, -lo) if sign else (hi, lo)


def _dyadic_raw(value: Fraction) -> tuple[int, int, int, int]:
    """The fraction `value`, whose denominator is a power of two, as an exact raw mpf."""
    shift = value.denominator.bit_length() - 1
    raw: tuple[int, int, int, int] = libmp.from_man_exp(value.numerator, -shift)
    return raw


def raw_parts(end: tuple[int, int, int, int]) -> tuple[bool, int, int]:
    """Sign, mantissa and exponent of a raw mpf, as `round_dyadic` takes them."""
    sign, mantissa, exponent, _ = end
    return bool(sign), int(mantissa), int(exponent)


def _in_range(values: F64) -> NDArray[np.bool_]:
    magnitude = np.abs(values)
    inside = (magnitude >= _SAFE[0]) & (magnitude <= _SAFE[1])
    return np.asarray((magnitude == 0) | inside, dtype=bool)


def xpos_sign(spec: RopeSpec, role: Role | None) -> int:
    """+1 for queries, -1 for keys under xPos; 0 without xPos (`role` then only checked)."""
    if spec.xpos is None:
        if role is not None:
            check_choice("role", role, ROLES)
        return 0
    if role is None:
        msg = "`role` must be 'query' or 'key' when spec.xpos is set; got None."
        raise ValueError(msg)
    return 1 if check_choice("role", role, ROLES) == "query" else -1
