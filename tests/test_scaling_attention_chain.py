"""`AttentionScale` (a bare attention factor) and `Chain` (rules in turn): formulas written here,
every backend, errors naming the parameter."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import AttentionScale, Chain, Linear, Llama3, YaRN
from tests._libraries import rotate_pairs

D = 16


def test_attention_scale_keeps_frequencies_and_scales_the_rotation():
    spec = rr.RopeSpec(D, scaling=AttentionScale(1.5))
    theta = 10000.0 ** -(np.arange(0, D, 2) / D)
    np.testing.assert_array_equal(rr.inv_freq(spec), rr.inv_freq(rr.RopeSpec(D)))
    x = np.random.default_rng(0).uniform(-1, 1, (3, 5, D))
    p = np.array([0, 1, 7, 300, 4095])
    expected = 1.5 * rotate_pairs(x, p[:, None] * theta, interleaved=False)
    np.testing.assert_allclose(rr.apply_rope(x, spec, p), expected, rtol=1e-13, atol=1e-15)
    # the old spelling gives the same rotation
    old = rr.RopeSpec(D, scaling=YaRN(1.0, original_max_position=4096, attention_factor=1.5))
    np.testing.assert_allclose(rr.apply_rope(x, old, p), expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    "backend",
    [
        b
        for b, why in rr.available_backends().items()
        if why is None and b in ("reference", "numba")
    ],
)
def test_attention_scale_and_chain_reach_every_kernel_through_the_tables(backend):
    rule = Chain(Llama3(8.0, original_max_position=64), Linear(4.0), AttentionScale(1.25))
    spec = rr.RopeSpec(D, base=500000.0, scaling=rule)
    x = np.random.default_rng(1).uniform(-1, 1, (2, 9, D)).astype(np.float32)
    p = np.arange(9) * 1000
    theta = 500000.0 ** -(np.arange(0, D, 2) / D)
    wavelength = 2 * math.pi / theta
    smooth = np.clip((64 / wavelength - 1.0) / 3.0, 0.0, 1.0)
    llama3 = (1 - smooth) * theta / 8.0 + smooth * theta
    expected = 1.25 * rotate_pairs(
        x.astype(np.float64), (p[:, None] / 4.0) * llama3, interleaved=False
    )
    got = rr.apply_rope(x, spec, p, backend=backend)
    np.testing.assert_allclose(got, expected, atol=2e-6)


def test_chain_multiplies_attention_factors_and_keeps_order():
    rule = Chain(YaRN(4.0, original_max_position=1024), AttentionScale(2.0))
    spec = rr.RopeSpec(D, scaling=rule)
    assert rr.attention_factor(spec) == pytest.approx(2.0 * (0.1 * math.log(4.0) + 1.0))
    a = Chain(Linear(2.0), Llama3(8.0, original_max_position=64))
    b = Chain(Llama3(8.0, original_max_position=64), Linear(2.0))
    assert a != b
    assert hash(a) == hash(Chain(Linear(2.0), Llama3(8.0, original_max_position=64)))
    assert not np.allclose(
        rr.inv_freq(rr.RopeSpec(D, scaling=a)), rr.inv_freq(rr.RopeSpec(D, scaling=b))
    )


@pytest.mark.parametrize(
    ("make", "error", "names"),
    [
        (lambda: AttentionScale(0.0), ValueError, "`factor`"),
        (lambda: AttentionScale(float("nan")), ValueError, "`factor`"),
        (lambda: AttentionScale("2"), TypeError, "`factor`"),
        (Chain, ValueError, "`rules`"),
        (lambda: Chain(Linear(2.0)), ValueError, "`rules`"),
        (lambda: Chain(Linear(2.0), Linear), TypeError, "`rules`"),
        (lambda: Chain(Linear(2.0), 3.0), TypeError, "`rules`"),
    ],
)
def test_bad_rules_are_refused_naming_the_parameter(make, error, names):
    with pytest.raises(error, match=names):
        make()
