"""Every diagnosis on a mistake planted into a real peer's settings.

The peer (transformers' rotary modules, torchtune, rotary-embedding-torch, MLX) computes the
result with one setting wrong, or used as a user might misuse it (each such test says so),
the oracle is told the right setting (or the reverse), and the diagnosis must name the
mistake and its fitted parameters. Peers that are not installed are skipped.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling as rules
from rope_ref.testing import diagnose, rope_report

torch = pytest.importorskip("torch")

P = np.array([0, 1, 2, 3, 50, 400, 2000, 9000, 30000])


def _x(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32))


def _torchtune():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchao's import-time notices
        return pytest.importorskip("torchtune.modules"), pytest.importorskip(
            "torchtune.models.llama3_1._position_embeddings"
        )


# --- torchtune -------------------------------------------------------------------------------


def test_torchtune_run_at_shifted_positions_is_an_offset():
    tt, _ = _torchtune()
    module = tt.RotaryPositionalEmbeddings(dim=64, max_seq_len=40000, base=10000)
    x = _x((2, len(P), 3, 64))
    ids = np.stack([P, P])
    y = module(x, input_pos=torch.from_numpy(ids + 100))
    spec = rr.RopeSpec(64, layout="interleaved")
    found = diagnose(y, x, spec, ids, seq_axis=-3)
    assert found is not None
    assert found.cause == "offset"
    assert "+100" in found.message
    assert rope_report(y, x, spec, ids + 100, seq_axis=-3).ok


@pytest.mark.parametrize(
    ("told", "snippet"),
    [
        (None, "the spec says no scaling rule: a scaling rule was applied"),
        (rules.Llama3(16.0, original_max_position=8192), "the factor is 8, not 16"),
        (rules.Llama3(8.0, original_max_position=4096), "original (pre-training) context"),
        (rules.Linear(8.0), "Llama3 used where Linear belongs"),
    ],
)
def test_torchtune_llama3_scaled_rope_scaling_mistakes(told, snippet):
    _, l31 = _torchtune()
    module = l31.Llama3ScaledRoPE(dim=64, max_seq_len=40000, base=500000)
    x = _x((2, len(P), 3, 64), seed=1)
    ids = np.stack([P, P])
    y = module(x, input_pos=torch.from_numpy(ids))
    right = rr.RopeSpec(64, base=500000.0, layout="interleaved", scaling=rules.Llama3(8.0, 8192))
    assert rope_report(y, x, right, ids, seq_axis=-3).ok
    found = diagnose(
        y, x, rr.RopeSpec(64, base=500000.0, layout="interleaved", scaling=told), ids, seq_axis=-3
    )
    assert found is not None, found
    assert found.cause == "scaling", found
    assert "the result follows Llama3(factor=8.0, original_max_position=8192" in found.message
    assert snippet in found.message


# --- MLX -------------------------------------------------------------------------------------


def test_mlx_fast_rope_at_offset_1000_is_an_offset():
    mx = pytest.importorskip("mlx.core")
    x = mx.array(np.random.default_rng(2).uniform(-1, 1, (1, 2, 9, 64)).astype(np.float32))
    y = mx.fast.rope(x, 64, traditional=False, base=10000.0, scale=1.0, offset=1000)
    spec = rr.RopeSpec(64)
    found = diagnose(y, x, spec)
    assert found is not None
    assert found.cause == "offset"
    assert "+1000" in found.message
    report = rope_report(y, x, spec, offset=1000)
    assert report.ok
    assert report.precision in ("float64-grade", "float32-grade")


# --- transformers' rotary modules ------------------------------------------------------------


def _hf_rotary(params: dict[str, Any], head_dim: int = 64) -> tuple[Any, Any]:
    """(q, result) of LlamaRotaryEmbedding + apply_rotary_pos_emb with these rope_parameters."""
    transformers = pytest.importorskip("transformers")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=32768,
        rope_parameters={"rope_theta": 10000.0, **params},
    )
    module = llama.LlamaRotaryEmbedding(config)
    q = _x((1, 2, len(P), head_dim), seed=3)
    cos, sin = module(q, torch.from_numpy(P)[None, :])
    out, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    return q, out


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}


@pytest.mark.parametrize(
    ("params", "told", "snippet"),
    [
        ({"rope_type": "default"}, rules.YaRN(4.0, 8192), "the scaling rule was not applied"),
        (YARN, None, "YaRN(factor=4"),
        (YARN, rules.YaRN(8.0, 8192), "the factor is 4, not 8"),
        (YARN, rules.YaRN(4.0, 4096), "original (pre-training) context length differs"),
        ({"rope_type": "linear", "factor": 4.0}, rules.NTKAware(4.0), "Linear used where NTKAware"),
        ({"rope_type": "linear", "factor": 4.0}, rules.Linear(2.0), "the factor is 4, not 2"),
    ],
)
def test_hf_scaling_mistakes(params, told, snippet):
    q, out = _hf_rotary(params)
    found = diagnose(out, q, rr.RopeSpec(64, scaling=told), P)
    assert found is not None, found
    assert found.cause == "scaling", found
    assert snippet in found.message


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}


@pytest.mark.parametrize(
    ("params", "told", "snippet"),
    [
        (
            {**LLAMA3, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
            rules.Llama3(8.0, 8192),
            "band factors are swapped: the result follows low_freq_factor=4, high_freq_factor=1",
        ),
        (
            {**LLAMA3, "low_freq_factor": 1.0, "high_freq_factor": 2.0},
            rules.Llama3(8.0, 8192),
            "high_freq_factor=2 (fitted)",
        ),
        ({**YARN, "beta_fast": 16.0}, rules.YaRN(4.0, 8192), "beta_fast=16 (fitted)"),
    ],
)
def test_hf_rule_parameter_mistakes_name_the_parameter(params, told, snippet):
    """transformers' own rope init with one parameter otherwise than the spec says."""
    q, out = _hf_rotary(params)
    found = diagnose(out, q, rr.RopeSpec(64, scaling=told), P)
    assert found is not None, found
    assert found.cause == "scaling", found
    assert snippet in found.message
    assert "M-RoPE" not in found.message


