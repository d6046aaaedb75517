"""rr.scaling rules: formulas worked out independently (mpmath), validation, value semantics."""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, NTKAware, Proportional, YaRN

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
