"""The error model of rope_ref.testing: its formula, and that it is sound but not vacuous.

Soundness is checked against float32 angle recipes written out here from the peers' source
(HF/vLLM, ggml CPU and CUDA, MLX Metal), rotating in float32; and against HF's bfloat16 /
float16 path (cos/sin rounded to the input dtype, rotation in that dtype) run in torch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref._core.error_model import angle_error, tolerance
from rope_ref.testing import ErrorModel, assert_rope_close, diagnose, error_model, rope_atol

F32 = np.float32


def test_atol_is_angle_error_plus_roundings():
    model = ErrorModel(eps=2.0**-23, angle_eps=2.0**-23)
    for phi, m in [(0.0, 1.0), (1000.0, 2.5), (2.0**20, 0.1)]:
        want = m * (angle_error(phi, angle_eps=2.0**-23) + 4 * 2.0**-23)
        assert model.atol(phi, m) == pytest.approx(want, rel=1e-15)
    # The array form agrees with the scalar form element by element.
    phis = np.array([0.0, 3.0, 1e6])
    np.testing.assert_allclose(model.atol(phis, 2.0), [model.atol(p, 2.0) for p in phis])
    # For float64 angles and 2 roundings it is the project's tolerance() (with 2x angles).
    f64 = ErrorModel(eps=2.0**-52, angle_eps=2.0**-52, roundings=2)
    assert f64.atol(500.0, 3.0) == pytest.approx(
        tolerance(2.0**-52, max_angle=500.0, magnitude=3.0) - 3.0 * angle_error(500.0), rel=1e-12
    )


def test_error_model_defaults_per_dtype():
    assert error_model("float64") == ErrorModel(eps=2.0**-52, angle_eps=2.0**-52)
    assert error_model(np.float32) == ErrorModel(eps=2.0**-23, angle_eps=2.0**-23)
    assert error_model(np.dtype("float16")).eps == 2.0**-10
    torch = pytest.importorskip("torch")
    assert error_model(torch.bfloat16) == ErrorModel(eps=2.0**-7, angle_eps=2.0**-23)
    assert error_model("float64", angle_dtype="float32").angle_eps == 2.0**-23
    with pytest.raises(ValueError, match=r"`dtype` must be one of .*; got 'int32'"):
        error_model("int32")


def test_rope_atol_uses_the_largest_angle():
    spec = rr.RopeSpec(head_dim=64, base=500000.0)
    p = np.array([3, 70000, 12])
    # theta_0 = 1, so the largest angle is the largest position (offset included).
    want = 2.0 * (2 * 2.0**-23 * (70010 + 1.0) + 4 * 2.0**-23)
    assert rope_atol(spec, p, dtype="float32", magnitude=2.0, offset=10) == pytest.approx(want)
    freqs = rr.RopeSpec(head_dim=4, freqs=(0.5, 0.25))
    assert rope_atol(freqs, [8], dtype="float64") == pytest.approx(
        2 * 2.0**-52 * 5.0 + 4 * 2.0**-52
    )


# --- float32 angle recipes of real implementations (peer survey, appendix A1) -------------------


def _hf(p, d, base):
    e = (np.arange(0, d, 2).astype(F32) / F32(d)).astype(F32)
    inv = (F32(1.0) / np.power(F32(base), e, dtype=F32)).astype(F32)
    return np.outer(p.astype(F32), inv).astype(F32)


def _ggml_cpu(p, d, base):
    scale = np.power(F32(base), F32(-2.0) / F32(d), dtype=F32)
    out = np.empty((len(p), d // 2), F32)
    theta = p.astype(F32)
    for j in range(d // 2):
        out[:, j] = theta
        theta = (theta * scale).astype(F32)
    return out


def _ggml_cuda(p, d, base):
    scale = np.power(F32(base), F32(-2.0) / F32(d), dtype=F32)
    powers = np.power(scale, np.arange(d // 2).astype(F32), dtype=F32)
    return np.outer(p.astype(F32), powers).astype(F32)


def _mlx(p, d, base):
    half = d // 2
    e = (np.arange(half).astype(F32) / F32(half)).astype(F32)
    inv = np.exp2(-e * F32(np.log2(base)), dtype=F32)
    return np.outer(p.astype(F32), inv).astype(F32)


def _rotate_f32(x, angles):
    """rotate_half in float32 arithmetic with float32 cos/sin, half layout."""
    n = angles.shape[-1]
    cos, sin = np.cos(angles).astype(F32), np.sin(angles).astype(F32)
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(F32)


@given(
    recipe=st.sampled_from([_hf, _ggml_cpu, _ggml_cuda, _mlx]),
    d=st.sampled_from([8, 64, 80, 96, 128]),
    base=st.sampled_from([10000.0, 500000.0, 1e6]),
    top=st.integers(0, 2**20),
    seed=st.integers(0, 2**16),
)
def test_float32_recipes_of_peers_pass_the_float32_model(recipe, d, base, top, seed):
    rng = np.random.default_rng(seed)
    p = np.unique(np.concatenate([rng.integers(0, top + 1, 6), [top]]))
    x = rng.uniform(-2.0, 2.0, (2, len(p), d)).astype(F32)
    actual = _rotate_f32(x, recipe(p, d, base))
    assert_rope_close(actual, x, rr.RopeSpec(head_dim=d, base=base), p)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_hf_low_precision_path_passes_its_model(dtype_name):
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    dtype = getattr(torch, dtype_name)
    d, base = 64, 500000.0
    p = torch.tensor([[0, 1, 2, 255, 256, 257, 2047, 2049, 60000]])
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = p[..., None].float() * inv
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)  # HF: cast to x.dtype
    q = torch.randn(1, 3, p.shape[-1], d, generator=torch.Generator().manual_seed(0)).to(dtype)
    q_out, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    assert_rope_close(q_out, q, rr.RopeSpec(head_dim=d, base=base), p[:, None, :])


def test_model_is_not_vacuous_for_low_precision_angles():
    # Angles built in bfloat16 (transformers PR #29285) fail even the bfloat16 model.
    torch = pytest.importorskip("torch")
    d = 32
    p = torch.arange(0, 600, 37)
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
    freqs = (p[:, None].to(torch.bfloat16) * inv.to(torch.bfloat16)).float()
    emb = torch.cat((freqs, freqs), dim=-1)
    x = torch.randn(2, len(p), d, generator=torch.Generator().manual_seed(1))
    half = x.shape[-1] // 2
    rotated = x * emb.cos() + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * emb.sin()
    spec = rr.RopeSpec(head_dim=d)
    with pytest.raises(AssertionError, match="Likely cause: precision"):
        assert_rope_close(rotated.to(torch.bfloat16), x.to(torch.bfloat16), spec, p)


@pytest.mark.parametrize("position", [1, 100, 10_000, 2**20])
def test_off_by_one_is_caught_where_the_model_can_see_it(position):
    # An off-by-one moves pair 0 by 1 rad: |error| = 2 sin(1/2) |pair| = 0.96 |pair|, which
    # exceeds the float32 tolerance while 2 * 2^-23 * position < 0.96, i.e. below ~4e6.
    spec = rr.RopeSpec(head_dim=16)
    x = np.random.default_rng(position).uniform(-1, 1, (1, 1, 16)).astype(F32)
    shifted = rr.apply_rope(x, spec, [position + 1])
    assert 2 * 2.0**-23 * (position + 1) < 2 * math.sin(0.5)
    d = diagnose(shifted, x, spec, [position])
    assert d is not None
    assert d.cause == "offset"
