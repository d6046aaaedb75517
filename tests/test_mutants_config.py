"""Reading and writing HF configs (rope_ref/_config) where a planted mistake hides.

Each test asserts what transformers' own code computes (its config classes, rotary
modules and RoPE initialisers), HF's documented arithmetic written here
(``int(head_dim * partial_rotary_factor)``), or, for values refused, the reading rules of
docs/variants/hf.md (the error names the key, the requirement and where it was read).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import warnings
from typing import Any

import numpy as np
import pytest

import rope_ref as rr


def test_glm4_moe_odd_rotary_dim_one_below_head_dim_is_hf_own():
    """Catches: an odd rotary size refused already when it is one below head_dim."""
    pytest.importorskip("transformers")
    from transformers import Glm4MoeConfig
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeRotaryEmbedding

    given = {"model_type": "glm4_moe", "hidden_size": 32, "num_attention_heads": 4,
             "head_dim": 8, "partial_rotary_factor": 0.875, "rope_theta": 10000.0}  # fmt: skip
    hf = Glm4MoeConfig(**{k: v for k, v in given.items() if k != "model_type"})
    inv, _ = Glm4MoeRotaryEmbedding.compute_default_rope_parameters(hf)
    spec = rr.RopeSpec.from_hf(given)
    assert spec.head_dim == 8
    assert spec.rotary_dim == 8  # int(8 * 0.875) = 7, rotated as 4 pairs
    want = [1.0 / 10000.0 ** (2 * j / 7) for j in range(4)]  # arange(0, 7, 2) / 7
    np.testing.assert_allclose(rr.inv_freq(spec), want, rtol=1e-15)
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


def test_a_family_size_key_pair_half_given_falls_back_to_hidden_size():
    """Catches: the first (hidden, heads) key pair taken when only one of the two is there."""
    pytest.importorskip("transformers")
    from transformers import GPTJConfig

    given = {"n_embd": 64, "hidden_size": 128, "num_attention_heads": 4, "rotary_dim": 8}
    hf = GPTJConfig(**given)  # hidden_size and num_attention_heads are its aliases
    spec = rr.RopeSpec.from_hf({"model_type": "gptj", **given})
    assert spec.head_dim == hf.n_embd // hf.n_head == 32
    assert spec.rotary_dim == hf.rotary_dim == 8


def test_to_hf_writes_three_axis_m_rope_and_refuses_two_axes():
    """Catches: the number of M-RoPE axes HF has (three) changed in `to_hf`'s check."""
    config: Any = rr.RopeSpec(16, sections=(2, 3, 3)).to_hf()
    assert config["rope_parameters"]["mrope_section"] == [2, 3, 3]
    with pytest.raises(ValueError, match=r"sections=\(4, 4\)"):
        rr.RopeSpec(16, sections=(4, 4)).to_hf()
    with pytest.raises(ValueError, match=r"sections=\(2, 2, 2, 2\)"):
        rr.RopeSpec(16, sections=(2, 2, 2, 2)).to_hf()


def test_to_hf_flags_interleaved_m_rope_and_only_it():
    """Catches: ``mrope_interleaved`` written for chunked sections instead of interleaved
    ones (Qwen3-VL's configs carry it; Qwen2-VL's chunked ones do not)."""
    for order in ("chunked", "interleaved"):
        spec = rr.RopeSpec(16, sections=(3, 3, 2), section_order=order)
        params: Any = spec.to_hf()["rope_parameters"]
        assert params.get("mrope_interleaved", False) is (order == "interleaved")
        assert rr.RopeSpec.from_hf(spec.to_hf()) == spec


def test_a_head_rotating_one_pair_is_read():
    """Catches: a rotary dimension of 2 (one pair, ``int(8 * 0.25)``) refused."""
    spec = rr.RopeSpec.from_hf({"head_dim": 8, "partial_rotary_factor": 0.25})
    assert spec.rotary_dim == 2
    np.testing.assert_array_equal(rr.inv_freq(spec), [1.0])  # base ** (-0 / 2)
    assert rr.RopeSpec.from_hf({"head_dim": 2}).rotary_dim == 2


def test_to_hf_partial_rotary_factor_gives_the_rotary_dim_by_hf_arithmetic():
    """Catches: a factor whose ``int(head_dim * factor)`` falls one short (e.g. 30 of 44)."""
    for head_dim in range(2, 130):
        for rotary_dim in range(2, head_dim, 2):
            config: Any = rr.RopeSpec(head_dim, rotary_dim=rotary_dim).to_hf()
            factor = config["rope_parameters"]["partial_rotary_factor"]
            assert int(head_dim * factor) == rotary_dim


