r"""The spec's frequencies, attention factor and xPos scale as real numbers, in mpmath.

Every function takes an mpmath context: ``mpmath.MPContext`` (rounded arithmetic at its
precision) or ``mpmath.ctx_iv.MPIntervalContext`` (intervals that surely hold the real
value). Floats given by the user (base, factors, custom ``freqs``, positions) are taken as
the exact values they hold.

What is a formula and what is a float:

- the default :math:`\theta_j = b^{-2j/d}`, custom ``freqs``, `Linear` (:math:`\theta_j/s`),
  `NTKAware` and `DynamicNTK` (:math:`\theta_j\,r^{-2j/(d-2)}`), `NTKScaling`
  (:math:`\theta_j\,s^{-((j+1)/(d/2))^\beta}`), `YaRN` (the ramp between
  the real ends :math:`d \ln(L_0 / 2\pi\beta) / 2 \ln b`, truncated to integers where
  ``truncate`` says so, each floor, ceiling and clamp decided on the real value; the
  temperature :math:`0.1\,m \ln s + 1`; ``ext_factor`` :math:`e` weighs the ramp's
  unscaled share, :math:`k = e\,(1 - r)`),
  `Llama3` (the bands decided by the real wavelength :math:`2\pi/\theta_j`, the blend
  :math:`(1-\gamma)\theta_j/s + \gamma\theta_j` with the real
  :math:`\gamma = (L_0\theta_j/2\pi - f_{lo})/(f_{hi} - f_{lo})`), `LongRoPE`
  (:math:`\theta_j/e_j`, the attention factor :math:`\sqrt{1 + \ln s/\ln L_0}`) and
  `Proportional` (:math:`\theta_j/s` for the rotated pairs, 0 after) are evaluated as the
  formulas of their docstrings;
- xPos with `rope_ref.XPos`: :math:`\zeta_j = (10j + 2d)/(7d)` exactly;
- custom ``freqs`` with a rule: each given frequency times the rule's real factor for
  that pair (every form but Llama 3's, whose bands depend on the frequency itself: its
  float64 values are taken);
- a rule names its formula by its class's own ``exact_form`` (`rope_ref.scaling._facts`);
  any other scaling rule (user rules, chains, subclasses) and xPos rule gives its float64
  frequencies, attention factor and decay bases, taken as exact values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from mpmath.ctx_iv import MPIntervalContext

from rope_ref._core.frequencies import attention_factor as float_attention_factor
from rope_ref._core.frequencies import inv_freq
from rope_ref._core.spec import RopeSpec
from rope_ref._core.xpos import XPos
from rope_ref.scaling import DynamicNTK, Llama3, LongRoPE, YaRN
from rope_ref.scaling._facts import exact_form

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
    d = spec.rotary_dim
    assert d is not None
    rule = spec.scaling
    if rule is None and spec.freqs is not None:
        return [ctx.mpf(float(f)) for f in spec.freqs]
    if rule is None:
        return _powers(ctx, spec.base, d)
    form = exact_form(rule)
    if form is None or (spec.freqs is not None and form not in _MULTIPLIERS):
        return [ctx.mpf(float(w)) for w in inv_freq(spec, seq_len)]  # float64, taken as exact
    scaled = _OMEGAS[form](ctx, rule, spec.base, d, seq_len)
    if spec.freqs is None:
        return scaled
    # the rule multiplies each pair by a factor that does not depend on its input
    plain = _powers(ctx, spec.base, d)
    return [ctx.mpf(float(f)) * w / t for f, w, t in zip(spec.freqs, scaled, plain, strict=True)]


def _linear(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    return [t / ctx.mpf(rule.factor) for t in _powers(ctx, base, d)]


def _ntk(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    return _powers(ctx, base, d, extra=(ctx.mpf(rule.factor), d))


def _ntk_scaling(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    log_s, half = ctx.ln(ctx.mpf(rule.factor)), d // 2
    out = []
    for j, t in enumerate(_powers(ctx, base, d)):
        if rule.mixed_b is None:
            exponent = ctx.mpf(j + 1) / half
        else:  # ((j + 1) / (d / 2)) ** mixed_b, as exp(mixed_b ln((j + 1) / (d / 2)))
            exponent = ctx.exp(ctx.mpf(rule.mixed_b) * ctx.ln(ctx.mpf(j + 1) / half))
        out.append(t * ctx.exp(-log_s * exponent))
    return out


def _dynamic_ntk(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    return _powers(ctx, base, d, extra=(_number(ctx, _dynamic_ratio(rule, seq_len)), d))


def _longrope(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    ext = rule.long_factor if rule.uses_long(seq_len) else rule.short_factor
    return [t / ctx.mpf(e) for t, e in zip(_powers(ctx, base, d), ext, strict=True)]


def _proportional(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    rotated = rule.n_rotated(d)
    return [t / ctx.mpf(rule.factor) if j < rotated else ctx.mpf(0)
            for j, t in enumerate(_powers(ctx, base, d))]  # fmt: skip


def _yarn_omegas(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    return _yarn(ctx, rule, _powers(ctx, base, d), base, d)


def _llama3_omegas(ctx: Any, rule: Any, base: float, d: int, seq_len: float | None) -> list[Number]:
    return _llama3(ctx, rule, _powers(ctx, base, d), base, d)


#: Each exact form's inverse frequencies: (ctx, rule, base, rotary_dim, seq_len) -> reals.
_OMEGAS: dict[str, Callable[[Any, Any, float, int, float | None], list[Number]]] = {
    "linear": _linear,
    "ntk": _ntk,
    "ntk_scaling": _ntk_scaling,
    "dynamic_ntk": _dynamic_ntk,
    "yarn": _yarn_omegas,
    "llama3": _llama3_omegas,
    "longrope": _longrope,
    "proportional": _proportional,
}

#: The forms whose rule multiplies each pair by a factor of the base and the pair alone
#: (not of the frequency it is given): with ``freqs=`` they are evaluated as that factor
#: times the given frequency. Llama 3's bands depend on the frequency itself.
_MULTIPLIERS = frozenset(_OMEGAS) - {"llama3"}

#: One pair's factor: extra (base, exponent) terms, a final value, or None (irrational).
_Pair = list[tuple[Fraction, Fraction]] | Fraction | None


def rational_omegas(spec: RopeSpec, seq_len: float | None) -> list[Fraction | None]:
    """Each pair's inverse frequency as a fraction where it is rational, else None.

    Every formula here is a product of rational powers of rationals (the base, factors,
    ratios; YaRN's ramp is a rational multiplier), rational exactly when its N-th power,
    N the common denominator of the exponents, has a rational N-th root. Llama 3's blended
    band involves ``1 / pi`` and is irrational unless its factor is 1.
    """
    d = spec.rotary_dim
    assert d is not None
    rule = spec.scaling
    form = None if rule is None else exact_form(rule)
    given = None if spec.freqs is None else [Fraction(float(f)) for f in spec.freqs]
    if rule is not None and (form is None or (given is not None and form not in _MULTIPLIERS)):
        return [Fraction(float(w)) for w in inv_freq(spec, seq_len)]
    if given is not None and form is None:
        return [*given]
    base = Fraction(spec.base)
    out: list[Fraction | None] = []
    for j in range(d // 2):
        pair = [] if form is None else _RATIONAL_PAIRS[form](rule, spec.base, d, seq_len, j)
        if pair is None or isinstance(pair, Fraction):
            out.append(pair)
            continue
        if given is None:
            out.append(_rational_product([(base, Fraction(-2 * j, d)), *pair]))
            continue
        factor = _rational_product(pair) if pair else Fraction(1)
        out.append(None if factor is None else given[j] * factor)
    return out


def _rational_linear(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    return [(Fraction(rule.factor), Fraction(-1))]


def _rational_proportional(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    return Fraction(0) if j >= rule.n_rotated(d) else [(Fraction(rule.factor), Fraction(-1))]


def _rational_ntk(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    return [(Fraction(rule.factor), _ntk_exponent(j, d))]


def _rational_ntk_scaling(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    if rule.factor == 1.0:
        return []
    exponent = _rational_power(
        Fraction(j + 1, d // 2), 1.0 if rule.mixed_b is None else rule.mixed_b
    )
    # an irrational algebraic power of s is transcendental (Gelfond-Schneider)
    return None if exponent is None else [(Fraction(rule.factor), -exponent)]


def _rational_power(value: Fraction, power: float) -> Fraction | None:
    """``value ** power`` (`value` > 0) as a fraction where it is rational, else None.

    With ``power = n / m`` in lowest terms, it is rational exactly when the numerator and
    denominator of `value` are perfect m-th powers.
    """
    exponent = Fraction(power)
    m = exponent.denominator
    top, bottom = _exact_root(value.numerator, m), _exact_root(value.denominator, m)
    if top is None or bottom is None:
        return None
    return Fraction(top, bottom) ** exponent.numerator


def _rational_dynamic(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    return [(_dynamic_ratio(rule, seq_len), _ntk_exponent(j, d))]


def _rational_longrope(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    ext = rule.long_factor if rule.uses_long(seq_len) else rule.short_factor
    return [(Fraction(ext[j]), Fraction(-1))]


def _rational_yarn(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    multiplier = _yarn_rational_multipliers(rule, base, d)[j]
    # None: inside a ramp whose ends are transcendental
    return None if multiplier is None else [(multiplier, Fraction(1))]


def _rational_llama3(rule: Any, base: float, d: int, seq_len: float | None, j: int) -> _Pair:
    band = _llama3_bands(rule, base, d)[j]
    if band == "blend" and rule.factor != 1.0:
        return None
    return [(Fraction(rule.factor), Fraction(-1))] if band == "scale" else []


#: Each exact form's factor of one pair, beside ``base ** (-2j / d)``.
_RATIONAL_PAIRS: dict[str, Callable[[Any, float, int, float | None, int], _Pair]] = {
    "linear": _rational_linear,
    "ntk": _rational_ntk,
    "ntk_scaling": _rational_ntk_scaling,
    "dynamic_ntk": _rational_dynamic,
    "yarn": _rational_yarn,
    "llama3": _rational_llama3,
    "longrope": _rational_longrope,
    "proportional": _rational_proportional,
}


def _dynamic_ratio(rule: DynamicNTK, seq_len: float | None) -> Fraction:
    length = max(rule.max_position if seq_len is None else seq_len, rule.max_position)
    return 1 + Fraction(rule.factor) * (Fraction(length) - rule.max_position) / rule.max_position


def _ntk_exponent(j: int, d: int) -> Fraction:
    """The exponent ``-2j / (d - 2)`` of NTK's ratio (0 for the only pair of ``d = 2``)."""
    return Fraction(-2 * j, d - 2) if j else Fraction(0)


def _rational_product(terms: list[tuple[Fraction, Fraction]]) -> Fraction | None:
    """``prod(base ** exponent)`` of positive bases, as a fraction if it is rational.

    The numerators and denominators of the bases are split into a coprime basis ``c_t``
    (pairwise coprime integers, each base a product of their powers), so that the product
    is ``prod(c_t ** F_t)`` with rational ``F_t``; it is rational exactly when every
    ``c_t`` with a fractional ``F_t`` is a perfect power of the denominator of ``F_t``.
    No power of a base is ever formed, so this costs little for any ``d``.
    """
    if any(value <= 0 for value, _ in terms):
        return None
    numbers = [n for value, _ in terms for n in (value.numerator, value.denominator)]
    result = Fraction(1)
    for c in _coprime_basis(numbers):
        total = sum(
            (e * (_valuation(v.numerator, c) - _valuation(v.denominator, c)) for v, e in terms),
            Fraction(0),
        )
        whole, rest = divmod(total.numerator, total.denominator)
        if rest:
            root = _exact_root(c, total.denominator)
            if root is None:
                return None
            result *= Fraction(root) ** rest
        result *= Fraction(c) ** whole
    return result


def _coprime_basis(numbers: list[int]) -> list[int]:
    """Pairwise coprime integers > 1 of which every number > 0 given is a product of powers."""
    basis = sorted({n for n in numbers if n > 1})
    while True:
        shared = next(
            ((x, y, math.gcd(x, y)) for i, x in enumerate(basis) for y in basis[i + 1 :]
             if math.gcd(x, y) > 1),
            None,
        )  # fmt: skip
        if shared is None:
            return basis
        x, y, g = shared
        rest = [n for n in basis if n not in (x, y)]
        basis = sorted({n for n in (*rest, x // g, y // g, g) if n > 1})


def _valuation(n: int, c: int) -> int:
    """How many times `c` > 1 divides `n` > 0."""
    count = 0
    while n % c == 0:
        n //= c
        count += 1
    return count


def _exact_root(value: int, n: int) -> int | None:
    """The integer n-th root of `value` >= 0 if there is one, else None (bisection)."""
    if value > 1 and value.bit_length() <= n:  # 1 < value < 2**n: no integer root
        return None
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
    step = ctx.ln(ctx.mpf(base)) * -2 / d  # the exponent's step from one pair to the next
    if extra is not None and d > 2:
        ratio, dim = extra
        step += ctx.ln(ratio) * -2 / (dim - 2)
    return [ctx.exp(step * j) if j else ctx.mpf(1) for j in range(d // 2)]


def _yarn(ctx: Any, rule: YaRN, theta: list[Number], base: float, d: int) -> list[Number]:
    """Each pair's ``theta ((1 - k) / s + k)``, ``k = e (1 - r)`` (``e`` = ``ext_factor``).

    The ramp ``r`` runs between the real ends.
    """
    rational = _yarn_rational_multipliers(rule, base, d)
    lo, hi = (_end_value(ctx, rule, base, d, end) for end in _yarn_ends(rule, base, d))
    s = ctx.mpf(rule.factor)
    out = []
    for j, (t, m) in enumerate(zip(theta, rational, strict=True)):
        if m is not None:
            out.append(t * _number(ctx, m))
            continue
        kept = (1 - (j - lo) / (hi - lo)) * ctx.mpf(rule.ext_factor)  # unscaled share
        out.append(t * ((1 - kept) / s + kept))
    return out


#: A ramp end: a rational part plus, where a float is given, the real index of that beta.
_End = tuple[Fraction, float | None]
_LAST_BITS = 1 << 16


def _index(ctx: Any, rule: YaRN, base: float, d: int, beta: float) -> Number:
    """YaRN's real correction index ``d ln(L0 / (2 pi beta)) / (2 ln b)`` of `beta`."""
    length = ctx.mpf(rule.original_max_position) / (ctx.mpf(beta) * 2 * ctx.pi)
    return d * ctx.ln(length) / (2 * ctx.ln(ctx.mpf(base)))


def _end_value(ctx: Any, rule: YaRN, base: float, d: int, end: _End) -> Number:
    rational, beta = end
    value = _number(ctx, rational)
    return value if beta is None else value + _index(ctx, rule, base, d, beta)


def _decide(question: Any) -> Any:
    """The first answer of ``question(ctx)`` that is not None, at doubling interval precision.

    Every question asked here compares a transcendental number with a rational one, which
    enough precision always decides; past 65536 bits an ArithmeticError says otherwise.
    """
    bits = 64
    while bits <= _LAST_BITS:
        ctx = MPIntervalContext()
        ctx.prec = bits
        answer = question(ctx)
        if answer is not None:
            return answer
        bits *= 2
    msg = f"backend='exact' could not decide YaRN's ramp at {_LAST_BITS} bits."
    raise ArithmeticError(msg)


def _floor(interval: Any, *, up: bool) -> int | None:
    """The floor (ceiling where `up`) of the real number in `interval`, if it is decided."""
    ends = [math.ceil(v) if up else math.floor(v) for v in (interval.a, interval.b)]
    return ends[0] if ends[0] == ends[1] else None


@functools.lru_cache(maxsize=64)
def _yarn_ends(rule: YaRN, base: float, d: int) -> tuple[_End, _End]:
    """The ramp's real ends ``(lo, hi)``, as `YaRN.correction_range` defines them.

    Each floor (ceiling) of ``truncate``, each clamp to ``[0, d - 1]`` and HF's ``+ 0.001``
    where the ends meet is decided on the real values.
    """
    fast, slow = float(rule.beta_fast), float(rule.beta_slow)
    if rule.truncate:
        lo_int = _decide(lambda ctx: _floor(_index(ctx, rule, base, d, fast), up=False))
        hi_int = _decide(lambda ctx: _floor(_index(ctx, rule, base, d, slow), up=True))
        lo: _End = (Fraction(max(lo_int, 0)), None)
        hi: _End = (Fraction(min(hi_int, d - 1)), None)
    else:
        lo_sign = _decide(lambda ctx: _sign_of(_index(ctx, rule, base, d, fast)))
        hi_sign = _decide(lambda ctx: _sign_of(_index(ctx, rule, base, d, slow) - (d - 1)))
        lo = (Fraction(0), None) if lo_sign < 0 else (Fraction(0), fast)
        hi = (Fraction(d - 1), None) if hi_sign > 0 else (Fraction(0), slow)
    if lo == hi:  # the ends meet: HF's guard against a zero-width ramp
        hi = (hi[0] + Fraction(0.001), hi[1])
    return lo, hi


def _sign_of(interval: Any) -> int | None:
    if interval.b < 0:
        return -1
    if interval.a > 0:
        return 1
    return None


@functools.lru_cache(maxsize=64)
def _yarn_rational_multipliers(rule: YaRN, base: float, d: int) -> tuple[Fraction | None, ...]:
    """Each pair's ``(1 - k) / s + k``, ``k = e (1 - r)``, as a fraction.

    None inside a ramp with a real end.
    """
    lo, hi = _yarn_ends(rule, base, d)
    s, e = Fraction(rule.factor), Fraction(rule.ext_factor)

    def blend(r: Fraction) -> Fraction:
        kept = e * (1 - r)
        return (1 - kept) / s + kept

    if lo[1] is None and hi[1] is None:
        width = hi[0] - lo[0]
        exact = [min(max((j - lo[0]) / width, Fraction(0)), Fraction(1)) for j in range(d // 2)]
        return tuple(blend(r) for r in exact)

    ramps: dict[int, Fraction | None] = {}  # 0, 1, or None strictly inside (irrational)

    def question(ctx: Any) -> bool | None:
        low, high = (_end_value(ctx, rule, base, d, end) for end in (lo, hi))
        for j in range(d // 2):
            if j in ramps:
                continue
            ramp = (j - low) / (high - low)
            if ramp.b <= 0:
                ramps[j] = Fraction(0)
            elif ramp.a >= 1:
                ramps[j] = Fraction(1)
            elif ramp.a > 0 and ramp.b < 1:
                ramps[j] = None
        return True if len(ramps) == d // 2 else None

    _decide(question)
    out: list[Fraction | None] = []
    for j in range(d // 2):
        ramp: Fraction | None = ramps[j]
        if ramp is None:  # strictly inside: r is irrational, so is the blend unless s = 1
            out.append(Fraction(1) if s == 1 else None)
        else:
            out.append(blend(ramp))
    return tuple(out)


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
    rule: Any = spec.scaling  # its exact form names its fields
    form = exact_form(rule)
    if form == "yarn" and rule.attention_factor_value is None:
        if rule.mscale and rule.mscale_all_dim:
            top = _yarn_mscale(ctx, rule.factor, rule.mscale)
            return top / _yarn_mscale(ctx, rule.factor, rule.mscale_all_dim)
        return _yarn_mscale(ctx, rule.factor, 1.0)
    if form == "longrope" and _longrope_formula(rule):
        assert rule.factor is not None
        ratio = ctx.ln(ctx.mpf(rule.factor)) / ctx.ln(ctx.mpf(rule.original_max_position))
        return ctx.sqrt(1 + ratio)
    return ctx.mpf(float_attention_factor(spec, seq_len))


def _longrope_formula(rule: LongRoPE) -> bool:
    """Whether LongRoPE's attention factor is its logarithmic formula (not 1, not given)."""
    return rule.attention_factor_value is None and rule.factor is not None and rule.factor > 1.0


def rational_attention_factor(spec: RopeSpec, seq_len: float | None) -> Fraction | None:
    """The attention factor as a fraction, or None where its formula has a logarithm."""
    rule: Any = spec.scaling  # its exact form names its fields
    form = exact_form(rule)
    if form == "yarn" and rule.attention_factor_value is None:
        return None if rule.factor > 1.0 else Fraction(1)
    if form == "longrope" and _longrope_formula(rule):
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
