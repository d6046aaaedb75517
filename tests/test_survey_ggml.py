"""ggml in `rope-ref survey`: `ggml_rope_ext` agrees in every mode rope_ref can state.

ggml's own formula is written here in float64 NumPy (pair angles, frequency factors, YaRN's
ramp between the correction dimensions, the attention factor) and checked against ggml at
``[head_dim, n_head, n_tokens]`` tensors with int32 positions, partial YaRN included,
which the survey skips; Llama 3.1's frequency factors are checked against HF's Llama 3 rule.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests._libraries import driver, require, rotate_pairs, rows

D = 64


def _ggml_formula(x, p, rope):
    """ggml's rotation of x (tokens, heads, D) in float64, written from ggml-cpu's rope."""
    n = rope.n_dims
    j = np.arange(n // 2)
    extrap = p[:, None] * rope.freq_base ** (-2.0 * j / n)
    if rope.factors is not None:
        extrap = extrap / np.asarray(rope.factors)
    interp = rope.freq_scale * extrap
    mscale = rope.attn_factor
    theta = interp
    if rope.ext_factor != 0.0:

        def corr_dim(rotations):
            ctx = rope.n_ctx_orig / (rotations * 2 * math.pi)
            return n * math.log(ctx) / (2 * math.log(rope.freq_base))

        start = max(0.0, math.floor(corr_dim(rope.beta_fast)))
        end = min(n - 1.0, math.ceil(corr_dim(rope.beta_slow)))
        ramp = 1.0 - np.clip((j - start) / max(0.001, end - start), 0.0, 1.0)
        mix = ramp * rope.ext_factor
        theta = interp * (1 - mix) + extrap * mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / rope.freq_scale)
    x = x.astype(np.float64)
    out = x.copy()
    out[..., :n] = mscale * rotate_pairs(x[..., :n], theta[:, None, :], interleaved=rope.mode == 0)
    return out


def test_rows_agree_and_partial_yarn_says_why_not():
    found = rows("ggml-python")
    assert len(found) == 11
    for settings, row in found.items():
        if "partial YaRN" in settings:
            assert row.verdict == "skipped", row
            assert "ext_factor between 0 and 1" in (row.diagnosis or "")
        else:
            assert row.verdict == "conformant", row


@pytest.mark.parametrize("index", range(11))
def test_rope_ext_follows_ggml_formula(index):
    require("ggml-python")
    ggml = driver("ggml")
    settings, rope, _, _ = ggml._cases()[index]
    p = np.array([0, 1, 2, 7, 255, 256, 2049, 5000, 33000], dtype=np.int32)
    x = np.random.default_rng(index).uniform(-1, 1, (p.size, 3, D)).astype(rope.dtype)
    y = ggml.rope_ext(x, p, rope)
    assert y.dtype == np.dtype(rope.dtype)
    assert y.shape == x.shape
    expected = _ggml_formula(x, p, rope)
    # float32 angles: off by up to half an ulp of p * theta (2e-3 rad at 33000)
    np.testing.assert_allclose(y, expected, rtol=0, atol=6e-3, err_msg=settings)
    near = p <= 256
    atol = 2e-3 if rope.dtype == "float16" else 2e-5
    np.testing.assert_allclose(y[near], expected[near], rtol=0, atol=atol, err_msg=settings)


def test_llama3_factors_give_hf_llama3_frequencies():
    ggml = driver("ggml")
    base, factor, low, high, old = 500000.0, 8.0, 1.0, 4.0, 8192
    inv = base ** -(np.arange(0, D, 2) / D)
    wavelength = 2 * math.pi / inv
    smooth = (old / wavelength - low) / (high - low)  # HF's _compute_llama3_parameters
    hf = np.where(wavelength > old / low, inv / factor, inv)
    medium = (wavelength >= old / high) & (wavelength <= old / low)
    hf = np.where(medium, (1 - smooth) * hf / factor + smooth * hf, hf)
    got = inv / np.asarray(ggml.llama3_factors(base, D, factor, low, high, old))
    np.testing.assert_allclose(got, hf, rtol=1e-12)
    assert 0 < medium.sum() < D // 2  # the test reaches all three bands
