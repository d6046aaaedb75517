"""A scaling rule's parameter planted wrong in plain NumPy (HF's formulas written out here):
the diagnosis names the rule's parameter that differs and its fitted value, never a
precision cause, an M-RoPE hint or another family."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling
from rope_ref.testing import diagnose

D = 128
P = np.arange(0, 8192, 61)


def _x(rows, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (rows, D)).astype(np.float32)


def _inv(base=10000.0, d=D):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def _rotate(x, angles):
    """rotate_half RoPE in float64, rounded to x's dtype."""
    n = angles.shape[-1]
    xr = x.astype(np.float64)
    a, b = xr[..., :n], xr[..., n:]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def _llama3(inv, factor, context, low, high):
    """transformers' _compute_llama3_parameters, for any low/high (swapped included)."""
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = context / low, context / high
    out = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, out)


def _yarn(factor, context, beta_fast, beta_slow, base=10000.0, d=D):
    """transformers' _compute_yarn_parameters (truncate=True), frequencies only."""

    def dim(rotations):
        return (d * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(dim(beta_fast)), 0)
    high = min(math.ceil(dim(beta_slow)), d - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    inv = _inv(base, d)
    return inv / factor * (1 - extrapolation_factor) + inv * extrapolation_factor


def _check(found, *snippets):
    assert found is not None
    assert found.cause == "scaling", found
    for snippet in snippets:
        assert snippet in found.message, found
    assert "M-RoPE" not in found.message
    assert "precision" not in found.message


def test_llama3_band_factors_swapped_are_named_swapped():
    spec = rr.RopeSpec(D, base=500000.0, scaling=scaling.Llama3(8.0, original_max_position=8192))
    theta = _llama3(_inv(500000.0), 8.0, 8192, 4.0, 1.0)  # low and high swapped
    x = _x(P.size)
    found = diagnose(_rotate(x, P[:, None] * theta), x, spec, P)
    _check(found, "band factors are swapped", "low_freq_factor=4, high_freq_factor=1")


@pytest.mark.parametrize(
    ("low", "high", "named"), [(1.0, 2.0, "high_freq_factor=2"), (2.0, 4.0, "low_freq_factor=2")]
)
def test_llama3_band_factor_is_fitted(low, high, named):
    spec = rr.RopeSpec(D, base=500000.0, scaling=scaling.Llama3(8.0, original_max_position=8192))
    theta = _llama3(_inv(500000.0), 8.0, 8192, low, high)
    x = _x(P.size, seed=1)
    _check(diagnose(_rotate(x, P[:, None] * theta), x, spec, P), named, "(fitted)")


def test_ntk_aware_without_its_exponent_is_named_the_exponent():
    s = 4.0
    spec = rr.RopeSpec(D, scaling=scaling.NTKAware(s))
    x = _x(P.size, seed=2)
    found = diagnose(_rotate(x, P[:, None] * _inv(10000.0 * s)), x, spec, P)  # base * s
    _check(found, "exponent d/(d-2) was dropped")


def test_dynamic_ntk_length_off_by_one_is_named():
    p = np.arange(0, 5000, 7)
    factor, max_position = 2.0, 2048
    spec = rr.RopeSpec(D, scaling=scaling.DynamicNTK(factor, max_position=max_position))
    length = p.max()  # the bug: max position, not max position + 1
    base = 10000.0 * (factor * length / max_position - (factor - 1)) ** (D / (D - 2))
    x = _x(p.size, seed=3)
    found = diagnose(_rotate(x, p[:, None] * _inv(base)), x, spec, p)
    _check(found, f"length {length}", "off by -1")


@pytest.mark.parametrize(
    ("beta_fast", "beta_slow", "named"), [(16.0, 1.0, "beta_fast=16"), (32.0, 2.0, "beta_slow=2")]
)
def test_yarn_ramp_ends_are_fitted(beta_fast, beta_slow, named):
    factor, context = 4.0, 4096
    spec = rr.RopeSpec(D, scaling=scaling.YaRN(factor, original_max_position=context))
    theta = _yarn(factor, context, beta_fast, beta_slow)
    mscale = 0.1 * math.log(factor) + 1.0
    x = _x(P.size, seed=4)
    y = (_rotate(x.astype(np.float64), P[:, None] * theta) * mscale).astype(np.float32)
    _check(diagnose(y, x, spec, P), named)


def test_proportional_exponents_over_the_rotated_part_are_named():
    fraction = 0.25
    spec = rr.RopeSpec(D, scaling=scaling.Proportional(fraction))
    k = int(fraction * D // 2)
    theta = np.zeros(D // 2)
    theta[:k] = 10000.0 ** (-np.arange(0, 2 * k, 2) / (fraction * D))  # over p*H, not H
    x = _x(P.size, seed=5)
    found = diagnose(_rotate(x, P[:, None] * theta), x, spec, P)
    _check(found, "run over 32 features", f"base^(-2j/{D})")


def test_yarn_default_attention_factor_where_mscale_settings_cancel_is_named():
    """DeepSeek-style YaRN: mscale = mscale_all_dim = 1 makes the factor 1; code that
    applies the default 0.1 ln(s) + 1 instead is named with that formula."""
    factor, context = 40.0, 4096
    rule = scaling.YaRN(factor, original_max_position=context, mscale=1.0, mscale_all_dim=1.0)
    spec = rr.RopeSpec(D, scaling=rule)
    theta = _yarn(factor, context, 32.0, 1.0)
    x = _x(P.size, seed=6)
    default = 0.1 * math.log(factor) + 1.0
    y = (_rotate(x.astype(np.float64), P[:, None] * theta) * default).astype(np.float32)
    found = diagnose(y, x, spec, P)
    assert found is not None
    assert found.cause == "attention_factor", found
    assert f"{default:.6g} is YaRN's default 0.1 ln(s) + 1" in found.message


@pytest.mark.parametrize(
    "p", [np.array([1]), np.arange(9), np.arange(0, 8192, 61), np.arange(0, 32769, 257)]
)
def test_the_same_rule_mistake_gets_the_same_cause_at_any_positions(p):
    """A counterexample at one position, a probe grid and a user's long positions agree."""
    llama = rr.RopeSpec(D, base=500000.0, scaling=scaling.Llama3(8.0, original_max_position=8192))
    swapped = _llama3(_inv(500000.0), 8.0, 8192, 4.0, 1.0)
    yarn = rr.RopeSpec(D, scaling=scaling.YaRN(4.0, original_max_position=4096))
    fast16 = _yarn(4.0, 4096, 16.0, 1.0)
    mscale = 0.1 * math.log(4.0) + 1.0
    x = _x(p.size, seed=7)
    found = diagnose(_rotate(x, p[:, None] * swapped), x, llama, p)
    _check(found, "band factors are swapped")
    y = (_rotate(x.astype(np.float64), p[:, None] * fast16) * mscale).astype(np.float32)
    _check(diagnose(y, x, yarn, p), "beta_fast=16")


def test_another_context_length_is_not_told_as_a_moved_ramp_end():
    """Both ramp ends move with original_max_position: that length is named, not a beta."""
    factor = 4.0
    spec = rr.RopeSpec(D, scaling=scaling.YaRN(factor, original_max_position=4096))
    theta = _yarn(factor, 8192, 32.0, 1.0)  # the code's context length is 8192
    x = _x(P.size, seed=8)
    mscale = 0.1 * math.log(factor) + 1.0
    y = (_rotate(x.astype(np.float64), P[:, None] * theta) * mscale).astype(np.float32)
    found = diagnose(y, x, spec, P)
    assert found is not None
    assert found.cause == "scaling", found
    assert "context length differs" in found.message, found
    assert "(fitted)" not in found.message


def test_ntk_aware_with_another_factor_is_told_as_the_factor():
    spec = rr.RopeSpec(D, scaling=scaling.NTKAware(4.0))
    base = 10000.0 * 2.0 ** (D / (D - 2))  # the code's factor is 2
    x = _x(P.size, seed=9)
    found = diagnose(_rotate(x, P[:, None] * _inv(base)), x, spec, P)
    assert found is not None
    assert found.cause == "scaling", found
    assert "the factor is 2, not 4" in found.message, found


def test_a_wide_head_fits_the_proportional_denominator_from_the_result():
    """Past 256 rotated features the denominators are not all tried: the one the second
    pair turns by is fitted (here 200 for a 512-feature head)."""
    d, fraction, p = 512, 0.25, np.arange(200)
    spec = rr.RopeSpec(d, scaling=scaling.Proportional(fraction))
    k = int(fraction * d // 2)
    theta = np.zeros(d // 2)
    theta[:k] = 10000.0 ** (-np.arange(0, 2 * k, 2) / 200.0)
    x = np.random.default_rng(10).uniform(-1.0, 1.0, (p.size, d)).astype(np.float32)
    n = d // 2
    xr = x.astype(np.float64)
    a, b = xr[:, :n], xr[:, n:]
    angles = p[:, None] * theta
    cos, sin = np.cos(angles), np.sin(angles)
    y = np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(np.float32)
    _check(diagnose(y, x, spec, p), "run over 200 features")


def _ggml_yarn(inv, factor, context, beta_fast, ext_factor, base=10000.0, d=D):
    """ggml's rope_yarn over the inverse frequencies `inv`: the ramp of ggml_rope_yarn_corr_dims
    (floor/ceil, hi clamped to d - 1) weighted by ext_factor (its ramp_mix)."""

    def dim(rotations):
        return (d * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(0.0, math.floor(dim(beta_fast)))
    high = min(d - 1.0, math.ceil(dim(1.0)))
    y = (np.arange(d // 2, dtype=np.float64) - low) / max(0.001, high - low)
    ramp_mix = (1.0 - np.clip(y, 0.0, 1.0)) * ext_factor
    return inv / factor * (1.0 - ramp_mix) + inv * ramp_mix


def _yarn_result(theta, factor, seed):
    x = _x(P.size, seed=seed)
    mscale = 0.1 * math.log(factor) + 1.0
    return (_rotate(x.astype(np.float64), P[:, None] * theta) * mscale).astype(np.float32), x


def test_partial_yarn_ramp_end_is_fitted_with_its_ext_factor():
    """llama.cpp's partial YaRN (ext_factor 0.5) with beta_fast 16 for the spec's 32: the
    candidates keep ext_factor, so the planted ramp end is found, not judged as full YaRN."""
    factor, context = 4.0, 4096
    rule = scaling.YaRN(factor, original_max_position=context, ext_factor=0.5)
    spec = rr.RopeSpec(D, scaling=rule)
    y, x = _yarn_result(_ggml_yarn(_inv(), factor, context, 16.0, 0.5), factor, seed=8)
    _check(diagnose(y, x, spec, P), "beta_fast=16 (fitted)")


def test_yarn_over_explicit_frequencies_is_fitted_over_them():
    """ggml's frequency factors with YaRN (freqs= and a rule): beta_fast 16 planted for 32
    is named over the spec's own frequencies, as is a factor of 8 for the spec's 4."""
    factor, context, base = 4.0, 4096, 500000.0
    divisors = np.linspace(1.0, 3.0, D // 2)  # per-pair frequency factors, as ggml's
    freqs = _inv(base) / divisors
    rule = scaling.YaRN(factor, original_max_position=context)
    spec = rr.RopeSpec(D, base=base, freqs=tuple(freqs), scaling=rule)
    theta = _ggml_yarn(freqs, factor, context, 16.0, 1.0, base=base)
    y, x = _yarn_result(theta, factor, seed=9)
    _check(diagnose(y, x, spec, P), "beta_fast=16 (fitted)")
    theta = _ggml_yarn(freqs, 8.0, context, 32.0, 1.0, base=base)
    y, x = _yarn_result(theta, 8.0, seed=10)
    _check(diagnose(y, x, spec, P), "the factor is 8, not 4")


def _ggml_inverted(inv, factor, context, ext_factor, base=10000.0, d=D):
    """`_ggml_yarn` with ramp_mix = ext_factor * (clamped y), not ext_factor * (1 - it):
    fast pairs interpolated, slow ones kept (their share ext_factor)."""
    kept = _ggml_yarn(inv, factor, context, 32.0, ext_factor, base=base, d=d)
    mix = (kept - inv / factor) / (inv - inv / factor)  # ext_factor * (1 - clamped y)
    inverted_mix = ext_factor - mix
    return inv / factor * (1.0 - inverted_mix) + inv * inverted_mix


@pytest.mark.parametrize("over_freqs", [False, True])
def test_an_inverted_partial_yarn_ramp_is_named_inverted(over_freqs):
    """Partial YaRN (ext_factor 0.5), alone or over freqs=, with its ramp inverted."""
    factor, context, base = 4.0, 4096, 10000.0
    rule = scaling.YaRN(factor, original_max_position=context, ext_factor=0.5)
    inv = _inv(base) / np.linspace(1.0, 2.0, D // 2) if over_freqs else _inv(base)
    freqs = tuple(inv) if over_freqs else None
    spec = rr.RopeSpec(D, freqs=freqs, scaling=rule)
    y, x = _yarn_result(_ggml_inverted(inv, factor, context, 0.5), factor, seed=11)
    _check(diagnose(y, x, spec, P), "YaRN's ramp is inverted", "With ext_factor=0.5 the kept pairs")
