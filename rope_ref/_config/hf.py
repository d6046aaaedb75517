"""Hugging Face transformers configs <-> `RopeSpec` (``RopeSpec.from_hf`` / ``to_hf``).

Mirrors ``transformers.modeling_rope_utils`` (5.x): the standardization of
``rope_parameters`` (legacy ``rope_theta`` + ``rope_scaling``, the priority of a top-level
``original_max_position_embeddings``) and the defaults of each ``ROPE_INIT_FUNCTIONS`` entry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from rope_ref._config.families import DEFAULT, FAMILIES, Family
from rope_ref._config.hf_file import read_config
from rope_ref._config.hf_keys import check_known_keys
from rope_ref._config.hf_precedence import base_of, fraction_of
from rope_ref._config.hf_reader import ConfigReader
from rope_ref._core.aliases import Layout, SectionOrder
from rope_ref._core.spec import RopeSpec, ScalingRule
from rope_ref._core.validation import check_bool, check_int
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, Proportional, YaRN

__all__ = ["spec_from_hf", "spec_to_hf"]

#: HF rope types that take `original_max_position_embeddings` (HF's standardize step).
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")
#: Legacy type names and what HF maps them to.
_ALIASES = {"su": "longrope", "mrope": "default"}
T = TypeVar("T")

_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "axial")


def spec_from_hf(
    config: object,
    *,
    layer_type: str | None = None,
    section_order: SectionOrder | None = None,
    strict: bool = False,
) -> RopeSpec:
    """See `RopeSpec.from_hf`."""
    strict = check_bool("strict", strict)
    outer = ConfigReader(_loaded(config))
    cfg = outer
    text = outer.section("text_config")
    if text is not None and not (outer.has("head_dim") or outer.has("hidden_size")):
        cfg = text
    model_type, family = _family(outer, cfg)
    _refuse_without_rope(family, cfg)
    check_known_keys(cfg, strict=strict)
    if family.local_base_key is not None:  # checked whatever the layer types say
        cfg.real(family.local_base_key, above=1.0)
    top = _top_rope_parameters(cfg)
    top = _legacy_layer_parameters(top, cfg, family)
    params = _layer_parameters(top, cfg, family, layer_type)
    rope_type = _rope_type(params, cfg)
    base = base_of(params, cfg, family, layer_type, strict=strict)
    layer = _layer_config(cfg, layer_type, family)
    head_dim, head_key, head_origin = _head_dim(layer, cfg, family, rope_type)
    if rope_type == "axial":
        return _axial_spec(head_dim, base)
    fraction, source = fraction_of(
        params, cfg, family, zero_allowed=rope_type == "proportional", strict=strict
    )
    if head_key == "qk_rope_head_dim" and source is not None:
        whole = _per_layer_safe(cfg, "head_dim")
        if whole is not None and int(whole * fraction) == head_dim:
            fraction, source = 1.0, None  # the factor is qk_rope_head_dim's share of head_dim
    scaling = _rule(rope_type, params, top, cfg, fraction)
    sections = params.integers("mrope_section")
    # Every value has been read and checked on its own; now the combinations.
    rotary_dim = head_dim if rope_type == "proportional" else int(head_dim * fraction)
    fixed = None if family.rotary_dim_key is None else cfg.integer(family.rotary_dim_key)
    if fixed is not None:
        if fixed > head_dim or fixed % 2:
            requirement = f"an even number of rotated features of at most head_dim ({head_dim})"
            cfg.fail(family.rotary_dim_key or "", requirement, fixed, ValueError)
        rotary_dim = fixed
    freqs = None
    if family.odd_rotary_dim and rotary_dim % 2 and source is not None:
        freqs = _odd_dim_freqs(rotary_dim, base, scaling, head_dim, params)
        rotary_dim += 1
    if rotary_dim % 2 or rotary_dim < 2:
        if source is None or rope_type == "proportional":  # the whole head rotates
            name = "head_dim" if head_key == "hidden_size" else head_key
            msg = (
                f"`{name}` must be even (RoPE rotates pairs of features) and at least 2; "
                f"got {name}={head_dim} ({head_origin})."
            )
        else:
            msg = (
                "`partial_rotary_factor` must give an even rotary dimension of at least 2 from "
                f"`head_dim` (HF's int(head_dim * partial_rotary_factor)); got "
                f"int({head_dim} * {fraction!r}) = {rotary_dim} ({source.where})."
            )
        raise ValueError(msg)
    if section_order is None:
        section_order = "interleaved" if params.flag("mrope_interleaved") else family.section_order
    given = sections is not None
    if sections is None:
        sections = family.sections
    n_pairs = rotary_dim // 2
    if sections is not None and section_order == "interleaved" and sum(sections) < n_pairs:
        # HF's interleaved M-RoPE (Qwen3-VL) gives axes 1.. their pairs and every other
        # pair to axis 0: its section is what is left.
        sections = (n_pairs - sum(sections[1:]), *sections[1:])
    requirement = f"pair counts summing to rotary_dim // 2 = {n_pairs}"
    if sections is not None and sum(sections) != n_pairs:
        if given:
            params.fail("mrope_section", requirement, list(sections), ValueError)
        msg = (
            f"`mrope_section` must be {requirement}; the config gives none, so model_type "
            f"{model_type!r} implies HF's default {list(sections)} (sum {sum(sections)}, "
            f"{family.source}); give mrope_section in {params.where}."
        )
        raise ValueError(msg)
    layout, output_layout = _layouts(cfg, family)
    return RopeSpec(
        head_dim,
        rotary_dim=rotary_dim,
        rotary_start=head_dim - rotary_dim if family.rotary_at_end else 0,
        base=10000.0 if freqs is not None else base,
        layout=layout,
        output_layout=output_layout,
        scaling=scaling,
        freqs=freqs,
        sections=sections,
        section_order=section_order,
    )


def _loaded(config: object) -> object:
    """`config`, or the config.json a path (str or os.PathLike) names: a file or a directory."""
    if isinstance(config, str | os.PathLike):
        return read_config(config)
    return config


def _odd_dim_freqs(
    dim: int, base: float, scaling: object, head_dim: int, params: ConfigReader
) -> tuple[float, ...]:
    """HF's ``1 / base ** (arange(0, dim, 2) / dim)`` for an odd `dim`, in float64."""
    if scaling is not None or dim + 1 > head_dim:
        requirement = (
            f"an even rotary dimension, or an odd one below head_dim ({head_dim}) with no "
            "scaling rule"
        )
        params.fail("partial_rotary_factor", requirement, dim, ValueError)
    return tuple(1.0 / base ** (2 * j / dim) for j in range((dim + 1) // 2))


def _family(outer: ConfigReader, cfg: ConfigReader) -> tuple[str | None, Family]:
    """The config's model type (the text config's, then the outer one's) and its `Family`."""
    for reader in (cfg, outer):
        model_type = reader.string("model_type")
        if model_type is None:
            continue
        for name in (model_type, model_type.removesuffix("_text")):
            if name in FAMILIES:
                return model_type, FAMILIES[name]
    return cfg.string("model_type") or outer.string("model_type"), DEFAULT


def _refuse_without_rope(family: Family, cfg: ConfigReader) -> None:
    """ValueError for a config that describes no RoPE, or one a RopeSpec cannot state."""
    reason = family.refused
    if family.no_rope is not None and (
        family.no_rope_flag is None or cfg.flag(family.no_rope_flag)
    ):
        reason = f"`config` describes no RoPE: {family.no_rope}"
    attention = cfg.section("attn_config")
    if reason is None and (
        cfg.flag("alibi") or (attention is not None and attention.flag("alibi"))
    ):
        reason = "`config` describes no RoPE: it sets alibi=true (ALiBi attention biases)"
    if reason is not None:
        msg = f"{reason} ({family.source})."
        raise ValueError(msg)


def _layouts(cfg: ConfigReader, family: Family) -> tuple[Layout, Layout | None]:
    """(layout read, layout written or None) of the family, or of its interleave flag."""
    if family.interleave_flag is not None and _or(
        cfg.flag(family.interleave_flag), family.interleave_default
    ):
        return "interleaved", "half"
    return family.layout, family.output_layout


def _legacy_layer_parameters(top: ConfigReader, cfg: ConfigReader, family: Family) -> ConfigReader:
    """Gemma 3's raw configs: one set of parameters plus the sliding layers' own base.

    HF (``Gemma3TextConfig``) gives ``full_attention`` the parameters (scaling included)
    and ``sliding_attention`` plain RoPE at ``rope_local_base_freq`` (default 10000).
    """
    key = family.local_base_key
    labels = _layer_types(cfg, family)
    if key is None or labels is None or any(label in _keys(top) for label in labels):
        return top
    full = dict(top.config) if isinstance(top.config, Mapping) else dict(vars(top.config))
    if "rope_theta" not in full and cfg.has("rope_theta"):
        full["rope_theta"] = cfg.raw("rope_theta")
    local = {"rope_type": "default", "rope_theta": _or(cfg.raw(key), 10000.0)}
    return ConfigReader({"full_attention": full, "sliding_attention": local}, top.where)


def _top_rope_parameters(cfg: ConfigReader) -> ConfigReader:
    """HF's priority: a legacy ``rope_scaling`` dict wins over ``rope_parameters``."""
    for key in ("rope_scaling", "rope_parameters"):
        params = cfg.section(key)
        if params is not None and _keys(params):
            return params
    return ConfigReader({}, f"{cfg.where}.rope_parameters")


def _keys(params: ConfigReader) -> list[str]:
    config = params.config
    return list(config) if isinstance(config, Mapping) else list(vars(config))


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


def _layer_types(cfg: ConfigReader, family: Family) -> tuple[str, ...] | None:
    """``layer_types``, or HF's default where a Gemma 3 config gives none.

    HF (``Gemma3TextConfig``) makes every ``sliding_window_pattern``-th layer (default 6)
    full attention and the others sliding.
    """
    types = cfg.strings("layer_types")
    count = layer_count(cfg)
    if types is not None or family.local_base_key is None or count is None:
        return types
    pattern = cfg.integer("sliding_window_pattern") or 6
    return tuple(
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(count)
    )


def _layer_parameters(
    top: ConfigReader, cfg: ConfigReader, family: Family, layer_type: str | None
) -> ConfigReader:
    """The parameters of `layer_type` when they are nested by layer type, else `top`.

    As HF, only keys that the config declares as layer types (``layer_types``, or a config
    class's ``_rope_type_labels``) count as nested.
    """
    labels = (
        cfg.strings("_rope_type_labels") or family.rope_type_labels or _layer_types(cfg, family)
    )
    labels = labels or ()
    nested = sorted(k for k in _keys(top) if k in labels)
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


def _rope_type(params: ConfigReader, cfg: ConfigReader) -> str:
    key = "rope_type" if params.has("rope_type") else "type"
    written = "rope_type" if "rope_type" in _keys(params) else "type"
    if written in _keys(params) and params.raw(written) is None:
        # HF keeps an explicit null as the type and its rotary modules fail on it
        # (ROPE_INIT_FUNCTIONS[None]: KeyError), whatever else the parameters say.
        requirement = (
            f"one of {', '.join(map(repr, _TYPES))}, or left out for 'default' (HF's rotary "
            "modules raise KeyError for a null type)"
        )
        params.fail(written, requirement, None, ValueError)
    given = params.string(key)
    rope_type = "default" if given is None else given  # "" is a value (an unknown type)
    rope_type = _ALIASES.get(rope_type, rope_type)
    if rope_type == "yarn" and cfg.string("model_type") == "phi3":
        rope_type = "longrope"  # Phi-3 configs once called LongRoPE "yarn"
    if rope_type not in _TYPES:
        msg = (
            f"`{key}` must be one of {', '.join(map(repr, _TYPES))}; got unknown rope_type "
            f"{rope_type!r} ({params.where})."
        )
        raise ValueError(msg)
    return rope_type


def _first(values: list[Any], default: Any) -> Any:
    """The first value that is not None (every one was checked), else `default`."""
    return next((v for v in values if v is not None), default)


def _axial_spec(head_dim: int, base: float) -> RopeSpec:
    """HF ``"axial"`` (Qwen-VL vision towers): rows and columns each take a quarter-head RoPE."""
    from rope_ref._core.multiaxis import axial_freqs

    if head_dim % 4:
        msg = f"`head_dim` must be a multiple of 4 for axial RoPE; got {head_dim}."
        raise ValueError(msg)
    sections = (head_dim // 4, head_dim // 4)
    return RopeSpec(head_dim, freqs=axial_freqs(sections, base=base), sections=sections)


def _layer_config(cfg: ConfigReader, layer_type: str | None, family: Family) -> ConfigReader | None:
    """A config's own view of the layers of `layer_type` (per-layer head sizes)."""
    views = None if layer_type is None else _per_layer_safe(cfg, "per_layer_config", raw=True)
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


def _head_dim(
    layer: ConfigReader | None, cfg: ConfigReader, family: Family, rope_type: str
) -> tuple[int, str, str]:
    """The head size RoPE sees, the key it was read from, and where (for error messages)."""
    for reader in [r for r in (layer, cfg) if r is not None]:
        for key in (*family.head_dim_keys, "head_dim"):
            head_dim = _per_layer_safe(reader, key)
            if head_dim is not None:
                return head_dim, key, reader.where
    head_dim, origin = _head_dim_from_sizes(cfg, family, vision=rope_type == "axial")
    return head_dim, "hidden_size", origin


def _head_dim_from_sizes(cfg: ConfigReader, family: Family, *, vision: bool) -> tuple[int, str]:
    """``hidden // heads``, each read as HF's ``attribute_map`` reads it, and where from.

    A family's own name (``n_embd``, ``n_head``) is an alias of the common one, which wins
    when both are given.
    """
    hidden_key = "embed_dim" if vision and cfg.has("embed_dim") else "hidden_size"
    hidden_key, hidden = _first_given(cfg, [hidden_key, *(h for h, _ in family.size_keys)])
    first = [] if family.heads_key is None else [family.heads_key]
    heads_key, heads = _first_given(
        cfg, [*first, "num_attention_heads", *(n for _, n in family.size_keys)]
    )
    if hidden is None or heads is None:
        msg = (
            "`config` must give head_dim, or hidden_size and num_attention_heads; "
            f"got head_dim=None, {hidden_key}={hidden!r}, num_attention_heads={heads!r} "
            f"({cfg.where})."
        )
        raise ValueError(msg)
    if hidden % heads and not family.floor_division:
        requirement = f"a multiple of num_attention_heads ({heads}) when head_dim is absent"
        cfg.fail(hidden_key, requirement, hidden, ValueError)
    return hidden // heads, f"{hidden_key}={hidden} // {heads_key}={heads} in {cfg.where}"


def _first_given(cfg: ConfigReader, keys: list[str]) -> tuple[str, int | None]:
    """The first of `keys` that `cfg` gives, and its integer value (the first key if none)."""
    for key in keys:
        value = cfg.integer(key)
        if value is not None:
            return key, value
    return keys[0], None


def _per_layer_safe(cfg: ConfigReader, key: str, *, raw: bool = False) -> Any:
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


def _original_max_position(params: ConfigReader, cfg: ConfigReader) -> int:
    """HF: a top-level value wins, then the rope parameters, then max_position_embeddings."""
    value = _first(
        [
            cfg.integer("original_max_position_embeddings"),
            params.integer("original_max_position_embeddings"),
            cfg.integer("max_position_embeddings"),
        ],
        None,
    )
    if value is None:
        msg = (
            "`config` must give original_max_position_embeddings or max_position_embeddings "
            f"({cfg.where})."
        )
        raise ValueError(msg)
    return int(value)


def _given(params: ConfigReader, key: str, value: T | None, rope_type: str) -> T:
    """`value`, or ValueError naming `key` when it is absent (None)."""
    if value is None:
        params.fail(key, f"given for rope_type {rope_type!r}", None, ValueError)
    return value


def _rule(
    rope_type: str,
    params: ConfigReader,
    top: ConfigReader,
    cfg: ConfigReader,
    fraction: float,
) -> ScalingRule | None:
    """The scaling rule; every value is read (and checked) before any is found missing."""
    if rope_type == "default":
        return None
    factor = params.real("factor", above=0.0)
    max_position = cfg.integer("max_position_embeddings")
    if rope_type == "linear":
        return Linear(_given(params, "factor", factor, rope_type))
    if rope_type == "dynamic":
        if max_position is None:
            cfg.fail("max_position_embeddings", "given for rope_type 'dynamic'", None, ValueError)
        return DynamicNTK(_given(params, "factor", factor, rope_type), max_position=max_position)
    if rope_type == "proportional":
        return Proportional(fraction, factor=_or(factor, 1.0))
    if rope_type == "llama3":
        low = _or(params.real("low_freq_factor", above=0.0), 1.0)
        high = _or(params.real("high_freq_factor", above=0.0), 4.0)
        original = _original_max_position(params, cfg)
        factor = _given(params, "factor", factor, rope_type)
        return Llama3(factor, original, low_freq_factor=low, high_freq_factor=high)
    attention_factor = params.real("attention_factor", above=0.0)
    if rope_type == "longrope":
        short, long = params.reals("short_factor"), params.reals("long_factor")
        original = _original_max_position(params, cfg)
        factor = _or(factor, None if max_position is None else max_position / original)
        return LongRoPE(
            _given(params, "short_factor", short, rope_type),
            _given(params, "long_factor", long, rope_type),
            original,
            factor=factor,
            attention_factor=attention_factor,
        )
    fields = {
        "beta_fast": _or(params.real("beta_fast", above=0.0), 32.0),
        "beta_slow": _or(params.real("beta_slow", above=0.0), 1.0),
        "mscale": params.real("mscale"),
        "mscale_all_dim": params.real("mscale_all_dim"),
        "truncate": _or(top.flag("truncate"), True),  # HF reads it from the top level
    }
    original = _original_max_position(params, cfg)
    if factor is None and max_position is not None:
        factor = max_position / original  # HF's default
    if factor is None:
        params.fail(
            "factor", "given for rope_type 'yarn' (or max_position_embeddings)", None, ValueError
        )
    return YaRN(factor, original, attention_factor=attention_factor, **fields)


def _or(value: Any, default: Any) -> Any:
    """`value`, or `default` when it is None (absent); 0 and False are values."""
    return default if value is None else value


# --- RopeSpec -> HF ---------------------------------------------------------------------


def spec_to_hf(spec: RopeSpec, *, max_position_embeddings: int | None = None) -> dict[str, Any]:
    """See `RopeSpec.to_hf`."""
    if max_position_embeddings is not None:
        max_position_embeddings = _hf_integer(
            "max_position_embeddings", max_position_embeddings, "max_position_embeddings"
        )
    _check_expressible(spec)
    params: dict[str, Any] = {"rope_type": "default", "rope_theta": spec.base}
    extra: dict[str, Any] = {}
    if spec.scaling is not None:
        params.update(_rule_parameters(spec.scaling, spec))
        if isinstance(spec.scaling, DynamicNTK):
            extra["max_position_embeddings"] = _hf_integer(
                "spec.scaling.max_position", spec.scaling.max_position, "max_position_embeddings"
            )
    if spec._rotary_dim != spec.head_dim:
        params["partial_rotary_factor"] = _fraction(spec._rotary_dim, spec.head_dim)
    if spec.sections is not None:
        params["mrope_section"] = list(spec.sections)
        if spec.section_order == "interleaved":
            params["mrope_interleaved"] = True
    if max_position_embeddings is not None:
        known = extra.get("max_position_embeddings", max_position_embeddings)
        if known != max_position_embeddings:
            msg = (
                f"`max_position_embeddings` must equal the DynamicNTK rule's max_position "
                f"({known}); got {max_position_embeddings!r}."
            )
            raise ValueError(msg)
        extra["max_position_embeddings"] = max_position_embeddings
    if spec.output_layout is not None:
        extra["rope_interleave"] = True  # DeepSeek-V3's key: interleaved read, half written
    return {"head_dim": spec.head_dim, "rope_parameters": params, **extra}


def _hf_integer(name: str, value: object, key: str) -> int:
    """`value` as the integer HF's reader accepts for `key` (1 to 2**53), or raise naming `name`.

    Integral floats (rules store integer-valued lengths as ints) are written as ints; a
    fractional length has no HF form, so it is an error rather than a config that
    `RopeSpec.from_hf` would refuse.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        msg = (
            f"`{name}` must be an integer for a HF config ({key} is an integer there); "
            f"got {value!r}."
        )
        raise ValueError(msg)
    result = check_int(name, value, minimum=1)
    if result > 2**53:
        msg = f"`{name}` must be at most 2**53 for a HF config ({key}); got {result}."
        raise ValueError(msg)
    return result


def _check_expressible(spec: RopeSpec) -> None:
    problems = []
    if spec.layout != "half" and spec.output_layout != "half":
        problems.append(
            "layout='interleaved' (HF rotates half-split pairs, or interleaved ones written "
            "in half order: output_layout='half')"
        )
    if spec.layout == "half" and spec.output_layout is not None:
        problems.append("output_layout='interleaved' (HF writes half order)")
    if spec.rotary_start != 0:
        problems.append(f"rotary_start={spec.rotary_start} (HF rotates the first features)")
    if spec.freqs is not None:
        problems.append("custom freqs")
    if spec.xpos is not None:
        problems.append("xpos")
    if spec.sections is not None and len(spec.sections) != 3:
        problems.append(f"sections={spec.sections} (HF M-RoPE has three axes)")
    if problems:
        msg = f"`spec` must be expressible as a HF config; got {', '.join(problems)}."
        raise ValueError(msg)


def _fraction(rotary_dim: int, head_dim: int) -> float:
    """A partial_rotary_factor p with ``int(head_dim * p) == rotary_dim``, as HF computes."""
    fraction = rotary_dim / head_dim
    while int(head_dim * fraction) < rotary_dim:
        fraction = float(np.nextafter(fraction, 2.0))
    return fraction


def _rule_parameters(rule: object, spec: RopeSpec) -> dict[str, Any]:
    if isinstance(rule, Linear):
        return {"rope_type": "linear", "factor": rule.factor}
    if isinstance(rule, DynamicNTK):
        return {"rope_type": "dynamic", "factor": rule.factor}
    if isinstance(rule, Llama3):
        return {
            "rope_type": "llama3",
            "factor": rule.factor,
            "original_max_position_embeddings": _original(rule),
            "low_freq_factor": rule.low_freq_factor,
            "high_freq_factor": rule.high_freq_factor,
        }
    if isinstance(rule, YaRN):
        return _yarn_parameters(rule)
    if isinstance(rule, LongRoPE):
        return _longrope_parameters(rule)
    if isinstance(rule, Proportional):
        if spec._rotary_dim != spec.head_dim:
            msg = f"`spec` must rotate the whole head with Proportional; got {spec!r}."
            raise ValueError(msg)
        return {
            "rope_type": "proportional",
            "factor": rule.factor,
            "partial_rotary_factor": rule.partial_rotary_factor,
        }
    msg = f"`spec.scaling` must be a rule with a HF rope_type; got {rule!r}."
    raise ValueError(msg)


def _original(rule: Llama3 | YaRN | LongRoPE) -> int:
    return _hf_integer(
        "spec.scaling.original_max_position",
        rule.original_max_position,
        "original_max_position_embeddings",
    )


def _yarn_parameters(rule: YaRN) -> dict[str, Any]:
    params: dict[str, Any] = {
        "rope_type": "yarn",
        "factor": rule.factor,
        "original_max_position_embeddings": _original(rule),
        "beta_fast": rule.beta_fast,
        "beta_slow": rule.beta_slow,
        "truncate": rule.truncate,
    }
    optional = {
        "mscale": rule.mscale,
        "mscale_all_dim": rule.mscale_all_dim,
        "attention_factor": rule.attention_factor_value,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return params


def _longrope_parameters(rule: LongRoPE) -> dict[str, Any]:
    params: dict[str, Any] = {
        "rope_type": "longrope",
        "short_factor": list(rule.short_factor),
        "long_factor": list(rule.long_factor),
        "original_max_position_embeddings": _original(rule),
    }
    if rule.factor is not None:
        params["factor"] = rule.factor
    if rule.attention_factor_value is not None or rule.factor is None:
        # Without a factor HF would derive one from max_position_embeddings: pin the value.
        params["attention_factor"] = rule.attention_factor(seq_len=None)
    return params


# --- one spec per layer -------------------------------------------------------------------


def spec_of_layer(
    config: object,
    layer: object,
    *,
    section_order: SectionOrder | None = None,
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
    config: object, *, section_order: SectionOrder | None = None, strict: bool = False
) -> tuple[RopeSpec | None, ...]:
    """See `RopeSpec.from_hf_layers`."""
    strict = check_bool("strict", strict)
    config = _loaded(config)
    outer = ConfigReader(config)
    cfg = outer
    text = outer.section("text_config")
    if text is not None and not (outer.has("head_dim") or outer.has("hidden_size")):
        cfg = text
    _, family = _family(outer, cfg)
    types = _layer_types(cfg, family)
    count = layer_count(cfg)
    if count is None and types is None:
        msg = f"`config` must give num_hidden_layers or layer_types ({cfg.where})."
        raise ValueError(msg)
    n = len(types) if types is not None else int(count or 0)
    uses_rope = _rope_layers(cfg, family, n)
    top = _legacy_layer_parameters(_top_rope_parameters(cfg), cfg, family)
    keyed = set(_keys(top)) & set(types or ())
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