def test_hf_float32_angles_are_float32_grade_and_fail_the_strict_mode():
    q, out = _hf_rotary({"rope_type": "default"})
    p = np.array([0, 1, 10**5, 10**6])
    transformers = pytest.importorskip("transformers")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    config = transformers.LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64)
    module = llama.LlamaRotaryEmbedding(config)
    q = _x((1, 2, len(p), 64), seed=4)
    cos, sin = module(q, torch.from_numpy(p)[None, :])
    out, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
    spec = rr.RopeSpec(64)
    report = rope_report(out, q, spec, p)
    assert report.ok
    assert report.precision == "float32-grade"
    assert 1e-3 < report.max_angle_error < 0.1  # float32 angles near 10^6 rad
    strict = rope_report(out, q, spec, p, angle_dtype="float64")
    assert not strict.ok
    assert strict.diagnosis is not None
    assert strict.diagnosis.cause == "precision"
    assert "float32" in strict.diagnosis.message
    with pytest.raises(AssertionError, match="Angle precision: float32-grade"):
        rr.testing.assert_rope_close(out, q, spec, p, angle_dtype="float64")


# --- M-RoPE (Qwen2-VL) -----------------------------------------------------------------------


def _qwen2_vl(sections=(6, 5, 5)) -> tuple[Any, Any, np.ndarray]:
    transformers = pytest.importorskip("transformers")
    qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
    head_dim = 2 * sum(sections)
    config = transformers.Qwen2VLTextConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": list(sections),
            "rope_theta": 10000.0,
        },
    )
    module = qwen2_vl.Qwen2VLRotaryEmbedding(config)
    ids = np.random.default_rng(5).integers(0, 3000, size=(3, 1, 9))  # distinct t, h, w
    q = _x((1, 2, 9, head_dim), seed=6)
    cos, sin = module(q, torch.from_numpy(ids))
    out, _ = qwen2_vl.apply_rotary_pos_emb(q, q, cos, sin)
    return q, out, np.moveaxis(ids, 0, -1)[:, None]  # (batch, 1, seq, 3)


