"""`RopeSpec.from_hf` of configs whose M-RoPE order is a pair map, and FoPE's refusal.

Ernie 4.5-VL is checked against HF's own rotary module and apply function; openPangu's
order against vLLM's ``get_mrope_interleaved_id_list``, transcribed in
`tests.test_multiaxis_map`.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests.test_multiaxis_map import ernie_axes, openpangu_axes, rotated


def _ernie_text_config(**rope):
    return {
        "model_type": "ernie4_5_vl_moe_text",
        "hidden_size": 512,
        "num_attention_heads": 4,  # head_dim 128: 64 pairs, HF's default [22, 22, 20]
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, **rope},
    }


def test_ernie_vl_reads_hf_default_sections_in_its_own_order():
    spec = rr.RopeSpec.from_hf(_ernie_text_config())
    assert spec.layout == "interleaved"
    assert spec.section_order == tuple(ernie_axes(22, 22, 20))
    assert spec.sections == (20, 22, 22)  # (t, h, w): the positions' order


def test_ernie_vl_matches_hf_rotary_module_and_apply():
    torch = pytest.importorskip("torch")
    modeling = pytest.importorskip("transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe")
    from transformers.models.ernie4_5_vl_moe.configuration_ernie4_5_vl_moe import (
        Ernie4_5_VLMoeTextConfig,
    )

    sections = [8, 8, 16]  # (h, w, t) of 32 pairs
    config = Ernie4_5_VLMoeTextConfig(
        hidden_size=256,
        num_attention_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": sections},
    )
    spec = rr.RopeSpec.from_hf(config)
    rng = np.random.default_rng(0)
    positions = rng.integers(0, 300, size=(6, 3))  # (tokens, (t, h, w))
    x = rng.standard_normal((1, 4, 6, 64))
    module = modeling.Ernie4_5_VLMoeTextRotaryEmbedding(config)
    q = torch.tensor(x, dtype=torch.float32)
    ids = torch.tensor(positions.T[:, None, :])  # (3, batch, seq)
    cos, sin = module(q, ids)
    hf, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    got = rr.apply_rope(x, spec, positions, seq_axis=-2)
    np.testing.assert_allclose(got, hf.double().numpy(), rtol=0, atol=3e-4)  # HF's float32
    want = rotated(x, positions[None, None], ernie_axes(8, 8, 16), 10000.0, "interleaved")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("sections", [[8, 12, 12], [16, 24, 24], [2, 3, 3], [16, 16], [3, 5]])
def test_openpangu_rope_type_gives_vllm_interleaved_order(sections):
    n_pairs = sum(sections)
    config = {
        "head_dim": 2 * n_pairs,
        "rope_parameters": {
            "rope_type": "openpangu",
            "rope_theta": 1e6,
            "mrope_section": sections,
            "mrope_interleaved": True,
        },
    }
    spec = rr.RopeSpec.from_hf(config)
    axes = openpangu_axes(sections)
    np.testing.assert_array_equal(rr.pair_axes(spec), axes)
    rng = np.random.default_rng(n_pairs)
    positions = rng.integers(0, 1000, size=(5, len(sections)))
    x = rng.standard_normal((5, spec.head_dim))
    got = rr.apply_rope(x, spec, positions)
    np.testing.assert_allclose(got, rotated(x, positions, axes, 1e6, "half"), atol=1e-11)


@pytest.mark.parametrize(
    ("rope", "match"),
    [
        ({"mrope_section": [8, 12, 12]}, r"`mrope_section` must be given, with mrope_interleaved"),
        ({"mrope_interleaved": True}, r"`mrope_section` must be given"),
        (
            {"mrope_section": [8, 12, 10], "mrope_interleaved": True},
            r"summing to rotary_dim // 2 = 32; got \[8, 12, 10\]",
        ),
        ({"mrope_section": [32], "mrope_interleaved": True}, r"2 or 3 positive pair counts"),
    ],
)
def test_openpangu_without_its_sections_is_refused(rope, match):
    config = {"head_dim": 64, "rope_parameters": {"rope_type": "openpangu", **rope}}
    with pytest.raises(ValueError, match=match):
        rr.RopeSpec.from_hf(config)


def test_ernie_vl_sections_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match=r"h == w"):
        rr.RopeSpec.from_hf(_ernie_text_config(mrope_section=[20, 24, 20]))
    with pytest.raises(ValueError, match=r"summing to rotary_dim // 2 = 64"):
        rr.RopeSpec.from_hf(_ernie_text_config(mrope_section=[22, 22, 10]))


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"head_dim": 64, "rope_parameters": {"rope_theta": 1e4, "use_fope": True}}, "parameters"),
        ({"head_dim": 64, "use_fope": True, "rope_theta": 1e4}, "config"),
    ],
)
def test_fope_is_refused_saying_why(config, where):
    with pytest.raises(ValueError, match=r"`use_fope` is true .*learned per-head coefficient"):
        rr.RopeSpec.from_hf(config)


def test_fope_keys_turned_off_read_as_plain_rope(recwarn):
    params = {"rope_theta": 1e4, "use_fope": False, "num_inv_freq": 16, "fope_sep_head": True}
    spec = rr.RopeSpec.from_hf({"head_dim": 64, "rope_parameters": params}, strict=True)
    assert spec == rr.RopeSpec(64)
    assert not recwarn.list


def test_a_map_given_to_from_hf_replaces_the_config_order():
    config = {"head_dim": 16, "rope_parameters": {"mrope_section": [2, 3, 3]}}
    axes = (0, 1, 2, 1, 2, 1, 2, 0)
    assert rr.RopeSpec.from_hf(config, section_order=axes).section_order == axes


def test_bailing_rope_type_gives_vllm_spatial_then_temporal_order():
    config = {
        "head_dim": 64,
        "rope_parameters": {"rope_type": "bailing_mrope", "mrope_section": [8, 12, 12]},
    }
    spec = rr.RopeSpec.from_hf(config)
    assert spec.section_order == tuple(ernie_axes(12, 12, 8))  # (t, h, w) -> h, w, ..., t
    assert spec.sections == (8, 12, 12)


def test_bailing_rope_type_selects_as_vllm_select_cos_sin_test_does():
    # vLLM's own test (test_bailing_mrope_selects_alternating_spatial_then_temporal):
    # mrope_section [2, 2, 2], positions t=(1, 2), h=(3, 4), w=(5, 6); a cache whose entry
    # for position p and pair j is 10 p + j selects [30, 51, 32, 53, 14, 15] for token 0.
    config = {
        "head_dim": 12,
        "rope_parameters": {"rope_type": "bailing_mrope", "mrope_section": [2, 2, 2]},
    }
    axes = rr.pair_axes(rr.RopeSpec.from_hf(config))
    positions = np.array([[1, 3, 5], [2, 4, 6]])
    selected = 10 * positions[:, axes] + np.arange(6)
    assert selected.tolist() == [[30, 51, 32, 53, 14, 15], [40, 61, 42, 63, 24, 25]]


@pytest.mark.parametrize("sections", [None, [8, 12, 10], [8, 12], [10, 12, 12]])
def test_bailing_sections_that_do_not_fit_are_refused(sections):
    params = {"rope_type": "bailing_mrope"}
    if sections is not None:
        params["mrope_section"] = sections
    with pytest.raises(ValueError, match="mrope_section"):
        rr.RopeSpec.from_hf({"head_dim": 64, "rope_parameters": params})
