"""Bugs planted in the real RoPE code of the nine libraries `rope-ref survey` drives.

Each case wraps one of the library's own functions (or a class's constructor) within the
test, builds the survey's entries of that library with the bug in place, runs the entry at
the survey's positions and asserts the cause `diagnose` names (and a snippet of its
message: the parameter or value that differs). `assert_rope_close` must name the same
cause. Without the planted bug, the same entry passes (no false alarm). A library that is
not installed skips its cases with the line that installs it.

The score these cases give is the one recorded in docs/testing.md (diagnoses section).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from rope_ref.cli.survey.positions import position_sets
from rope_ref.cli.survey.run import _inputs
from rope_ref.testing import assert_rope_close, diagnose
from tests._libraries import require

MAX_POSITION = 20000


@dataclass(frozen=True)
class Plant:
    """One bug: `wrap(original)` replaces `module.attribute` while the entry runs."""

    package: str
    module: str
    attribute: str
    wrap: Callable[[Any], Any]
    settings: str  # the survey entry's settings (a prefix of them)
    cause: str
    snippet: str = ""
    peer: str = ""  # the entry's peer name, where one package has several


def _kwargs(**forced: Any) -> Callable[[Any], Any]:
    """A wrapper that calls the original with some keyword arguments forced."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def planted(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **{**kwargs, **forced})

        return planted

    return wrap


def _dropped(*names: str) -> Callable[[Any], Any]:
    """A wrapper that calls the original without some keyword arguments."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def planted(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **{k: v for k, v in kwargs.items() if k not in names})

        return planted

    return wrap


def _args(change: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]) -> Callable[[Any], Any]:
    """A wrapper that calls the original with its arguments changed by `change`."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def planted(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = change(*args, **kwargs)
            return original(*args, **kwargs)

        return planted

    return wrap


