"""`RopeSpec.from_hf(config, layer=i)` and the per-layer readers: the RoPE of one layer, or
why it has none (layer types, per-layer head sizes and thetas, layers without RoPE)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import warning_of_from_hf as _warning_of

SMOLLM3 = {
    "model_type": "smollm3",
    "head_dim": 64,
    "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0],
}


def test_each_layer_of_a_gemma3_config_gets_the_rope_of_its_layer_type() -> None:
    """Layer i takes the RoPE parameters of ``layer_types[i]`` as HF's config class writes
    them (sliding layers at 10,000, full-attention layers at 1,000,000)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Gemma3TextConfig(num_hidden_layers=8)
    for i, kind in enumerate(config.layer_types):
        want = config.rope_parameters[kind]["rope_theta"]
        assert rr.RopeSpec.from_hf(config, layer=i).base == want, (i, kind)
    assert {config.layer_types[i] for i in (0, 5)} == {"sliding_attention", "full_attention"}


def test_a_layer_with_rope_is_the_spec_of_the_model() -> None:
    """SmolLM3's layers with RoPE all rotate the whole 64-feature head at the default base."""
    for i in range(3):
        spec = rr.RopeSpec.from_hf(SMOLLM3, layer=i)
        assert (spec.head_dim, spec.rotary_dim, spec.base) == (64, 64, 10000.0)


def test_a_layer_without_rope_is_refused_naming_it() -> None:
    """``no_rope_layers`` 0 marks layer 3 as without RoPE: a ValueError naming the layer."""
    with pytest.raises(ValueError, match=re.escape("`layer` 3 of this config applies no RoPE")):
        rr.RopeSpec.from_hf(SMOLLM3, layer=3)


@pytest.mark.parametrize(
    ("layer", "error", "message"),
    [
        (4, ValueError, "`layer` must be below the config's 4 layers; got 4."),
        (-1, ValueError, "`layer` must be at least 0; got -1."),
        (True, TypeError, "`layer` must be an integer; got True."),
        ("1", TypeError, "`layer` must be an integer; got '1'."),
    ],
)
def test_a_bad_layer_is_refused_naming_it(layer: object, error: type, message: str) -> None:
    """Past the last layer, negative, or not an integer."""
    with pytest.raises(error, match=re.escape(message)):
        rr.RopeSpec.from_hf(SMOLLM3, layer=layer)


def test_layer_and_layer_type_are_not_given_together() -> None:
    """A layer's type comes from the config: both at once is a ValueError naming both."""
    with pytest.raises(ValueError, match=re.escape("give `layer` or `layer_type`, not both")):
        rr.RopeSpec.from_hf(SMOLLM3, layer=1, layer_type="full_attention")


def test_a_config_of_2_to_the_20_layers_is_read_and_one_more_is_refused() -> None:
    """The documented limit on ``num_hidden_layers`` (docs/api.md, Limits): 2**20 layers
    give 2**20 specs; one more is refused naming the key and the limit."""
    config = {"model_type": "llama", "head_dim": 64, "num_hidden_layers": 2**20}
    specs = rr.RopeSpec.from_hf_layers(config)
    assert len(specs) == 2**20
    assert specs[-1] == rr.RopeSpec.from_hf(config, layer=2**20 - 1) == rr.RopeSpec(64)
    config["num_hidden_layers"] = 2**20 + 1
    with pytest.raises(ValueError, match=r"num_hidden_layers.*at most 2\*\*20 = 1048576"):
        rr.RopeSpec.from_hf_layers(config)


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


@pytest.mark.parametrize("interval", [1, 2, 3, 7])
def test_smollm3_no_rope_layer_interval_builds_the_layers_without_rope_as_hf(interval):
    """Catches: ``no_rope_layer_interval`` left unread (HF's default of 4 taken)."""
    transformers = pytest.importorskip("transformers")
    sizes = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 8,
             "no_rope_layer_interval": interval}  # fmt: skip
    hf = transformers.SmolLM3Config(**sizes)
    specs = rr.RopeSpec.from_hf_layers({"model_type": "smollm3", **sizes})
    assert [spec is not None for spec in specs] == [bool(f) for f in hf.no_rope_layers]


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


@pytest.mark.parametrize("count", [3, 5])
def test_no_rope_layers_of_another_length_than_the_layers_is_refused(count):
    """Catches: a ``no_rope_layers`` list one short or one long taken (a layer's flag
    then missing, or one left over)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layers": [1] * count}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layers` must be a list of 4 flags"):
        rr.RopeSpec.from_hf_layers(given)


def test_a_no_rope_layer_interval_of_zero_is_refused_not_taken_for_the_default():
    """Catches: an interval of 0 let through and then replaced by HF's default 4 (HF's
    ``(i + 1) % 0`` fails)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layer_interval": 0}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layer_interval` must be an integer from 1"):
        rr.RopeSpec.from_hf_layers(given)


@pytest.mark.parametrize("flags", [1, "1111", {0: 1, 1: 1, 2: 1, 3: 1}])
def test_no_rope_layers_not_a_list_is_refused_naming_it(flags):
    """Catches: the list test of ``no_rope_layers`` weakened (an int then has no length,
    a mapping of four entries passes as four flags)."""
    given = {"model_type": "smollm3", "hidden_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 4, "no_rope_layers": flags}  # fmt: skip
    with pytest.raises(ValueError, match="`no_rope_layers` must be a list of 4 flags"):
        rr.RopeSpec.from_hf_layers(given)


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
