"""Agreement with real, independent RoPE implementations (HF transformers, GPT-J, lucidrains'
rotary-embedding-torch, Meta's complex form) and HF's weight permutation.

Tolerances: 4 eps (max|phi| + 1) max|x| (`_tol64`, `_tol32`). The two sides' inv_freq recipes
(1 / b**e vs b**-e) differ by <= ~2 ulp and phi = p * inv_freq rounds once more, so the angles
differ by <= 2.5 eps |phi|; cos/sin add 1 ulp and the rotation a c - b s ~1.5 ulp of |x|.
eps = 2^-52 when both sides are float64; 2^-23 (one float32 ulp of 1) for float32 peers
(HF's modules, the library's default), which build angles and rotate in float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host, max_abs

torch = pytest.importorskip("torch")

EPS64 = 2.0**-52
EPS32 = 2.0**-23


def _tol64(x: Any, max_phi: float) -> float:
    return 4 * EPS64 * (max_phi + 1.0) * float(np.max(np.abs(host(x))))


def _tol32(x: Any, max_phi: float) -> float:
    return 4 * EPS32 * (max_phi + 1.0) * float(np.max(np.abs(host(x))))


def _inv64(dim: int, base: float) -> Any:
    # The HF / Meta / lucidrains recipe, but in float64.
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def _hf_cos_sin(position_ids: Any, dim: int, base: float) -> tuple[Any, Any]:
    freqs = position_ids[..., None].to(torch.float64) * _inv64(dim, base)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


# --- HF transformers: LLaMA (half layout) ---------------------------------------------------


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_hf_llama_apply_rotary_pos_emb_per_batch_positions(base):
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    gen = torch.Generator().manual_seed(0)
    B, H, Hkv, S, D = 2, 4, 2, 5, 16
    q = torch.randn(B, H, S, D, dtype=torch.float64, generator=gen)
    k = torch.randn(B, Hkv, S, D, dtype=torch.float64, generator=gen)
    position_ids = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 700]])  # per batch row
    cos, sin = _hf_cos_sin(position_ids, D, base)
    q_hf, k_hf = llama.apply_rotary_pos_emb(q, k, cos, sin)  # unsqueeze_dim=1: (B, H, S, D)
    spec = rr.RopeSpec(head_dim=D, base=base)
    q_rr, k_rr = rr.apply_rope_qk(q, k, spec, position_ids[:, None, :])
    assert max_abs(q_rr, q_hf) <= _tol64(q, 700.0)
    assert max_abs(k_rr, k_hf) <= _tol64(k, 700.0)
    # rotate_half itself is the half layout's 90-degree turn: rope at angle pi/2 on every pair.
    quarter = rr.RopeSpec(head_dim=D, freqs=(math.pi / 2,) * (D // 2))
    ones = torch.ones(S, dtype=torch.float64)
    assert max_abs(rr.apply_rope(q, quarter, ones), llama.rotate_half(q)) <= _tol64(q, 2.0)


def test_hf_llama_seq_before_heads_and_default_positions():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    gen = torch.Generator().manual_seed(1)
    B, S, H, D = 2, 7, 3, 8
    q = torch.randn(B, S, H, D, dtype=torch.float64, generator=gen)
    position_ids = torch.arange(S)[None, :] + 11  # e.g. decoding after an 11-token prefix
    cos, sin = _hf_cos_sin(position_ids, D, 10000.0)
    q_hf, _ = llama.apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=2)
    spec = rr.RopeSpec(head_dim=D)
    assert max_abs(rr.apply_rope(q, spec, offset=11, seq_axis=-3), q_hf) <= _tol64(q, 18.0)
    grid = position_ids[:, :, None]  # (1, S, 1) broadcasts to (B, S, H)
    assert max_abs(rr.apply_rope(q, spec, grid), q_hf) <= _tol64(q, 18.0)


@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_hf_llama_rotary_embedding_module_float32(theta):
    transformers = pytest.importorskip("transformers")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    D = 16
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, head_dim=D, rope_theta=theta,
        max_position_embeddings=4096,
    )  # fmt: skip
    module = llama.LlamaRotaryEmbedding(config)
    spec = rr.RopeSpec(head_dim=D, base=theta)
    # inv_freq buffer: float32 pow and division, each within ~1 float32 ulp of the truth.
    inv = module.inv_freq.double().numpy()
    np.testing.assert_allclose(inv, rr.inv_freq(spec), rtol=2 * EPS32, atol=0)
    position_ids = torch.tensor([[0, 1, 2, 3, 100, 2047], [5, 6, 7, 8, 9, 4000]])
    x = torch.randn(2, 4, 6, D, dtype=torch.float32, generator=torch.Generator().manual_seed(2))
    cos_hf, sin_hf = module(x, position_ids)
    cos, sin = rr.rope_cos_sin(spec, position_ids)
    assert max_abs(cos_hf[..., : D // 2], cos) <= _tol32(cos, 4000.0)
    assert max_abs(sin_hf[..., D // 2 :], sin) <= _tol32(sin, 4000.0)
    q_hf, _ = llama.apply_rotary_pos_emb(x, x, cos_hf, sin_hf)
    q_rr = rr.apply_rope(x.double(), spec, position_ids[:, None, :])
    assert max_abs(q_hf.double(), q_rr) <= _tol32(x, 4000.0)
    # The test separates the two grades: HF's float32 angles at p = 4000 are off by ~1e-4
    # rad, far beyond what float64 angles allow (`_tol64`, ~1e-11), yet within `_tol32`.
    assert max_abs(q_hf.double(), q_rr) > 1000 * _tol64(x, 4000.0)


# --- HF GPT-NeoX: partial rotary (slices cos.shape[-1]) --------------------------------------


@pytest.mark.parametrize("factor", [0.25, 0.5])
def test_hf_gpt_neox_partial_rotary(factor):
    transformers = pytest.importorskip("transformers")
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    D = 16
    R = int(D * factor)
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 6, D, dtype=torch.float64, generator=gen)
    k = torch.randn(2, 4, 6, D, dtype=torch.float64, generator=gen)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5], [9, 10, 11, 12, 13, 300]])
    cos, sin = _hf_cos_sin(position_ids, R, 10000.0)  # rotary_dim wide
    q_hf, k_hf = neox.apply_rotary_pos_emb(q, k, cos, sin)
    spec = rr.RopeSpec(head_dim=D, rotary_dim=R)
    q_rr, k_rr = rr.apply_rope_qk(q, k, spec, position_ids[:, None, :])
    assert max_abs(q_rr, q_hf) <= _tol64(q, 300.0)
    assert max_abs(k_rr, k_hf) <= _tol64(k, 300.0)
    assert torch.equal(q_rr[..., R:], q[..., R:])  # pass-through is bit-identical
    # The module's inv_freq uses d = rotary_dim (not head_dim).
    params = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor}
    config = transformers.GPTNeoXConfig(
        hidden_size=4 * D, num_attention_heads=4, rope_parameters=params
    )
    module = neox.GPTNeoXRotaryEmbedding(config)
    inv = module.inv_freq.double().numpy()
    np.testing.assert_allclose(inv, rr.inv_freq(spec), rtol=2 * EPS32, atol=0)


# --- HF GPT-J: interleaved ------------------------------------------------------------------


def test_hf_gptj_interleaved():
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    gen = torch.Generator().manual_seed(4)
    B, S, H, D, R = 2, 5, 3, 12, 8
    t = torch.randn(B, S, H, D, dtype=torch.float64, generator=gen)
    position_ids = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 250]])
    sinusoid = position_ids[..., None].double() * _inv64(R, 10000.0)
    rot = gptj.apply_rotary_pos_emb(t[..., :R], sinusoid.sin(), sinusoid.cos())
    want = torch.cat([rot, t[..., R:]], dim=-1)  # GPT-J's partial rotary (config.rotary_dim)
    spec = rr.RopeSpec(head_dim=D, rotary_dim=R, layout="interleaved")
    got = rr.apply_rope(t, spec, position_ids[:, :, None])
    assert max_abs(got, want) <= _tol64(t, 250.0)
    quarter = rr.RopeSpec(head_dim=D, freqs=(math.pi / 2,) * (D // 2), layout="interleaved")
    ones = torch.ones(S, dtype=torch.float64)
    turned = rr.apply_rope(t, quarter, ones, seq_axis=-3)
    assert max_abs(turned, gptj.rotate_every_two(t)) <= _tol64(t, 2.0)
    # GPT-J's own float32 table: cat(sin, cos) of p * inv_freq.
    table = gptj.create_sinusoidal_positions(4096, R).double()
    cos, sin = rr.rope_cos_sin(rr.RopeSpec(head_dim=R), np.arange(4096))
    assert max_abs(table[:, : R // 2], sin) <= _tol32(sin, 4095.0)
    assert max_abs(table[:, R // 2 :], cos) <= _tol32(cos, 4095.0)


# --- lucidrains rotary-embedding-torch: interleaved, start_index, offset ---------------------


@pytest.mark.parametrize(("rotary_dim", "start"), [(16, 0), (8, 0), (8, 4), (6, 10)])
def test_rotary_embedding_torch_apply_rotary_emb_float64(rotary_dim, start):
    ret = pytest.importorskip("rotary_embedding_torch")
    rep = pytest.importorskip("einops").repeat
    D, S = 16, 9
    t = torch.randn(2, 3, S, D, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    pos = torch.arange(S, dtype=torch.float64) + 40.0
    freqs = rep(pos[:, None] * _inv64(rotary_dim, 10000.0), "... n -> ... (n r)", r=2)
    want = ret.apply_rotary_emb(freqs, t, start_index=start)
    spec = rr.RopeSpec(head_dim=D, rotary_dim=rotary_dim, rotary_start=start, layout="interleaved")
    got = rr.apply_rope(t, spec, offset=40)
    assert max_abs(got, want) <= _tol64(t, 48.0)


def test_rotary_embedding_torch_module_float64_offset_and_cached_keys():
    ret = pytest.importorskip("rotary_embedding_torch")
    D, R = 16, 8
    # float64 custom freqs and no float32 cache, so the module runs in float64 end to end.
    module = ret.RotaryEmbedding(dim=R, custom_freqs=_inv64(R, 10000.0), cache_if_possible=False)
    gen = torch.Generator().manual_seed(6)
    q = torch.randn(2, 3, 2, D, dtype=torch.float64, generator=gen)
    k = torch.randn(2, 3, 6, D, dtype=torch.float64, generator=gen)
    spec = rr.RopeSpec(head_dim=D, rotary_dim=R, layout="interleaved")
    want = module.rotate_queries_or_keys(k, offset=17)
    assert max_abs(rr.apply_rope(k, spec, offset=17), want) <= _tol64(k, 23.0)
    q_lr, k_lr = module.rotate_queries_with_cached_keys(q, k)  # q at positions 4, 5
    q_rr, k_rr = rr.apply_rope_qk(q, k, spec)
    assert max_abs(q_rr, q_lr) <= _tol64(q, 6.0)
    assert max_abs(k_rr, k_lr) <= _tol64(k, 6.0)


def test_rotary_embedding_torch_default_module_float32():
    ret = pytest.importorskip("rotary_embedding_torch")
    D, R, S = 16, 8, 64
    module = ret.RotaryEmbedding(dim=R)  # float32 freqs; positions built in float32 (exact here)
    t = torch.randn(1, 2, S, D, dtype=torch.float32, generator=torch.Generator().manual_seed(7))
    want = module.rotate_queries_or_keys(t, offset=1000)
    spec = rr.RopeSpec(head_dim=D, rotary_dim=R, layout="interleaved")
    got = rr.apply_rope(t.double(), spec, offset=1000)
    assert max_abs(got, want.double()) <= _tol32(t, 1000.0 + S)


# --- Meta LLaMA complex form -----------------------------------------------------------------


def _meta_precompute_freqs_cis(dim: int, end: int, theta: float) -> Any:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    t = torch.arange(end, dtype=torch.float64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128


def _meta_apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i in (1, xq_.ndim - 1) else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)  # (1, S, 1, D/2), Meta's reshape_for_broadcast
    return (torch.view_as_real(xq_ * freqs_cis).flatten(3),
            torch.view_as_real(xk_ * freqs_cis).flatten(3))  # fmt: skip


@pytest.mark.parametrize("form", ["rotate_half", "complex"])
@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_meta_llama_complex(form, theta):
    B, S, H, Hkv, D, start_pos = 2, 6, 4, 2, 16, 30
    gen = torch.Generator().manual_seed(8)
    xq = torch.randn(B, S, H, D, dtype=torch.float64, generator=gen)
    xk = torch.randn(B, S, Hkv, D, dtype=torch.float64, generator=gen)
    freqs_cis = _meta_precompute_freqs_cis(D, 64, theta)[start_pos : start_pos + S]
    q_meta, k_meta = _meta_apply_rotary_emb(xq, xk, freqs_cis)
    spec = rr.RopeSpec(head_dim=D, base=theta, layout="interleaved")
    q_rr, k_rr = rr.apply_rope_qk(xq, xk, spec, offset=start_pos, seq_axis=-3, form=form)
    assert max_abs(q_rr, q_meta) <= _tol64(xq, start_pos + S)
    assert max_abs(k_rr, k_meta) <= _tol64(xk, start_pos + S)


# --- HF's Meta -> HF weight permutation -------------------------------------------------------
# transformers/models/llama/convert_llama_weights_to_hf.py is not shipped in the wheel (and its
# `permute` is a closure inside write_model), so its two lines are reproduced verbatim here.


def _hf_permute(w: Any, n_heads: int, dim1: int, dim2: int) -> Any:
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def _hf_permute_rotary(w: Any, n_heads: int, spec: rr.RopeSpec) -> Any:
    # HF's permute applied to the rotary slice of each head only (partial rotary).
    a, b, hd = spec.rotary_start, spec.rotary_start + 2 * spec.n_pairs, spec.head_dim
    w3 = w.reshape(n_heads, hd, -1).clone()
    part = w3[:, a:b, :].reshape(n_heads * (b - a), -1)
    w3[:, a:b, :] = _hf_permute(part, n_heads, n_heads * (b - a), part.shape[1]).reshape(
        n_heads, b - a, -1
    )
    return w3.reshape(w.shape)


SPEC_CASES = [(16, None, 0), (16, 8, 0), (16, 8, 4)]  # (head_dim, rotary_dim, rotary_start)


@pytest.mark.parametrize(("hd", "rd", "rs"), SPEC_CASES)
def test_permute_weights_equals_hf_permute(hd, rd, rs):
    spec = rr.RopeSpec(head_dim=hd, rotary_dim=rd, rotary_start=rs)
    n_heads, dim = 4, 24
    w = torch.randn(n_heads * hd, dim, dtype=torch.float64)
    want = _hf_permute_rotary(w, n_heads, spec)
    got = rr.permute_weights(w, n_heads=n_heads, spec=spec, src="interleaved", dst="half")
    assert torch.equal(got, want)
    bias = torch.randn(n_heads * hd, dtype=torch.float64)
    want_b = _hf_permute_rotary(bias[:, None], n_heads, spec)[:, 0]
    assert torch.equal(rr.permute_weights(bias, n_heads=n_heads, spec=spec), want_b)
    if rd is None:  # the literal one-liner on a whole projection
        assert torch.equal(got, _hf_permute(w, n_heads, n_heads * hd, dim))


def _logits(x, wq, bq, wk, bk, n_heads, n_kv, spec, positions):
    S, hd = x.shape[0], spec.head_dim
    q = (x @ wq.T + bq).reshape(S, n_heads, hd).transpose(0, 1)  # (H, S, hd)
    k = (x @ wk.T + bk).reshape(S, n_kv, hd).transpose(0, 1)
    q, k = rr.apply_rope_qk(q, k, spec, positions)
    k = k.repeat_interleave(n_heads // n_kv, dim=0)  # GQA: head h reads kv head h // group
    return q @ k.transpose(-1, -2)


@pytest.mark.parametrize(("hd", "rd", "rs"), SPEC_CASES)
@pytest.mark.parametrize(("n_heads", "n_kv"), [(4, 4), (4, 2), (4, 1)])
def test_permuted_weights_give_the_same_attention_logits(hd, rd, rs, n_heads, n_kv):
    gen = torch.Generator().manual_seed(9)
    S, dim = 7, 32
    x = torch.randn(S, dim, dtype=torch.float64, generator=gen)
    wq = torch.randn(n_heads * hd, dim, dtype=torch.float64, generator=gen) / dim**0.5
    wk = torch.randn(n_kv * hd, dim, dtype=torch.float64, generator=gen) / dim**0.5
    bq = torch.randn(n_heads * hd, dtype=torch.float64, generator=gen)
    bk = torch.randn(n_kv * hd, dtype=torch.float64, generator=gen)
    positions = torch.tensor([0, 1, 2, 5, 8, 13, 150])
    meta = rr.RopeSpec(head_dim=hd, rotary_dim=rd, rotary_start=rs, layout="interleaved")
    hf = rr.RopeSpec(head_dim=hd, rotary_dim=rd, rotary_start=rs, layout="half")
    want = _logits(x, wq, bq, wk, bk, n_heads, n_kv, meta, positions)
    p_q = _hf_permute_rotary(wq, n_heads, hf), _hf_permute_rotary(bq[:, None], n_heads, hf)[:, 0]
    p_k = _hf_permute_rotary(wk, n_kv, hf), _hf_permute_rotary(bk[:, None], n_kv, hf)[:, 0]
    got = _logits(x, *p_q, *p_k, n_heads, n_kv, hf, positions)
    # hd products of rotated values, each off by <= 8 eps (|phi| + 1) |q| |k|.
    tol = hd * 8 * EPS64 * 151 * float(want.abs().max() + 1)
    assert max_abs(got, want) <= tol
    rq = (
        rr.permute_weights(wq, n_heads=n_heads, spec=hf),
        rr.permute_weights(bq, n_heads=n_heads, spec=hf),
    )
    rk = (
        rr.permute_weights(wk, n_heads=n_kv, spec=hf),
        rr.permute_weights(bk, n_heads=n_kv, spec=hf),
    )
    assert max_abs(_logits(x, *rq, *rk, n_heads, n_kv, hf, positions), want) <= tol
    # Not vacuous: half RoPE on the unpermuted weights gives other logits.
    assert max_abs(_logits(x, wq, bq, wk, bk, n_heads, n_kv, hf, positions), want) > 1e-3
