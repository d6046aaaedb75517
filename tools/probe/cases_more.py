"""More second-probe cases: threads, configs and keywords.

Threads on `apply_rope_qk`, `rerotate`, the exact backend and `from_hf`; more odd configs for
`from_hf` and round trips through `to_hf`; wrong keywords to the Hypothesis strategies; numbers
the ``rope-ref`` command must refuse.
"""

from __future__ import annotations

import json

import numpy as np
from _cli import cli, usage_error
from _expect import (
    DS,
    S8,
    L,
    X,
    _thread_check,
    _threads,
    along,
    case,
    dyn_inv,
    either,
    err,
    holds,
    inp,
    is_,
    rope64,
    val,
)

import rope_ref as rr
import rope_ref.scaling as sc
import rope_ref.testing.strategies as st

apply = rr.apply_rope
qk = rr.apply_rope_qk
rer = rr.rerotate
fh = rr.RopeSpec.from_hf

# more threads, more configs, more keywords
case(
    "apply_rope_qk",
    "8 threads, GQA, distinct offsets",
    lambda: _threads(lambda k: qk(X((4, 1, 8)), X((2, 5, 8)), offset=k)[1], 8),
    val(_thread_check(lambda k, x: rope64(X((2, 5, 8)), along(np.arange(5), (2, 5, 8)) + k))),
)
case(
    "rerotate",
    "8 threads, distinct to_seq_len",
    lambda: _threads(lambda k: rer(X((2, 5, 8)), DS, from_seq_len=4, to_seq_len=8 + k), 8),
    val(
        _thread_check(
            lambda k, x: rope64(
                rope64(x, along(np.arange(5), x.shape), freqs=dyn_inv(4), inverse=True),
                along(np.arange(5), x.shape),
                freqs=dyn_inv(8 + k),
            )
        )
    ),
)
case(
    "apply_rope",
    "8 threads, exact backend",
    lambda: _threads(lambda k: apply(X((2, 5, 8)), offset=k, backend="exact"), 8),
    val(_thread_check(lambda k, x: rope64(x, along(np.arange(5), x.shape) + k))),
)
case(
    "from_hf",
    "8 threads, one config",
    lambda: _threads(lambda k: fh(dict(L) | {"rope_theta": 1e4 + k}).base, 8),
    val(is_([1e4 + k for k in range(8)])),
)
for name, cfg, expect in [
    (
        "rope_parameters with NaN factor",
        L | {"rope_parameters": {"rope_type": "linear", "factor": float("nan"), "rope_theta": 1e4}},
        err("factor"),
    ),
    (
        "rope_parameters rope_theta string",
        L | {"rope_parameters": {"rope_type": "default", "rope_theta": "1e4"}},
        err("rope_theta"),
    ),
    (
        "rope_parameters per layer type, unknown type",
        L
        | {
            "layer_types": ["full_attention"],
            "rope_parameters": {"bogus_attention": {"rope_type": "default", "rope_theta": 1e4}},
        },
        either("rope_parameters", holds(lambda s: s.head_dim == 8, "spec")),
    ),
    ("head_dim 0", L | {"head_dim": 0}, err("head_dim", "0")),
    ("head_dim -8", L | {"head_dim": -8}, err("head_dim", "-8")),
    (
        "head_dim None, hidden_size None",
        L | {"head_dim": None, "hidden_size": None},
        err("hidden_size"),
    ),
    ("hidden_size 1e300", L | {"hidden_size": 1e300}, err("hidden_size")),
    ("num_attention_heads 2**60", L | {"num_attention_heads": 2**60}, err("num_attention_heads")),
    ("rope_theta inf", L | {"rope_theta": float("inf")}, err("rope_theta")),
    ("rope_theta True", L | {"rope_theta": True}, err("rope_theta")),
    ("rope_theta a list", L | {"rope_theta": [1e4]}, err("rope_theta")),
    (
        "yarn beta_fast NaN",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "beta_fast": float("nan"),
                "original_max_position_embeddings": 64,
            }
        },
        err("beta_fast"),
    ),
    (
        "yarn mscale string",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "mscale": "1",
                "original_max_position_embeddings": 64,
            }
        },
        err("mscale"),
    ),
    (
        "longrope factors strings",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": ["a"] * 4,
                "long_factor": [1.0] * 4,
                "original_max_position_embeddings": 64,
            }
        },
        err("short_factor"),
    ),
    (
        "longrope factors NaN",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [float("nan")] * 4,
                "original_max_position_embeddings": 64,
            }
        },
        err("long_factor"),
    ),
    (
        "dynamic factor inf",
        L | {"rope_scaling": {"rope_type": "dynamic", "factor": float("inf")}},
        err("factor"),
    ),
    (
        "rope_scaling type None",
        L | {"rope_scaling": {"rope_type": None, "factor": 2.0}},
        either("rope_type", holds(lambda s: s.scaling is None or True, "spec")),
    ),
    (
        "rope_scaling empty dict",
        L | {"rope_scaling": {}},
        either("rope_scaling", holds(lambda s: s.scaling is None, "no scaling")),
    ),
    (
        "a key with a typo warns, strict raises",
        L | {"rope_thetta": 5e5},
        either("rope_thetta", holds(lambda s: s.base == 1e4, "base kept")),
    ),
    (
        "text_config holding the keys",
        {"model_type": "llava", "text_config": dict(L)},
        either("text_config", holds(lambda s: s.head_dim == 8, "head_dim 8")),
    ),
    ("JSON string of a list", "[1, 2]", err("config")),
    ("JSON string nested 10000 deep", "[" * 10000 + "]" * 10000, err("config")),
]:
    case(
        "from_hf",
        f"config: {name}",
        lambda cfg=cfg: fh(inp(cfg) if isinstance(cfg, dict) else cfg),
        expect,
    )
