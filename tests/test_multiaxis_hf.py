"""Multi-axis RoPE against transformers' Qwen2-VL and Qwen3-VL code and rotary-embedding-torch.

- M-RoPE: Qwen2-VL's (chunked) and Qwen3-VL's (interleaved) text rotary modules followed by
  ``apply_rotary_pos_emb``, with the specs read by `RopeSpec.from_hf`.
- Axial vision RoPE: the Qwen-VL vision rotary modules with HF's ``get_vision_position_ids``
  and ``apply_rotary_pos_emb_vision``.
- M-RoPE position ids: HF's ``get_rope_index``.
- rotary-embedding-torch's ``get_axial_freqs`` ("lang" and "pixel" frequencies).
- M-RoPE sections read from HF configs and their families' defaults (Qwen3-VL, GLM-4V,
  Cosmos 3).

Tolerances, as in test_hf_conformance.py: the peers build inverse frequencies and angles in
float32, so an angle is off by at most ``p * theta_j * (|ln theta_j| + 9) u`` with
``u = 2^-24``; cos/sin add ``u``; the rotation then moves an output by at most
``(|d phi| + 3u) * 2 max|x|`` (rounded to float32 once more where the peer rotates in
float32: ``+ 2u max|x|``).
"""

from __future__ import annotations

import functools
import re
import types
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
qwen3_vl = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
vision_utils = pytest.importorskip("transformers.vision_utils")

U32 = 2.0**-24


def _tol(spec: rr.RopeSpec, x: Any, max_position: float, *, float32_rotation: bool) -> float:
    theta = rr.inv_freq(spec)
    with np.errstate(divide="ignore"):
        rel = np.where(theta > 0, (np.abs(np.log(np.where(theta > 0, theta, 1))) + 9) * U32, 0)
    dphi = float(np.max(max_position * theta * rel))
    scale = 2 * float(np.max(np.abs(host(x))))
    return (dphi + 3 * U32) * scale + (2 * U32 * scale if float32_rotation else 0.0)


def _tol_per_element(spec: rr.RopeSpec, x: Any, positions: np.ndarray) -> np.ndarray:
    """Per-element tolerance for HF's M-RoPE (half layout), shape of x (batch, heads, seq, d).

    Pair j of a token is off by at most ``(p theta_j (|ln theta_j| + 9) u + 3u)`` times the
    pair's ``|x_j| + |x_{j+n}|``, where p is the largest of the token's axis positions
    (whichever axis the pair follows). `positions` is ``(batch, 1, seq, n_axes)``.
    """
    theta = rr.inv_freq(spec)
    rel = (np.abs(np.log(theta)) + 9) * U32
    p = np.max(np.abs(positions), axis=-1)[..., None].astype(np.float64)  # (b, 1, s, 1)
    xa = np.abs(host(x))
    n = spec.n_pairs
    per_pair = (p * theta * rel + 3 * U32) * (xa[..., :n] + xa[..., n : 2 * n])
    return np.concatenate(
        [per_pair, per_pair, np.zeros((*xa.shape[:-1], xa.shape[-1] - 2 * n))], axis=-1
    )


