"""`RopeSpec.from_hf(config, layer=i)`: the RoPE of one layer, or why it has none."""

from __future__ import annotations

import re

import pytest

import rope_ref as rr

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
