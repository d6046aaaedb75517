"""Diagnoses of a scaling rule's parameters: the spec's rule with one parameter changed.

Each rule family has its own parameters to fit: Llama 3's band factors (swapped included),
NTK-aware's exponent, dynamic NTK's length, YaRN's ramp ends, proportional RoPE's exponent
denominator. The candidates are ranked by how far the angles they predict lie from the
result's (cheap), and the best few are judged under the error model (`explains`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rope_ref import scaling as rules
from rope_ref._core.frequencies import inv_freq
from rope_ref.testing._compare import F64, Comparison, Setup
from rope_ref.testing._diagnosis.focus import explains_by, with_freqs, with_spec
from rope_ref.testing._diagnosis.frequencies import pair_positions
from rope_ref.testing._diagnosis.rules import COMMON_LENGTHS, low_position_freqs
from rope_ref.testing._diagnosis.shared import (
    Diagnosis,
    failing_pairs,
    pair_angles,
    ranges,
    wrap,
)

__all__ = ["TurnedAngles", "llama3_freqs", "rule_parameters"]

Candidate = tuple[F64, str]

#: How many of the best-ranked candidates are judged under the error model.
JUDGED = 4
#: Rows the ranking reads at most (evenly spread over the result).
RANKED_ROWS = 512
#: Rotated widths up to which every exponent denominator is tried (proportional RoPE).
WIDTHS_TRIED = 256
#: Values tried for a factor-like parameter, besides a fine log-spaced grid.
COMMON_VALUES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0)


def _grid(lo: float, hi: float, n: int = 97) -> list[float]:
    values = [*COMMON_VALUES, *np.geomspace(lo, hi, n).tolist()]
    return [float(v) for v in dict.fromkeys(values) if lo <= v <= hi]


@dataclass(frozen=True)
class TurnedAngles:
    """The result's pair angles, positions and norms, read once for many candidates.

    At most `RANKED_ROWS` rows are kept (evenly spread over the result).
    """

    angle: F64  # (rows, n_pairs), sign of the direction applied
    position: F64
    usable: NDArray[np.bool_]

    @classmethod
    def of(cls, c: Comparison) -> TurnedAngles:
        s = c.setup
        got, norm = pair_angles(s, c.actual)
        p = pair_positions(s)
        n = got.shape[-1]
        got, norm, p = (a.reshape(-1, n) for a in (got, norm, p))
        if got.shape[0] > RANKED_ROWS:
            rows = np.linspace(0, got.shape[0] - 1, RANKED_ROWS).astype(int)
            got, norm, p = got[rows], norm[rows], p[rows]
        sign = -1.0 if s.inverse else 1.0
        return cls(sign * got, p, norm > 0)

    def residual(self, theta: F64) -> float:
        """Largest |angle| (rad) between the result's pairs and a rotation with `theta`."""
        off = np.abs(wrap(self.angle - self.position * theta))
        return float(np.max(np.where(self.usable, off, 0.0), initial=0.0))


def llama3_freqs(theta: F64, factor: float, context: int, low: float, high: float) -> F64:
    """Llama 3's rule as HF writes it, for any band factors (swapped ones included)."""
    wavelength = 2.0 * math.pi / theta
    low_wavelength, high_wavelength = context / low, context / high
    out = np.where(wavelength > low_wavelength, theta / factor, theta)
    if high == low:
        return np.asarray(out, dtype=np.float64)
    smooth = (context / wavelength - low) / (high - low)
    blended = (1.0 - smooth) * out / factor + smooth * out
    medium = ~(wavelength < high_wavelength) & ~(wavelength > low_wavelength)
    return np.asarray(np.where(medium, blended, out), dtype=np.float64)


def llama3_clamped_freqs(theta: F64, factor: float, context: int, low: float, high: float) -> F64:
    """Llama 3's rule written with a clamped smooth factor (litgpt's form).

    For ``low < high`` it equals `llama3_freqs`; with the factors swapped, the clamp turns
    the bands around (the fast pairs are divided by the factor, the slow ones kept).
    """
    if high == low:
        return llama3_freqs(theta, factor, context, low, high)
    ratio = context * theta / (2.0 * math.pi)
    smooth = np.clip((ratio - low) / (high - low), 0.0, 1.0)
    return np.asarray((1.0 - smooth) * theta / factor + smooth * theta, dtype=np.float64)