def test_phi3_reads_yarn_as_longrope_and_only_yarn():
    """Catches: Phi-3's old name for LongRoPE ("yarn") applied to its other rope types."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    factors = {"short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 3.0, 5.0, 8.0]}
    old = {"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 4,
           "max_position_embeddings": 256, "original_max_position_embeddings": 64,
           "rope_scaling": {"type": "yarn", **factors}}  # fmt: skip
    hf = transformers.Phi3Config(**{k: v for k, v in old.items() if k != "model_type"})
    inv, factor = ROPE_INIT_FUNCTIONS[hf.rope_parameters["rope_type"]](hf, "cpu", seq_len=200)
    spec = rr.RopeSpec.from_hf(old)
    assert isinstance(spec.scaling, rr.scaling.LongRoPE)
    np.testing.assert_allclose(rr.inv_freq(spec, seq_len=200), inv.double().numpy(), rtol=1e-6)
    assert rr.attention_factor(spec, seq_len=200) == pytest.approx(float(factor), rel=1e-12)
    plain = rr.RopeSpec.from_hf({"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 4})
    assert plain.scaling is None
    np.testing.assert_allclose(rr.inv_freq(plain), [1e4 ** (-j / 4) for j in range(4)], rtol=1e-15)


def test_the_reader_warns_about_unknown_keys_unless_asked_to_be_strict():
    """Catches: `strict` on by default in the reader the survey sweep calls directly."""
    from rope_ref._config.hf import spec_from_hf

    given = {"hidden_size": 64, "num_attention_heads": 4, "rope_thetta": 5.0}
    with pytest.warns(UserWarning, match="rope_thetta"):
        spec = spec_from_hf(given)
    assert spec == rr.RopeSpec(16)
    with pytest.raises(ValueError, match="rope_thetta"):
        spec_from_hf(given, strict=True)


def test_text_config_is_read_only_when_the_outer_config_has_no_sizes():
    """Catches: the outer config's head_dim passed over, or a text_config-only config not
    read, by `from_hf` and `from_hf_layers`."""
    assert rr.RopeSpec.from_hf({"head_dim": 32, "text_config": {"head_dim": 16}}).head_dim == 32
    assert rr.RopeSpec.from_hf({"hidden_size": 128, "num_attention_heads": 4,
                                "text_config": {"head_dim": 16}}).head_dim == 32  # fmt: skip
    text = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    assert rr.RopeSpec.from_hf_layers({"text_config": text}) == (rr.RopeSpec(16),) * 2
    outer = {"head_dim": 8, "num_hidden_layers": 3, "text_config": text}
    assert rr.RopeSpec.from_hf_layers(outer) == (rr.RopeSpec(8),) * 3


def test_gptj_rotary_dim_may_be_the_whole_head_and_no_more():
    """Catches: GPT-J's ``rotary_dim`` refused when it equals the head size."""
    given = {"model_type": "gptj", "n_embd": 64, "n_head": 4}
    assert rr.RopeSpec.from_hf({**given, "rotary_dim": 16}).rotary_dim == 16
    with pytest.raises(ValueError, match="rotary_dim"):
        rr.RopeSpec.from_hf({**given, "rotary_dim": 18})


def test_glm4_moe_odd_head_rotated_whole_is_refused_naming_the_factor():
    """An odd head rotated whole would need a feature past the head: refused up front."""
    given = {"model_type": "glm4_moe", "hidden_size": 28, "num_attention_heads": 4}
    with pytest.raises(ValueError, match="`partial_rotary_factor` must be an even rotary"):
        rr.RopeSpec.from_hf({**given, "partial_rotary_factor": 1.0})


