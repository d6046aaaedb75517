r"""The spec's frequencies, attention factor and xPos scale as real numbers, in mpmath.

Every function takes an mpmath context: ``mpmath.MPContext`` (rounded arithmetic at its
precision) or ``mpmath.ctx_iv.MPIntervalContext`` (intervals that surely hold the real
value). Floats given by the user (base, factors, custom ``freqs``, positions) are taken as
the exact values they hold.

What is a formula and what is a float:

- the default :math:`\theta_j = b^{-2j/d}`, custom ``freqs``, `Linear` (:math:`\theta_j/s`),
  `NTKAware` and `DynamicNTK` (:math:`\theta_j\,r^{-2j/(d-2)}`), `YaRN` (the ramp from
  its float64 ends ``correction_range``, the temperature :math:`0.1\,m \ln s + 1`),
  `Llama3` (the bands decided by the real wavelength :math:`2\pi/\theta_j`, the blend
  :math:`(1-\gamma)\theta_j/s + \gamma\theta_j` with the real
  :math:`\gamma = (L_0\theta_j/2\pi - f_{lo})/(f_{hi} - f_{lo})`), `LongRoPE`
  (:math:`\theta_j/e_j`, the attention factor :math:`\sqrt{1 + \ln s/\ln L_0}`) and
  `Proportional` (:math:`\theta_j/s` for the rotated pairs, 0 after) are evaluated as the
  formulas of their docstrings;
- xPos with `rope_ref.XPos`: :math:`\zeta_j = (10j + 2d)/(7d)` exactly;
- any other scaling rule (user rules, chains) and xPos rule gives its float64 frequencies,
  attention factor and decay bases, taken as exact values.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

from mpmath.ctx_iv import MPIntervalContext

from rope_ref import XPos, inv_freq
from rope_ref import attention_factor as float_attention_factor
from rope_ref._core.spec import RopeSpec
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, NTKAware, Proportional, YaRN

__all__ = [
    "attention_factor",
    "log_zetas",
    "omegas",
    "rational_attention_factor",
    "rational_omegas",
]

Number = Any  # an mpf or an interval of the context


def omegas(ctx: Any, spec: RopeSpec, seq_len: float | None) -> list[Number]:
    """Inverse frequency of every pair as a real number of `ctx`."""
    if spec.freqs is not None:
        return [ctx.mpf(float(f)) for f in spec.freqs]
    d = spec.rotary_dim
    assert d is not None
    rule = spec.scaling
    if rule is None or type(rule) in (Linear, NTKAware, YaRN, Llama3, LongRoPE, Proportional):
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
    if type(rule) is Llama3:
        return _llama3(ctx, rule, theta, base, d)
    if type(rule) is LongRoPE:
        ext = rule.long_factor if rule.uses_long(seq_len) else rule.short_factor
        return [t / ctx.mpf(e) for t, e in zip(theta, ext, strict=True)]
    if type(rule) is Proportional:
        rotated = rule.n_rotated(d)
        return [t / ctx.mpf(rule.factor) if j < rotated else ctx.mpf(0)
                for j, t in enumerate(theta)]  # fmt: skip
    return theta


def rational_omegas(spec: RopeSpec, seq_len: float | None) -> list[Fraction | None]:
    """Each pair's inverse frequency as a fraction where it is rational, else None.

    Every formula here is a product of rational powers of rationals (the base, factors,
    ratios; YaRN's ramp is a rational multiplier), rational exactly when its N-th power,
    N the common denominator of the exponents, has a rational N-th root. Llama 3's blended
    band involves ``1 / pi`` and is irrational unless its factor is 1.
    """
    if spec.freqs is not None:
        return [Fraction(float(f)) for f in spec.freqs]
    d = spec.rotary_dim
    assert d is not None
    rule = spec.scaling
    known = (Linear, NTKAware, DynamicNTK, YaRN, Llama3, LongRoPE, Proportional)
    if rule is not None and type(rule) not in known:
        return [Fraction(float(w)) for w in inv_freq(spec, seq_len)]
    base = Fraction(spec.base)
    out: list[Fraction | None] = []
    for j in range(d // 2):
        terms = [(base, Fraction(-2 * j, d))]
        if type(rule) is Linear or type(rule) is Proportional:
            terms.append((Fraction(rule.factor), Fraction(-1)))
        elif type(rule) is NTKAware:
            terms.append((Fraction(rule.factor), Fraction(-2 * j, d - 2)))
        elif type(rule) is DynamicNTK:
            terms.append((_dynamic_ratio(rule, seq_len), Fraction(-2 * j, d - 2)))
        elif type(rule) is LongRoPE:
            ext = rule.long_factor if rule.uses_long(seq_len) else rule.short_factor
            terms.append((Fraction(ext[j]), Fraction(-1)))
        elif type(rule) is YaRN:
            terms.append((_yarn_multipliers(rule, spec.base, d)[j], Fraction(1)))
        elif type(rule) is Llama3:
            band = _llama3_bands(rule, spec.base, d)[j]
            if band == "blend" and rule.factor != 1.0:
                out.append(None)
                continue
            if band == "scale":
                terms.append((Fraction(rule.factor), Fraction(-1)))
        if type(rule) is Proportional and j >= rule.n_rotated(d):
            out.append(Fraction(0))
            continue
        out.append(_rational_product(terms))
    return out


def _dynamic_ratio(rule: DynamicNTK, seq_len: float | None) -> Fraction:
    length = max(rule.max_position if seq_len is None else seq_len, rule.max_position)
    return 1 + Fraction(rule.factor) * (Fraction(length) - rule.max_position) / rule.max_position


def _yarn_multipliers(rule: YaRN, base: float, d: int) -> list[Fraction]:
    """``r / s + 1 - r`` of every pair: YaRN's frequency over the plain one."""
    lo, hi = (Fraction(v) for v in rule.correction_range(base=base, rotary_dim=d))
    if lo == hi:
        hi += Fraction(0.001)  # HF's float guard, as the rule applies it
    out = []
    for j in range(d // 2):
        ramp = min(max((j - lo) / (hi - lo), Fraction(0)), Fraction(1))
        out.append(ramp / Fraction(rule.factor) + 1 - ramp)
    return out


def _rational_product(terms: list[tuple[Fraction, Fraction]]) -> Fraction | None:
    """``prod(base ** exponent)`` of positive bases, as a fraction if it is rational."""
    n = math.lcm(*(e.denominator for _, e in terms))
    power = Fraction(1)
    for value, exponent in terms:
        power *= value ** int(exponent * n)
    num, den = _exact_root(power.numerator, n), _exact_root(power.denominator, n)
    return None if num is None or den is None else Fraction(num, den)


def _exact_root(value: int, n: int) -> int | None:
    """The integer n-th root of `value` >= 0 if there is one, else None (bisection)."""
    low, high = 0, 1 << -(-value.bit_length() // n)
    while low < high:
        middle = (low + high) // 2
        if middle**n < value:
            low = middle + 1
        else:
            high = middle
    return low if low**n == value else None


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
    """Each pair's ``theta (r / s + 1 - r)``, the ramp ``r`` from its float64 ends."""
    multipliers = _yarn_multipliers(rule, base, d)
    return [t * _number(ctx, m) for t, m in zip(theta, multipliers, strict=True)]


def _llama3(ctx: Any, rule: Llama3, theta: list[Number], base: float, d: int) -> list[Number]:
    s, context = ctx.mpf(rule.factor), ctx.mpf(rule.original_max_position)
    low, high = ctx.mpf(rule.low_freq_factor), ctx.mpf(rule.high_freq_factor)
    out = []
    for t, band in zip(theta, _llama3_bands(rule, base, d), strict=True):
        if band == "keep":
            out.append(t)
        elif band == "scale":
            out.append(t / s)
        else:
            gamma = (context * t / (2 * ctx.pi) - low) / (high - low)
            out.append((1 - gamma) * t / s + gamma * t)
    return out


@functools.lru_cache(maxsize=64)
def _llama3_bands(rule: Llama3, base: float, d: int) -> tuple[str, ...]:
    r"""Each pair's band by its real wavelength: "keep", "blend" or "scale".

    The wavelength :math:`2\pi/\theta_j` is transcendental (:math:`\theta_j` is
    algebraic), so it never equals the rational bounds :math:`L_0/f`: interval arithmetic
    at doubling precision always decides.
    """
    bands: dict[int, str] = {}
    bits = 64
    while len(bands) < d // 2:
        ctx = MPIntervalContext()
        ctx.prec = bits
        context = ctx.mpf(rule.original_max_position)
        short, long = context / ctx.mpf(rule.high_freq_factor), context / rule.low_freq_factor
        for j, theta in enumerate(_powers(ctx, base, d)):
            wavelength = 2 * ctx.pi / theta
            if j in bands:
                continue
            if wavelength.b < short.a:
                bands[j] = "keep"
            elif wavelength.a > long.b:
                bands[j] = "scale"
            elif wavelength.a > short.b and wavelength.b < long.a:
                bands[j] = "blend"
        bits *= 2
    return tuple(bands[j] for j in range(d // 2))


def attention_factor(ctx: Any, spec: RopeSpec, seq_len: float | None) -> Number:
    """The factor multiplied into cos and sin, as a real number of `ctx`."""
    rule = spec.scaling
    if type(rule) is YaRN and rule.attention_factor_value is None:
        if rule.mscale and rule.mscale_all_dim:
            top = _yarn_mscale(ctx, rule.factor, rule.mscale)
            return top / _yarn_mscale(ctx, rule.factor, rule.mscale_all_dim)
        return _yarn_mscale(ctx, rule.factor, 1.0)
    if type(rule) is LongRoPE and _longrope_formula(rule):
        assert rule.factor is not None
        ratio = ctx.ln(ctx.mpf(rule.factor)) / ctx.ln(ctx.mpf(rule.original_max_position))
        return ctx.sqrt(1 + ratio)
    if type(rule) in (Llama3, Proportional):
        return ctx.mpf(1)
    return ctx.mpf(float_attention_factor(spec, seq_len))


def _longrope_formula(rule: LongRoPE) -> bool:
    """Whether LongRoPE's attention factor is its logarithmic formula (not 1, not given)."""
    return rule.attention_factor_value is None and rule.factor is not None and rule.factor > 1.0


def rational_attention_factor(spec: RopeSpec, seq_len: float | None) -> Fraction | None:
    """The attention factor as a fraction, or None where its formula has a logarithm."""
    rule = spec.scaling
    if type(rule) is YaRN and rule.attention_factor_value is None and rule.factor > 1.0:
        return None
    if type(rule) is YaRN and rule.attention_factor_value is None:
        return Fraction(1)
    if type(rule) is LongRoPE and _longrope_formula(rule):
        assert rule.factor is not None
        ratio = _log_ratio(Fraction(rule.factor), rule.original_max_position)
        return None if ratio is None else _rational_sqrt(1 + ratio)
    return Fraction(float_attention_factor(spec, seq_len))


def _log_ratio(value: Fraction, base: int) -> Fraction | None:
    """``ln value / ln base`` where it is rational (`base` of at most 2**40), else None.

    It is rational exactly when ``value`` is a product of the primes of ``base`` with
    exponents proportional to theirs.
    """
    if base > 2**40:
        return None
    ratio = None
    num, den, rest = value.numerator, value.denominator, base
    prime = 2
    while rest > 1:
        if prime * prime > rest:
            prime = rest  # what is left is prime
        if rest % prime == 0:
            count = 0
            while rest % prime == 0:
                rest //= prime
                count += 1
            power = 0
            while num % prime == 0:
                num //= prime
                power += 1
            while den % prime == 0:
                den //= prime
                power -= 1
            if ratio is None:
                ratio = Fraction(power, count)
            elif Fraction(power, count) != ratio:
                return None
        prime += 1
    return ratio if num == den == 1 else None


def _rational_sqrt(value: Fraction) -> Fraction | None:
    """The square root of `value` where it is rational, else None."""
    num, den = math.isqrt(value.numerator), math.isqrt(value.denominator)
    return Fraction(num, den) if Fraction(num * num, den * den) == value else None


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
