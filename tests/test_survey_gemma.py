"""Gemma (JAX) in `rope-ref survey`: rows agree; `rope_proportion` is the proportional rule
(Gemma's formula, timescales padded with infinity, transcribed in float64 here)."""

from __future__ import annotations

import numpy as np

import rope_ref as rr
from rope_ref.scaling import Proportional
from tests._libraries import require, rows

D = 64


def test_rows_agree():
    found = rows("gemma")
    assert len(found) == 3
    for row in found.values():
        assert row.verdict == "conformant", row


def test_rope_proportion_is_the_proportional_rule():
    require("gemma")
    k = int(0.25 * D // 2)
    timescale = np.concatenate([10000.0 ** ((2.0 / D) * np.arange(k)), np.full(D // 2 - k, np.inf)])
    expected = 1.0 / timescale  # Gemma divides positions by the timescales
    spec = rr.RopeSpec(D, scaling=Proportional(0.25))
    np.testing.assert_allclose(rr.inv_freq(spec), expected, rtol=1e-15)
