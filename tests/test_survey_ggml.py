"""ggml in `rope-ref survey`: `ggml_rope_ext` agrees in every mode rope_ref can state.

ggml's own formula is written here in float64 NumPy (pair angles, frequency factors, YaRN's
ramp between the correction dimensions, the attention factor) and checked against ggml at
``[head_dim, n_head, n_tokens]`` tensors with int32 positions, partial YaRN included
(whose row's spec is checked against the formula without ggml); Llama 3.1's frequency
factors are checked against HF's Llama 3 rule.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling as rules
from tests._libraries import driver, require, rotate_pairs, rows

D = 64


def _axis_of_pair(j: int, sections, imrope: bool) -> int:
    """ggml-cpu's M-RoPE map: the position axis (t, h, w, e = 0..3) of pair j."""
    t, h, w, e = sections
    sector = j % (t + h + w + e)
    if imrope:
        for axis, size in ((1, h), (2, w), (0, t)):
            if sector % 3 == axis % 3 and sector < 3 * size:
                return axis
        return 3
    return int(np.searchsorted(np.cumsum([t, h, w, e]), sector, side="right"))


def _vision_formula(x, p, rope):
    """ggml's VISION mode: n_dims = D / 2, pairs (i, i + n_dims) over the whole head, and
    each section restarts its ladder (``indep_sects``) at its own position (t, then h)."""
    n = rope.n_dims
    t = rope.sections[0]
    i = np.arange(n)
    sector = i % sum(rope.sections)
    in_h = sector >= t
    step = np.where(in_h, sector - t, sector)  # theta *= theta_scale since the reset
    angle = p[:, in_h.astype(int)] * rope.freq_base ** (-2.0 * step / n)
    x = x.astype(np.float64)
    return rotate_pairs(x, angle[:, None, :], interleaved=False)


