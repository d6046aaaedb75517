"""Scaling rules where a planted mistake in rope_ref/scaling hides.

Expected values are the rules' published formulas written here, or the refusals their
docstrings promise.
"""

from __future__ import annotations

import dataclasses
import inspect

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


@pytest.mark.parametrize("factor", [1.0, 1.25, 1.5, 2.0, 4.0, 40.0])
def test_yarn_mscale_is_the_published_formula(factor):
    """Catches: the factor below which YaRN's mscale is 1 moved off 1."""
    want = 1.0 if factor <= 1.0 else 0.1 * np.log(factor) + 1.0
    assert rr.scaling.yarn_mscale(factor) == pytest.approx(want, rel=1e-15)
    spec = rr.RopeSpec(8, scaling=rr.scaling.YaRN(factor, 64))
    assert rr.attention_factor(spec) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize(
    ("head_dim", "base", "original"),
    [(64, 1e4, 64), (16, 10.0, 1000), (16, 1e4, 4096), (16, 1e4, 6)],
)
def test_yarn_defaults_and_ramp_ends_are_hf_own(head_dim, base, original):
    """Catches: a changed default beta_slow, or the ramp's top end clipped below dim - 1
    (HF's ``min(high, dim - 1)``: reached with a small base and a long original length), or
    HF's guard against a zero-width ramp changed (both ends 0 at an original length of 6)."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": "yarn", "rope_theta": base, "factor": 4.0,
              "original_max_position_embeddings": original}  # fmt: skip
    config = transformers.LlamaConfig(head_dim=head_dim, hidden_size=4 * head_dim,
                                      num_attention_heads=4, rope_parameters=params,
                                      max_position_embeddings=4 * original)  # fmt: skip
    inv, factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    rule = rr.scaling.YaRN(4.0, original)
    assert rule.beta_slow == 1.0
    assert rule.beta_fast == 32.0
    spec = rr.RopeSpec(head_dim, base=base, scaling=rule)
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)
    assert rr.attention_factor(spec) == pytest.approx(float(factor), rel=1e-6)


@pytest.mark.parametrize("attention_factor", [None, 1.5])
def test_yarn_mscale_ratio_must_be_positive_unless_the_factor_is_given(attention_factor):
    """Catches: the ratio check skipped in the usual case (no attention_factor), or a
    ratio of exactly 0 let through (mscale = -10 / ln(factor) makes the top 0)."""
    zero_top = {"mscale": -10.0 / np.log(4.0), "mscale_all_dim": 1.0}
    zero_bottom = {"mscale": 1.0, "mscale_all_dim": -10.0 / np.log(4.0)}  # ratio infinite
    negative = {"mscale": 1.0, "mscale_all_dim": -100.0}
    # 1.4e299 / 7.8e-16 overflows (their product would not)
    overflow = {"mscale": 1e300, "mscale_all_dim": -10.0 / np.log(4.0) * (1 - 2.0**-50)}
    for mscales in (zero_top, zero_bottom, negative, overflow):
        if attention_factor is None:
            with pytest.raises(ValueError, match="must give a finite positive attention"):
                rr.scaling.YaRN(4.0, 64, **mscales)
        else:  # the given factor wins; the mscales are not used
            rule = rr.scaling.YaRN(4.0, 64, attention_factor=attention_factor, **mscales)
            assert rule.attention_factor(seq_len=None) == attention_factor


def test_a_divisor_whose_reciprocal_is_finite_is_accepted():
    """Catches: the overflow check of a tiny factor made stricter than 1 / factor."""
    for factor in (6e-309, 1e-308):  # 2 / factor overflows, 1 / factor does not
        spec = rr.RopeSpec(2, scaling=Linear(factor))
        assert rr.inv_freq(spec).tolist() == [1.0 / factor]
    with pytest.raises(ValueError, match="must be at least 1 / \\(largest float64\\)"):
        Linear(5e-309)


def test_ntk_rules_on_a_single_pair_keep_its_frequency():
    """Catches: the one-pair case (exponent 0, not 2j / (d - 2) = 0 / 0) lost."""
    for rule in (rr.scaling.NTKAware(4.0), rr.scaling.DynamicNTK(2.0, max_position=16)):
        spec = rr.RopeSpec(2, scaling=rule)
        assert rr.inv_freq(spec, 64).tolist() == [1.0]
    assert rr.inv_freq(rr.RopeSpec(4, scaling=rr.scaling.NTKAware(4.0))).tolist() == [1.0, 0.0025]


def _hf_yarn(extra: dict[str, float]) -> tuple[np.ndarray, float]:
    """HF's own YaRN inverse frequencies and attention factor, head_dim 16, factor 4, L0 64."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
              "original_max_position_embeddings": 64, **extra}  # fmt: skip
    config = transformers.LlamaConfig(
        head_dim=16,
        hidden_size=64,
        num_attention_heads=4,
        rope_parameters=params,
        max_position_embeddings=256,
    )
    inv, factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    return inv.double().numpy(), float(factor)


