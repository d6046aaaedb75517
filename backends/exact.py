"""The exact backend: the real-number RoPE of the inputs, rounded once to x's dtype.

Reached through ``rope_ref.apply_rope(x, spec, backend="exact")``. Each output element is

    a' = A s (a cos(p w) - b sin(p w)),   b' = A s (b cos(p w) + a sin(p w))

for its pair (a, b), with the position p (after `offset`) and every float input taken as
the exact value it holds, w the spec's inverse frequency, A the attention factor and s the
xPos scale as real numbers (`rope_ref.backends.exact_frequencies` says which rules are
formulas), rounded to nearest even to x's dtype (float64, float32, float16, bfloat16),
subnormals and overflow included.

How
---
1. For every distinct position (row of positions for multi-axis specs) and pair, the
   products ``A s cos`` and ``A s sin`` are computed in mpmath with about 128 correct bits
   (the angle with as many more as it has integer bits) and kept as double-doubles with an
   error bound of 2**-100 of ``|A s|``.
2. Each element is ``a C - b S`` in double-double arithmetic (Dekker products, exact sums)
   with a rigorous error bound, rounded to the target format, and kept where the whole
   error interval rounds to the same value (Ziv's test).
3. The rest (near a rounding boundary, heavy cancellation, extreme magnitudes) are computed
   one by one in mpmath interval arithmetic, the precision doubling from 128 bits until
   both ends of the interval round alike.

Step 3 ends whenever the exact value is not itself a rounding boundary (a tie or zero).
The value is exactly zero only when both of its products are (a zero member against a zero
angle or a zero partner); those take the sign IEEE arithmetic gives the reference, and are
settled before step 2. At a zero angle, without xPos and without a logarithmic attention
factor, every interval operation is exact, so ties there are decided exactly. Otherwise the
angle is algebraic and non-zero (positions, rational powers of the base, float factors),
and by the Lindemann-Weierstrass theorem ``a cos + b sin`` is then transcendental unless
``a = b = 0``: no tie is possible. (With YaRN's ``0.1 ln s + 1`` factor the same follows
from Schanuel's conjecture.) If a value does stay undecided past 65536 bits, an
ArithmeticError says so; no unproven value is ever returned.
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

from rope_ref._core.aliases import ROLES, Array, ArrayNamespace, Role
from rope_ref._core.compat import device, dtype_name, to_numpy
from rope_ref._core.frequencies import check_seq_len, inferred_seq_len, max_plus_one, pair_axes
from rope_ref._core.reference import join_pairs, split_pairs
from rope_ref._core.spec import RopeSpec
from rope_ref._core.validation import check_choice
from rope_ref._core.xpos import XPos
from rope_ref._engine.api import laid_out_positions

from . import exact_frequencies as freq
from .exact_dd import combine
from .exact_rounding import (
    FORMATS,
    Format,
    round_dyadic,
    round_fraction,
    rounded_and_certain,
    to_format,
)

__all__ = ["apply"]

F64 = NDArray[np.float64]
#: Table values and inputs outside this range (and not zero) go to the interval path.
_SAFE = (2.0**-300, 2.0**300)
_FIRST_BITS, _LAST_BITS = 128, 1 << 16


def apply(
    x: Array,
    spec: RopeSpec,
    positions: Array | None,
    *,
    offset: object,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    role: Role | None,
    out: Array | None,
    xp: ArrayNamespace,
) -> Array:
    """Return the correctly rounded RoPE of `x` (see the module docstring).

    The arguments are those `rope_ref.apply_rope` has checked.
    """
    if out is not None:
        msg = "`out` is supported by the kernel backends ('numba', 'cupy') only; got an array."
        raise ValueError(msg)
    fmt = FORMATS[dtype_name(x.dtype)]
    p, _ = laid_out_positions(x, spec, positions, offset=offset, seq_axis=seq_axis, xp=xp)
    grid = np.asarray(to_numpy(p))
    problem = _Problem(spec, grid, seq_len, role, inverse)
    host = _host(x)
    stop = spec.rotary_start + 2 * spec.n_pairs
    read, written = spec.layout, spec.output_layout or spec.layout
    if inverse:  # the inverse reads what the forward rotation wrote
        read, written = written, read
    a, b = split_pairs(host[..., spec.rotary_start : stop].astype(np.float64), layout=read)
    shape = a.shape
    rows = np.broadcast_to(problem.row_of_grid, shape[:-1])[..., None]
    first = problem.rotate(a, b, rows, fmt, member=0)
    second = problem.rotate(b, -a, rows, fmt, member=1)
    rotated = join_pairs(first, second, layout=written, xp=np)
    result = host.copy()
    result[..., spec.rotary_start : stop] = rotated.astype(host.dtype)
    return _back(result, x, xp)


class _Problem:
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
        self.sign = _xpos_sign(spec, role)
        width = 1 if spec.sections is None else len(spec.sections)
        flat = grid.reshape(-1, width)
        # by bits: -0.0 and 0.0 give sin(angle) zeros of different signs
        keys = flat.astype(np.float64).view(np.int64) if flat.dtype.kind == "f" else flat
        _, first, inverse_index = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        self.rows = flat[first]
        self.row_of_grid = inverse_index.reshape(grid.shape[: grid.ndim - (width > 1)])
        if spec.sections is None:
            self.row_of_grid = self.row_of_grid.reshape(grid.shape)
        self.axes = pair_axes(spec)
        self._interval_terms: dict[int, tuple[Any, list[Any], Any, list[Any] | None]] = {}
        self.tables = self._tables()

    def _exact(self, ctx: Any, value: Any) -> Any:
        return ctx.mpf(int(value)) if isinstance(value, np.integer) else ctx.mpf(float(value))

    def _terms(self, ctx: Any) -> tuple[list[Any], Any, list[Any] | None]:
        w = freq.omegas(ctx, self.spec, self.seq_len)
        factor = freq.attention_factor(ctx, self.spec, self.seq_len)
        log_zeta = None if self.spec.xpos is None else freq.log_zetas(ctx, self.spec)
        return w, factor, log_zeta

    def _scale(self, ctx: Any, factor: Any, log_zeta: list[Any] | None, row: Any, j: int) -> Any:
        if log_zeta is None:
            return factor
        xpos = self.spec.xpos
        assert xpos is not None
        center = ctx.mpf(xpos.center(self.center_len))
        power = (self._exact(ctx, row[0]) - center) / ctx.mpf(xpos.scale_base)
        return factor * ctx.exp(self.sign * power * log_zeta[j])

    def _angle(self, ctx: Any, w: list[Any], row: Any, j: int) -> Any:
        phi = self._exact(ctx, row[self.axes[j]]) * w[j]
        return -phi if self.inverse else phi

    def _tables(self) -> dict[str, F64]:
        """Double-double ``A s cos`` and ``A s sin`` per distinct position row and pair.

        Works on mpmath's raw numbers (``libmp``): the product ``p w`` is exact, cos and
        sin are rounded to the working precision, which covers the angle's integer bits.
        """
        n, n_rows = self.spec.n_pairs, len(self.rows)
        top = float(np.max(np.abs(self.rows.astype(np.float64)))) if n_rows else 0.0
        rough = mpmath.MPContext()  # 53 bits, whatever the global mpmath precision
        w_float = [float(v) for v in freq.omegas(rough, self.spec, self.seq_len)]
        reach = top * max(w_float, default=0.0)
        self.reach_bits = max(0, math.frexp(reach)[1])
        ctx = mpmath.MPContext()
        prec = ctx.prec = _FIRST_BITS + 16 + self.reach_bits
        w, factor, log_zeta = self._terms(ctx)
        w_raw = [v._mpf_ for v in w]
        cos = np.empty((n_rows, n, 2))
        sin = np.empty((n_rows, n, 2))
        scale = np.empty((n_rows, n))
        zero_angle = np.zeros((n_rows, n), dtype=bool)
        axes = [int(a) for a in self.axes]
        for r, row in enumerate(self.rows):
            values = [self._exact(ctx, v)._mpf_ for v in row]
            for j in range(n):
                angle = libmp.mpf_mul(values[axes[j]], w_raw[j])  # exact
                if self.inverse:
                    angle = libmp.mpf_neg(angle)
                c_, s_ = libmp.mpf_cos_sin(angle, prec)
                k = self._scale(ctx, factor, log_zeta, row, j)._mpf_
                if k != libmp.fone:
                    c_, s_ = libmp.mpf_mul(k, c_, prec), libmp.mpf_mul(k, s_, prec)
                cos[r, j] = _double_double(c_)
                sin[r, j] = _double_double(s_)
                scale[r, j] = abs(libmp.to_float(k))
                zero_angle[r, j] = angle == libmp.fzero
        tables = {"scale": scale * (1 + 2.0**-40), "zero_angle": zero_angle}
        tables["c_hi"], tables["c_lo"] = cos[..., 0], cos[..., 1]
        tables["s_hi"], tables["s_lo"] = sin[..., 0], sin[..., 1]
        # a zero angle keeps the sign of zero the float64 reference gives it
        angle_sign = np.array([[float(row[self.axes[j]]) * w_float[j] for j in range(n)]
                               for row in self.rows]).reshape(n_rows, n)  # fmt: skip
        zero_sin = np.sin(angle_sign) * (-1.0 if self.inverse else 1.0)
        tables["s_hi"] = np.where(zero_angle, zero_sin, tables["s_hi"])
        return tables

    def rotate(self, u: F64, v: F64, rows: NDArray[np.intp], fmt: Format, *, member: int) -> F64:
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
            ctx, w, factor, log_zeta = self._interval_context(bits)
            values = self.rows[row]
            s = self._scale(ctx, factor, log_zeta, values, j)
            c_, s_ = (
                ctx.cos(self._angle(ctx, w, values, j)),
                ctx.sin(self._angle(ctx, w, values, j)),
            )
            value = s * (ctx.mpf(float(u)) * c_ - ctx.mpf(float(v)) * s_)
            low, high = (float(round_dyadic(*_raw(end), fmt)) for end in value._mpi_)
            if low == high and math.copysign(1.0, low) == math.copysign(1.0, high):
                return low
            bits *= 2
        msg = (
            f"backend='exact' could not decide the rounding of an element at {_LAST_BITS} bits "
            f"(pair {j}, members {u!r}, {v!r}); no value is returned unproven."
        )
        raise ArithmeticError(msg)

    def _rational_scale(self, row: Any, j: int) -> Fraction | None:
        """``A s`` as a fraction where it is rational by its formula, else None."""
        factor = freq.rational_attention_factor(self.spec, self.seq_len)
        xpos = self.spec.xpos
        if factor is None or xpos is None:
            return factor
        d = self.spec.rotary_dim
        power = (Fraction(row[0].item()) - Fraction(xpos.center(self.center_len))) / Fraction(
            xpos.scale_base
        )
        if type(xpos) is not XPos or d is None or power.denominator != 1:
            return None
        zeta = Fraction(10 * j + 2 * d, 7 * d)
        return factor * zeta ** (self.sign * power.numerator)

    def _interval_context(self, bits: int) -> tuple[Any, list[Any], Any, list[Any] | None]:
        if bits not in self._interval_terms:
            ctx = MPIntervalContext()
            ctx.prec = bits + self.reach_bits
            self._interval_terms[bits] = (ctx, *self._terms(ctx))
        return self._interval_terms[bits]


def _double_double(raw: tuple[int, int, int, int]) -> tuple[float, float]:
    """Return ``(hi, lo)``, ``hi + lo`` the raw mpf `raw` to about 106 bits.

    Python rounds an int to float to nearest, so ``hi`` is the float64 rounding of `raw`.
    """
    sign, mantissa, exponent, _ = raw
    if mantissa == 0:
        return 0.0, 0.0
    top = float(mantissa)
    rest = float(mantissa - int(top))
    hi, lo = math.ldexp(top, exponent), math.ldexp(rest, exponent)
    return (-hi, -lo) if sign else (hi, lo)


def _raw(end: tuple[int, int, int, int]) -> tuple[bool, int, int]:
    sign, mantissa, exponent, _ = end
    return bool(sign), int(mantissa), int(exponent)


def _in_range(values: F64) -> NDArray[np.bool_]:
    magnitude = np.abs(values)
    inside = (magnitude >= _SAFE[0]) & (magnitude <= _SAFE[1])
    return np.asarray((magnitude == 0) | inside, dtype=bool)


def _xpos_sign(spec: RopeSpec, role: Role | None) -> int:
    if spec.xpos is None:
        if role is not None:
            check_choice("role", role, ROLES)
        return 0
    if role is None:
        msg = "`role` must be 'query' or 'key' when spec.xpos is set; got None."
        raise ValueError(msg)
    return 1 if check_choice("role", role, ROLES) == "query" else -1


def _host(x: Array) -> NDArray[Any]:
    """`x` as a NumPy array of its own dtype (bfloat16 through ml_dtypes)."""
    if dtype_name(x.dtype) == "bfloat16" and not isinstance(x, np.ndarray):
        import ml_dtypes

        wide = x.float() if hasattr(x, "float") else x
        return np.asarray(to_numpy(wide)).astype(ml_dtypes.bfloat16)
    return np.asarray(to_numpy(x))


def _back(result: NDArray[Any], x: Array, xp: ArrayNamespace) -> Array:
    """`result` (host, x's dtype) in x's namespace and on its device."""
    if isinstance(x, np.ndarray):
        return result
    carrier = np.float64 if dtype_name(x.dtype) == "float64" else np.float32
    moved = xp.asarray(result.astype(carrier), device=device(x))
    return xp.astype(moved, x.dtype)