def _llama3(s: Setup, rule: rules.Llama3, plain: F64) -> Iterator[Candidate]:
    low, high = rule.low_freq_factor, rule.high_freq_factor
    args = (rule.factor, rule.original_max_position)
    spec_text = f"the spec says low_freq_factor={low:g}, high_freq_factor={high:g}"
    if low != high:
        swapped = (
            f"Llama 3's band factors are swapped: the result follows low_freq_factor="
            f"{high:g}, high_freq_factor={low:g}; {spec_text}."
        )
        fix = "pass low_freq_factor and high_freq_factor to the rule in their own places."
        yield (
            llama3_freqs(plain, *args, high, low),
            f"{swapped} Only the pairs between the band edges turn otherwise: {fix}",
        )
        yield (
            llama3_clamped_freqs(plain, *args, high, low),
            f"{swapped} Written with a clamped smooth factor, the swap turns the bands "
            f"around (the fast pairs are divided by the factor, the slow ones kept): {fix}",
        )
    for value in _grid(0.25, 64.0):
        if value != high and value >= low:
            yield (
                llama3_freqs(plain, *args, low, value),
                f"the result follows Llama 3 with high_freq_factor={value:.4g} (fitted); "
                f"{spec_text}: the band's fast edge (original_max_position / "
                "high_freq_factor) differs.",
            )
        if value != low and value <= high:
            yield (
                llama3_freqs(plain, *args, value, high),
                f"the result follows Llama 3 with low_freq_factor={value:.4g} (fitted); "
                f"{spec_text}: the band's slow edge (original_max_position / "
                "low_freq_factor) differs.",
            )


def _ntk(s: Setup, rule: rules.NTKAware, plain: F64) -> Iterator[Candidate]:
    """The exponent of the base's factor written otherwise: ``base * s^k``.

    Only named forms are tried (a fitted ``k`` would also stand for another factor, which
    `scaling` names): dropped (``k = 1``), inverted (``(d-2)/d``), or taken over the head
    where partial rotary needs the rotated width.
    """
    spec = s.spec
    d = spec._rotary_dim
    j = np.arange(plain.size, dtype=np.float64)
    right = d / (d - 2) if d > 2 else 1.0
    forms = {1.0: "the exponent d/(d-2) was dropped (base * factor)"}
    if d > 2:
        forms[(d - 2) / d] = "the exponent is inverted: (d-2)/d for d/(d-2)"
    h = spec.head_dim
    if h != d and h > 2:
        forms[h / (h - 2)] = f"the exponent takes head_dim {h} for d, not rotary_dim {d}"
    for k, why in forms.items():
        if math.isclose(k, right, rel_tol=1e-12):
            continue
        yield (
            plain * rule.factor ** (-2.0 * j * k / d),
            f"the result follows NTK-aware scaling with base * factor^{k:.6g}, but the rule "
            f"is base * factor^(d/(d-2)) = base * {rule.factor:g}^{right:.6g} (d = {d}): "
            f"{why}.",
        )


def _other_length_explains(c: Comparison, rule: object) -> bool:
    """Whether the rule at another common original context length explains the result.

    Moving the length moves both band edges (both ramp ends) at once; where one moved
    edge fits as well, the length (which `scaling` names) is the likelier mistake.
    """
    length = getattr(rule, "original_max_position", None)
    if not isinstance(rule, (rules.YaRN, rules.Llama3)) or length is None:
        return False
    spec = c.setup.spec
    for other in COMMON_LENGTHS:
        if other == length:
            continue
        try:
            alt = dataclasses.replace(spec, scaling=_with_length(rule, other))
        except ValueError:
            continue
        if explains_by(c, with_spec(alt), spec=alt):
            return True
    return False


def _with_length(rule: rules.YaRN | rules.Llama3, length: int) -> rules.YaRN | rules.Llama3:
    if isinstance(rule, rules.YaRN):
        return rules.YaRN(
            rule.factor,
            length,
            beta_fast=rule.beta_fast,
            beta_slow=rule.beta_slow,
            mscale=rule.mscale,
            mscale_all_dim=rule.mscale_all_dim,
            attention_factor=rule.attention_factor_value,
            truncate=rule.truncate,
            ext_factor=rule.ext_factor,
        )
    return dataclasses.replace(rule, original_max_position=length)


def _dynamic(s: Setup, rule: rules.DynamicNTK, plain: F64) -> Iterator[Candidate]:
    length = s.seq_len
    if length is None:
        return
    for step in (-1, 1, -2, 2):
        other = length + step
        if other > 0:
            yield (
                inv_freq(s.spec, other),
                f"the result follows dynamic NTK at length {other:g}, the oracle's is "
                f"{length:g} (the largest position + 1): the sequence length is off by "
                f"{step:+d}{' (max position used, not max position + 1)' if step == -1 else ''}.",
            )
    for step in (-1, 1):
        try:
            alt = dataclasses.replace(rule, max_position=rule.max_position + step)
        except ValueError:
            continue
        yield (
            inv_freq(dataclasses.replace(s.spec, scaling=alt), length),
            f"the result follows dynamic NTK with max_position {alt.max_position}, the "
            f"spec's is {rule.max_position}: max_position_embeddings is off by {step:+d}.",
        )


def _yarn_with(rule: rules.YaRN, **changes: float | bool) -> rules.YaRN:
    """`rule` with some fields changed (YaRN's own constructor: its keywords differ)."""
    fields: dict[str, float | bool | None] = {
        "beta_fast": rule.beta_fast,
        "beta_slow": rule.beta_slow,
        "mscale": rule.mscale,
        "mscale_all_dim": rule.mscale_all_dim,
        "attention_factor": rule.attention_factor_value,
        "truncate": rule.truncate,
        "ext_factor": rule.ext_factor,
    }
    fields.update(changes)
    return rules.YaRN(rule.factor, rule.original_max_position, **fields)  # type: ignore[arg-type]


