"""Per-layer reading of HF configs: layer types, their parameters, their own overrides.

A config may hold one RoPE per layer type (``rope_parameters`` keyed by layer type, as
``layer_types`` or a config class's labels declare), or overrides per layer index
(``per_layer_config``); a family's legacy keys may imply both (`Family.layer_labels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rope_ref._config.families import Family
from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_values import keys_of, or_default

__all__ = [
    "MAX_LAYERS",
    "layer_config",
    "layer_count",
    "layer_parameters",
    "layer_types",
    "legacy_layer_parameters",
    "per_layer_value",
    "top_rope_parameters",
]

#: Most layers a config may give: one spec (or layer type) per layer is built, and models
#: have at most a few hundred.
MAX_LAYERS = 2**20


def layer_count(cfg: ConfigReader) -> int | None:
    """``num_hidden_layers``, at most `MAX_LAYERS`, or None."""
    count = cfg.integer("num_hidden_layers")
    if count is not None and count > MAX_LAYERS:
        requirement = f"at most 2**20 = {MAX_LAYERS} (one spec is built per layer)"
        cfg.fail("num_hidden_layers", requirement, count, ValueError)
    return count


def top_rope_parameters(cfg: ConfigReader) -> ConfigReader:
    """HF's priority: a legacy ``rope_scaling`` dict wins over ``rope_parameters``."""
    for key in ("rope_scaling", "rope_parameters"):
        params = cfg.section(key)
        if params is not None and keys_of(params):
            return params
    return ConfigReader({}, f"{cfg.where}.rope_parameters")


def legacy_layer_parameters(top: ConfigReader, cfg: ConfigReader, family: Family) -> ConfigReader:
    """A raw config's one set of parameters, split as its family's `Family.layer_labels` say.

    Gemma 3 (``Gemma3TextConfig``) gives ``full_attention`` the parameters (scaling
    included) and ``sliding_attention`` plain RoPE at ``rope_local_base_freq`` (default
    10000).
    """
    key = family.local_base_key
    labels = layer_types(cfg, family)
    if (
        key is None
        or family.layer_labels is None
        or labels is None
        or any(label in keys_of(top) for label in labels)
    ):
        return top
    full = dict(top.config) if isinstance(top.config, Mapping) else dict(vars(top.config))
    if "rope_theta" not in full and cfg.has("rope_theta"):
        full["rope_theta"] = cfg.raw("rope_theta")
    local = {"rope_type": "default", "rope_theta": or_default(cfg.raw(key), 10000.0)}
    full_label, local_label = family.layer_labels
    return ConfigReader({full_label: full, local_label: local}, top.where)


def layer_types(cfg: ConfigReader, family: Family) -> tuple[str, ...] | None:
    """``layer_types``, or the default of a family's `Family.layer_pattern` where none is given.

    HF (``Gemma3TextConfig``) makes every ``sliding_window_pattern``-th layer (default 6)
    full attention and the others sliding.
    """
    types = cfg.strings("layer_types")
    count = layer_count(cfg)
    labels, pattern = family.layer_labels, family.layer_pattern
    if types is not None or labels is None or pattern is None or count is None:
        return types
    every = cfg.integer(pattern[0]) or pattern[1]
    return tuple(labels[1] if (i + 1) % every else labels[0] for i in range(count))


def layer_parameters(
    top: ConfigReader, cfg: ConfigReader, family: Family, layer_type: str | None
) -> ConfigReader:
    """The parameters of `layer_type` when they are nested by layer type, else `top`.

    As HF, only keys that the config declares as layer types (``layer_types``, or a config
    class's ``_rope_type_labels``) count as nested.
    """
    labels = cfg.strings("_rope_type_labels") or family.rope_type_labels or layer_types(cfg, family)
    labels = labels or ()
    nested = sorted(k for k in keys_of(top) if k in labels)
    if not nested:
        if layer_type is not None:
            msg = f"`layer_type` must be None for a config with one RoPE; got {layer_type!r}."
            raise ValueError(msg)
        return top
    if layer_type not in nested:
        msg = f"`layer_type` must be one of {', '.join(map(repr, nested))}; got {layer_type!r}."
        raise ValueError(msg)
    params = top.section(layer_type)
    if params is None:
        top.fail(layer_type, "the parameters of that layer type", None, ValueError)
    return params


def layer_config(cfg: ConfigReader, layer_type: str | None, family: Family) -> ConfigReader | None:
    """A config's own view of the layers of `layer_type` (per-layer head sizes)."""
    views = None if layer_type is None else per_layer_value(cfg, "per_layer_config", raw=True)
    if isinstance(views, Mapping) and layer_type is not None:
        return _layer_overrides(cfg, views, layer_type, family)
    if views is None or isinstance(views, list | tuple):
        return None
    try:
        return ConfigReader(views[layer_type], f"{cfg.where}.per_layer_config[{layer_type!r}]")
    except Exception:
        return None


def _layer_overrides(
    cfg: ConfigReader, overrides: Mapping[Any, Any], layer_type: str, family: Family
) -> ConfigReader | None:
    """The overrides the layers of `layer_type` share, from config.json's ``per_layer_config``.

    HF writes it as overrides keyed by layer index; a head size that differs among the
    layers of one type is refused.
    """
    types = cfg.strings("layer_types")
    if types is None:
        return None
    try:
        by_index = {int(index): dict(values) for index, values in overrides.items()}
    except (TypeError, ValueError):
        requirement = "a mapping from layer index to a mapping of overrides"
        cfg.fail("per_layer_config", requirement, overrides, ValueError)
    layers = [by_index.get(i, {}) for i, kind in enumerate(types) if kind == layer_type]
    keys = {key for layer in layers for key in layer}
    shared = {k: layers[0][k] for k in keys if all(k in x and x[k] == layers[0][k] for x in layers)}
    for key in (*family.head_dim_keys, "head_dim"):
        if key in keys and key not in shared:
            values = [layer.get(key) for layer in layers]
            requirement = f"one {key} for every layer of type {layer_type!r}"
            cfg.fail("per_layer_config", requirement, values, ValueError)
    return ConfigReader(shared, f"{cfg.where}.per_layer_config[{layer_type!r}]")


def per_layer_value(cfg: ConfigReader, key: str, *, raw: bool = False) -> Any:
    """``cfg.integer(key)`` (`raw`: the value as stored), or ValueError where refused.

    A config object refuses a per-layer attribute that differs between layers with
    transformers' AmbiguousGlobalPerLayerAttributeError (HF's rotary modules then fail too).
    """
    try:
        return cfg.raw(key) if raw else cfg.integer(key)
    except (TypeError, ValueError):
        raise
    except Exception as error:
        msg = f"`{key}` must be one value for the model; {cfg.where} refuses it: {error}"
        raise ValueError(msg) from error
