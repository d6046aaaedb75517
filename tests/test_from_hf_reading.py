"""Reading HF configs (rope_ref/_config): head sizes, rotary dims, partial rotary factors,
class default thetas, the scaling rules' HF defaults and the unknown-key warnings.

Each test asserts what transformers' own code computes (its config classes, rotary
modules and RoPE initialisers), HF's documented arithmetic written here, or, for values
refused, the reading rules of docs/variants/hf.md (the error names the key, the
requirement and where it was read).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import warning_of_from_hf as _warning_of


def test_rope_parameters_partial_rotary_factor_wins_over_the_top_level_one():
    """Catches: the top-level ``partial_rotary_factor`` read before ``rope_parameters``'."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    given = {
        "hidden_size": 256,
        "num_attention_heads": 4,
        "head_dim": 64,
        "partial_rotary_factor": 0.5,
        "rope_parameters": {
            "rope_type": "linear",
            "rope_theta": 1e4,
            "factor": 2.0,
            "partial_rotary_factor": 0.25,
        },
    }
    config = transformers.LlamaConfig(**given)  # HF reads both and chooses
    hf_inv_freq, _ = ROPE_INIT_FUNCTIONS["linear"](config, "cpu")
    # two different values of one key: the one HF takes is used, and the warning names both
    with pytest.warns(UserWarning, match=r"0\.5 \(config\) is ignored.*takes .* 0\.25"):
        spec = rr.RopeSpec.from_hf(given)
    assert spec.rotary_dim == 2 * hf_inv_freq.numel() == 16
    np.testing.assert_allclose(rr.inv_freq(spec), hf_inv_freq.double().numpy(), rtol=1e-6)


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


def test_a_head_rotating_one_pair_is_read():
    """Catches: a rotary dimension of 2 (one pair, ``int(8 * 0.25)``) refused."""
    spec = rr.RopeSpec.from_hf({"head_dim": 8, "partial_rotary_factor": 0.25})
    assert spec.rotary_dim == 2
    np.testing.assert_array_equal(rr.inv_freq(spec), [1.0])  # base ** (-0 / 2)
    assert rr.RopeSpec.from_hf({"head_dim": 2}).rotary_dim == 2


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


def test_embed_dim_sizes_the_head_only_for_axial_vision_rope():
    """Catches: a text config's ``embed_dim`` taken for its hidden size."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "embed_dim": 256}
    assert rr.RopeSpec.from_hf(given).head_dim == 16


def test_a_class_default_theta_just_above_one_is_a_base():
    """Catches: the lower bound of a class's ``default_theta`` moved off 1."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "default_theta": 1.5}
    assert rr.RopeSpec.from_hf(given).base == 1.5


def test_the_family_table_cannot_be_changed_by_a_caller():
    """Catches: `Family` made mutable (one caller's change would reach every later
    `from_hf` in the process), or `family_of` not finding a listed model type."""
    from rope_ref._config.families import family_of

    with pytest.raises(dataclasses.FrozenInstanceError):
        family_of("cohere").layout = "half"  # type: ignore[misc]
    assert family_of("cohere").layout == "interleaved"


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


@pytest.mark.parametrize("theta", [1.0, 0.5])
def test_a_class_default_theta_of_one_or_less_is_refused_naming_it(theta):
    """Catches: the lower bound of ``default_theta`` moved below 1 (``base ** x`` is then
    1 or decreasing: no rotation frequencies)."""
    given = {"hidden_size": 64, "num_attention_heads": 4, "default_theta": theta}
    with pytest.raises(ValueError, match="`default_theta` must be a finite real number greater"):
        rr.RopeSpec.from_hf(given)


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


def test_a_partial_factor_rotating_no_pair_is_refused_naming_it():
    """Catches: a rotary dimension of 0 (``int(16 * 0.05)``) let through the check."""
    with pytest.raises(ValueError, match=r"int\(16 \* 0\.05\) = 0"):
        rr.RopeSpec.from_hf({"head_dim": 16, "partial_rotary_factor": 0.05})


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


def test_an_integer_of_two_to_the_53_is_read_and_one_more_is_refused():
    """Catches: the reader's documented bounds (1 and 2**53, exact in float64) moved."""
    from rope_ref._config.hf_reader import ConfigReader

    assert ConfigReader({"n": 2**53}).integer("n") == 2**53
    assert ConfigReader({"n": 1}).integer("n") == 1
    for value in (0, 2**53 + 1):
        with pytest.raises(ValueError, match=r"`n` must be an integer from 1 to 2\*\*53"):
            ConfigReader({"n": value}).integer("n")


def test_an_unknown_key_warning_points_at_the_callers_line():
    """Catches: the warning's ``stacklevel`` pointing inside rope_ref, or past the caller."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        rr.RopeSpec.from_hf({"head_dim": 16, "rope_thetta": 1e4})
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


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