def _random_mrope_positions(rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
    """(3, batch, seq) ids with distinct t, h, w (as for image tokens)."""
    return rng.integers(0, 5000, size=(3, batch, seq))


@pytest.mark.parametrize(
    ("config_cls", "module_cls", "sections", "order"),
    [
        ("Qwen2VLTextConfig", "qwen2", (2, 3, 3), "chunked"),
        ("Qwen2VLTextConfig", "qwen2", (16, 24, 24), "chunked"),
        ("Qwen3VLTextConfig", "qwen3", (24, 20, 20), "interleaved"),
        ("Qwen3VLTextConfig", "qwen3", (4, 2, 2), "interleaved"),
    ],
)
@pytest.mark.parametrize("base", [10000.0, 1000000.0])
def test_mrope_matches_qwen_vl_text_rotary_modules(config_cls, module_cls, sections, order, base):
    head_dim = 2 * sum(sections)
    kwargs = {
        "hidden_size": 4 * head_dim,
        "num_attention_heads": 4,
        "rope_parameters": {
            "rope_type": "default",
            "mrope_section": list(sections),
            "rope_theta": base,
        },
    }
    if config_cls == "Qwen3VLTextConfig":
        config = transformers.Qwen3VLTextConfig(head_dim=head_dim, **kwargs)
        module, apply = qwen3_vl.Qwen3VLTextRotaryEmbedding(config), qwen3_vl.apply_rotary_pos_emb
    else:
        config = transformers.Qwen2VLTextConfig(**kwargs)
        module, apply = qwen2_vl.Qwen2VLRotaryEmbedding(config), qwen2_vl.apply_rotary_pos_emb
    spec = rr.RopeSpec.from_hf(config)
    assert spec.sections == sections
    assert spec.section_order == order
    assert spec.head_dim == head_dim
    assert spec.base == base
    rng = np.random.default_rng(head_dim)
    ids = _random_mrope_positions(rng, 2, 7)
    gen = torch.Generator().manual_seed(head_dim)
    q = torch.randn(2, 4, 7, head_dim, dtype=torch.float64, generator=gen)
    k = torch.randn(2, 2, 7, head_dim, dtype=torch.float64, generator=gen)
    cos, sin = module(q, torch.from_numpy(ids))
    q_hf, k_hf = apply(q, k, cos, sin)
    positions = np.moveaxis(ids, 0, -1)[:, None, :, :]  # (batch, 1, seq, 3)
    q_rr, k_rr = rr.apply_rope_qk(q, k, spec, positions)
    for ours, theirs, x in ((q_rr, q_hf, q), (k_rr, k_hf, k)):
        excess = np.abs(host(ours) - host(theirs)) - _tol_per_element(spec, x, positions)
        assert np.all(excess <= 0), float(np.max(excess))
    tol = _tol(spec, torch.cat([q, k], dim=1), 5000.0, float32_rotation=False)
    # The other assignment of pairs to axes gives a different rotation: the test can tell.
    if order == "interleaved":
        other = rr.RopeSpec(head_dim, base=base, sections=sections)
        assert float(torch.max(torch.abs(rr.apply_rope(q, other, positions) - q_hf))) > 10 * tol


def test_mrope_from_legacy_qwen2_vl_config_json():
    config = {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.sections, spec.section_order, spec.scaling) == (
        128,
        (16, 24, 24),
        "chunked",
        None,
    )
    nested = {
        "model_type": "qwen3_vl",
        "text_config": {
            "model_type": "qwen3_vl_text",
            "head_dim": 128,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "rope_theta": 5000000.0,
            "rope_scaling": {
                "rope_type": "default",
                "mrope_section": [24, 20, 20],
                "mrope_interleaved": True,
            },
        },
    }
    spec = rr.RopeSpec.from_hf(nested)
    assert (spec.sections, spec.section_order, spec.base) == ((24, 20, 20), "interleaved", 5e6)
    assert rr.RopeSpec.from_hf(spec.to_hf()) == spec


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
@pytest.mark.parametrize(("grid", "merge"), [((1, 4, 6), 2), ((2, 4, 4), 2), ((1, 3, 5), 1)])
def test_axial_vision_rope_matches_qwen_vl_vision_towers(family, grid, merge):
    head_dim = 16
    if family == "qwen2":
        config = transformers.Qwen2VLVisionConfig(embed_dim=4 * head_dim, num_heads=4)
        module = qwen2_vl.Qwen2VLVisionRotaryEmbedding(config)
    else:
        config = transformers.Qwen3VLVisionConfig(hidden_size=4 * head_dim, num_heads=4)
        module = qwen3_vl.Qwen3VLVisionRotaryEmbedding(config)
    spec = rr.RopeSpec.from_hf(config)
    quarter = head_dim // 4
    assert spec == rr.RopeSpec(
        head_dim, freqs=rr.axial_freqs((quarter, quarter)), sections=(quarter, quarter)
    )
    grid_thw = torch.tensor([grid])
    ids = vision_utils.get_vision_position_ids(grid_thw, merge)  # (tokens, 2): (row, column)
    t, h, w = grid
    ours = np.tile(rr.patch_positions((h, w), merge_size=merge), (t, 1))
    np.testing.assert_array_equal(ours, ids.numpy())
    cos, sin = module(torch.zeros(1), ids)
    gen = torch.Generator().manual_seed(merge)
    q = torch.randn(len(ids), 4, head_dim, dtype=torch.float64, generator=gen)
    q_hf, _ = qwen2_vl.apply_rotary_pos_emb_vision(q, q, cos, sin)  # rotates in float32
    q_rr = rr.apply_rope(q, spec, ours[:, None, :])
    assert float(torch.max(torch.abs(q_rr - q_hf))) <= _tol(
        spec, q, max(h, w), float32_rotation=True
    )


def test_patch_positions_with_time_match_hf_including_temporal():
    grid_thw = torch.tensor([[3, 4, 6]])
    ids = vision_utils.get_vision_position_ids(grid_thw, 2, include_temporal=True)
    np.testing.assert_array_equal(rr.patch_positions((3, 4, 6), merge_size=2), ids.numpy())


def _hf_rope_index(model_cls: Any, segments: list[Any], merge: int) -> np.ndarray:
    """Run HF's get_rope_index on a text/image sequence (it needs no weights)."""
    types_, grids = [], []
    for seg in segments:
        if isinstance(seg, int):
            types_ += [0] * seg
        else:
            t, h, w = seg
            types_ += [1] * (t * (h // merge) * (w // merge))
            grids.append(list(seg))
    owner = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=merge)),
        get_vision_position_ids=functools.partial(model_cls.get_vision_position_ids, None),
    )
    input_ids = torch.zeros(1, len(types_), dtype=torch.long)
    position_ids, _ = model_cls.get_rope_index(
        owner, input_ids, torch.tensor([types_]), image_grid_thw=torch.tensor(grids)
    )
    return position_ids[:, 0, :].T.numpy()