def _result(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A wrapper that changes what the original returns."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def planted(*args: Any, **kwargs: Any) -> Any:
            return change(original(*args, **kwargs))

        return planted

    return wrap


def _init(owner: str, **forced: Any) -> Callable[[Any], Any]:
    """Class `owner`'s ``__init__`` with some keyword arguments forced (not its subclasses')."""

    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        def planted(self: Any, *args: Any, **kwargs: Any) -> Any:
            if type(self).__name__ == owner:
                kwargs = {**kwargs, **forced}
            return original(self, *args, **kwargs)

        return planted

    return wrap


def _litgpt_swapped(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    extra = dict(kwargs.get("extra_config") or {})
    if "low_freq_factor" in extra:
        extra["low_freq_factor"], extra["high_freq_factor"] = (
            extra["high_freq_factor"],
            extra["low_freq_factor"],
        )
        kwargs = {**kwargs, "extra_config": extra}
    return args, kwargs


def _negated_sin(x: Any, cos: Any, sin: Any, *rest: Any, **kwargs: Any) -> Any:
    return (x, cos, -sin, *rest), kwargs


def _conj_table(xq: Any, xk: Any, table: Any, *rest: Any) -> Any:
    return (xq, xk, table.conj(), *rest), {}


def _shifted_positions(dim: int, pos: Any, *rest: Any, **kwargs: Any) -> Any:
    return (dim, pos + 1, *rest), kwargs


def _one_later(original: Any) -> Any:
    """A cos/sin table whose row i holds position i + 1."""

    @functools.wraps(original)
    def planted(dim: int, end: int, theta: float) -> Any:
        return original(dim, end + 1, theta)[1:]

    return planted


def _flipped_layout(*args: Any, **kwargs: Any) -> Any:
    return args, {**kwargs, "rotary_interleaved": not kwargs.get("rotary_interleaved", False)}


def _gemma_shift(inputs: Any, positions: Any, **kwargs: Any) -> Any:
    return (inputs, positions + 1), kwargs


LITGPT = "litgpt.model"
DIFFUSERS = "diffusers.models.embeddings"
XT = "x_transformers.x_transformers"
LLAMA = "llama_models.llama3.model"
MISTRAL = "mistral_inference.rope"
OLMO = "olmo_core.nn.rope"
MEGATRON = "megatron.core.models.common.embeddings"
GEMMA = "gemma.gm.math._positional_embeddings"
TIMM = "timm.layers.pos_embed_sincos"

PLANTS: dict[str, Plant] = {
    # litgpt
    "litgpt-base-ignored": Plant(
        "litgpt",
        LITGPT,
        "build_rope_cache",
        _kwargs(base=500000),
        "rope_base=10000",
        "frequencies",
        "500000",
    ),
    "litgpt-llama3-swapped": Plant(
        "litgpt",
        LITGPT,
        "build_rope_cache",
        _args(_litgpt_swapped),
        "rope_base=500000, rope_adjustments=llama3",
        "scaling",
        "swapped",
    ),
    "litgpt-mla-read-as-half": Plant(
        "litgpt",
        LITGPT,
        "apply_rope_interleave",
        lambda original: sys.modules[LITGPT].apply_rope,
        "rope_interleave=True",
        "layout",
        "interleaved",
        peer="apply_rope_interleave",
    ),
    "litgpt-sin-negated": Plant(
        "litgpt",
        LITGPT,
        "apply_rope",
        _args(_negated_sin),
        "rope_base=10000",
        "direction",
    ),
    # diffusers
    "diffusers-theta": Plant(
        "diffusers",
        DIFFUSERS,
        "get_1d_rotary_pos_embed",
        _kwargs(theta=500000.0),
        "use_real, repeat_interleave_real (Flux)",
        "frequencies",
        "500000",
    ),
    "diffusers-positions-plus-one": Plant(
        "diffusers",
        DIFFUSERS,
        "get_1d_rotary_pos_embed",
        _args(_shifted_positions),
        "use_real, repeat_interleave_real (Flux)",
        "offset",
    ),
    "diffusers-half-table-interleaved-rotation": Plant(
        "diffusers",
        DIFFUSERS,
        "get_1d_rotary_pos_embed",
        _kwargs(repeat_interleave_real=False),
        "use_real, repeat_interleave_real (Flux)",
        "table_layout",
    ),
    # x-transformers
    "x-transformers-freqs-negated": Plant(
        "x-transformers",
        XT,
        "apply_rotary_pos_emb",
        _args(lambda t, freqs, *rest, **kw: ((t, -freqs, *rest), kw)),
        "base=10000",
        "direction",
    ),
    "x-transformers-angles-bfloat16": Plant(
        "x-transformers",
        XT,
        "apply_rotary_pos_emb",
        _args(lambda t, freqs, *rest, **kw: ((t, freqs.bfloat16().float(), *rest), kw)),
        "base=10000",
        "precision",
        "bfloat16",
    ),
    "x-transformers-ntk-dropped": Plant(
        "x-transformers",
        f"{XT}.RotaryEmbedding",
        "__init__",
        _dropped("base_rescale_factor"),
        "base_rescale_factor=4",
        "scaling",
    ),
    # llama-models
    "llama-models-theta": Plant(
        "llama-models",
        LLAMA,
        "precompute_freqs_cis",
        _args(lambda dim, end, theta, **kw: ((dim, end, 10000.0), kw)),
        "rope_theta=500000",
        "frequencies",
        "10000",
    ),
    "llama-models-conj": Plant(
        "llama-models",
        LLAMA,
        "apply_rotary_emb",
        _args(_conj_table),
        "rope_theta=500000",
        "direction",
    ),
    "llama-models-scaled-where-not": Plant(
        "llama-models",
        LLAMA,
        "precompute_freqs_cis",
        _kwargs(use_scaled=True),
        "rope_theta=500000",
        "scaling",
    ),
    # mistral-inference
    "mistral-theta": Plant(
        "mistral-inference",
        MISTRAL,
        "precompute_freqs_cis",
        _args(lambda dim, end, theta: ((dim, end, 10000.0), {})),
        "rope_theta=1e6",
        "frequencies",
        "10000",
    ),
    "mistral-table-shifted": Plant(
        "mistral-inference",
        MISTRAL,
        "precompute_freqs_cis",
        _one_later,
        "rope_theta=1e6",
        "offset",
    ),
    "mistral-conj": Plant(
        "mistral-inference",
        MISTRAL,
        "apply_rotary_emb",
        _args(_conj_table),
        "rope_theta=1e6",
        "direction",
    ),
    # OLMo-core
    "olmo-theta": Plant(
        "ai2-olmo-core",
        f"{OLMO}.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", theta=10000),
        "theta=500000",
        "frequencies",
        "10000",
    ),
    "olmo-pi-dropped": Plant(
        "ai2-olmo-core",
        f"{OLMO}.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", scaling=None),
        "PI factor=4",
        "scaling",
    ),
    "olmo-partial-dropped": Plant(
        "ai2-olmo-core",
        f"{OLMO}.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", partial_rotary_factor=1.0),
        "partial_rotary_factor=0.5",
        "rotary_dim",
    ),
    # Megatron-core
    "megatron-base": Plant(
        "megatron-core",
        f"{MEGATRON}.rotary_pos_embedding.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", rotary_base=500000),
        "rotary_base=10000",
        "frequencies",
        "500000",
    ),
    "megatron-layout-flipped": Plant(
        "megatron-core",
        f"{MEGATRON}.rope_utils",
        "_apply_rotary_pos_emb_bshd",
        _args(_flipped_layout),
        "rotary_base=10000",
        "table_layout",
    ),
    "megatron-interleaved": Plant(
        "megatron-core",
        f"{MEGATRON}.rotary_pos_embedding.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", rotary_interleaved=True),
        "rotary_base=10000",
        "layout",
    ),
    "megatron-yarn-context": Plant(
        "megatron-core",
        f"{MEGATRON}.yarn_rotary_pos_embedding.YarnRotaryEmbedding",
        "__init__",
        _init("YarnRotaryEmbedding", original_max_position_embeddings=2048),
        "YaRN scaling_factor=4",
        "scaling",
        "2048",
    ),
    # Gemma
    "gemma-base": Plant(
        "gemma",
        GEMMA,
        "apply_rope",
        _kwargs(base_frequency=500000),
        "base_frequency=10000",
        "frequencies",
        "500000",
    ),
    "gemma-positions-plus-one": Plant(
        "gemma",
        GEMMA,
        "apply_rope",
        _args(_gemma_shift),
        "base_frequency=10000",
        "offset",
    ),
    "gemma-scale-factor-dropped": Plant(
        "gemma",
        GEMMA,
        "apply_rope",
        _kwargs(scale_factor=1.0),
        "base_frequency=1000000, scale_factor=8",
        "scaling",
    ),
    # timm
    "timm-temperature": Plant(
        "timm",
        f"{TIMM}.RotaryEmbedding",
        "__init__",
        _init("RotaryEmbedding", temperature=100.0),
        "in_pixels=False (EVA-02)",
        "frequencies",
        "100",
    ),
    "timm-embed-bfloat16": Plant(
        "timm",
        f"{TIMM}.RotaryEmbedding",
        "get_embed",
        _result(lambda embed: tuple(t.bfloat16().float() for t in embed)),
        "in_pixels=False (EVA-02)",
        "precision",
        "bfloat16",
    ),
    "timm-rot-negated": Plant(
        "timm",
        TIMM,
        "rot",
        _result(lambda t: -t),
        "in_pixels=False (EVA-02)",
        "direction",
    ),
}


