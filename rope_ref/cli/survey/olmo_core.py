"""OLMo-core: `RotaryEmbedding` and `ComplexRotaryEmbedding` with PI, Stepwise, YaRN and ABF.

``olmo_core/__init__`` and its config module import cached-path and dataclass-extensions
(checkpoint I/O, config serialisation) that RoPE does not use; stand-ins replace them where
they are not installed. The rule of each row is the one OLMo exports through its own
``to_hf_config()`` read by `RopeSpec.from_hf`; ABF has no HF form (``to_hf_config`` raises)
and is a new base with `rope_ref.scaling.AttentionScale`. OLMo takes a start position
(``start_pos``), not position ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import fake_modules, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]

THETA = 500_000


def _load() -> Any:
    """``olmo_core.nn.rope`` with stand-ins for its checkpoint and config dependencies."""
    fake_modules("cached_path", "dataclass_extensions")
    return import_alone("olmo_core.nn.rope")


def _hf_spec(scaling: Any, *, partial: float = 1.0) -> RopeSpec:
    """The spec of OLMo's own HF export of `scaling` (None: plain RoPE)."""
    params: dict[str, Any] = {"rope_type": "default", "rope_theta": float(THETA)}
    if scaling is not None:
        params = {**params, **scaling.to_hf_config()}
    config = {
        "head_dim": HEAD_DIM,
        "hidden_size": 4 * HEAD_DIM,
        "num_attention_heads": 4,
        "partial_rotary_factor": partial,
        "rope_parameters": params,
    }
    return RopeSpec.from_hf(config)


def _settings(rope: Any) -> Iterator[tuple[str, Any, dict[str, Any], RopeSpec]]:
    cls = rope.RotaryEmbedding
    yield "theta=500000", cls, {}, _hf_spec(None)
    yield (
        "partial_rotary_factor=0.5",
        cls,
        {"partial_rotary_factor": 0.5},
        _hf_spec(None, partial=0.5),
    )
    for name, scaling in (
        ("PI factor=4", rope.PIRoPEScalingConfig(factor=4.0)),
        ("Stepwise factor=32 (defaults)", rope.StepwiseRoPEScalingConfig()),
        ("YaRN factor=8 (defaults)", rope.YaRNRoPEScalingConfig()),
    ):
        yield name, cls, {"scaling": scaling}, _hf_spec(scaling)
    abf = rope.ABFRoPEScalingConfig(new_theta=8_000_000, attention_rescale_factor=1.25)
    yield (
        "ABF new_theta=8e6, attention_rescale_factor=1.25",
        cls,
        {"scaling": abf},
        RopeSpec(HEAD_DIM, base=8e6, scaling=rules.AttentionScale(1.25)),
    )
    pi = rope.PIRoPEScalingConfig(factor=4.0, attention_rescale_factor=1.25)
    yield (
        "PI factor=4, attention_rescale_factor=1.25",
        cls,
        {"scaling": pi},
        RopeSpec(
            HEAD_DIM,
            base=float(THETA),
            scaling=rules.Chain(rules.Linear(4.0), rules.AttentionScale(1.25)),
        ),
    )
    yield (
        "ComplexRotaryEmbedding",
        rope.ComplexRotaryEmbedding,
        {},
        RopeSpec(HEAD_DIM, base=float(THETA), layout="interleaved"),
    )


def _entries() -> Iterator[Entry]:
    rope = _load()
    for settings, cls, kwargs, spec in _settings(rope):
        module = cls(head_size=HEAD_DIM, theta=THETA, **kwargs)

        def run(x: np.ndarray, p: np.ndarray, module: Any = module) -> np.ndarray:
            q = _torch(x)
            out, _ = module(q, q.clone(), start_pos=int(p[0]))
            return _numpy(out)

        yield Entry(f"OLMo-core {cls.__name__}", settings, spec, run, positions="offset")


GROUP = Group(
    "ai2-olmo-core",
    ("olmo_core", "torch"),
    "pip install --no-deps ai2-olmo-core (stand-ins for cached-path, dataclass-extensions)",
    _entries,
)