@pytest.mark.parametrize(
    ("told", "swap_axes", "snippet"),
    [
        ({"sections": (5, 6, 5)}, False, "the sections are [6, 5, 5], not the spec's [5, 6, 5]"),
        ({"section_order": "interleaved"}, False, "assigned to axes chunked"),
        ({}, True, "position axes are read in the order"),
    ],
)
def test_mrope_mistakes(told, swap_axes, snippet):
    q, out, positions = _qwen2_vl()
    spec = rr.RopeSpec(32, **{"sections": (6, 5, 5), **told})
    p = positions[..., [1, 0, 2]] if swap_axes else positions
    assert rope_report(out, q, rr.RopeSpec(32, sections=(6, 5, 5)), positions).ok
    found = diagnose(out, q, spec, p)
    assert found is not None, found
    assert found.cause == "sections", found
    assert snippet in found.message


def test_mrope_collapsed_to_1d_and_1d_positions_for_an_mrope_result():
    q, out, positions = _qwen2_vl()
    # The peer given t = h = w = the t positions (1-D RoPE); the oracle told the 3 axes.
    qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
    found = diagnose(
        rr.apply_rope(q, rr.RopeSpec(32), positions[..., 0]),
        q,
        rr.RopeSpec(32, sections=(6, 5, 5)),
        positions,
    )
    assert found is not None
    assert found.cause == "sections"
    assert "collapsed to one axis" in found.message
    # The M-RoPE result, but the oracle told only the t positions, as 1-D RoPE.
    found = diagnose(out, q, rr.RopeSpec(32), positions[..., 0])
    assert found is not None, found
    assert found.cause == "unknown", found  # a 1-D spec and 1-D positions: not "sections"
    assert "pairs 0-5 match the given positions" in found.message
    assert qwen2_vl is not None


# --- the other causes, each planted into a peer's settings ----------------------------------


def test_torchtune_checked_as_half_is_a_layout_mistake():
    tt, _ = _torchtune()
    module = tt.RotaryPositionalEmbeddings(dim=64, max_seq_len=40000)
    x = _x((1, len(P), 2, 64), seed=7)
    y = module(x, input_pos=torch.from_numpy(P)[None])
    found = diagnose(y, x, rr.RopeSpec(64), P, seq_axis=-3)  # torchtune pairs (2j, 2j + 1)
    assert found is not None
    assert found.cause == "layout"


def test_torchtune_without_input_pos_ignores_the_positions():
    tt, _ = _torchtune()
    module = tt.RotaryPositionalEmbeddings(dim=64, max_seq_len=40000)
    x = _x((2, 5, 2, 64), seed=8)
    ids = np.array([[3, 4, 5, 6, 7], [900, 901, 902, 903, 904]])  # e.g. decoding after a prefix
    y = module(x)  # input_pos forgotten: positions 0..seq-1
    found = diagnose(y, x, rr.RopeSpec(64, layout="interleaved"), ids, seq_axis=-3)
    assert found is not None
    assert found.cause == "positions"


@pytest.mark.parametrize(
    ("params", "spec_kwargs", "cause", "snippet"),
    [
        ({"rope_theta": 500000.0}, {}, "frequencies", "base 500000 instead of the spec's base"),
        (
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 8192,
                "attention_factor": 1.5,
            },
            {"scaling": rules.YaRN(4.0, 8192)},
            "attention_factor",
            "whose attention factor is 1.1386",
        ),
    ],
)
def test_hf_frequency_and_attention_factor_mistakes(params, spec_kwargs, cause, snippet):
    q, out = _hf_rotary({"rope_type": "default", **params})
    found = diagnose(out, q, rr.RopeSpec(64, **spec_kwargs), P)
    assert found is not None, found
    assert found.cause == cause, found
    assert snippet in found.message


def test_hf_gpt_neox_partial_rotary_checked_as_full_is_a_rotary_dim_mistake():
    transformers = pytest.importorskip("transformers")
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    config = transformers.GPTNeoXConfig(
        hidden_size=256,
        num_attention_heads=4,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
    )
    assert rr.RopeSpec.from_hf(config).rotary_dim == 16
    module = neox.GPTNeoXRotaryEmbedding(config)
    q = _x((1, 2, len(P), 64), seed=9)
    cos, sin = module(q, torch.from_numpy(P)[None])
    out, _ = neox.apply_rotary_pos_emb(q, q, cos, sin)
    found = diagnose(out, q, rr.RopeSpec(64), P)  # told: the whole head rotates
    assert found is not None, found
    assert found.cause == "rotary_dim", found
    assert "rotates features [0, 16)" in found.message


# --- non-finite, zeros, direction, identity, position range ---------------------------------


