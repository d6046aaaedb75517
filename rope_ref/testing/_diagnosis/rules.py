"""Diagnoses of scaling rules: a rule missing, of another family or with other parameters."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.frequencies import inv_freq
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison
from rope_ref.testing._diagnosis.focus import explains_by, with_spec
from rope_ref.testing._diagnosis.shared import (
    Diagnosis,
    explains,
    oracle_with_freqs,
    pair_angles,
    ranges,
    wrap,
)

__all__ = ["low_position_freqs", "scaling", "yarn_ramp"]


#: Pre-training context lengths to try for rules that have one.
COMMON_LENGTHS = (2048, 4096, 8192, 16384, 32768, 131072)


#: Factors to try besides the fitted one.
COMMON_FACTORS = (2.0, 4.0, 8.0, 16.0, 32.0, 40.0)


def low_position_freqs(c: Comparison) -> F64 | None:
    """Per-pair angle per position of the result, refined up a ladder of positions.

    At the smallest non-zero position no pair has turned by more than pi, which gives a
    first estimate; each larger position then unwraps its angle around the prediction of
    the estimate so far (valid while the prediction is within pi), so the estimate sharpens
    with every step up.
    """
    s = c.setup
    p = np.abs(s.row_positions)
    steps = np.unique(p[p > 0])
    if steps.size == 0:
        return None
    got, norm = pair_angles(s, c.actual)
    sign = -1.0 if s.inverse else 1.0
    n = got.shape[-1]
    flat_p = p.reshape(-1)
    order = np.argsort(flat_p, kind="stable")  # the rows of each step, found once
    angle = (sign * got).reshape(-1, n)[order]
    usable = (norm > 0).reshape(-1, n)[order]
    bounds = np.searchsorted(flat_p[order], steps, side="left")
    ends = np.searchsorted(flat_p[order], steps, side="right")
    theta: F64 | None = None
    for step, lo, hi in zip(steps, bounds, ends, strict=True):
        rows = usable[lo:hi]
        if not np.all(np.any(rows, axis=0)):
            continue
        masked = np.where(rows, angle[lo:hi], np.nan)
        at_step = np.asarray(np.nanmedian(masked, axis=0), dtype=np.float64)
        if theta is None:
            theta = wrap(at_step) / step
            continue
        predicted = theta * step
        if np.any(np.abs(theta - (predicted + wrap(at_step - predicted)) / step) * step > 1.0):
            break  # the prediction drifted too far to unwrap safely
        theta = (predicted + wrap(at_step - predicted)) / step
    return theta


def _rule_text(rule: object) -> str:
    if rule is None:
        return "no scaling rule"
    return repr(rule)


def _fitted_factors(c: Comparison) -> list[float]:
    """Factors read off the result, each tidied to 3 significant digits and exact.

    The median ratio of unscaled to measured frequency over all pairs (a linear rule
    scales every pair alike), and the ratio at the slowest pair (which YaRN, Llama 3 and
    NTK-aware scale by the full factor). A pair too slow to turn measurably at the given
    positions reads 0 and its ratio is infinite: the median holds while fewer than half
    the pairs are such. Factors within 1e-3 of 1 are left out (a factor of 1 is no rule);
    factors below 1 are kept: a result that turns faster than the unscaled frequencies
    follows one (e.g. positions multiplied by the factor instead of divided).
    """
    spec = c.setup.spec
    measured = low_position_freqs(c)
    if measured is None or spec.freqs is not None or not np.all(measured >= 0):
        return []
    plain = inv_freq(dataclasses.replace(spec, scaling=None))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = plain / measured
    found: list[float] = []
    for factor in (float(np.median(ratios)), float(ratios[-1])):
        if math.isfinite(factor) and abs(factor - 1.0) > 1e-3:
            found += [float(f"{factor:.3g}"), factor]
    return list(dict.fromkeys(found))


def _candidate_rules(c: Comparison) -> Iterator[object]:
    """Rules to try, most likely first.

    No rule; then every family with the spec's own factor (and every common length), then
    with the fitted and the common factors (and the spec's length, or two common ones).
    """
    spec = c.setup.spec
    rule = spec.scaling
    if rule is not None:
        yield None
    original = getattr(rule, "original_max_position", None)
    every_length = list(dict.fromkeys([*([original] if original else []), *COMMON_LENGTHS]))
    few_lengths = [original] if original else [8192, 4096]
    factor = getattr(rule, "factor", None)
    fitted = _fitted_factors(c)

    def family(f: float, lengths: list[int]) -> Iterator[object]:
        yield rules.Linear(f)
        if rule is not None:  # without a rule, NTK-aware is another base: `frequencies`
            yield rules.NTKAware(f)
        for n in lengths:
            yield rules.YaRN(f, original_max_position=n)
            yield rules.Llama3(f, original_max_position=n)

    if factor:
        yield from family(factor, every_length)
    for f in dict.fromkeys([*fitted, *COMMON_FACTORS]):
        if f != factor:
            yield from family(f, few_lengths)
    if isinstance(rule, rules.DynamicNTK):
        for n in every_length:
            yield rules.DynamicNTK(rule.factor, max_position=n)


def scaling(c: Comparison) -> Diagnosis | None:
    """A scaling rule missing, of another family, or with other parameters.

    Tried, in order: no rule (where the spec has one); every family (Linear, NTK-aware
    where the spec has a rule, YaRN, Llama 3) with the spec's factor, YaRN and Llama 3 at
    the spec's original context length and at each common one (`COMMON_LENGTHS`: 2048,
    4096, 8192, 16384, 32768, 131072); then every family with the factors read off the
    result (`_fitted_factors`) and the common factors (`COMMON_FACTORS`: 2, 4, 8, 16, 32,
    40), at the spec's length (8192 and 4096 where the spec has none); for a dynamic NTK
    rule, its factor at the spec's and each common context length. M-RoPE and xPos specs
    are tried alike (a rule scales their frequencies as any other's). Explicit
    frequencies (``freqs=``) with a rule stay every candidate's input (ggml's frequency
    factors with YaRN); without a rule they are left alone: a rule's ramp reads the base,
    which such frequencies need not follow.
    """
    spec = c.setup.spec
    if spec.freqs is not None and spec.scaling is None:
        return None
    for rule in _candidate_rules(c):  # at most 84 rules
        if rule == spec.scaling:
            continue
        try:
            alt = _with_rule(spec, rule)
            found = explains_by(c, with_spec(alt), spec=alt)
        except ValueError:
            continue
        if found:
            return Diagnosis("scaling", _scaling_message(spec.scaling, rule))
    return None


def _with_rule(spec: RopeSpec, rule: object) -> RopeSpec:
    """`spec` with `rule` (its ``freqs`` kept; no rule over them takes the default base)."""
    if rule is None and spec.freqs is not None:  # `base` then only fed the rule
        return dataclasses.replace(spec, scaling=None, base=10000.0)
    return dataclasses.replace(spec, scaling=rule)  # type: ignore[arg-type]


def _scaling_message(want: object, got: object) -> str:
    head = f"the result follows {_rule_text(got)}, but the spec says {_rule_text(want)}"
    if got is None:
        why = "the scaling rule was not applied (plain RoPE frequencies)"
    elif want is None:
        why = "a scaling rule was applied that the spec does not have"
    elif type(got) is not type(want):
        why = f"{type(got).__name__} used where {type(want).__name__} belongs"
    elif getattr(got, "factor", None) != getattr(want, "factor", None):
        why = f"the factor is {got.factor:g}, not {want.factor:g}"  # type: ignore[attr-defined]
    else:
        why = "the original (pre-training) context length differs"
    return f"{head}: {why}."


def yarn_ramp(c: Comparison) -> Diagnosis | None:
    """YaRN with its ramp inverted: fast pairs interpolated, slow pairs kept.

    Over the spec's own input frequencies (``freqs=`` when given); with a partial YaRN's
    ``ext_factor`` e, the unscaled share k of each pair is inverted to e - k.
    """
    s = c.setup
    rule = s.spec.scaling
    if not isinstance(rule, rules.YaRN):
        return None
    if s.spec.freqs is not None:  # the rule's input (its base may differ from the default)
        plain = np.array(s.spec.freqs, dtype=np.float64)
    else:
        plain = inv_freq(dataclasses.replace(s.spec, scaling=None))
    interpolated = plain / rule.factor
    scaled = inv_freq(s.spec, s.seq_len)
    span = plain - interpolated
    share = rule.ext_factor  # the unscaled share of the fastest pairs
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = np.where(span != 0, (scaled - interpolated) / span, share)  # share: extrapolated
    inverted = interpolated * (1.0 - share + kept) + plain * (share - kept)
    if np.allclose(inverted, scaled) or not explains(c, oracle_with_freqs(s, inverted)):
        return None
    fast = np.flatnonzero(kept > share / 2).tolist()
    slow = np.flatnonzero(kept <= share / 2).tolist()
    fast_text = f"pairs {ranges(fast)}" if fast else "no pair"
    slow_text = f"pairs {ranges(slow)}" if slow else "no pair"
    return Diagnosis(
        "scaling",
        f"YaRN's ramp is inverted: the result slows the fast {fast_text} by the factor "
        f"{rule.factor:g} and leaves the slow {slow_text} at their original frequency; the "
        f"rule keeps fast pairs (wavelength below original_max_position / beta_fast) and "
        f"divides slow pairs by {rule.factor:g}. Use 1 - ramp where the ramp is used (or "
        "swap beta_fast and beta_slow)."
        + (
            ""
            if share == 1.0
            else f" With ext_factor={share:g} the kept pairs keep that share of their "
            "frequency and the rest is divided."
        ),
    )
