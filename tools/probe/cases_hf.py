"""Second-probe cases for `RopeSpec.from_hf` and `from_hf_layers` with odd configs."""

from __future__ import annotations

import copy
import json

from _expect import L, _llama_config, _UserRule, case, either, err, holds, inp, val

import rope_ref as rr

# RopeSpec.from_hf with odd configs
fh = rr.RopeSpec.from_hf
for name, cfg, expect in [
    ("None", None, err("config", "None")),
    ("a list", [L], err("config")),
    ("an int", 3, err("config", "3")),
    ("a JSON string that is not JSON", "{not json", err("config")),
    ("bytes", b"{}", err("config")),
    ("empty dict", {}, err("config")),
    ("hidden_size a string", L | {"hidden_size": "64"}, err("hidden_size", "'64'")),
    ("hidden_size not divisible", L | {"hidden_size": 60}, err("hidden_size")),
    ("num_attention_heads 0", L | {"num_attention_heads": 0}, err("num_attention_heads")),
    ("num_attention_heads True", L | {"num_attention_heads": True}, err("num_attention_heads")),
    ("head_dim 7", L | {"head_dim": 7}, err("head_dim", "7")),
    ("head_dim 8.5", L | {"head_dim": 8.5}, err("head_dim", "8.5")),
    ("head_dim 2**60", L | {"head_dim": 2**60}, err("head_dim")),
    ("rope_theta NaN", L | {"rope_theta": float("nan")}, err("rope_theta")),
    ("rope_theta '1e4'", L | {"rope_theta": "1e4"}, err("rope_theta")),
    ("rope_theta 1", L | {"rope_theta": 1}, err("rope_theta")),
    (
        "rope_theta None",
        L | {"rope_theta": None},
        either("rope_theta", holds(lambda s: s.base == 10000.0, "default base")),
    ),
    ("rope_scaling a string", L | {"rope_scaling": "linear"}, err("rope_scaling")),
    ("rope_scaling a list", L | {"rope_scaling": [2.0]}, err("rope_scaling")),
    (
        "rope_scaling unknown type",
        L | {"rope_scaling": {"rope_type": "wavy", "factor": 2.0}},
        err("rope_type", "wavy"),
    ),
    (
        "rope_scaling type an int",
        L | {"rope_scaling": {"rope_type": 3, "factor": 2.0}},
        err("rope_type"),
    ),
    ("linear without factor", L | {"rope_scaling": {"rope_type": "linear"}}, err("factor")),
    (
        "linear factor NaN",
        L | {"rope_scaling": {"rope_type": "linear", "factor": float("nan")}},
        err("factor"),
    ),
    (
        "linear factor '2'",
        L | {"rope_scaling": {"rope_type": "linear", "factor": "2"}},
        err("factor"),
    ),
    (
        "linear factor True",
        L | {"rope_scaling": {"rope_type": "linear", "factor": True}},
        err("factor"),
    ),
    (
        "yarn factor 0",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 0,
                "original_max_position_embeddings": 64,
            }
        },
        err("factor"),
    ),
    (
        "yarn original_max -5",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 2.0,
                "original_max_position_embeddings": -5,
            }
        },
        err("original_max_position"),
    ),
    (
        "llama3 missing keys",
        L | {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
        either(
            "rope_scaling",
            holds(
                lambda s: s.scaling.low_freq_factor == 1.0 and s.scaling.high_freq_factor == 4.0,
                "Llama 3.1 defaults",
            ),
        ),
    ),
    (
        "longrope short_factor wrong length",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": [1.0],
                "long_factor": [1.0],
                "original_max_position_embeddings": 64,
            }
        },
        err("short_factor"),
    ),
    (
        "dynamic with max_position_embeddings 0",
        L | {"max_position_embeddings": 0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        err("max_position"),
    ),
    ("partial_rotary_factor 0", L | {"partial_rotary_factor": 0.0}, err("partial_rotary_factor")),
    ("partial_rotary_factor 1.5", L | {"partial_rotary_factor": 1.5}, err("partial_rotary_factor")),
    (
        "partial_rotary_factor '0.5'",
        L | {"partial_rotary_factor": "0.5"},
        err("partial_rotary_factor"),
    ),
    (
        "partial_rotary_factor 0.3 (odd rotary)",
        L | {"partial_rotary_factor": 0.3},
        either("partial_rotary_factor", holds(lambda s: s.rotary_dim % 2 == 0, "even")),
    ),
    (
        "rope_scaling with NaN in JSON text",
        json.dumps(L | {"rope_scaling": {"rope_type": "linear", "factor": 2}}).replace(
            "2}", "NaN}"
        ),
        err("factor"),
    ),
    (
        "unknown model_type, plain keys",
        L | {"model_type": "nonexistent-model"},
        either("model_type", holds(lambda s: s.head_dim == 8, "head_dim 8")),
    ),
    ("model_type an int", L | {"model_type": 5}, err("model_type")),
    ("text_config a list", L | {"text_config": [1]}, err("text_config")),
    ("rope_parameters not a dict", L | {"rope_parameters": 5}, err("rope_parameters")),
    (
        "mrope_section wrong sum",
        L | {"rope_scaling": {"rope_type": "default", "mrope_section": [1, 1]}},
        err("mrope_section"),
    ),
    (
        "mrope_section strings",
        L | {"rope_scaling": {"rope_type": "default", "mrope_section": ["a"]}},
        err("mrope_section"),
    ),
    ("layer_types not a list", L | {"layer_types": "full"}, err("layer_types")),
    (
        "max_position_embeddings 1e300",
        L
        | {
            "max_position_embeddings": 1e300,
            "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
        },
        err("max_position"),
    ),
]:
    case(
        "from_hf",
        f"config: {name}",
        lambda cfg=cfg: fh(copy.deepcopy(cfg) if not isinstance(cfg, dict) else inp(cfg)),
        expect,
    )
