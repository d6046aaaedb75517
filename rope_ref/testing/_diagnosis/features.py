"""Diagnoses of which features rotate and by how much: rotary range, attention factor."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.frequencies import attention_factor
from rope_ref.testing._compare import F64, Comparison
from rope_ref.testing._diagnosis.shared import Diagnosis, explains, rotary_mask

__all__ = ["rotary_range", "scale"]


def _rotated_features(c: Comparison) -> np.ndarray:
    changed = np.abs(c.actual - c.setup.x) > c.tolerance
    return np.asarray(np.any(changed.reshape(-1, c.actual.shape[-1]), axis=0))


def rotary_range(c: Comparison) -> Diagnosis | None:
    s = c.setup
    spec = s.spec
    changed = _rotated_features(c)
    if not np.any(changed):
        return None
    lo, hi = int(np.argmax(changed)), int(len(changed) - np.argmax(changed[::-1]))
    if (lo, hi) == (spec.rotary_start, spec.rotary_stop):
        return None
    want = f"[{spec.rotary_start}, {spec.rotary_stop})"
    # Slowly turning pairs may look unchanged at small positions: the rotated range can be
    # wider than the changed one, so try every range that covers it.
    if spec.freqs is None and spec.sections is None:
        for start in sorted({lo, spec.rotary_start, 0} & set(range(lo + 1))):
            first = hi - start + (hi - start) % 2
            for width in range(max(first, 2), spec.head_dim - start + 1, 2):
                if (start, width) == (spec.rotary_start, spec.rotary_dim):
                    continue
                alt_spec = dataclasses.replace(spec, rotary_dim=width, rotary_start=start)
                if explains(c, s.oracle(spec=alt_spec), spec=alt_spec):
                    return Diagnosis(
                        "rotary_dim",
                        f"the result rotates features [{start}, {start + width}) "
                        f"(rotary_dim={width}, rotary_start={start}), but the spec rotates "
                        f"{want} (rotary_dim={spec.rotary_dim}, rotary_start="
                        f"{spec.rotary_start}); partial rotary was ignored or misplaced.",
                    )
    outside = changed & ~rotary_mask(spec)
    inside_ok = not np.any(c.failed[..., rotary_mask(spec)])
    if np.any(outside) and inside_ok:  # the rotated features are right: that is all
        return Diagnosis(
            "rotary_dim",
            f"features {np.flatnonzero(outside).tolist()[:8]} changed although the spec "
            f"rotates only {want}: the pass-through features must be copied unchanged.",
        )
    return None


def scale(c: Comparison) -> Diagnosis | None:
    s = c.setup
    mask = rotary_mask(s.spec)
    e, a = c.expected[..., mask], c.actual[..., mask]
    denominator = float(np.sum(e * e))
    if denominator == 0.0:
        return None
    ratio = float(np.sum(a * e)) / denominator
    if not math.isfinite(ratio) or abs(ratio - 1.0) < 1e-6 or ratio <= 0:
        return None
    alt = c.expected.copy()
    alt[..., mask] *= ratio
    tol = c.tolerance * max(1.0, ratio)
    if not explains(c, alt, tol=tol) or not _scale_explains_the_error(c, alt, tol):
        return None
    factor = attention_factor(s.spec, s.seq_len)
    got = f"the result is {ratio:.6g} x the oracle"
    if factor != 1.0 and math.isclose(ratio * factor, 1.0, rel_tol=1e-3):
        detail = (
            f"{got}: the spec's attention factor {factor:.6g} was not applied (YaRN / "
            "LongRoPE mscale dropped from cos/sin)."
        )
    elif factor != 1.0 and math.isclose(ratio, factor, rel_tol=1e-3):
        detail = f"{got}: the attention factor {factor:.6g} was applied twice."
    else:
        detail = (
            f"{got}, whose attention factor is {factor:.6g}: cos/sin were scaled by a "
            f"different factor, {ratio * factor:.6g} (mscale / mscale_all_dim / "
            "attention_factor mismatch)."
        )
        named = _yarn_factor_named(s.spec.scaling, ratio * factor)
        if named is not None:
            detail = detail[:-1] + f"; {ratio * factor:.6g} is {named}."
    return Diagnosis("attention_factor", detail)


def _yarn_factor_named(rule: object, carried: float) -> str | None:
    """Which of YaRN's attention-factor formulas gives the factor the result carries."""
    if not isinstance(rule, rules.YaRN):
        return None
    s = rule.factor
    formulas = {
        "YaRN's default 0.1 ln(s) + 1 (the spec's mscale settings ignored)": (rules.yarn_mscale(s))
    }
    if rule.mscale:
        formulas["0.1 mscale ln(s) + 1 alone (mscale_all_dim ignored)"] = rules.yarn_mscale(
            s, rule.mscale
        )
    if rule.mscale_all_dim:
        formulas["0.1 mscale_all_dim ln(s) + 1 alone (mscale ignored)"] = rules.yarn_mscale(
            s, rule.mscale_all_dim
        )
    for name, value in formulas.items():
        if math.isclose(carried, value, rel_tol=1e-3) and not math.isclose(
            value, attention_factor_of(rule), rel_tol=1e-9
        ):
            return name
    return None


def attention_factor_of(rule: rules.YaRN) -> float:
    return float(rule.attention_factor(seq_len=None))


def _scale_explains_the_error(c: Comparison, alt: F64, tol: F64) -> bool:
    """Whether the scale removes most of the error (not a ratio fitted to rounding noise).

    A result off by rounding (a cos/sin table in float16, say) has a least-squares ratio
    near 1 that may fit as well as 1 itself: then the scale explains nothing, and a message
    "the result is 1 x the oracle" would contradict itself.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        before = np.where(c.error == 0.0, 0.0, c.error / c.tolerance)
        after = np.where(c.actual == alt, 0.0, np.abs(c.actual - alt) / tol)
    return bool(np.max(after, initial=0.0) <= 0.5 * np.max(before, initial=0.0))
