"""rr.scaling rules: formulas worked out independently (mpmath, or the published formulas
written here), HF's own defaults, validation, value semantics."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re

import mpmath
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import (
    Chain,
    DynamicNTK,
    Linear,
    Llama3,
    LongRoPE,
    NTKAware,
    Proportional,
    YaRN,
)

mpmath.mp.dps = 40
EPS = 2.0**-52


def exact_plain(d: int, base: float) -> list[mpmath.mpf]:
    return [mpmath.mpf(base) ** (mpmath.mpf(-2 * j) / d) for j in range(d // 2)]


def assert_close_to(actual, exact, ulps=4):
    expected = np.array([float(e) for e in exact])
    np.testing.assert_allclose(actual, expected, rtol=ulps * EPS, atol=0)


def test_linear_divides_every_frequency():
    spec = rr.RopeSpec(head_dim=12, base=500.0, scaling=Linear(3.0))
    assert_close_to(rr.inv_freq(spec), [t / 3 for t in exact_plain(12, 500.0)])
    assert rr.attention_factor(spec) == 1.0


def test_ntk_aware_is_a_larger_base():
    d, base, s = 16, 10000.0, 8.0
    spec = rr.RopeSpec(head_dim=d, base=base, scaling=NTKAware(s))
    new_base = mpmath.mpf(base) * mpmath.mpf(s) ** (mpmath.mpf(d) / (d - 2))
    assert_close_to(rr.inv_freq(spec), exact_plain(d, new_base))
    theta = rr.inv_freq(spec)
    assert theta[0] == 1.0
    assert theta[-1] == pytest.approx(base ** (-(d - 2) / d) / s, rel=4 * EPS)


def test_dynamic_ntk_follows_hf_formula():
    d, base, s, L_max = 8, 10000.0, 4.0, 1024
    spec = rr.RopeSpec(head_dim=d, base=base, scaling=DynamicNTK(s, L_max))
    for seq_len, length in ((None, L_max), (10, L_max), (L_max, L_max), (5000, 5000)):
        ratio = mpmath.mpf(s) * length / L_max - (s - 1)
        new_base = base * ratio ** (mpmath.mpf(d) / (d - 2))
        assert_close_to(rr.inv_freq(spec, seq_len=seq_len), exact_plain(d, new_base))


def test_yarn_follows_the_paper_with_hf_details():
    d, base, s, L0 = 64, 10000.0, 16.0, 2048
    rule = YaRN(s, L0)
    spec = rr.RopeSpec(head_dim=d, base=base, scaling=rule)

    def corr(beta):  # pair index whose wavelength fits `beta` turns in L0
        return d * mpmath.log(L0 / (beta * 2 * mpmath.pi)) / (2 * mpmath.log(base))

    lo, hi = int(mpmath.floor(corr(32))), int(mpmath.ceil(corr(1)))
    assert rule.correction_range(base=base, rotary_dim=d) == (lo, min(hi, d - 1))
    plain = exact_plain(d, base)
    expected = []
    for j, t in enumerate(plain):
        r = min(max(mpmath.mpf(j - lo) / (hi - lo), 0), 1)
        expected.append(t / s * r + t * (1 - r))
    assert_close_to(rr.inv_freq(spec), expected)
    assert rr.attention_factor(spec) == pytest.approx(0.1 * math.log(s) + 1, rel=EPS)


def test_yarn_attention_factor_options():
    s = 40.0
    deepseek = YaRN(s, 4096, mscale=0.707, mscale_all_dim=0.707)
    assert deepseek.attention_factor(seq_len=None) == 1.0
    ratio = YaRN(s, 4096, mscale=1.0, mscale_all_dim=0.5).attention_factor(seq_len=None)
    assert ratio == pytest.approx((0.1 * math.log(s) + 1) / (0.05 * math.log(s) + 1), rel=EPS)
    # HF treats a zero mscale as absent: back to 0.1 ln s + 1.
    zero = YaRN(s, 4096, mscale=0.0, mscale_all_dim=1.0).attention_factor(seq_len=None)
    assert zero == pytest.approx(0.1 * math.log(s) + 1, rel=EPS)
    assert YaRN(s, 4096, attention_factor=1.25).attention_factor(seq_len=None) == 1.25
    assert YaRN(0.5, 4096).attention_factor(seq_len=None) == 1.0


def test_yarn_truncate_false_keeps_fractional_ramp_ends():
    rule = YaRN(8.0, 4096, truncate=False)
    lo, hi = rule.correction_range(base=10000.0, rotary_dim=128)
    assert not float(lo).is_integer()
    assert not float(hi).is_integer()
    truncated = YaRN(8.0, 4096).correction_range(base=10000.0, rotary_dim=128)
    assert truncated == (math.floor(lo), math.ceil(hi))


def test_llama3_bands():
    d, base, s, L0, lf, hf = 128, 500000.0, 8.0, 8192, 1.0, 4.0
    spec = rr.RopeSpec(head_dim=d, base=base, scaling=Llama3(s, L0, lf, hf))
    expected = []
    for t in exact_plain(d, base):
        wavelength = 2 * mpmath.pi / t
        if wavelength < L0 / hf:
            expected.append(t)
        elif wavelength > L0 / lf:
            expected.append(t / s)
        else:
            g = (L0 / wavelength - lf) / (hf - lf)
            expected.append((1 - g) * t / s + g * t)
    assert_close_to(rr.inv_freq(spec), expected, ulps=16)
    assert rr.attention_factor(spec) == 1.0


def test_longrope_chooses_factors_by_seq_len():
    short, long = [1.0, 2.0, 4.0], [8.0, 16.0, 32.0]
    rule = LongRoPE(short, long, 1000, factor=16.0)
    spec = rr.RopeSpec(head_dim=6, scaling=rule)
    plain = np.array([float(t) for t in exact_plain(6, 10000.0)])
    np.testing.assert_allclose(rr.inv_freq(spec), plain / short, rtol=2 * EPS)
    np.testing.assert_allclose(rr.inv_freq(spec, seq_len=1000), plain / short, rtol=2 * EPS)
    np.testing.assert_allclose(rr.inv_freq(spec, seq_len=1001), plain / long, rtol=2 * EPS)
    expected = math.sqrt(1 + math.log(16.0) / math.log(1000))
    assert rr.attention_factor(spec) == pytest.approx(expected, rel=2 * EPS)
    assert LongRoPE(short, long, 1000).attention_factor(seq_len=None) == 1.0
    assert LongRoPE(short, long, 1000, factor=0.5).attention_factor(seq_len=None) == 1.0
    # seq_len defaults to max(position) + 1 when tables are built.
    np.testing.assert_array_equal(
        rr.rope_angles(spec, [1000.0])[0], 1000.0 * rr.inv_freq(spec, seq_len=1001)
    )


def test_proportional_zeroes_the_tail_with_full_head_exponents():
    spec = rr.RopeSpec(head_dim=16, scaling=Proportional(0.25, factor=2.0))
    plain = [float(t) for t in exact_plain(16, 10000.0)]
    np.testing.assert_allclose(
        rr.inv_freq(spec), [plain[0] / 2, plain[1] / 2] + [0.0] * 6, rtol=2 * EPS, atol=0
    )
    x = np.random.default_rng(0).standard_normal((5, 16))
    y = rr.apply_rope(x, spec)
    tail = [j for j in range(16) if j % 8 >= 2]  # pairs (j, j + 8) with j >= 2 do not rotate
    np.testing.assert_array_equal(y[:, tail], x[:, tail])


# --- validation ------------------------------------------------------------------------------

BAD_FACTORS = [0.0, -1.0, math.nan, math.inf]


@pytest.mark.parametrize("bad", BAD_FACTORS)
@pytest.mark.parametrize(
    "make",
    [
        Linear,
        NTKAware,
        lambda f: DynamicNTK(f, 1024),
        lambda f: YaRN(f, 1024),
        lambda f: Llama3(f, 8192),
        lambda f: LongRoPE([1.0], [2.0], 1024, factor=f),
        lambda f: Proportional(0.5, factor=f),
    ],
)
def test_bad_factor_raises_naming_factor(make, bad):
    with pytest.raises(ValueError, match=r"^`factor` must be"):
        make(bad)


@pytest.mark.parametrize("bad", [0, -5, math.nan])
@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda n: YaRN(2.0, n), "original_max_position"),
        (lambda n: Llama3(2.0, n), "original_max_position"),
        (lambda n: LongRoPE([1.0], [1.0], n), "original_max_position"),
        (lambda n: DynamicNTK(2.0, n), "max_position"),
    ],
)
def test_bad_context_length_raises_naming_it(make, field, bad):
    with pytest.raises(ValueError, match=rf"^`{field}` must be"):
        make(bad)


def test_factor_lists_must_fit_the_rotary_dim():
    rule = LongRoPE([1.0] * 4, [2.0] * 4, 4096)
    rr.RopeSpec(head_dim=8, scaling=rule)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`short_factor` must have one entry per pair (rotary_dim // 2 = 3); got 4."
        ),
    ):
        rr.RopeSpec(head_dim=6, scaling=rule)
    with pytest.raises(ValueError, match=r"^`long_factor` must have as many entries"):
        LongRoPE([1.0] * 4, [2.0] * 3, 4096)
    with pytest.raises(ValueError, match=r"^`short_factor` must be positive"):
        LongRoPE([1.0, 0.0], [2.0, 2.0], 4096)
    with pytest.raises(ValueError, match=r"^`long_factor` must be a non-empty"):
        LongRoPE([1.0], [], 4096)
    with pytest.raises(TypeError, match=r"^`short_factor` must be a sequence"):
        LongRoPE(1.0, [1.0], 4096)


def test_llama3_band_order_and_other_fields():
    with pytest.raises(
        ValueError,
        match=re.escape("`low_freq_factor` must be at most high_freq_factor (2.0); got 3.0."),
    ):
        Llama3(8.0, 8192, low_freq_factor=3.0, high_freq_factor=2.0)
    with pytest.raises(ValueError, match=r"^`low_freq_factor` must be positive"):
        Llama3(8.0, 8192, low_freq_factor=0.0)
    with pytest.raises(ValueError, match=r"^`beta_fast` must be positive"):
        YaRN(2.0, 4096, beta_fast=0.0)
    with pytest.raises(ValueError, match=r"^`beta_slow` must be finite"):
        YaRN(2.0, 4096, beta_slow=math.inf)
    with pytest.raises(ValueError, match=r"^`attention_factor` must be positive"):
        YaRN(2.0, 4096, attention_factor=-1.0)
    with pytest.raises(TypeError, match=r"^`truncate` must be True or False"):
        YaRN(2.0, 4096, truncate=1)
    with pytest.raises(ValueError, match=r"^`partial_rotary_factor` must be between 0 and 1"):
        Proportional(1.5)
    with pytest.raises(TypeError, match=r"^`factor` must be a real number"):
        Linear("2")


def test_rules_are_frozen_hashable_values_with_readable_reprs():
    rules = [
        Linear(2),
        NTKAware(2.0),
        DynamicNTK(2.0, 1024),
        YaRN(4.0, 4096, truncate=False),
        Llama3(8.0, 8192),
        LongRoPE([1.0, 2.0], [3.0, 4.0], 4096, factor=2.0),
        Proportional(0.5),
    ]
    for rule in rules:
        assert isinstance(rule, rr.ScalingRule)
        assert hash(rule) == hash(eval(repr(rule), vars(rr.scaling)))
        assert eval(repr(rule), vars(rr.scaling)) == rule
        with pytest.raises(AttributeError):
            setattr(rule, "factor", 3.0)  # noqa: B010
        spec = rr.RopeSpec(head_dim=4, scaling=rule)
        assert spec == rr.RopeSpec(head_dim=4, scaling=eval(repr(rule), vars(rr.scaling)))
    assert Linear(2).factor == 2.0
    assert isinstance(Linear(2).factor, float)
    assert YaRN(4.0, 4096.0).original_max_position == 4096
    short = [1.0, 2.0]
    rule = LongRoPE(short, short, 4096)
    short[0] = 9.0  # the rule keeps its own copy
    assert rule.short_factor == (1.0, 2.0)


_EVERY_RULE = [
    Linear(2.0),
    NTKAware(3.0),
    DynamicNTK(2.0, max_position=64),
    YaRN(4.0, original_max_position=64),
    Llama3(8.0, 64),
    LongRoPE([1.0, 1.5, 2.0], [3.0, 4.0, 5.0], 64, factor=4.0),
    Proportional(0.5, factor=2.0),
]


@pytest.mark.parametrize("rule", _EVERY_RULE, ids=lambda rule: type(rule).__name__)
def test_each_rule_says_whether_its_tables_change_with_seq_len(rule):
    from rope_ref.scaling._facts import is_length_dependent

    spec = rr.RopeSpec(head_dim=6, scaling=rule)
    short = (rr.inv_freq(spec, seq_len=8), rr.attention_factor(spec, seq_len=8))
    long = (rr.inv_freq(spec, seq_len=10**6), rr.attention_factor(spec, seq_len=10**6))
    changes = not (np.array_equal(short[0], long[0]) and short[1] == long[1])
    assert is_length_dependent(rule) == changes


def test_a_rule_that_says_nothing_is_taken_to_depend_on_seq_len():
    from rope_ref.scaling._facts import exact_form, is_length_dependent

    class Halving:
        def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
            return inv_freq / 2

        def attention_factor(self, *, seq_len):
            return 1.0

    assert is_length_dependent(Halving())
    assert exact_form(Halving()) is None
    assert not is_length_dependent(None)


def test_a_subclass_is_evaluated_exactly_only_where_it_restates_its_formula():
    from rope_ref.scaling._facts import exact_form

    class Doubled(Linear):
        def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
            return np.asarray(inv_freq, dtype=np.float64) * 2.0

    class Restated(Linear):
        exact_form = "linear"

    assert exact_form(Linear(2.0)) == "linear"
    assert exact_form(Doubled(2.0)) is None
    assert exact_form(Restated(2.0)) == "linear"
    spec = rr.RopeSpec(head_dim=4, scaling=Doubled(2.0))
    x = np.ones((1, 1, 3, 4))
    got = rr.apply_rope(x, spec, backend="exact")
    # Doubled's own frequencies [2, 0.02], not Linear's formula [0.5, 0.005]
    angles = np.arange(3)[:, None] * np.array([2.0, 0.02])
    want = np.concatenate([np.cos(angles) - np.sin(angles), np.sin(angles) + np.cos(angles)], -1)
    np.testing.assert_allclose(got[0, 0], want, rtol=4 * EPS, atol=4 * EPS)


def test_llama3_defaults_are_hf_own():
    """Catches: the default ``high_freq_factor`` (or ``low_freq_factor``) of Llama 3 changed.

    HF requires both keys; the values its Llama-3-scaled configs fill in when none are
    given (Apertus, CWM) are the ones Meta's code hard-codes.
    """
    transformers = pytest.importorskip("transformers")
    for config in (transformers.ApertusConfig(), transformers.CwmConfig()):
        params = config.rope_parameters
        assert params["rope_type"] == "llama3"
        rule = rr.scaling.Llama3(params["factor"], params["original_max_position_embeddings"])
        assert rule.high_freq_factor == params["high_freq_factor"]
        assert rule.low_freq_factor == params["low_freq_factor"]
        omitted = {k: v for k, v in params.items() if not k.endswith("freq_factor")}
        from_hf = rr.RopeSpec.from_hf({"head_dim": 64, "rope_parameters": omitted}).scaling
        assert isinstance(from_hf, rr.scaling.Llama3)
        assert from_hf.high_freq_factor == params["high_freq_factor"]
        assert from_hf.low_freq_factor == params["low_freq_factor"]


def test_llama3_band_edges_are_divided_exactly():
    """Catches: ``context / low`` or ``context / high`` as floor division.

    With context 8192 and low_freq_factor 3 the edge is 2730.67 wavelengths, not 2730: a
    pair of wavelength 2730.5 is in the medium band. The rule is HF's (and Meta's),
    written here: long wavelengths divided by the factor, short ones kept, the band
    between blended linearly in context / wavelength.
    """
    context, low, high, factor = 8192, 3.0, 7.0, 8.0
    rule = rr.scaling.Llama3(factor, context, low_freq_factor=low, high_freq_factor=high)
    wavelengths = np.array([2730.5, 1170.1, 5000.0, 100.0, 9000.0])  # 8192 / 7 = 1170.29
    theta = 2 * np.pi / wavelengths
    smooth = (context / wavelengths - low) / (high - low)
    medium = (1 - smooth) * theta / factor + smooth * theta
    want = np.where(wavelengths > context / low, theta / factor, medium)
    want = np.where(wavelengths < context / high, theta, want)
    got = rule.inv_freq(theta, base=1e4, rotary_dim=10, seq_len=None)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert got[0] != theta[0] / factor  # 2730.5: blended, not divided


@pytest.mark.parametrize(
    ("args", "error", "name", "got"),
    [
        ((float("nan"),), ValueError, "factor", "nan"),
        ((float("inf"),), ValueError, "factor", "inf"),
        ((0.0,), ValueError, "factor", "0.0"),
        ((-1.0,), ValueError, "factor", "-1.0"),
        (("2",), TypeError, "factor", "'2'"),
        ((4.0, float("nan")), ValueError, "mscale", "nan"),
        ((4.0, None), TypeError, "mscale", "None"),
    ],
)
def test_yarn_mscale_refuses_what_is_not_a_factor(
    args: tuple[object, ...], error: type[Exception], name: str, got: str
) -> None:
    """`yarn_mscale` names a non-finite, non-positive or non-real argument (no NaN returned)."""
    with pytest.raises(error, match=rf"`{name}`.*got {re.escape(got)}"):
        rr.scaling.yarn_mscale(*args)


def test_yarn_mscale_values() -> None:
    """``0.1 * m * ln(s) + 1`` above s = 1, and 1 at or below it."""
    assert rr.scaling.yarn_mscale(4.0, 2.0) == pytest.approx(0.2 * math.log(4.0) + 1.0, rel=1e-15)
    assert rr.scaling.yarn_mscale(0.5) == 1.0
    assert rr.scaling.yarn_mscale(1.0, 3.0) == 1.0


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
