"""rope_cos_sin(..., full=True): HF-width tables, one value per rotated feature."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import rope_ref as rr


def _pair_angles(head_dim: int, base: float, positions: np.ndarray) -> np.ndarray:
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return positions[:, None].astype(np.float64) * inv


def test_half_layout_repeats_the_pairs_after_each_other():
    positions = np.array([0, 1, 7, 1000])
    angles = _pair_angles(8, 10000.0, positions)
    cos, sin = rr.rope_cos_sin(rr.RopeSpec(head_dim=8), positions, full=True)
    np.testing.assert_allclose(cos, np.cos(np.concatenate([angles, angles], -1)), rtol=1e-15)
    np.testing.assert_allclose(sin, np.sin(np.concatenate([angles, angles], -1)), rtol=1e-15)


def test_interleaved_layout_repeats_each_pair_in_place():
    positions = np.array([3, 50])
    angles = _pair_angles(8, 10000.0, positions)
    spec = rr.RopeSpec(head_dim=8, layout="interleaved")
    cos, sin = rr.rope_cos_sin(spec, positions, full=True, dtype="float32")
    assert cos.dtype == np.float32
    np.testing.assert_array_equal(cos, np.cos(np.repeat(angles, 2, axis=-1)).astype(np.float32))
    np.testing.assert_array_equal(sin, np.sin(np.repeat(angles, 2, axis=-1)).astype(np.float32))


def test_partial_rotary_is_rotary_dim_wide_and_grids_keep_their_shape():
    spec = rr.RopeSpec(head_dim=64, rotary_dim=16)
    cos, _ = rr.rope_cos_sin(spec, np.zeros((2, 5), dtype=np.int64), full=True)
    assert cos.shape == (2, 5, 16)


def test_full_must_be_a_bool():
    with pytest.raises(TypeError, match="`full` must be True or False; got 1"):
        rr.rope_cos_sin(rr.RopeSpec(head_dim=8), [0], full=1)


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
    reason="needs transformers and torch",
)
def test_the_tables_are_hfs_own():
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(
        hidden_size=512,
        num_attention_heads=4,
        head_dim=128,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    )
    positions = torch.tensor([[0, 1, 17, 4000]])
    x = torch.zeros(1, 4, 4, 128, dtype=torch.float64)
    hf_cos, hf_sin = LlamaRotaryEmbedding(config)(x, positions)
    cos, sin = rr.rope_cos_sin(rr.RopeSpec.from_hf(config), positions, full=True)
    assert cos.shape == hf_cos.shape
    # HF builds its angles in float32: agreement to float32's angle error at 4000
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=4000 * 2.0**-22)
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=4000 * 2.0**-22)