def test_rotary_embedding_torch_float16_positions_overflow_to_non_finite():
    """The peer's own arithmetic: rotate_queries_or_keys builds the positions in the query's
    dtype (arange(n, dtype=q.dtype) + offset); in float16, from 65520 on they round to inf,
    and cos/sin of inf are NaN. A float16 chunk of 48 tokens decoded from position 65504."""
    ret = pytest.importorskip("rotary_embedding_torch")
    module = ret.RotaryEmbedding(dim=64)
    offset, n = 65504, 48  # 65504: the largest finite float16
    q = _x((1, 2, n, 64), seed=10).half()
    y = module.rotate_queries_or_keys(q, offset=offset)
    with np.errstate(over="ignore"):
        overflowed = int(np.sum(np.isinf((offset + np.arange(n)).astype(np.float16))))
    assert overflowed == 32  # positions 65520 to 65551
    found = diagnose(y, q, rr.RopeSpec(64, layout="interleaved"), offset=offset)
    assert found is not None
    assert found.cause == "non-finite", found
    assert f"{overflowed * 2 * 64} element(s) of the result are NaN or infinite" in found.message


def test_torchtune_kv_cache_reset_zeroes_the_keys_it_returned():
    """A misuse of the peer's preallocated-output path: torchtune's KVCache.update returns its
    own buffer ("the updated cache"), not a copy; keys kept from it and checked after reset()
    (as before the next prompt) were zeroed in place."""
    tt, _ = _torchtune()
    rope = tt.RotaryPositionalEmbeddings(dim=64, max_seq_len=4096)
    positions = np.arange(8)
    x = _x((1, 8, 2, 64), seed=11)  # [b, s, n_h, h_d]
    rotated = rope(x, input_pos=torch.from_numpy(positions)[None]).transpose(1, 2)
    cache = tt.KVCache(
        batch_size=1, max_seq_len=8, num_kv_heads=2, head_dim=64, dtype=torch.float32
    )
    keys, _ = cache.update(rotated, rotated)
    spec = rr.RopeSpec(64, layout="interleaved")
    x_heads_first = x.transpose(1, 2)
    assert rope_report(keys, x_heads_first, spec, positions).ok
    cache.reset()
    found = diagnose(keys, x_heads_first, spec, positions)
    assert found is not None
    assert found.cause == "zeros", found
    assert f"every mismatched element of the result is 0 ({keys.numel()} of them)" in found.message


def _hf_with_negated_sin(p: np.ndarray) -> tuple[Any, Any]:
    """transformers' apply_rotary_pos_emb handed LlamaRotaryEmbedding's cos and -sin."""
    transformers = pytest.importorskip("transformers")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64)
    q = _x((1, 2, len(p), 64), seed=12)
    cos, sin = llama.LlamaRotaryEmbedding(config)(q, torch.from_numpy(p)[None])
    out, _ = llama.apply_rotary_pos_emb(q, q, cos, -sin)
    return q, out


def _mlx_with_negative_scale(p: np.ndarray) -> tuple[Any, Any]:
    """MLX's fast.rope with scale=-1.0: the positions negated, as when undoing a rotation."""
    mx = pytest.importorskip("mlx.core")
    x = mx.array(np.random.default_rng(13).uniform(-1, 1, (1, 2, len(p), 64)).astype(np.float32))
    assert np.array_equal(p, np.arange(len(p)))  # fast.rope rotates rows at offset + 0, 1, ...
    return x, mx.fast.rope(x, 64, traditional=True, base=10000.0, scale=-1.0, offset=0)


@pytest.mark.parametrize(
    ("peer", "layout", "p"),
    [(_hf_with_negated_sin, "half", P), (_mlx_with_negative_scale, "interleaved", np.arange(9))],
)
def test_the_inverse_rotation_through_a_peer_is_a_direction_mistake(peer, layout, p):
    """A misuse: the inverse rotation's table or setting (sin negated; positions scaled by -1)
    in the forward path, e.g. left over from un-rotating cached keys."""
    x, y = peer(p)
    spec = rr.RopeSpec(64, layout=layout)
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "direction", found
    assert "the result is the inverse rotation (every angle negated)" in found.message
    assert rope_report(y, x, spec, p, inverse=True).ok


