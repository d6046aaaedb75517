"""from_hf knows how each model family applies RoPE (rope_ref._config.families).

Raw config.json values as released, with the expected spec written here from the family's
transformers code (cited per test); the sweep (test_hf_sweep.py) drives the code itself.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

import rope_ref as rr
from rope_ref._config.families import FAMILIES

ROOT = Path(__file__).resolve().parent.parent


def test_gptj_rotates_rotary_dim_features_in_pairs():
    # modeling_gptj.py: rotate_every_two on query[..., :rotary_dim]; head = n_embd // n_head
    config = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64}
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.rotary_dim, spec.layout) == (256, 64, "interleaved")


def test_glm4_moe_keeps_an_odd_rotary_dim_as_its_code_does():
    # modeling_glm4_moe.py: head 4096 // 96 = 42, dim = int(42 * 0.5) = 21, inv_freq =
    # 1 / base ** (arange(0, 21, 2) / 21): 11 pairs (22 features) at exponents 2j / 21
    config = {
        "model_type": "glm4_moe", "hidden_size": 4096, "num_attention_heads": 96,
        "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.rotary_dim, spec.layout) == (42, 22, "half")
    expected = [10000.0 ** (-j / 10.5) for j in range(11)]
    assert spec.freqs == pytest.approx(expected, rel=1e-15)
    scaled = {**config, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        rr.RopeSpec.from_hf(scaled)  # custom freqs take no scaling rule: refused, not dropped


def test_qwen3_omni_moe_head_size_is_rounded_down_as_its_code_does():
    # modeling_qwen3_omni_moe.py: Qwen3OmniMoeThinkerTextAttention head_dim =
    # hidden_size // num_attention_heads; 2048 // 28 = 73 is odd, so no RoPE fits it
    config = {"model_type": "qwen3_omni_moe", "hidden_size": 2048, "num_attention_heads": 28}
    with pytest.raises(ValueError, match="head_dim=73"):
        rr.RopeSpec.from_hf(config)
    config["hidden_size"] = 2060  # 2060 // 28 = 73 too: rounded down, not refused for it
    with pytest.raises(ValueError, match="head_dim=73"):
        rr.RopeSpec.from_hf(config)


def test_gpt_neox_legacy_keys():
    # gpt-neox-20b's config.json: rotary_pct 0.25 of 6144 // 64 = 96 features, base key
    config = {
        "model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
        "rotary_pct": 0.25, "rotary_emb_base": 20000,
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.rotary_dim, spec.base) == (96, 24, 20000.0)


def test_deepseek_v3_reads_interleaved_pairs_and_writes_half_order():
    # modeling_deepseek_v3.py: apply_rotary_pos_emb_interleave on q[..., qk_nope_head_dim:]
    config = {
        "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_interleave": True,
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.layout, spec.output_layout) == (64, "interleaved", "half")
    assert rr.RopeSpec.from_hf({**config, "rope_interleave": False}).layout == "half"
    assert rr.RopeSpec.from_hf(spec.to_hf()) == spec


def test_mistral4_fraction_is_the_rope_share_of_the_whole_head():
    # configuration_mistral4.py: partial_rotary_factor = qk_rope / (qk_nope + qk_rope)
    config = {
        "model_type": "mistral4", "head_dim": 128, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 64, "num_attention_heads": 32, "hidden_size": 4096,
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5},
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.head_dim, spec.rotary_dim) == (64, 64)


@pytest.mark.parametrize(
    ("config", "head_dim"),
    [
        ({"model_type": "jetmoe", "kv_channels": 128, "hidden_size": 2048,
          "num_attention_heads": 32}, 128),  # attribute_map head_dim -> kv_channels
        ({"model_type": "zamba2", "attention_head_dim": 160, "hidden_size": 2560,
          "num_attention_heads": 32}, 160),  # attribute_map head_dim -> attention_head_dim
        ({"model_type": "dbrx", "d_model": 6144, "n_heads": 48}, 128),  # d_model // n_heads
    ],
)  # fmt: skip
def test_head_size_keys(config, head_dim):
    assert rr.RopeSpec.from_hf(config).head_dim == head_dim


def test_gemma3_legacy_local_base():
    # configuration_gemma3.py: rope_scaling -> full_attention, rope_local_base_freq ->
    # sliding_attention's rope_theta (plain RoPE)
    config = {
        "model_type": "gemma3_text", "head_dim": 256, "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    }  # fmt: skip
    local = rr.RopeSpec.from_hf(config, layer_type="sliding_attention")
    full = rr.RopeSpec.from_hf(config, layer_type="full_attention")
    assert (local.base, local.scaling) == (10_000.0, None)
    assert (full.base, full.scaling) == (1_000_000.0, rr.scaling.Linear(8.0))


def test_layers_without_rope():
    # configuration_llama4.py: no_rope_layers default: layer i has RoPE iff (i + 1) % 4 != 0
    config = {
        "model_type": "llama4_text", "head_dim": 128, "num_hidden_layers": 8,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    }  # fmt: skip
    specs = rr.RopeSpec.from_hf_layers(config)
    assert [s is not None for s in specs] == [True, True, True, False] * 2
    assert specs[0] is not None
    assert specs[0].layout == "interleaved"
    given = {**config, "no_rope_layers": [0, 1, 1, 1, 1, 1, 1, 0]}
    assert [s is None for s in rr.RopeSpec.from_hf_layers(given)] == [True] + [False] * 6 + [True]
    with pytest.raises(ValueError, match=r"`no_rope_layers` must be a list of 8 flags"):
        rr.RopeSpec.from_hf_layers({**config, "no_rope_layers": [1, 2, 1, 1, 1, 1, 1, 1]})


def test_layers_by_type():
    config = {
        "head_dim": 64, "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        },
    }  # fmt: skip
    specs = rr.RopeSpec.from_hf_layers(config)
    assert [s.base for s in specs if s is not None] == [10000.0, 1e6]


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"model_type": "mpt", "d_model": 4096, "n_heads": 32}, "MPT adds ALiBi"),
        ({"model_type": "bloom", "hidden_size": 4096, "n_head": 32}, "Bloom adds ALiBi"),
        ({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
          "alibi": True}, "alibi=true"),
        ({"hidden_size": 64, "num_attention_heads": 1, "attn_config": {"alibi": True}},
         "alibi=true"),
    ],
)  # fmt: skip
def test_alibi_is_refused_naming_why(config, words):
    with pytest.raises(ValueError, match="describes no RoPE") as info:
        rr.RopeSpec.from_hf(config)
    assert words in str(info.value)


def test_falcon_with_rope_is_read():
    config = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71}
    assert rr.RopeSpec.from_hf({**config, "alibi": False}).head_dim == 64


def test_inverse_rotation_family_is_refused():
    with pytest.raises(ValueError, match=r"negated angles .* inverse=True"):
        rr.RopeSpec.from_hf({"model_type": "nanochat", "head_dim": 128})


@pytest.mark.parametrize(
    ("config", "key", "nearest"),
    [
        ({"head_dim": 64, "rope_thetta": 5e5}, "rope_thetta", "rope_theta"),
        ({"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factr": 2.0,
                                              "factor": 2.0}}, "factr", "factor"),
        ({"head_dim": 64, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                           "original_max_position_embedding": 4096,
                                           "original_max_position_embeddings": 4096}},
         "original_max_position_embedding", "original_max_position_embeddings"),
    ],
)  # fmt: skip
def test_unknown_keys_warn_or_raise(config, key, nearest):
    message = f"unknown key {key!r} (did you mean {nearest!r}?)"
    with pytest.warns(UserWarning, match=re.escape(message)):
        rr.RopeSpec.from_hf(config)
    with pytest.raises(ValueError, match=re.escape(message)):
        rr.RopeSpec.from_hf(config, strict=True)


def test_known_keys_do_not_warn():
    config = {
        "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "partial_rotary_factor": 1.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    }  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rr.RopeSpec.from_hf(config, strict=True)


def test_every_entry_names_its_source():
    for name, family in FAMILIES.items():
        assert "transformers/models/" in family.source or "modeling_" in family.source, name


def test_core_spec_imports_nothing_of_config():
    tree = ast.parse((ROOT / "rope_ref/_core/spec.py").read_text(encoding="utf-8"))
    names = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)] + [
        a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
    ]
    assert not [n for n in names if n.startswith("rope_ref._config")]


def test_deepseek_v4_rotates_the_trailing_slice():
    # modeling_deepseek_v4.py: apply_rotary_pos_emb rotates x[..., -rope_dim:] in pairs
    config = {
        "model_type": "deepseek_v4", "head_dim": 512,
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.125},
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert (spec.rotary_start, spec.rotary_dim, spec.layout) == (448, 64, "interleaved")


def test_interleaved_mrope_gives_the_rest_to_axis_zero():
    # Qwen3-VL's apply_interleaved_mrope: axes 1 and 2 take pairs 1, 4, ... and 2, 5, ...
    # for their sections' lengths; every other pair keeps axis 0.
    config = {
        "model_type": "qwen3_vl_text", "head_dim": 256,
        "rope_parameters": {"rope_type": "default", "mrope_section": [11, 11, 10]},
    }  # fmt: skip
    spec = rr.RopeSpec.from_hf(config)
    assert spec.sections == (107, 11, 10)
    assert spec.section_order == "interleaved"
    with pytest.raises(ValueError, match=r"`mrope_section` must be pair counts"):
        rr.RopeSpec.from_hf({**config, "model_type": "qwen2_vl"})  # chunked: must sum


def test_family_quirks_are_rows_of_the_family_table(monkeypatch):
    from rope_ref._config.families import FAMILIES, Family

    row = Family(
        "a family of this test",
        rope_type_renames=(("linear", "dynamic"),),
        local_base_key="toy_local_base",
        layer_labels=("global_layer", "local_layer"),
        layer_pattern=("toy_pattern", 3),
        alibi_flags=("toy_section.biases",),
    )
    monkeypatch.setitem(FAMILIES, "toy_family", row)
    base = {"model_type": "toy_family", "head_dim": 8, "max_position_embeddings": 64}
    params = {"rope_type": "linear", "factor": 2.0}
    spec = rr.RopeSpec.from_hf({**base, "rope_parameters": params})
    assert spec.scaling == rr.scaling.DynamicNTK(2.0, max_position=64)
    layered = {**base, "num_hidden_layers": 6, "toy_local_base": 100.0, "toy_pattern": 3}
    specs = rr.RopeSpec.from_hf_layers({**layered, "rope_parameters": params})
    local = rr.RopeSpec(head_dim=8, base=100.0)
    assert [s == local for s in specs] == [True, True, False, True, True, False]
    assert rr.RopeSpec.from_hf({**base, "alibi": True}) == rr.RopeSpec(head_dim=8)
    with pytest.raises(ValueError, match="alibi=true"):
        rr.RopeSpec.from_hf({**base, "toy_section": {"biases": True}})