@pytest.mark.parametrize(
    "mscales",
    [
        {"mscale": 1.0},  # no mscale_all_dim: HF falls back to get_mscale(factor)
        {"mscale": -100.0, "mscale_all_dim": 0.0},  # a zero mscale_all_dim: the same
        {"mscale": 1.0, "mscale_all_dim": 2.0},  # a ratio below 1 (0.89)
    ],
)
def test_yarn_mscale_ratio_only_when_both_are_set_and_not_rounded(mscales):
    """Catches: the mscale ratio checked when only one of the two is set (``or`` for
    ``and``: one missing is a TypeError, a zero one refuses a negative mscale HF ignores),
    or the ratio floor-divided (a ratio below 1 becomes 0 and is refused)."""
    inv, factor = _hf_yarn(mscales)
    spec = rr.RopeSpec(16, scaling=rr.scaling.YaRN(4.0, 64, **mscales))
    assert rr.attention_factor(spec) == pytest.approx(factor, rel=1e-15)
    np.testing.assert_allclose(rr.inv_freq(spec), inv, rtol=1e-6)


@pytest.mark.parametrize("mscale", [np.inf, -np.inf, np.nan, 1.0])
def test_yarn_mscale_is_one_at_factor_one_whatever_the_mscale(mscale):
    """Catches: factor 1 sent through the formula (``<`` for ``<=``): 0.1 m ln 1 + 1 is
    not 1 for an infinite or NaN m, which the documented "1 for s <= 1" ignores."""
    assert rr.scaling.yarn_mscale(1.0, mscale) == 1.0
    assert rr.scaling.yarn_mscale(0.5, mscale) == 1.0


def test_yarn_class_defaults_are_hf_own():
    """Catches: a default of beta_fast, beta_slow or truncate changed where the class
    declares it (what ``YaRN.beta_fast``, ``dataclasses.fields`` and the API docs show)
    but not in the constructor, or the other way round. HF's ``_compute_yarn_parameters``
    uses ``beta_fast or 32``, ``beta_slow or 1`` and ``truncate`` True."""
    hf = {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True}
    declared = {f.name: f.default for f in dataclasses.fields(rr.scaling.YaRN)}
    signature = inspect.signature(rr.scaling.YaRN).parameters
    rule = rr.scaling.YaRN(4.0, 64)
    for name, want in hf.items():
        assert declared[name] == want, name
        assert signature[name].default == want, name
        assert getattr(rule, name) == want, name


def test_context_lengths_keep_their_fraction():
    """Catches: a fractional context length truncated to an int (or a whole one kept as a
    float): dynamic NTK at L_max = 10.5 and L = 21 has the ratio 1 + 2 (21 - 10.5) / 10.5 = 3,
    where a truncated L_max = 10 would give 3.2."""
    rule = rr.scaling.DynamicNTK(2.0, max_position=10.5)
    assert rule.max_position == 10.5
    j = np.arange(4)
    want = 1e4 ** (-j / 4) * 3.0 ** (-2.0 * j / 6)
    np.testing.assert_allclose(rr.inv_freq(rr.RopeSpec(8, scaling=rule), 21), want, rtol=1e-14)
    assert rr.scaling.YaRN(4.0, 4096.5).original_max_position == 4096.5
    for whole in (rr.scaling.DynamicNTK(2.0, 16.0).max_position,
                  rr.scaling.YaRN(4.0, 4096.0).original_max_position):  # fmt: skip
        assert type(whole) is int
