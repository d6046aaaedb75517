"""litgpt: `build_rope_cache` (condense_ratio, Llama 3, YaRN, linear) and `apply_rope`.

litgpt's package ``__init__`` imports Lightning and its training scripts; the driver imports
``litgpt.model`` alone with ``litgpt.scripts`` stood in for (the model imports one weight
converter from it that RoPE never calls). Settings are those of ``litgpt/config.py``:
``rope_base``, ``rope_condense_ratio``, ``rope_adjustments`` (Llama 3.1/3.2 and YaRN
keys), ``rotary_percentage`` (the first ``rope_n_elem`` features rotate).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import fake_modules, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch, cache_length

__all__ = ["GROUP"]

_LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
_LLAMA3_RULE = rules.Llama3(8.0, original_max_position=8192)
_YARN = {"factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "original_max_seq_len": 4096}


def _load() -> Any:
    """``litgpt.model`` without Lightning."""
    fake_modules("litgpt.scripts", installed=True)
    return import_alone("litgpt.model")


def _settings() -> Iterator[tuple[str, dict[str, Any], RopeSpec]]:
    yield "rope_base=10000", {}, RopeSpec(HEAD_DIM)
    yield (
        "rope_base=500000, rope_adjustments=llama3 (8, 1, 4, 8192)",
        {"base": 500000, "extra_config": {**_LLAMA3, "original_max_seq_len": 8192}},
        RopeSpec(HEAD_DIM, base=500000.0, scaling=_LLAMA3_RULE),
    )
    yield (
        "rope_condense_ratio=4 with llama3 (8, 1, 4, 8192)",
        {
            "base": 500000,
            "condense_ratio": 4,
            "extra_config": {**_LLAMA3, "original_max_seq_len": 8192},
        },
        RopeSpec(HEAD_DIM, base=500000.0, scaling=rules.Chain(_LLAMA3_RULE, rules.Linear(4.0))),
    )
    yield (
        "rope_condense_ratio=8",
        {"condense_ratio": 8},
        RopeSpec(HEAD_DIM, scaling=rules.Linear(8.0)),
    )
    yield (
        "rope_adjustments={factor: 4} (linear)",
        {"extra_config": {"factor": 4.0}},
        RopeSpec(HEAD_DIM, scaling=rules.Linear(4.0)),
    )
    # YaRN without mscale: the paper's (and HF's) attention factor is 0.1 ln s + 1
    yield (
        "rope_adjustments=yarn (4, beta 32/1, 4096), no mscale",
        {"extra_config": dict(_YARN)},
        RopeSpec(HEAD_DIM, scaling=rules.YaRN(4.0, original_max_position=4096)),
    )
    yield (
        "rope_adjustments=yarn (4, beta 32/1, 4096), mscale=1, mscale_all_dim=0",
        {"extra_config": {**_YARN, "mscale": 1.0, "mscale_all_dim": 0.0}},
        RopeSpec(HEAD_DIM, scaling=rules.YaRN(4.0, original_max_position=4096)),
    )
    for index, layers, spec in (
        (0, "global", RopeSpec(HEAD_DIM, base=1e6, scaling=rules.Linear(8.0))),
        (1, "local", RopeSpec(HEAD_DIM)),
    ):
        yield (
            f"Gemma 3: rope_base=1e6, factor 8, rope_local_base_freq=1e4; {layers} layers",
            {
                "base": 1_000_000,
                "extra_config": {"factor": 8.0},
                "rope_local_base_freq": 10000.0,
                "rope_index": index,
            },
            spec,
        )
    yield (
        "rotary_percentage=0.25",
        {"n_elem": HEAD_DIM // 4},
        RopeSpec(HEAD_DIM, rotary_dim=HEAD_DIM // 4),
    )


def _run(model: Any, options: dict[str, Any], x: np.ndarray, p: np.ndarray) -> np.ndarray:
    import torch

    n_elem = options.pop("n_elem", HEAD_DIM)
    index = options.pop("rope_index", None)  # Config.rope_indices: 0 global, 1 local
    cos, sin = model.build_rope_cache(cache_length(p), n_elem, **options)
    if index is not None:
        cos, sin = cos[..., index], sin[..., index]
    ids = torch.from_numpy(p)
    cos, sin = cos.index_select(0, ids)[None], sin.index_select(0, ids)[None]  # GPT.forward
    t = _torch(x)
    roped = model.apply_rope(t[..., :n_elem], cos, sin)
    return _numpy(torch.cat((roped, t[..., n_elem:]), dim=-1))


def _entries() -> Iterator[Entry]:
    model = _load()
    for settings, options, spec in _settings():
        run = functools.partial(lambda o, x, p: _run(model, dict(o), x, p), options)
        yield Entry("litgpt build_rope_cache + apply_rope", settings, spec, run)
    yield Entry(
        "litgpt apply_rope_interleave",
        "rope_interleave=True (MLA checkpoints)",
        RopeSpec(HEAD_DIM, layout="interleaved", output_layout="half"),
        functools.partial(_run_interleave, model),
    )


def _run_interleave(model: Any, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """`apply_rope_interleave`: interleaved pairs read, written in half order."""
    import torch

    cos, sin = model.build_rope_cache(cache_length(p), HEAD_DIM)
    ids = torch.from_numpy(p)
    cos, sin = cos.index_select(0, ids)[None], sin.index_select(0, ids)[None]
    return _numpy(model.apply_rope_interleave(_torch(x), cos, sin))


GROUP = Group(
    "litgpt",
    ("litgpt", "torch", "yaml"),
    "pip install --no-deps litgpt (a stand-in replaces its Lightning imports)",
    _entries,
)
