"""Scaling rules where a planted mistake in rope_ref/scaling hides.

Expected values are the rules' published formulas written here, or the refusals their
docstrings promise.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import Chain, Linear, LongRoPE


class OnlyFrequencies:
    """A would-be rule with ``inv_freq`` but no ``attention_factor``."""

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return inv_freq


def test_chain_refuses_a_rule_without_attention_factor():
    """Catches: a rule accepted when it has either method instead of both."""
    with pytest.raises(TypeError, match="`rules` must be scaling rule instances"):
        Chain(Linear(2.0), OnlyFrequencies())


def test_chain_lets_each_rule_check_the_rotary_dim():
    """Catches: the chain's check skipping its rules (LongRoPE needs a factor per pair)."""
    short, long = [1.0, 1.5, 2.0, 3.0], [1.0, 2.0, 4.0, 8.0]
    rule = Chain(Linear(2.0), LongRoPE(short, long, 16, factor=4.0))
    with pytest.raises(ValueError, match=r"`short_factor` must have one entry per pair"):
        rr.RopeSpec(16, scaling=rule)
    spec = rr.RopeSpec(8, scaling=rule)  # 4 pairs: fine; short factors below 16 positions
    theta = 10000.0 ** (-np.arange(4) / 4)
    np.testing.assert_allclose(rr.inv_freq(spec, 8), theta / 2.0 / np.array(short), rtol=1e-15)


@pytest.mark.parametrize("fraction", [-0.5, -1.0, 1.5])
def test_proportional_refuses_a_fraction_outside_zero_to_one(fraction):
    """Catches: the lower bound of the fraction of rotated pairs moved below 0."""
    with pytest.raises(ValueError, match="`partial_rotary_factor` must be between 0 and 1"):
        rr.scaling.Proportional(fraction)


def test_ntk_rules_leave_the_attention_factor_at_one():
    """Catches: a changed attention factor of NTK-aware and dynamic NTK (HF's is 1)."""
    for rule in (rr.scaling.NTKAware(4.0), rr.scaling.DynamicNTK(2.0, max_position=16)):
        for seq_len in (None, 8, 64):
            assert rr.attention_factor(rr.RopeSpec(8, scaling=rule), seq_len=seq_len) == 1.0


FACTORS = ([1.0, 1.5, 2.0, 3.0], [1.0, 2.0, 4.0, 8.0])


@pytest.mark.parametrize("factor", [1.25, 1.5, 2.0, 4.0])
def test_longrope_attention_factor_for_any_factor_above_one(factor):
    """Catches: the factor-free case widened past 1 (sqrt(1 + ln s / ln L) for every s > 1)."""
    spec = rr.RopeSpec(8, scaling=LongRoPE(*FACTORS, 4096, factor=factor))
    want = np.sqrt(1.0 + np.log(factor) / np.log(4096.0))
    assert rr.attention_factor(spec) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("length", [1, 0.5, 0])
def test_longrope_refuses_an_original_length_of_one_or_less(length):
    """Catches: a length of 1 accepted (its log is the denominator of the attention factor)."""
    with pytest.raises(ValueError, match="`original_max_position` must be greater than 1"):
        LongRoPE(*FACTORS, length, factor=2.0)