case("from_hf", "strict='yes'", lambda: fh(inp(dict(L)), strict="yes"), err("strict", "'yes'"))
case(
    "from_hf",
    "section_order 'bogus'",
    lambda: fh(inp(dict(L)), section_order="bogus"),
    err("section_order", "'bogus'"),
)
case("from_hf", "section_order 1", lambda: fh(inp(dict(L)), section_order=1), err("section_order"))
case(
    "from_hf",
    "layer_type 'bogus'",
    lambda: fh(inp(dict(L)), layer_type="bogus"),
    err("layer_type", "'bogus'"),
)
case("from_hf", "layer_type 3", lambda: fh(inp(dict(L)), layer_type=3), err("layer_type"))
case(
    "from_hf",
    "layer_type not among 2 layer_types",
    lambda: fh(inp(L | {"layer_types": ["full_attention"] * 2}), layer_type="sliding_attention"),
    err("layer_type", "sliding_attention"),
)
case(
    "from_hf",
    "transformers LlamaConfig with rope_theta NaN",
    lambda: fh(_llama_config(rope_theta=float("nan"))),
    err("rope_theta"),
)
case(
    "from_hf",
    "plain value: L",
    lambda: fh(inp(dict(L))),
    val(
        holds(
            lambda s: s.head_dim == 8 and s.base == 10000.0 and s.layout == "half",
            "llama head_dim 8",
        )
    ),
)
case("from_hf_layers", "config None", lambda: rr.RopeSpec.from_hf_layers(None), err("config"))
case(
    "from_hf_layers",
    "layer_types with None",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"layer_types": [None, "full_attention"]})),
    err("layer_types"),
)
case(
    "to_hf",
    "spec with freqs",
    lambda: rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01]).to_hf(),
    err("freqs"),
)
case(
    "to_hf",
    "spec with a user scaling rule",
    lambda: rr.RopeSpec(8, scaling=_UserRule()).to_hf(),
    err("scaling"),
)
