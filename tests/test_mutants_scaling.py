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