@pytest.mark.parametrize("model", ["Qwen2VLModel", "Qwen3VLModel"])
@pytest.mark.parametrize(
    ("segments", "merge"),
    [
        ([3, (1, 4, 6), 2], 2),
        ([(1, 2, 2), 5, (1, 6, 2), 2, (1, 2, 4), 1], 1),  # HF needs text between images
        ([1, (2, 4, 4), 3], 2),  # a 2-frame "image": T <= max(H, W) / merge
    ],
)
def test_mrope_positions_match_hf_get_rope_index(model, segments, merge):
    module = qwen2_vl if model == "Qwen2VLModel" else qwen3_vl
    expected = _hf_rope_index(getattr(module, model), segments, merge)
    np.testing.assert_array_equal(rr.mrope_positions(segments, merge_size=merge), expected)


def test_mrope_positions_continue_after_the_largest_position_where_hf_5_does_not():
    # A video with more frames than rows/columns: HF 5.x resumes text at start + max(H, W)/m,
    # inside the video's temporal range; rope_ref resumes at max(previous) + 1.
    segments = [2, (6, 2, 2), 1]
    ours = rr.mrope_positions(segments)
    hf = _hf_rope_index(qwen2_vl.Qwen2VLModel, segments, 1)
    assert ours[-1].tolist() == [8, 8, 8]  # video positions 2..7 on t
    assert hf[-1].tolist() == [4, 4, 4]


# --- rotary-embedding-torch axial frequencies ----------------------------------------------


