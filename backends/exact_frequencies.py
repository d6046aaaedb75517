r"""The spec's frequencies, attention factor and xPos scale as real numbers, in mpmath.

Every function takes an mpmath context: ``mpmath.MPContext`` (rounded arithmetic at its
precision) or ``mpmath.ctx_iv.MPIntervalContext`` (intervals that surely hold the real
value). Floats given by the user (base, factors, custom ``freqs``, positions) are taken as
the exact values they hold.

What is a formula and what is a float:

- the default :math:`\theta_j = b^{-2j/d}`, custom ``freqs``, `Linear` (:math:`\theta_j/s`),
  `NTKAware` and `DynamicNTK` (:math:`\theta_j\,r^{-2j/(d-2)}`), and `YaRN` (the ramp from
  its float64 ends ``correction_range``, the temperature :math:`0.1\,m \ln s + 1`) are
  evaluated as the formulas of their docstrings;
- xPos with `rope_ref.XPos`: :math:`\zeta_j = (10j + 2d)/(7d)` exactly;
- any other scaling rule (Llama3, LongRoPE, Proportional, user rules) and xPos rule gives
  its float64 frequencies, attention factor and decay bases, taken as exact values.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from rope_ref import XPos, inv_freq
from rope_ref import attention_factor as float_attention_factor
from rope_ref._core.spec import RopeSpec
from rope_ref.scaling import DynamicNTK, Linear, NTKAware, YaRN

__all__ = ["attention_factor", "log_zetas", "omegas", "rational_attention_factor"]

Number = Any  # an mpf or an interval of the context


def omegas(ctx: Any, spec: RopeSpec, seq_len: float | None) -> list[Number]:
    """Inverse frequency of every pair as a real number of `ctx`."""
    if spec.freqs is not None:
        return [ctx.mpf(float(f)) for f in spec.freqs]
    d = spec.rotary_dim
    assert d is not None
    rule = spec.scaling
    if rule is None or type(rule) in (Linear, NTKAware, YaRN):
        base = spec.base
    elif type(rule) is DynamicNTK:
        length = max(rule.max_position if seq_len is None else seq_len, rule.max_position)
        growth = (Fraction(length) - rule.max_position) / rule.max_position
        ratio = 1 + Fraction(rule.factor) * growth
        return _powers(ctx, spec.base, d, extra=(_number(ctx, ratio), d))
    else:
        return [ctx.mpf(float(w)) for w in inv_freq(spec, seq_len)]
    if type(rule) is NTKAware:
        return _powers(ctx, base, d, extra=(ctx.mpf(rule.factor), d))
    theta = _powers(ctx, base, d)
    if type(rule) is Linear:
        return [t / ctx.mpf(rule.factor) for t in theta]
    if type(rule) is YaRN:
        return _yarn(ctx, rule, theta, base, d)
    return theta


def _powers(ctx: Any, base: float, d: int, extra: tuple[Number, int] | None = None) -> list[Number]:
    """``base ** (-2j / d)``, times ``ratio ** (-2j / (d - 2))`` when `extra` is given."""
    log_base = ctx.ln(ctx.mpf(base))
    out = []
    for j in range(d // 2):
        if j == 0:
            out.append(ctx.mpf(1))
            continue
        log_w = log_base * (-2 * j) / d
        if extra is not None:
            ratio, dim = extra
            log_w += ctx.ln(ratio) * (-2 * j) / (dim - 2)
        out.append(ctx.exp(log_w))
    return out


def _yarn(ctx: Any, rule: YaRN, theta: list[Number], base: float, d: int) -> list[Number]:
    lo, hi = (Fraction(v) for v in rule.correction_range(base=base, rotary_dim=d))
    if lo == hi:
        hi += Fraction(0.001)  # HF's float guard, as the rule applies it
    factor = ctx.mpf(rule.factor)
    out = []
    for j, t in enumerate(theta):
        ramp = min(max((j - lo) / (hi - lo), Fraction(0)), Fraction(1))
        r = _number(ctx, ramp)
        out.append(t / factor * r + t * (1 - r))
    return out


def attention_factor(ctx: Any, spec: RopeSpec, seq_len: float | None) -> Number:
    """The factor multiplied into cos and sin, as a real number of `ctx`."""
    rule = spec.scaling
    if type(rule) is YaRN and rule.attention_factor_value is None:
        if rule.mscale and rule.mscale_all_dim:
            top = _yarn_mscale(ctx, rule.factor, rule.mscale)
            return top / _yarn_mscale(ctx, rule.factor, rule.mscale_all_dim)
        return _yarn_mscale(ctx, rule.factor, 1.0)
    return ctx.mpf(float_attention_factor(spec, seq_len))


def rational_attention_factor(spec: RopeSpec, seq_len: float | None) -> Fraction | None:
    """The attention factor as a fraction, or None where its formula has a logarithm."""
    rule = spec.scaling
    if type(rule) is YaRN and rule.attention_factor_value is None and rule.factor > 1.0:
        return None
    if type(rule) is YaRN and rule.attention_factor_value is None:
        return Fraction(1)
    return Fraction(float_attention_factor(spec, seq_len))


def _yarn_mscale(ctx: Any, factor: float, mscale: float) -> Number:
    if factor <= 1.0:
        return ctx.mpf(1)
    return ctx.mpf(mscale) * ctx.ln(ctx.mpf(factor)) / 10 + 1


def log_zetas(ctx: Any, spec: RopeSpec) -> list[Number]:
    """``ln zeta_j`` of the spec's xPos rule for every pair."""
    xpos = spec.xpos
    assert xpos is not None
    d = spec.rotary_dim
    assert d is not None
    if type(xpos) is XPos:
        return [ctx.ln(ctx.mpf(10 * j + 2 * d) / (7 * d)) for j in range(d // 2)]
    return [ctx.ln(ctx.mpf(float(z))) for z in xpos.zeta(d)]


def _number(ctx: Any, value: Fraction) -> Number:
    return ctx.mpf(value.numerator) / value.denominator