def test_rotary_embedding_torch_cache_read_past_its_prefill_is_identity():
    """A misuse of the peer's cache: RotaryEmbedding keeps the angles of its longest prefill in
    cached_freqs, a buffer of cache_max_seq_len rows that stays zero past the prefill. Its
    rotate methods take one offset for every row, so a decoder with per-token positions that
    gathers rows of that buffer for the library's apply_rotary_emb reads zero angles from
    position 2048 on: cos = 1, sin = 0, the rows come back unrotated."""
    ret = pytest.importorskip("rotary_embedding_torch")
    module = ret.RotaryEmbedding(dim=64)
    module.rotate_queries_or_keys(_x((1, 2, 2048, 64), seed=14))  # a 2048-token prefill
    p = np.array([0, 1, 2, 3, 50, 400, 2047, 2048, 5000, 8000])
    q = _x((1, 2, len(p), 64), seed=15)
    y = ret.apply_rotary_emb(module.cached_freqs[torch.from_numpy(p)], q)
    assert module.cached_freqs_seq_len == 2048
    found = diagnose(y, q, rr.RopeSpec(64, layout="interleaved"), p)
    assert found is not None
    assert found.cause == "identity", found
    assert "positions up to 2047 are rotated correctly, but from 2048 on" in found.message


@pytest.mark.parametrize(
    ("fold", "snippet"),
    [
        ("wrap", "wrap around a table of 2048 or 4096 positions, which the given positions cannot"),
        ("clamp", "are clamped to 4095"),
    ],
)
def test_torchtune_cache_indexed_past_its_length_is_a_position_range_mistake(fold, snippet):
    """A misuse of the peer's cache: RotaryPositionalEmbeddings reads cache[input_pos] from a
    table of max_seq_len rows and raises IndexError past it. Positions folded into the table
    to make it run (modulo its length, as a ring-buffer KV cache indexes its slots, or clamped
    to its last row) rotate every later token as an earlier one. The positions do not straddle
    the table's end: its length is read off the result (9000 and 30000 wrap alike modulo 2048
    and 4096, so both are named)."""
    tt, _ = _torchtune()
    module = tt.RotaryPositionalEmbeddings(dim=64, max_seq_len=4096)
    x = _x((2, len(P), 2, 64), seed=16)
    ids = np.stack([P, P])
    with pytest.raises(IndexError):
        module(x, input_pos=torch.from_numpy(ids))
    folded = ids % 4096 if fold == "wrap" else np.minimum(ids, 4095)
    y = module(x, input_pos=torch.from_numpy(folded))
    spec = rr.RopeSpec(64, layout="interleaved")
    assert rope_report(y, x, spec, folded, seq_axis=-3).ok
    found = diagnose(y, x, spec, ids, seq_axis=-3)
    assert found is not None
    assert found.cause == "position_range", found
    assert "positions up to 2000 are correct" in found.message
    assert snippet in found.message


def test_qwen3_vl_interleaved_sections_that_overrun_the_pairs_are_expressed():
    """transformers' Qwen3-VL text rotary embedding with mrope_section (16, 24, 24) (its
    interleaving slices past the 64 pairs and gives the axes 22, 21 and 21), checked
    against the chunked spec: named with the sections that express it, which then pass."""
    transformers = pytest.importorskip("transformers")
    qwen3_vl = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
    transformers.logging.set_verbosity_error()
    config = transformers.Qwen3VLTextConfig(
        hidden_size=512,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=128,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [16, 24, 24],
        },
    )
    module = qwen3_vl.Qwen3VLTextRotaryEmbedding(config)
    rng = np.random.default_rng(5)
    rows = 40
    grid = np.stack([np.arange(rows), rng.integers(0, 20, rows), rng.integers(0, 30, rows)], -1)
    q = torch.from_numpy(rng.uniform(-1.0, 1.0, (1, 2, rows, 128)).astype(np.float32))
    cos, sin = module(q, torch.from_numpy(grid.T[:, None, :].copy()))
    out, _ = qwen3_vl.apply_rotary_pos_emb(q, q, cos, sin)
    found = diagnose(out, q, rr.RopeSpec(128, sections=(16, 24, 24)), grid)
    assert found is not None
    assert found.cause == "sections", found
    assert "sections=(22, 21, 21), section_order='interleaved'" in found.message
    expressed = rr.RopeSpec(128, sections=(22, 21, 21), section_order="interleaved")
    assert diagnose(out, q, expressed, grid) is None