def _target(dotted: str) -> Any:
    """The module or class named `dotted` (a class is ``module.Class``)."""
    if dotted in sys.modules:
        return sys.modules[dotted]
    module, _, name = dotted.rpartition(".")
    return getattr(sys.modules[module], name)


def _entry(plant: Plant) -> Any:
    group = require(plant.package)
    found = [
        e for e in group.entries() if e.settings.startswith(plant.settings) and plant.peer in e.peer
    ]
    assert found, f"no {plant.package} entry with settings {plant.settings!r}"
    return found[0]


def _results(entry: Any) -> list[tuple[Any, np.ndarray, np.ndarray]]:
    """The result, input and positions at each of the survey's position sets of `entry`."""
    out = []
    for i, p in enumerate(position_sets(entry, MAX_POSITION)):
        x = _inputs(entry, p, i)
        out.append((entry.run(x.copy(), p.copy()), x, p))
    return out


def _check_entry(plant: Plant) -> Any:
    require(plant.package)
    return _entry(plant)


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_a_bug_planted_in_the_library_is_named(name, monkeypatch):
    plant = PLANTS[name]
    _entry(plant)  # the driver imports the library its own way (stand-ins, no package init)
    target = _target(plant.module)
    original = getattr(target, plant.attribute)
    monkeypatch.setattr(target, plant.attribute, plant.wrap(original))
    entry = _entry(plant)
    failing = []
    for y, x, p in _results(entry):  # the same cause at every position set that fails
        found = diagnose(y, x, entry.spec, p)
        if found is not None:
            assert found.cause == plant.cause, f"{name} at {p[:4]}: {found}"
            assert plant.snippet in found.message, f"{name} at {p[:4]}: {found}"
            failing.append((y, x, p))
    assert failing, f"{name}: the planted bug passed"
    y, x, p = failing[0]
    with pytest.raises(AssertionError) as raised:
        assert_rope_close(y, x, entry.spec, positions=p)
    assert f"Likely cause: {plant.cause}:" in str(raised.value), f"{name}: {raised.value}"


#: The entries the bugs are planted in, once each: (package, settings).
ENTRIES = sorted({(p.package, p.settings) for p in PLANTS.values()})


@pytest.mark.parametrize(("package", "settings"), ENTRIES)
def test_the_same_entry_without_the_bug_passes(package, settings):
    plant = next(p for p in PLANTS.values() if (p.package, p.settings) == (package, settings))
    entry = _check_entry(plant)
    for i, p in enumerate(position_sets(entry, MAX_POSITION)):
        x = _inputs(entry, p, i)
        y = entry.run(x.copy(), p.copy())
        assert diagnose(y, x, entry.spec, p) is None, f"{settings}: false alarm at {p[:4]}"