case(
    "from_hf",
    "strict=True, a typo",
    lambda: fh(inp(L | {"rope_thetta": 5e5}), strict=True),
    err("rope_thetta"),
)
case(
    "from_hf_layers",
    "num_hidden_layers -1",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": -1})),
    err("num_hidden_layers"),
)
case(
    "from_hf_layers",
    "num_hidden_layers 2**40",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": 2**40})),
    err("num_hidden_layers"),
)
case(
    "from_hf_layers",
    "layer_types a string",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"layer_types": "full_attention"})),
    err("layer_types"),
)
case(
    "from_hf_layers",
    "two layers, value",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": 2})),
    val(holds(lambda r: len(r) == 2 and all(s.head_dim == 8 for s in r), "two specs")),
)
case(
    "to_hf",
    "max_position_embeddings -1",
    lambda: S8.to_hf(max_position_embeddings=-1),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "max_position_embeddings 1.5",
    lambda: S8.to_hf(max_position_embeddings=1.5),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "max_position_embeddings 'x'",
    lambda: S8.to_hf(max_position_embeddings="x"),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "round trip of a YaRN spec",
    lambda: rr.RopeSpec.from_hf(
        rr.RopeSpec(128, scaling=sc.YaRN(4.0, 4096)).to_hf()
        | {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8}
    ),
    val(holds(lambda s: s.scaling == sc.YaRN(4.0, 4096) and s.head_dim == 128, "same rule")),
)
for kw, value in [
    ("head_dims", "8"),
    ("layouts", "half"),
    ("bases", 1e4),
    ("scalings", [sc.Linear(2.0)]),
    ("partial", "yes"),
    ("sections", 1),
    ("min_rotary_dim", 2.0),
    ("nonzero_start", None),
]:
    case(
        "testing.strategies.rope_specs",
        f"rope_specs {kw}={value!r}",
        lambda kw=kw, value=value: st.rope_specs(**{kw: value}).example(),
        err(kw),
    )
for kw, value in [
    ("max_heads", -1),
    ("max_seq", 0),
    ("min_position", -5),
    ("max_position", 2**70),
    ("per_row_positions", "no"),
    ("specs", S8),
    ("dtypes", "float32"),
    ("dtypes", ["bfloat16"]),
]:
    expect = err(kw)
    if value == ["bfloat16"]:
        expect = either(kw, holds(lambda c: c.x.dtype.name == "bfloat16", "bfloat16 x"))
    elif kw in ("min_position", "max_position"):  # negative positions are positions; the top
        expect = either(kw, holds(lambda c: c.x is not None, "a case"))  # is capped at draw
    case(
        "testing.strategies.rope_cases",
        f"rope_cases {kw}={value!r}",
        lambda kw=kw, value=value: st.rope_cases(np, **{kw: value}).example(),
        expect,
    )
case(
    "testing.strategies.scaling_rules",
    "scaling_rules max_factor '2'",
    lambda: st.scaling_rules(max_factor="2").example(),
    err("max_factor"),
)
case(
    "testing.strategies.scaling_rules",
    "scaling_rules max_factor 1",
    lambda: st.scaling_rules(max_factor=1.0).example(),
    either("max_factor", holds(lambda r: r is not None, "a rule")),
)
for argv, option, got in [
    (("survey", "--max-position", "1e400"), "--max-position", None),
    (("survey", "--max-position", "0x10"), "--max-position", "0x10"),
    (("bound", "--context", "100", "--dim", "2.5"), "--dim", "2.5"),
    (("bound", "--context", ""), "--context", None),
    (("plot", "decay", "--out", "/tmp/x.png", "--dim", "100000"), "--dim", "100000"),
    (("plot", "decay", "--out", "/tmp/x.png", "--base", "inf"), "--base", "inf"),
    (("bench", "--sweep-max", "-1", "--sweep"), "--sweep-max", "-1"),
    (("bench", "--rounds", "1e9"), "--rounds", "1e9"),
    (
        ("check", "numpy:add", "--convention", "plain", "--examples", "10000001"),
        "--examples",
        "10000001",
    ),
    (
        ("check", "numpy:add", "--convention", "plain", "--max-position", "9007199254740993"),
        "--max-position",
        None,
    ),
    (("check", "numpy:add", "--convention", "plain", "--rotary-dim", "0"), "--rotary-dim", "0"),
    (
        (
            "check",
            "numpy:add",
            "--convention",
            "plain",
            "--hf-config",
            json.dumps(L | {"rope_scaling": {"rope_type": "bogus"}}),
        ),
        "--hf-config",
        None,
    ),
]:
    case(
        f"cli {argv[0]}", " ".join(argv[1:]), lambda argv=argv: cli(*argv), usage_error(option, got)
    )
