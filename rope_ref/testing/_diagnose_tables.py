"""Diagnoses of how a peer built its tables: the other layout's cos/sin, an inverted ramp.

A full-width cos/sin table built for one layout and applied with the other rotation, and a
YaRN ramp turned the wrong way round.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.frequencies import inv_freq, rope_cos_sin
from rope_ref.testing._compare import F64, Comparison
from rope_ref.testing._diagnose_variants import ranges
from rope_ref.testing._explain import Diagnosis, explains, oracle_with_freqs

__all__ = ["table_layout", "yarn_ramp"]

_TABLE = {
    "half": "cat(freqs, freqs) (transformers, rotate_half)",
    "interleaved": "repeat_interleave(freqs, 2) (Meta, GPT-J, timm, diffusers' use_real)",
}
_ROTATION = {
    "half": "rotate_half, pairs (j, j + n/2)",
    "interleaved": "pairs (2j, 2j + 1)",
}


def _full_width(table: F64, layout: str) -> F64:
    if layout == "half":
        return np.concatenate([table, table], axis=-1)
    return np.repeat(table, 2, axis=-1)


def _rotated_partner(x: F64, layout: str) -> F64:
    """``rotate_half(x)`` for "half"; ``(-x1, x0, -x3, x2, ...)`` for "interleaved"."""
    if layout == "half":
        n = x.shape[-1] // 2
        return np.concatenate([-x[..., n:], x[..., :n]], axis=-1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return out


def table_layout(c: Comparison) -> Diagnosis | None:
    """A full-width cos/sin table built for one layout, applied with the other rotation."""
    s = c.setup
    spec = s.spec
    if spec.xpos is not None or spec.n_pairs < 2:
        return None
    cos, sin = (
        np.asarray(t, dtype=np.float64) for t in rope_cos_sin(spec, s.grid, None, s.seq_len)
    )
    sl = slice(spec.rotary_start, spec.rotary_stop)
    xr = s.x[..., sl]
    sign = -1.0 if s.inverse else 1.0
    for table, rotation in (("interleaved", "half"), ("half", "interleaved")):
        alt = s.x.copy()
        alt[..., sl] = xr * _full_width(cos, table) + sign * _rotated_partner(
            xr, rotation
        ) * _full_width(sin, table)
        if explains(c, alt):
            return Diagnosis(
                "table_layout",
                f"a cos/sin table built for the {table!r} layout ({_TABLE[table]}) was "
                f"applied with the {rotation!r} rotation ({_ROTATION[rotation]}); the spec's "
                f"layout is {spec.layout!r}: build the table as {_TABLE[spec.layout]} and "
                f"rotate {_ROTATION[spec.layout]}.",
            )
    return None


def yarn_ramp(c: Comparison) -> Diagnosis | None:
    """YaRN with its ramp inverted: fast pairs interpolated, slow pairs kept."""
    s = c.setup
    rule = s.spec.scaling
    if not isinstance(rule, rules.YaRN) or s.spec.freqs is not None:
        return None
    plain = inv_freq(dataclasses.replace(s.spec, scaling=None))
    interpolated = plain / rule.factor
    scaled = inv_freq(s.spec, s.seq_len)
    span = plain - interpolated
    with np.errstate(divide="ignore", invalid="ignore"):
        kept = np.where(span != 0, (scaled - interpolated) / span, 1.0)  # 1: extrapolated
    inverted = interpolated * kept + plain * (1.0 - kept)
    if np.allclose(inverted, scaled) or not explains(c, oracle_with_freqs(s, inverted)):
        return None
    fast = np.flatnonzero(kept > 0.5).tolist()
    slow = np.flatnonzero(kept <= 0.5).tolist()
    fast_text = f"pairs {ranges(fast)}" if fast else "no pair"
    slow_text = f"pairs {ranges(slow)}" if slow else "no pair"
    return Diagnosis(
        "scaling",
        f"YaRN's ramp is inverted: the result slows the fast {fast_text} by the factor "
        f"{rule.factor:g} and leaves the slow {slow_text} at their original frequency; the "
        f"rule keeps fast pairs (wavelength below original_max_position / beta_fast) and "
        f"divides slow pairs by {rule.factor:g}. Use 1 - ramp where the ramp is used (or "
        "swap beta_fast and beta_slow).",
    )