def _ggml_formula(x, p, rope):
    """ggml's rotation of x (tokens, heads, D) in float64, written from ggml-cpu's rope."""
    if rope.mode == 24:
        return _vision_formula(x, p, rope)
    n = rope.n_dims
    j = np.arange(n // 2)
    if rope.sections is not None:  # p: (tokens, k); the positions not given are 0
        p4 = np.concatenate([p, np.zeros((p.shape[0], 4 - p.shape[1]), p.dtype)], axis=1)
        axes = [_axis_of_pair(k, rope.sections, rope.mode == 40) for k in j]
        p = p4[:, axes]
    else:
        p = p[:, None]
    extrap = p * rope.freq_base ** (-2.0 * j / n)
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


def test_rows_agree():
    found = rows("ggml-python")
    assert len(found) == 15
    for settings, row in found.items():
        assert row.verdict == "conformant", (settings, row)


@pytest.mark.parametrize("index", range(15))
def test_rope_ext_follows_ggml_formula(index):
    require("ggml-python")
    ggml = driver("ggml")
    settings, rope, _, _ = ggml._cases()[index]
    p = np.array([0, 1, 2, 7, 255, 256, 2049, 5000, 33000], dtype=np.int32)
    if rope.sections is not None:  # distinct (t, h, w) per token
        p = np.stack([p, p // 3 + 1, p // 5 + 2], axis=-1)
    x = np.random.default_rng(index).uniform(-1, 1, (p.shape[0], 3, D)).astype(rope.dtype)
    y = ggml.rope_ext(x, p, rope)
    assert y.dtype == np.dtype(rope.dtype)
    assert y.shape == x.shape
    expected = _ggml_formula(x, p, rope)
    # float32 angles: off by up to half an ulp of p * theta (2e-3 rad at 33000)
    np.testing.assert_allclose(y, expected, rtol=0, atol=6e-3, err_msg=settings)
    near = (p if p.ndim == 1 else p[:, 0]) <= 256
    atol = 2e-3 if rope.dtype == "float16" else 2e-5
    np.testing.assert_allclose(y[near], expected[near], rtol=0, atol=atol, err_msg=settings)


@pytest.mark.parametrize("ext_factor", [0.5, 0.25, 1.0])
def test_partial_yarn_rows_spec_is_ggmls_formula(ext_factor):
    """The partial-YaRN row's spec rotates as ggml's formula, in float64 (no ggml needed)."""
    ggml = driver("ggml")
    settings, rope, spec, _ = next(c for c in ggml._cases() if "partial YaRN" in c[0])
    assert not isinstance(spec, str), settings
    rope = dataclasses.replace(rope, ext_factor=ext_factor)
    spec = dataclasses.replace(spec, scaling=rules.YaRN(4.0, 32768, ext_factor=ext_factor))
    p = np.array([0, 1, 2, 7, 255, 256, 2049, 5000, 33000, 131071], dtype=np.int32)
    x = np.random.default_rng(5).uniform(-1, 1, (p.size, 3, D))
    got = rr.apply_rope(x, spec, p, seq_axis=0)
    np.testing.assert_allclose(got, _ggml_formula(x, p, rope), rtol=0, atol=1e-10)


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


def test_imrope_gives_the_last_pair_the_fourth_position():
    # HF's Qwen3-VL interleave: h on pairs 1, 4, ..., w on 2, 5, ... (3 * section long),
    # t on the rest; ggml's IMROPE sends what t's condition misses to e instead.
    hf = ["t"] * 32
    for k in range(1, 30, 3):
        hf[k] = "h"
    for k in range(2, 30, 3):
        hf[k] = "w"
    ggml_axes = ["thwe"[_axis_of_pair(k, (12, 10, 10, 0), True)] for k in range(32)]
    assert [k for k in range(32) if hf[k] != ggml_axes[k]] == [31]
    assert ggml_axes[31] == "e"
    require("ggml-python")
    ggml = driver("ggml")
    rope = ggml.Rope(40, freq_base=1e6, sections=(12, 10, 10, 0))
    p = np.array([[500, 500, 500]], dtype=np.int32)  # a text token: t = h = w, e = 0
    x = np.random.default_rng(3).uniform(-1, 1, (1, 2, D)).astype(np.float32)
    y = ggml.rope_ext(x, p, rope)
    np.testing.assert_array_equal(y[..., [31, 63]], x[..., [31, 63]])  # pair 31 unrotated


def test_positions_that_do_not_fit_raise_instead_of_aborting():
    ggml = driver("ggml")
    x = np.zeros((4, 2, D), dtype=np.float32)
    with pytest.raises(ValueError, match=r"positions.*\(4,\).*\(5,\)"):
        ggml.rope_ext(x, np.arange(5), ggml.Rope())
    with pytest.raises(ValueError, match=r"positions.*\(4, 2 to 4\).*\(4, 5\)"):
        ggml.rope_ext(x, np.zeros((4, 5)), ggml.Rope(8, sections=(8, 12, 12, 0)))
    with pytest.raises(ValueError, match=r"positions.*\(4, 2 to 4\).*\(3, 3\)"):
        ggml.rope_ext(x, np.zeros((3, 3)), ggml.Rope(8, sections=(8, 12, 12, 0)))


def _row(label):
    ggml = driver("ggml")
    (case,) = [c for c in ggml._cases() if c[0].startswith(label)]
    return case


def test_imrope_row_states_ggml_map_with_a_fourth_axis():
    import rope_ref as rr

    _, rope, spec, _ = _row("IMROPE, sections=(12, 10, 10, 0)")
    want = [_axis_of_pair(k, rope.sections, True) for k in range(D // 2)]
    np.testing.assert_array_equal(rr.pair_axes(spec), want)
    assert spec.n_axes == 4
    assert spec.base == rope.freq_base


def test_vision_row_spec_gives_ggml_vision_angles():
    import rope_ref as rr

    _, rope, spec, _ = _row("VISION")
    p = np.array([[3, 11], [250, 7], [0, 40]])
    x = np.random.default_rng(5).uniform(-1, 1, (3, 2, D))
    want = _vision_formula(x, p, rope)
    got = rr.apply_rope(x, spec, p[:, None, :], seq_axis=0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_imrope_fourth_position_turns_pair_31():
    require("ggml-python")
    ggml = driver("ggml")
    _, rope, _, _ = _row("IMROPE, sections=(12, 10, 10, 0)")
    p = np.array([[5, 6, 7, 0], [5, 6, 7, 900]], dtype=np.int32)  # only e differs
    x = np.ones((2, 1, D), dtype=np.float32)
    y = ggml.rope_ext(x, p, rope)
    differs = np.flatnonzero(np.abs(y[0, 0] - y[1, 0]) > 1e-6)
    assert differs.tolist() == [31, 63]
    np.testing.assert_allclose(y, _ggml_formula(x, p, rope), rtol=0, atol=2e-5)