def test_gemma3_parameters_already_keyed_by_layer_type_win_over_the_legacy_key():
    """Catches: keyed ``rope_parameters`` rebuilt from ``rope_local_base_freq``."""
    given = {"model_type": "gemma3_text", "head_dim": 16,
             "layer_types": ["sliding_attention", "full_attention"],
             "rope_local_base_freq": 20000.0,
             "rope_parameters": {
                 "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}  # fmt: skip
    sliding, full = rr.RopeSpec.from_hf_layers(given)
    assert sliding == rr.RopeSpec(16, base=1e4)
    assert full == rr.RopeSpec(16, base=1e6, scaling=rr.scaling.Linear(8.0))


def test_embed_dim_sizes_the_head_only_for_axial_vision_rope():
    """Catches: a text config's ``embed_dim`` taken for its hidden size."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "embed_dim": 256}
    assert rr.RopeSpec.from_hf(given).head_dim == 16


def test_a_class_default_theta_just_above_one_is_a_base():
    """Catches: the lower bound of a class's ``default_theta`` moved off 1."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "default_theta": 1.5}
    assert rr.RopeSpec.from_hf(given).base == 1.5


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


def test_the_family_table_cannot_be_changed_by_a_caller():
    """Catches: `Family` made mutable (one caller's change would reach every later
    `from_hf` in the process), or `family_of` not finding a listed model type."""
    from rope_ref._config.families import family_of

    with pytest.raises(dataclasses.FrozenInstanceError):
        family_of("cohere").layout = "half"  # type: ignore[misc]
    assert family_of("cohere").layout == "interleaved"


def test_a_config_objects_per_layer_view_sizes_each_layer_types_rotation():
    """Catches: a config object's ``per_layer_config`` (keyed by layer type) left unread."""
    pytest.importorskip("transformers")
    from transformers.models.dots3_note.configuration_dots3_note import Dots3NoteTextConfig

    make: Any = Dots3NoteTextConfig  # its sliding-layer keyword arguments are not typed
    config = make(swa_qk_nope_head_dim=224)  # sliding layers rotate 32 of 256
    views = config.per_layer_config
    assert (
        views["sliding_attention"].qk_rope_head_dim != views["indexed_attention"].qk_rope_head_dim
    )
    for layer_type, spec in zip(
        config.layer_types, rr.RopeSpec.from_hf_layers(config), strict=True
    ):
        assert spec is not None
        # HF rotates the ``qk_rope_head_dim`` features split off each query and key head.
        assert spec.head_dim == spec.rotary_dim == views[layer_type].qk_rope_head_dim
        assert spec.base == config.rope_parameters[layer_type]["rope_theta"]


@pytest.mark.parametrize(
    ("model_type", "given"),
    [
        ("gptj", {"n_embd": 64, "num_attention_heads": 4, "rotary_dim": 8}),
        ("gptj", {"hidden_size": 64, "n_head": 4, "rotary_dim": 8}),
        ("gptj", {"n_embd": 64, "n_head": 4, "hidden_size": 128, "rotary_dim": 8}),
        ("codegen", {"n_embd": 64, "num_attention_heads": 2, "rotary_dim": 8}),
        ("dbrx", {"d_model": 64, "num_attention_heads": 8}),
        ("dbrx", {"hidden_size": 64, "n_heads": 8, "d_model": 32}),
    ],
)
def test_sizes_mixing_a_familys_own_names_and_the_common_ones_read_as_hf(model_type, given):
    """HF's ``attribute_map`` makes ``hidden_size`` an alias of ``n_embd`` (``d_model``)
    and ``num_attention_heads`` one of ``n_head`` (``n_heads``), each on its own; where
    both names of one size are given, the common one wins."""
    transformers = pytest.importorskip("transformers")
    config_cls = transformers.AutoConfig.for_model(model_type).__class__
    hf = config_cls(**given)
    want = hf.hidden_size // hf.num_attention_heads
    assert rr.RopeSpec.from_hf({"model_type": model_type, **given}).head_dim == want
    assert rr.RopeSpec.from_hf(hf).head_dim == want


# --- the checks of the head and rotary sizes ------------------------------------------------


def test_glm4_moe_odd_head_given_as_head_dim_rotated_whole_is_refused_naming_the_factor():
    """Catches: a ``partial_rotary_factor`` of 1 treated as absent outside multi-latent
    heads (``qk_rope_head_dim``), so an odd head is blamed on `head_dim` instead.

    HF's ``int(7 * 1.0) = 7`` rotates ``arange(0, 7, 2)``: four pairs, eight features, one
    past the head.
    """
    given = {"model_type": "glm4_moe", "head_dim": 7, "hidden_size": 28,
             "num_attention_heads": 4, "partial_rotary_factor": 1.0}  # fmt: skip
    with pytest.raises(ValueError, match="`partial_rotary_factor` must be an even rotary"):
        rr.RopeSpec.from_hf(given)


def test_gptj_odd_rotary_dim_is_refused_naming_rotary_dim():
    """Catches: an odd GPT-J ``rotary_dim`` let through (refused only when also too large).

    HF's ``rotate_every_two`` on ``query[..., :7]`` would pair 4 features with 3.
    """
    given = {"model_type": "gptj", "n_embd": 64, "n_head": 4}
    for rotary_dim in (7, 15, 18):
        want = rf"`rotary_dim` must be an even number .* got {rotary_dim} \(config\)"
        with pytest.raises(ValueError, match=want):
            rr.RopeSpec.from_hf({**given, "rotary_dim": rotary_dim})


@pytest.mark.parametrize(
    "given", [{"hidden_size": 64}, {"num_attention_heads": 4}, {"n_embd": 64, "model_type": "gptj"}]
)
def test_a_head_size_half_given_is_a_value_error_naming_both_sizes(given):
    """Catches: the missing-size check made to need both sizes absent (then ``64 % None``
    is a bare TypeError)."""
    with pytest.raises(ValueError, match="must give head_dim, or hidden_size and num_attention"):
        rr.RopeSpec.from_hf(given)


def test_proportional_partial_rotary_factor_below_zero_is_refused_where_it_is_read():
    """Catches: the lower bound of a proportional ``partial_rotary_factor`` moved below 0.

    HF's ``int(-0.5 * 16 // 2) = -4`` rotated angles is no rotation it can state.
    """
    params = {"rope_type": "proportional", "partial_rotary_factor": -0.5}
    given = {"head_dim": 16, "rope_parameters": params}
    want = r"`partial_rotary_factor` must be .* at least 0 .*-0\.5 \(config\.rope_parameters\)"
    with pytest.raises(ValueError, match=want):
        rr.RopeSpec.from_hf(given)
    params["partial_rotary_factor"] = 0.0  # HF: no angle rotates
    assert rr.RopeSpec.from_hf(given).scaling == rr.scaling.Proportional(0.0)


def test_axial_vision_rope_takes_heads_a_multiple_of_four_as_hf_quarters_them():
    """Catches: the axial head-size check on another modulus, or a quarter-head section
    computed with true division."""
    pytest.importorskip("transformers")
    from transformers import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionRotaryEmbedding

    for head_dim in (8, 16, 20, 24):
        config = Qwen3VLVisionConfig(hidden_size=4 * head_dim, num_heads=4)
        inv = Qwen3VLVisionRotaryEmbedding(config).inv_freq.double().numpy()  # per axis
        spec = rr.RopeSpec.from_hf(config)
        assert spec.sections == (head_dim // 4, head_dim // 4)
        assert all(type(n) is int for n in spec.sections)
        np.testing.assert_allclose(rr.inv_freq(spec), np.concatenate([inv, inv]), rtol=1e-6)
    for head_dim in (6, 10, 15):
        with pytest.raises(ValueError, match=f"multiple of 4 for axial RoPE; got {head_dim}"):
            rr.RopeSpec.from_hf(Qwen3VLVisionConfig(hidden_size=4 * head_dim, num_heads=4))


# --- to_hf --------------------------------------------------------------------------------


def test_to_hf_writes_lengths_up_to_two_to_the_53():
    """Catches: the largest length a config holds (2**53, exact in float64) refused."""
    config: Any = rr.RopeSpec(16).to_hf(max_position_embeddings=2**53)
    assert config["max_position_embeddings"] == 2**53
    with pytest.raises(ValueError, match="at most 2\\*\\*53"):
        rr.RopeSpec(16).to_hf(max_position_embeddings=2**53 + 1)


def test_to_hf_writes_longrope_factor_which_hf_takes_over_its_own_length_ratio():
    """Catches: a LongRoPE factor left out of the config (HF then takes
    ``max_position_embeddings / original_max_position_embeddings`` instead)."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    short, long = [1.0, 1.5, 2.0, 3.0] * 2, [2.0, 3.0, 5.0, 8.0] * 2
    rule = rr.scaling.LongRoPE(short, long, 64, factor=4.0)
    config: Any = rr.RopeSpec(16, scaling=rule).to_hf()
    params = config["rope_parameters"]
    assert params["factor"] == 4.0  # HF's own ratio here is 128 / 64 = 2
    sizes = {"hidden_size": 64, "num_attention_heads": 4, "original_max_position_embeddings": 64}
    hf = transformers.LlamaConfig(**sizes, max_position_embeddings=128, rope_parameters=params)
    _, attention = ROPE_INIT_FUNCTIONS["longrope"](hf, "cpu", seq_len=200)
    assert attention == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(64)), rel=1e-15)


# --- layers without RoPE ------------------------------------------------------------------


@pytest.mark.parametrize("interval", [1, 2, 3, 7])
def test_smollm3_no_rope_layer_interval_builds_the_layers_without_rope_as_hf(interval):
    """Catches: ``no_rope_layer_interval`` left unread (HF's default of 4 taken)."""
    transformers = pytest.importorskip("transformers")
    sizes = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 8,
             "no_rope_layer_interval": interval}  # fmt: skip
    hf = transformers.SmolLM3Config(**sizes)
    specs = rr.RopeSpec.from_hf_layers({"model_type": "smollm3", **sizes})
    assert [spec is not None for spec in specs] == [bool(f) for f in hf.no_rope_layers]


# --- class defaults and per-layer attributes --------------------------------------------


def test_a_per_layer_head_size_is_refused_where_hf_refuses_it_not_replaced():
    """Catches: a head size that differs between layers (transformers' ``per_layer_config``)
    read as absent, so ``hidden_size // num_attention_heads`` (16) silently stands in for
    the 24 and 32 of the layers; or HF's own RuntimeError let through."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    sizes = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    config = transformers.LlamaConfig(**sizes, head_dim=24, per_layer_config={1: {"head_dim": 32}})
    assert [layer.head_dim for layer in config.per_layer_config] == [24, 32]
    with pytest.raises(RuntimeError, match="head_dim"):
        LlamaRotaryEmbedding(config)  # HF's rotary module cannot read it either
    with pytest.raises(ValueError, match="`head_dim` must be one value for the model"):
        rr.RopeSpec.from_hf(config)
    with pytest.raises(ValueError, match="`head_dim` must be one value for the model"):
        rr.RopeSpec.from_hf_layers(config)


def test_deepseek_partial_factor_with_only_qk_rope_head_dim_is_read_as_hf():
    """Catches: ``qk_rope_head_dim``'s share of a ``head_dim`` looked for when the config
    gives no ``head_dim`` (then ``None * factor``)."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}
    sizes = {"hidden_size": 64, "num_attention_heads": 4, "qk_rope_head_dim": 16}
    hf = transformers.DeepseekV3Config(**sizes, rope_parameters=dict(params))
    inv, _ = ROPE_INIT_FUNCTIONS["linear"](hf, "cpu")  # HF's int(16 * 0.5) = 8 features
    spec = rr.RopeSpec.from_hf({"model_type": "deepseek_v3", **sizes, "rope_parameters": params})
    assert spec.rotary_dim == 2 * inv.numel() == 8
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


def test_a_class_default_theta_by_global_and_local_label_reaches_each_layer_type():
    """Catches: Gemma 3's ``default_theta`` labels ("global", "local") not mapped to the
    layer types, so the full-attention layers fall back to 10000."""
    transformers = pytest.importorskip("transformers")

    types = ["sliding_attention", "full_attention"]
    params = {kind: {"rope_type": "default"} for kind in types}  # no rope_theta given
    copied = {kind: dict(value) for kind, value in params.items()}  # HF fills them in
    hf = transformers.Gemma3TextConfig(
        head_dim=16, num_hidden_layers=2, layer_types=types, rope_parameters=copied
    )
    given = {"head_dim": 16, "layer_types": types, "rope_parameters": params,
             "default_theta": dict(transformers.Gemma3TextConfig.default_theta)}  # fmt: skip
    specs = rr.RopeSpec.from_hf_layers(given)
    assert [spec.base for spec in specs if spec is not None] == [
        hf.rope_parameters[kind]["rope_theta"] for kind in types
    ]


@pytest.mark.parametrize("theta", [1.0, 0.5])
def test_a_class_default_theta_of_one_or_less_is_refused_naming_it(theta):
    """Catches: the lower bound of ``default_theta`` moved below 1 (``base ** x`` is then
    1 or decreasing: no rotation frequencies)."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "default_theta": theta}
    with pytest.raises(ValueError, match="`default_theta` must be a finite real number greater"):
        rr.RopeSpec.from_hf(given)


def test_a_layer_type_whose_layers_differ_elsewhere_is_read_from_the_config():
    """Catches: transformers' refusal of a per-type view whose layers differ in something
    else (NeoMME's sliding windows) let through, where the config holds the head size."""
    pytest.importorskip("transformers")
    from transformers.models.neomme.configuration_neomme import NeoMMEConfig
    from transformers.models.neomme.modeling_neomme import NeoMMERotaryEmbedding

    config = NeoMMEConfig()
    rotary = NeoMMERotaryEmbedding(config)
    for layer_type in sorted(set(config.layer_types)):
        inv = getattr(rotary, f"{layer_type}_inv_freq").double().numpy()
        spec = rr.RopeSpec.from_hf(config, layer_type=layer_type)
        assert spec.rotary_dim == 2 * inv.size
        np.testing.assert_allclose(rr.inv_freq(spec), inv, rtol=1e-6)


def test_gemma3_legacy_rope_scaling_keeps_its_own_theta_over_the_top_level_one():
    """Catches: the top-level ``rope_theta`` written over the one ``rope_scaling`` gives
    (HF's Gemma 3 only sets a default: ``setdefault``)."""
    transformers = pytest.importorskip("transformers")

    given: dict[str, Any] = {"head_dim": 16, "num_hidden_layers": 2, "rope_theta": 1e6,
             "layer_types": ["sliding_attention", "full_attention"],
             "rope_local_base_freq": 1e4,
             "rope_scaling": {"rope_type": "linear", "factor": 8.0, "rope_theta": 5e5}}  # fmt: skip
    hf = transformers.Gemma3TextConfig(**{**given, "rope_scaling": dict(given["rope_scaling"])})
    specs = rr.RopeSpec.from_hf_layers({"model_type": "gemma3_text", **given})
    assert [spec.base for spec in specs if spec is not None] == [
        hf.rope_parameters[kind]["rope_theta"] for kind in given["layer_types"]
    ]


def test_a_gptj_config_without_hidden_size_is_refused_naming_the_common_key():
    """Catches: a family's own name (``n_embd``) reported for the missing hidden size."""
    with pytest.raises(ValueError, match="got head_dim=None, hidden_size=None, num_att"):
        rr.RopeSpec.from_hf({"model_type": "gptj", "n_head": 4})


def test_longrope_factor_by_default_is_hf_true_ratio_of_lengths():
    """Catches: the default LongRoPE factor ``max_position / original`` rounded down."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    factors = {"short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 3.0, 5.0, 8.0]}
    given: dict[str, Any] = {"hidden_size": 32, "num_attention_heads": 4,
             "max_position_embeddings": 200,
             "rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 64,
                                 **factors}}  # fmt: skip
    hf = transformers.LlamaConfig(**{**given, "rope_parameters": dict(given["rope_parameters"])})
    _, want = ROPE_INIT_FUNCTIONS["longrope"](hf, "cpu", seq_len=300)
    assert want == pytest.approx(math.sqrt(1 + math.log(200 / 64) / math.log(64)), rel=1e-15)
    spec = rr.RopeSpec.from_hf(given)
    assert rr.attention_factor(spec, seq_len=300) == pytest.approx(want, rel=1e-15)


def test_to_hf_writes_a_length_of_one():
    """Catches: the smallest length a config holds (1) refused by `to_hf`."""
    config: Any = rr.RopeSpec(16).to_hf(max_position_embeddings=1)
    assert config["max_position_embeddings"] == 1
    with pytest.raises(ValueError, match="max_position_embeddings"):
        rr.RopeSpec(16).to_hf(max_position_embeddings=0)


@pytest.mark.parametrize("count", [3, 5])
def test_no_rope_layers_of_another_length_than_the_layers_is_refused(count):
    """Catches: a ``no_rope_layers`` list one short or one long taken (a layer's flag
    then missing, or one left over)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layers": [1] * count}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layers` must be a list of 4 flags"):
        rr.RopeSpec.from_hf_layers(given)


def test_a_partial_factor_rotating_no_pair_is_refused_naming_it():
    """Catches: a rotary dimension of 0 (``int(16 * 0.05)``) let through the check."""
    with pytest.raises(ValueError, match=r"int\(16 \* 0\.05\) = 0"):
        rr.RopeSpec.from_hf({"head_dim": 16, "partial_rotary_factor": 0.05})


def test_a_no_rope_layer_interval_of_zero_is_refused_not_taken_for_the_default():
    """Catches: an interval of 0 let through and then replaced by HF's default 4 (HF's
    ``(i + 1) % 0`` fails)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layer_interval": 0}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layer_interval` must be an integer from 1"):
        rr.RopeSpec.from_hf_layers(given)


def test_yarn_factor_by_default_is_hf_true_ratio_of_lengths():
    """Catches: the default YaRN factor ``max_position / original`` rounded down."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 64}
    given = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 200}
    hf = transformers.LlamaConfig(**given, rope_parameters=dict(params))
    inv, want = ROPE_INIT_FUNCTIONS["yarn"](hf, "cpu")  # HF: factor 200 / 64 = 3.125
    assert want == pytest.approx(0.1 * math.log(200 / 64) + 1.0, rel=1e-15)
    spec = rr.RopeSpec.from_hf({**given, "rope_parameters": params})
    assert rr.attention_factor(spec) == pytest.approx(want, rel=1e-15)
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


@pytest.mark.parametrize("flags", [1, "1111", {0: 1, 1: 1, 2: 1, 3: 1}])
def test_no_rope_layers_not_a_list_is_refused_naming_it(flags):
    """Catches: the list test of ``no_rope_layers`` weakened (an int then has no length,
    a mapping of four entries passes as four flags)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layers": flags}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layers` must be a list of 4 flags"):
        rr.RopeSpec.from_hf_layers(given)


@pytest.mark.parametrize(
    "model_type", ["axk1", "deepseek_v3", "glm4_moe_lite", "mistral4", "sarvam_mla", "youtu"]
)
def test_rope_interleave_absent_is_the_hf_config_class_default(model_type):
    """A config without ``rope_interleave`` gets the HF class's default (True for these
    multi-latent-attention families: ``apply_rotary_pos_emb_interleave``, which reads
    pairs (2j, 2j + 1) and writes them in half order), not "half" read and written."""
    transformers = pytest.importorskip("transformers")
    hf = transformers.CONFIG_MAPPING[model_type]()
    given = {k: v for k, v in hf.to_dict().items() if k != "rope_interleave"}
    spec = rr.RopeSpec.from_hf(given)
    assert hf.rope_interleave is True
    assert (spec.layout, spec.output_layout) == ("interleaved", "half")
    spec = rr.RopeSpec.from_hf({**given, "rope_interleave": False})
    assert (spec.layout, spec.output_layout) == ("half", None)


@pytest.mark.parametrize(
    "given",
    [
        # Layer types given, no rope_local_base_freq: HF's default local base (10000).
        {"layer_types": ["sliding_attention", "full_attention"], "num_hidden_layers": 2},
        # No layer types (configs on the Hub): HF builds them from sliding_window_pattern.
        {"num_hidden_layers": 7, "sliding_window_pattern": 3, "rope_local_base_freq": 2e4},
        {"num_hidden_layers": 7},  # pattern 6
    ],
)
def test_gemma3_raw_configs_give_each_layer_hf_rope(given):
    """Catches: a raw Gemma 3 config without ``rope_local_base_freq`` or ``layer_types``
    read as one RoPE (the full-attention layers' scaling and base) for every layer, where
    HF gives the sliding-window layers plain RoPE at their own base."""
    transformers = pytest.importorskip("transformers")

    given = {"head_dim": 16, "rope_theta": 1e6, **given}
    scaling = {"rope_type": "linear", "factor": 8.0}
    hf = transformers.Gemma3TextConfig(**given, rope_scaling=dict(scaling))
    specs = rr.RopeSpec.from_hf_layers(
        {"model_type": "gemma3_text", **given, "rope_scaling": scaling}
    )
    assert len(specs) == len(hf.layer_types) == given["num_hidden_layers"]
    for spec, layer_type in zip(specs, hf.layer_types, strict=True):
        params = hf.rope_parameters[layer_type]
        assert spec is not None
        assert spec.base == params["rope_theta"]
        want = rr.scaling.Linear(params["factor"]) if params["rope_type"] == "linear" else None
        assert spec.scaling == want


def test_gemma4_config_json_per_layer_head_sizes_are_read_as_hf():
    """Catches: config.json's ``per_layer_config`` (overrides by layer index, as HF writes
    Gemma 4's: 512 features in its full-attention layers, 256 elsewhere) left unread, so
    every layer got the global ``head_dim``; or such a mapping taken for a view by type."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    config = transformers.Gemma4TextConfig(num_hidden_layers=12)
    rotary = Gemma4TextRotaryEmbedding(config)
    given = config.to_dict()
    assert isinstance(given["per_layer_config"], dict)
    specs = rr.RopeSpec.from_hf_layers(given)
    for i, (spec, layer_type) in enumerate(zip(specs, config.layer_types, strict=True)):
        assert spec is not None
        assert spec.head_dim == config.per_layer_config[i].head_dim
        inv = getattr(rotary, f"{layer_type}_inv_freq").double().numpy()
        np.testing.assert_allclose(rr.inv_freq(spec), inv, rtol=1e-6)
    layers = given["per_layer_config"]
    layers[min(layers)] = {"head_dim": 128}  # one of the two full-attention layers differs
    with pytest.raises(ValueError, match="`per_layer_config` must be one head_dim for every"):
        rr.RopeSpec.from_hf_layers(given)


def test_glm4_moe_even_partial_rotation_takes_the_usual_path():
    """Catches: GLM-4-MoE's odd-dimension frequencies used for an even rotary dimension
    too (one feature added past it, then refused)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeRotaryEmbedding

    sizes = {"hidden_size": 64, "num_attention_heads": 4, "partial_rotary_factor": 0.5}
    inv = Glm4MoeRotaryEmbedding(transformers.Glm4MoeConfig(**sizes)).inv_freq
    spec = rr.RopeSpec.from_hf({"model_type": "glm4_moe", **sizes})
    assert spec.rotary_dim == 2 * inv.numel() == 8
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


# --- the checked reading of values, and the unknown-key check ------------------------------


def test_an_integer_of_two_to_the_53_is_read_and_one_more_is_refused():
    """Catches: the reader's documented bounds (1 and 2**53, exact in float64) moved."""
    from rope_ref._config.hf_reader import ConfigReader

    assert ConfigReader({"n": 2**53}).integer("n") == 2**53
    assert ConfigReader({"n": 1}).integer("n") == 1
    for value in (0, 2**53 + 1):
        with pytest.raises(ValueError, match=r"`n` must be an integer from 1 to 2\*\*53"):
            ConfigReader({"n": value}).integer("n")


@pytest.mark.parametrize(
    ("sections", "error"), [([0, 4, 4], ValueError), ({1, 2}, TypeError), ((4, 4, 0), ValueError)]
)
def test_a_section_list_with_a_zero_or_not_a_sequence_is_refused_naming_it(sections, error):
    """Catches: a pair count of 0 accepted, or a set (no order, no ``tolist``) converted."""
    given = {"head_dim": 16, "rope_parameters": {"mrope_section": sections}}
    with pytest.raises(error, match="`mrope_section` must be a non-empty list of positive"):
        rr.RopeSpec.from_hf(given)


def _warning_of(config: dict[str, Any], **kwargs: Any) -> warnings.WarningMessage:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rr.RopeSpec.from_hf(config, **kwargs)
    assert len(caught) == 1
    return caught[0]


def test_an_unknown_key_warning_points_at_the_callers_line():
    """Catches: the warning's ``stacklevel`` pointing inside rope_ref, or past the caller."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        rr.RopeSpec.from_hf({"head_dim": 16, "rope_thetta": 1e4})
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


def test_unknown_keys_of_one_layer_types_parameters_and_theta_keys_are_warned_about():
    """Catches: the parameters nested under a layer type left unchecked, and a key naming
    only ``theta`` not checked."""
    params = {"full_attention": {"rope_type": "default", "rope_thetaa": 5.0}}
    nested = {"head_dim": 16, "layer_types": ["full_attention"], "rope_parameters": params}
    message = str(_warning_of(nested, layer_type="full_attention").message)
    assert message.startswith("`config.rope_parameters.full_attention` has an unknown key")
    assert "'rope_thetaa' (did you mean 'rope_theta'?)" in message
    message = str(_warning_of({"head_dim": 16, "local_theta": 1e4}).message)
    assert "unknown key 'local_theta'" in message


def test_an_unknown_key_near_no_known_one_is_said_to_be_ignored():
    """Catches: the cutoff of the nearest-key suggestion lowered (any key then gets one)."""
    message = str(_warning_of({"head_dim": 16, "theta_of_the_moon": 1}).message)
    assert message.endswith("unknown key 'theta_of_the_moon' (from_hf ignores it).")


class _ListWithAttributes(list[int]):
    """A sequence whose instances have a ``__dict__``, as config objects do."""


@pytest.mark.parametrize("config", [object(), {1, 2}, frozenset(), _ListWithAttributes([1])])
def test_a_config_neither_a_mapping_nor_a_config_object_is_a_type_error(config):
    """Catches: an object without attributes (``object()``, a set), or a sequence that has
    some, taken for a config whose every key is absent."""
    with pytest.raises(TypeError, match="`config` must be a config mapping or a transformers"):
        rr.RopeSpec.from_hf(config)


def test_layer_types_with_an_item_not_a_string_is_a_type_error_naming_it():
    """Catches: the items of a string list left unchecked."""
    given = {"head_dim": 16, "num_hidden_layers": 2, "layer_types": ["full_attention", 3]}
    with pytest.raises(TypeError, match="`layer_types` must be a list of strings"):
        rr.RopeSpec.from_hf_layers(given)


def test_deepseek_v4_config_json_keeps_its_two_ropes_apart():
    """DeepSeek-V4's config.json nests one RoPE under ``main`` and one under ``compress``
    (labels only its config class declares): each is read by `layer_type`, as HF's rotary
    module builds them, and not taken together for one flat set of parameters."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    config = transformers.DeepseekV4Config(num_hidden_layers=4)
    rotary = DeepseekV4RotaryEmbedding(config)
    given = config.to_dict()
    assert "_rope_type_labels" not in given
    for label in ("main", "compress"):
        spec = rr.RopeSpec.from_hf(given, layer_type=label)
        assert spec.base == config.rope_parameters[label]["rope_theta"]
        inv = getattr(rotary, f"{label}_inv_freq").double().numpy()
        np.testing.assert_allclose(rr.inv_freq(spec), inv, rtol=1e-6)
    with pytest.raises(ValueError, match="`layer_type` must be one of 'compress', 'main'"):
        rr.RopeSpec.from_hf(given)


@pytest.mark.parametrize("sections", [[1, 3, 4], np.array([2, 3, 3])])
def test_a_section_of_one_pair_and_a_numpy_array_of_sections_are_read(sections):
    """Catches: a pair count of 1 refused, or a NumPy array of sections not read as a list."""
    spec = rr.RopeSpec.from_hf({"head_dim": 16, "rope_parameters": {"mrope_section": sections}})
    assert spec.sections == tuple(int(n) for n in sections)