@pytest.mark.parametrize("kind", ["lang", "pixel"])
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)])
def test_axial_freqs_match_rotary_embedding_torch(kind, shape):
    ret = pytest.importorskip("rotary_embedding_torch")
    dim = 8  # per-axis rotary features
    rotary = ret.RotaryEmbedding(dim, freqs_for=kind, max_freq=10.0)
    freqs = rotary.get_axial_freqs(*shape)  # (*shape, len(shape) * dim), float32 angles
    n_axes = len(shape)
    sections = (dim // 2,) * n_axes
    spec = rr.RopeSpec(
        head_dim=n_axes * dim + 2,  # two pass-through features
        rotary_dim=n_axes * dim,
        layout="interleaved",
        freqs=rr.axial_freqs(sections, kind=kind, max_freq=10.0),
        sections=sections,
    )
    position_kind = "pixel" if kind == "pixel" else "index"
    positions = rr.patch_positions(shape, kind=position_kind).reshape(*shape, n_axes)
    gen = torch.Generator().manual_seed(len(shape))
    x = torch.randn(2, *shape, spec.head_dim, dtype=torch.float64, generator=gen)
    theirs = ret.apply_rotary_emb(freqs.to(torch.float64), x)
    ours = rr.apply_rope(x, spec, positions)
    theta = rr.inv_freq(spec)
    dphi = float(np.max(theta)) * max(shape) * 8 * U32  # float32 freqs, positions, products
    tol = (dphi + 3 * U32) * 2 * float(torch.max(torch.abs(x)))
    assert float(torch.max(torch.abs(ours - theirs))) <= tol
    assert torch.equal(ours[..., -2:], x[..., -2:])


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_sections_default_to_the_hf_modules_defaults(family):
    kwargs = {"hidden_size": 512, "num_attention_heads": 4}
    if family == "qwen2":
        config = transformers.Qwen2VLTextConfig(**kwargs)
        module, apply = qwen2_vl.Qwen2VLRotaryEmbedding(config), qwen2_vl.apply_rotary_pos_emb
    else:
        config = transformers.Qwen3VLTextConfig(head_dim=128, **kwargs)
        module, apply = qwen3_vl.Qwen3VLTextRotaryEmbedding(config), qwen3_vl.apply_rotary_pos_emb
    assert "mrope_section" not in config.rope_parameters
    spec = rr.RopeSpec.from_hf(config)
    assert spec.sections == tuple(module.mrope_section)
    ids = _random_mrope_positions(np.random.default_rng(0), 1, 5)
    q = torch.randn(1, 2, 5, 128, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    cos, sin = module(q, torch.from_numpy(ids))
    q_hf, _ = apply(q, q, cos, sin)
    positions = np.moveaxis(ids, 0, -1)[:, None]
    q_rr = rr.apply_rope(q, spec, positions)
    excess = np.abs(host(q_rr) - host(q_hf)) - _tol_per_element(spec, q, positions)
    assert np.all(excess <= 0), float(np.max(excess))


def _m_rope_family(family: str) -> tuple[Any, Any]:
    """A text-config class and its rotary module, for model types without `mrope_section`."""
    transformers = pytest.importorskip("transformers")
    models = transformers.models
    return {
        "glm4v": (transformers.Glm4vTextConfig,
                  models.glm4v.modeling_glm4v.Glm4vTextRotaryEmbedding),
        "glm4v_moe": (transformers.Glm4vMoeTextConfig,
                      models.glm4v_moe.modeling_glm4v_moe.Glm4vMoeTextRotaryEmbedding),
        "qwen3_vl_moe": (transformers.Qwen3VLMoeTextConfig,
                         models.qwen3_vl_moe.modeling_qwen3_vl_moe.Qwen3VLMoeTextRotaryEmbedding),
        "qwen3_omni_moe": (
            models.qwen3_omni_moe.configuration_qwen3_omni_moe.Qwen3OmniMoeTextConfig,
            models.qwen3_omni_moe.modeling_qwen3_omni_moe.Qwen3OmniMoeThinkerTextRotaryEmbedding),
        "qwen3_5": (transformers.Qwen3_5TextConfig,
                    models.qwen3_5.modeling_qwen3_5.Qwen3_5TextRotaryEmbedding),
        "qwen3_vl": (transformers.Qwen3VLTextConfig,
                     models.qwen3_vl.modeling_qwen3_vl.Qwen3VLTextRotaryEmbedding),
        "qwen3_5_moe": (transformers.Qwen3_5MoeTextConfig,
                        models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_5MoeTextRotaryEmbedding),
        "qwen4_exp": (models.qwen4_exp.configuration_qwen4_exp.Qwen4ExpTextConfig,
                      models.qwen4_exp.modeling_qwen4_exp.Qwen4ExpTextRotaryEmbedding),
        # Classes that write their own default mrope_section (then the module's is unused).
        "cosmos3_edge": (
            models.cosmos3_edge.configuration_cosmos3_edge.Cosmos3EdgeTextConfig,
            models.cosmos3_edge.modeling_cosmos3_edge.Cosmos3EdgeTextRotaryEmbedding),
        "hy_v4_vl": (models.hy_v4_vl.configuration_hy_v4_vl.HYV4VLTextConfig,
                     models.hy_v4_vl.modeling_hy_v4_vl.HYV4VLRotaryEmbedding),
    }[family]  # fmt: skip


# Sizes whose rotated pairs HF's default sections fill exactly.
_M_ROPE_SIZES = {
    "glm4v": {"hidden_size": 256, "num_attention_heads": 4},  # 64 features, 32 pairs
    "glm4v_moe": {"hidden_size": 512, "num_attention_heads": 4},  # half of 128 rotated
    "qwen3_vl_moe": {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 128},
    "qwen3_omni_moe": {"hidden_size": 512, "num_attention_heads": 4},
    "qwen3_5": {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 256},  # quarter
    "qwen3_vl": {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 128},
    "qwen3_5_moe": {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 256},  # quarter
    "qwen4_exp": {"hidden_size": 256, "num_attention_heads": 4, "head_dim": 64},
}


_INTERLEAVED = ["qwen3_vl", "qwen3_vl_moe", "qwen3_omni_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp"]


@pytest.mark.parametrize("family", sorted(_M_ROPE_SIZES))
def test_m_rope_default_sections_are_the_hf_modules_own(family):
    """Catches: any entry of a family's default `mrope_section` changed."""
    config_cls, module_cls = _m_rope_family(family)
    config = config_cls(**_M_ROPE_SIZES[family])
    assert "mrope_section" not in config.rope_parameters
    module = module_cls(config)
    spec = rr.RopeSpec.from_hf(config)
    assert spec.rotary_dim == 2 * module.inv_freq.numel()
    assert spec.sections == tuple(module.mrope_section)
    np.testing.assert_allclose(rr.inv_freq(spec), module.inv_freq.double().numpy(), rtol=1e-6)


@pytest.mark.parametrize("family", _INTERLEAVED)
def test_interleaved_default_sections_one_pair_too_many_are_refused_naming_hf_default(family):
    """Catches: the first entry of an interleaved family's default lowered by one (which
    would make it fit a head one pair smaller than HF's default fills)."""
    config_cls, module_cls = _m_rope_family(family)
    sizes = dict(_M_ROPE_SIZES[family])
    default = module_cls(config_cls(**sizes)).mrope_section
    key = "head_dim" if "head_dim" in sizes else "hidden_size"  # the head is hidden // heads
    sizes[key] = int(sizes[key] * (2 * sum(default) - 2) / (2 * sum(default)))
    config = config_cls(**sizes)
    assert module_cls(config).inv_freq.numel() == sum(default) - 1
    with pytest.raises(ValueError, match=re.escape(f"HF's default {list(default)}")):
        rr.RopeSpec.from_hf(config)


def test_glm4v_moe_head_is_hidden_size_over_heads_rounded_down_as_hf():
    """Catches: GLM-4V-MoE's floor division dropped (514 features over 4 heads refused)."""
    config_cls, module_cls = _m_rope_family("glm4v_moe")
    from transformers.models.glm4v_moe.modeling_glm4v_moe import Glm4vMoeTextAttention

    config = config_cls(hidden_size=514, num_attention_heads=4)
    inv = module_cls(config).inv_freq
    spec = rr.RopeSpec.from_hf(config)
    assert spec.head_dim == Glm4vMoeTextAttention(config, 0).head_dim == 514 // 4
    assert spec.rotary_dim == 2 * inv.numel()
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


@pytest.mark.parametrize(("family", "head_key"), [("cosmos3_edge", "head_dim"),
                                                 ("hy_v4_vl", "qk_rope_head_dim")])  # fmt: skip
def test_m_rope_sections_a_config_class_writes_are_the_familys_default(family, head_key):
    """Catches: a family's default `mrope_section` other than the one its HF config class
    writes into every config (HY-V4-VL's [12, 10, 10], not its rotary module's unreachable
    fallback [24, 20, 20]); and, the sections being interleaved, their first entry lowered."""
    config_cls, module_cls = _m_rope_family(family)
    config = config_cls()
    default = config.rope_parameters["mrope_section"]
    module = module_cls(config)
    assert module.mrope_section == default
    keys = ("hidden_size", "num_attention_heads", "head_dim", head_key)
    given = {"model_type": config.model_type, **{k: getattr(config, k) for k in keys},
             "rope_theta": config.rope_parameters["rope_theta"]}  # fmt: skip
    spec = rr.RopeSpec.from_hf(given)  # no mrope_section: the default applies
    assert spec.sections == tuple(default)
    assert spec.section_order == "interleaved"
    np.testing.assert_allclose(rr.inv_freq(spec), module.inv_freq.double().numpy(), rtol=1e-6)
    smaller = {**given, "head_dim": config.head_dim - 2, head_key: config.head_dim - 2}
    errors = pytest.importorskip("huggingface_hub.errors")
    with pytest.raises(errors.StrictDataclassClassValidationError, match="mrope_section"):
        config_cls(**{k: v for k, v in smaller.items() if k in keys})  # HF refuses it too
    with pytest.raises(ValueError, match=re.escape(f"HF's default {list(default)}")):
        rr.RopeSpec.from_hf(smaller)


def test_cosmos3_reads_m_rope_as_the_qwen3_vl_text_model_it_wraps():
    """Catches: an entry of Cosmos3's default `mrope_section` changed. Its config (in
    TensorRT-LLM and vLLM, not transformers) wraps a ``qwen3_vl_text`` config, so the
    Qwen3-VL text rotary module applies it."""
    config_cls, module_cls = _m_rope_family("qwen3_vl")
    config = config_cls(**_M_ROPE_SIZES["qwen3_vl"])
    module = module_cls(config)
    sizes = {**_M_ROPE_SIZES["qwen3_vl"], "rope_theta": config.rope_parameters["rope_theta"]}
    spec = rr.RopeSpec.from_hf({"model_type": "cosmos3", "text_config": sizes})
    assert spec.sections == tuple(module.mrope_section)
    assert spec.section_order == "interleaved"
    np.testing.assert_allclose(rr.inv_freq(spec), module.inv_freq.double().numpy(), rtol=1e-6)
    smaller = {**sizes, "head_dim": sizes["head_dim"] - 2}
    with pytest.raises(ValueError, match=re.escape(f"HF's default {list(module.mrope_section)}")):
        rr.RopeSpec.from_hf({"model_type": "cosmos3", "text_config": smaller})


@pytest.mark.parametrize(
    ("sections", "error"), [([0, 4, 4], ValueError), ({1, 2}, TypeError), ((4, 4, 0), ValueError)]
)
def test_a_section_list_with_a_zero_or_not_a_sequence_is_refused_naming_it(sections, error):
    """Catches: a pair count of 0 accepted, or a set (no order, no ``tolist``) converted."""
    given = {"head_dim": 16, "rope_parameters": {"mrope_section": sections}}
    with pytest.raises(error, match="`mrope_section` must be a non-empty list of positive"):
        rr.RopeSpec.from_hf(given)


@pytest.mark.parametrize("sections", [[1, 3, 4], np.array([2, 3, 3])])
def test_a_section_of_one_pair_and_a_numpy_array_of_sections_are_read(sections):
    """Catches: a pair count of 1 refused, or a NumPy array of sections not read as a list."""
    spec = rr.RopeSpec.from_hf({"head_dim": 16, "rope_parameters": {"mrope_section": sections}})
    assert spec.sections == tuple(int(n) for n in sections)