def _yarn(s: Setup, rule: rules.YaRN, plain: F64) -> Iterator[Candidate]:
    spec_text = f"the spec's beta_fast={rule.beta_fast:g}, beta_slow={rule.beta_slow:g}"
    for name in ("beta_fast", "beta_slow"):
        for value in _grid(0.125, 256.0):
            if value == getattr(rule, name):
                continue
            try:
                alt = _yarn_with(rule, **{name: value})
            except ValueError:
                continue
            yield (
                inv_freq(dataclasses.replace(s.spec, scaling=alt), s.seq_len),
                f"the result follows YaRN with {name}={value:.4g} (fitted); {spec_text}: "
                "the ramp's "
                f"{'fast' if name == 'beta_fast' else 'slow'} end differs.",
            )
    alt = _yarn_with(rule, truncate=not rule.truncate)
    yield (
        inv_freq(dataclasses.replace(s.spec, scaling=alt), s.seq_len),
        f"the result follows YaRN with truncate={alt.truncate}, the spec's is "
        f"{rule.truncate}: the ramp's ends are {'' if alt.truncate else 'not '}rounded to "
        "whole pairs (GPT-OSS sets truncate: false).",
    )


def _proportional(
    s: Setup, rule: rules.Proportional, plain: F64, measured: F64 | None
) -> Iterator[Candidate]:
    """The exponents' denominator: the rotated part's width, half or twice the head's.

    Besides those named forms, the width fitted from the result's second pair (which
    turns at ``base^(-2/D)``) and its neighbours are tried, and for a rotated width up to
    `WIDTHS_TRIED` every width up to four times it (a bound on the cost).
    """
    spec = s.spec
    d = spec._rotary_dim
    k = rule.n_rotated(d)
    j = np.arange(plain.size, dtype=np.float64)
    named = [2 * k, int(rule.partial_rotary_factor * d), d // 2, 2 * d, spec.head_dim]
    every = range(1, 4 * d + 1) if d <= WIDTHS_TRIED else range(0)
    for denominator in dict.fromkeys([*named, *_fitted_widths(measured, spec.base), *every]):
        if denominator in (0, d):
            continue
        theta = spec.base ** (-2.0 * j / denominator) / rule.factor
        theta[k:] = 0.0
        yield (
            theta,
            f"the result's exponents run over {denominator} features (theta_j = "
            f"base^(-2j/{denominator})), but proportional RoPE keeps the whole head's: "
            f"base^(-2j/{d}) (divide by rotary_dim, not partial_rotary_factor * rotary_dim).",
        )


def _fitted_widths(measured: F64 | None, base: float) -> list[int]:
    """Widths ``D`` near the one whose ladder ``base^(-2j/D)`` the second pair follows."""
    if measured is None or measured.size < 2 or not 0.0 < measured[1] < 1.0:
        return []
    width = -2.0 * math.log(base) / math.log(float(measured[1]))
    if not math.isfinite(width):
        return []
    return [w for w in range(round(width) - 2, round(width) + 3) if w > 0]


def rule_parameters(c: Comparison) -> Diagnosis | None:
    """The spec's scaling rule with one of its parameters changed (the fitted value named).

    Explicit frequencies (``freqs=``) stay the rule's input in every candidate; only
    proportional RoPE, whose candidates are ladders of the base, is not fitted over them.
    """
    s = c.setup
    spec = s.spec
    rule = spec.scaling
    if rule is None or spec.xpos is not None or spec.n_pairs < 2:
        return None
    if spec.freqs is not None:  # the rule's input (its base may differ from the default)
        plain = np.array(spec.freqs, dtype=np.float64)
    else:
        plain = inv_freq(dataclasses.replace(spec, scaling=None))
    fitters = {
        rules.Llama3: _llama3,
        rules.NTKAware: _ntk,
        rules.DynamicNTK: _dynamic,
        rules.YaRN: _yarn,
    }
    if isinstance(rule, rules.Proportional):
        if spec.freqs is not None:
            return None
        turned = TurnedAngles.of(c)
        candidates = list(_proportional(s, rule, plain, low_position_freqs(c)))
    elif type(rule) in fitters:
        turned = TurnedAngles.of(c)
        candidates = list(fitters[type(rule)](s, rule, plain))  # type: ignore[operator]
    else:
        return None
    scored = sorted(candidates, key=lambda cand: turned.residual(cand[0]))
    for theta, message in scored[:JUDGED]:
        if explains_by(c, with_freqs(theta)):
            if _other_length_explains(c, rule):
                return None  # `scaling` names the original context length
            bad = failing_pairs(c)
            where = f" (pairs {ranges(np.flatnonzero(bad).tolist())} differ)" if np.any(bad) else ""
            return Diagnosis("scaling", message + where)
    return None
