"""One `RopeSpec` per layer of a HF config (``RopeSpec.from_hf_layers``, ``from_hf(layer=)``)."""

from __future__ import annotations

from collections.abc import Sequence

from rope_ref._config.families import Family
from rope_ref._config.hf_layers import (
    layer_count,
    layer_types,
    legacy_layer_parameters,
    top_rope_parameters,
)
from rope_ref._config.hf_read import family_of_config, loaded_config, model_config, spec_from_hf
from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_values import keys_of
from rope_ref._core.aliases import SectionOrder
from rope_ref._core.spec import RopeSpec
from rope_ref._core.validation import check_bool, check_int

__all__ = ["spec_of_layer", "specs_per_layer"]


def spec_of_layer(
    config: object,
    layer: object,
    *,
    section_order: SectionOrder | Sequence[int] | None = None,
    strict: bool = False,
) -> RopeSpec:
    """See `RopeSpec.from_hf` with `layer`: entry `layer` of `specs_per_layer`, or why not."""
    index = check_int("layer", layer, minimum=0)
    specs = specs_per_layer(config, section_order=section_order, strict=strict)
    if index >= len(specs):
        msg = f"`layer` must be below the config's {len(specs)} layers; got {index}."
        raise ValueError(msg)
    spec = specs[index]
    if spec is None:
        msg = (
            f"`layer` {index} of this config applies no RoPE (its family's per-layer flags "
            f"or its layer type say so; RopeSpec.from_hf_layers lists every layer); "
            f"got layer={index}."
        )
        raise ValueError(msg)
    return spec


def specs_per_layer(
    config: object,
    *,
    section_order: SectionOrder | Sequence[int] | None = None,
    strict: bool = False,
) -> tuple[RopeSpec | None, ...]:
    """See `RopeSpec.from_hf_layers`."""
    strict = check_bool("strict", strict)
    config = loaded_config(config)
    outer = ConfigReader(config)
    cfg = model_config(outer)
    _, family = family_of_config(outer, cfg)
    types = layer_types(cfg, family)
    count = layer_count(cfg)
    if count is None and types is None:
        msg = f"`config` must give num_hidden_layers or layer_types ({cfg.where})."
        raise ValueError(msg)
    n = len(types) if types is not None else int(count or 0)
    uses_rope = _rope_layers(cfg, family, n)
    top = legacy_layer_parameters(top_rope_parameters(cfg), cfg, family)
    keyed = set(keys_of(top)) & set(types or ())
    specs: dict[str | None, RopeSpec] = {}
    result: list[RopeSpec | None] = []
    for i in range(n):
        kind = types[i] if types is not None and types[i] in keyed else None
        if not uses_rope[i] or (keyed and kind is None):
            result.append(None)  # no RoPE here (or a layer type without RoPE parameters)
            continue
        if kind not in specs:
            specs[kind] = spec_from_hf(
                config, layer_type=kind, section_order=section_order, strict=strict
            )
        result.append(specs[kind])
    return tuple(result)


def _rope_layers(cfg: ConfigReader, family: Family, n: int) -> list[bool]:
    """Whether each of the `n` layers applies RoPE (the family's per-layer flags)."""
    key = family.rope_layers_key
    if key is None:
        return [True] * n
    flags = cfg.raw(key)
    if flags is None:
        interval = cfg.integer(family.rope_layers_interval_key or "", minimum=1) or 4
        return [(i + 1) % interval != 0 for i in range(n)]  # HF's default: every n-th has none
    if isinstance(flags, str | bytes) or not isinstance(flags, list | tuple) or len(flags) != n:
        cfg.fail(key, f"a list of {n} flags (1: the layer applies RoPE, 0: it does not)", flags,
                 ValueError)  # fmt: skip
    if not all(isinstance(f, bool | int) and f in (0, 1) for f in flags):
        cfg.fail(key, f"a list of {n} flags (1: the layer applies RoPE, 0: it does not)", flags,
                 ValueError)  # fmt: skip
    return [bool(f) for f in flags]
