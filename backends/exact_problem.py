"""The tables of one exact call and the element-wise correct rounding against them.

`Problem` holds, for every distinct position row and pair, the double-double products
``A s cos`` and ``A s sin`` (attention factor, xPos scale, angle as real numbers), and
rounds ``u C - v S`` of given members correctly (`Problem.rotate`); the exact backend's
module docstring (`rope_ref.backends.exact`) says how and why every element is decided.
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

from . import exact_frequencies as freq
from .exact_dd import combine
from .exact_rounding import Format, round_dyadic, round_fraction, rounded_and_certain, to_format

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
        inverse: bool,
    ) -> None:  # fmt: skip
        self.spec, self.inverse = spec, inverse
        seq_len = check_seq_len(seq_len)
        top = max_plus_one(grid, np) if seq_len is None else seq_len
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
        power = (exact_value(ctx, row[0]) - center) / ctx.mpf(xpos.scale_base)
        return factor * ctx.exp(self.sign * power * log_zeta[j])

    def _rational_scale(self, row: Any, j: int) -> Fraction | None:
        """``A s`` as a fraction where it is rational by its formula, else None."""
        factor = freq.rational_attention_factor(self.spec, self.seq_len)
        xpos = self.spec.xpos
        if factor is None or xpos is None:
            return factor
        power = (Fraction(row[0].item()) - Fraction(xpos.center(self.center_len))) / Fraction(
            xpos.scale_base
        )
        zeta = rational_zeta(self.spec, j)
        if zeta is None or power.denominator != 1:
            return None
        return factor * zeta ** (self.sign * power.numerator)

    # -- tables ---------------------------------------------------------------------------------

    def _angle(self, ctx: Any, terms: AngleTerms, row: Any, j: int) -> Any:
        p = exact_value(ctx, row[self.axes[j]])
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
        zero_angle = np.zeros((n_rows, n), dtype=bool)
        zero_sin = np.zeros((n_rows, n))
        axes = [int(a) for a in self.axes]
        for r, row in enumerate(self.rows):
            values = [exact_value(ctx, v)._mpf_ for v in row]
            for j in range(n):
                angle = libmp.fzero
                for sign, w in raw_terms[j]:
                    product = libmp.mpf_mul(values[axes[j]], w)  # exact
                    angle = libmp.mpf_add(angle, product if sign > 0 else libmp.mpf_neg(product))
                c_, s_ = libmp.mpf_cos_sin(angle, prec)
                k = self._scale(ctx, factor, log_zeta, row, j)._mpf_
                if k != libmp.fone:
                    c_, s_ = libmp.mpf_mul(k, c_, prec), libmp.mpf_mul(k, s_, prec)
                cos[r, j] = _double_double(c_)
                sin[r, j] = _double_double(s_)
                scale[r, j] = abs(libmp.to_float(k))
                if angle == libmp.fzero:  # keeps the sign of zero float64 arithmetic gives it
                    zero_angle[r, j] = True
                    zero_sin[r, j] = math.sin(_float_angle(float(row[axes[j]]), w_float[j]))
        tables = {"scale": scale * (1 + 2.0**-40), "zero_angle": zero_angle}
        tables["c_hi"], tables["c_lo"] = cos[..., 0], cos[..., 1]
        tables["s_hi"], tables["s_lo"] = sin[..., 0], sin[..., 1]
        tables["s_hi"] = np.where(zero_angle, zero_sin, tables["s_hi"])
        return tables

    # -- rounding -------------------------------------------------------------------------------

    def rotate(self, u: F64, v: F64, rows: NDArray[np.intp], fmt: Format) -> F64:
        """``u C - v S`` of every element, correctly rounded to `fmt`."""
        t = {name: table[rows, np.arange(u.shape[-1])] for name, table in self.tables.items()}
        c_hi, s_hi = t["c_hi"], t["s_hi"]
        with np.errstate(all="ignore"):
            plain = u * c_hi - v * s_hi  # signs of exact zeros; inf and nan propagate
            hi, lo, err = combine(u, v, c_hi, t["c_lo"], s_hi, t["s_lo"], t["scale"] * 2.0**-100)
            y, certain = rounded_and_certain(hi, lo, err, fmt)
        safe = _in_range(u) & _in_range(v) & _in_range(t["scale"]) & np.isfinite(hi)
        exact_zero = (u == 0) & ((v == 0) | t["zero_angle"])
        settled = exact_zero | ~(np.isfinite(u) & np.isfinite(v))
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
    """Return ``(hi, lo)``, ``hi + lo`` the raw mpf `raw` to about 106 bits.

    Python rounds an int to float to nearest, so ``hi`` is the float64 rounding of `raw`.
    Past about 2**1000 only the sign is kept: the scale is then out of the safe range and
    every element that is not an exact zero goes to the interval path.
    """
    sign, mantissa, exponent, _ = raw
    if mantissa == 0:
        return 0.0, 0.0
    if exponent + mantissa.bit_length() > 1000:  # past float64: its sign, for signed zeros
        return (-(2.0**1000), 0.0) if sign else (2.0**1000, 0.0)
    top = float(mantissa)
    rest = float(mantissa - int(top))
    hi, lo = math.ldexp(top, exponent), math.ldexp(rest, exponent)
    return (-hi, -lo) if sign else (hi, lo)


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
