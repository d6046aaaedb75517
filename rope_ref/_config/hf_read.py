"""Hugging Face transformers config -> `RopeSpec` (``RopeSpec.from_hf``).

Mirrors ``transformers.modeling_rope_utils`` (5.x): the standardization of
``rope_parameters`` (legacy ``rope_theta`` + ``rope_scaling``, the priority of a top-level
``original_max_position_embeddings``) and the defaults of each ``ROPE_INIT_FUNCTIONS`` entry,
whose readers are the rows of `rope_ref._config.hf_rules.HF_RULES`. What differs by model
family is data: `rope_ref._config.families`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rope_ref._config.families import DEFAULT, FAMILIES, Family
from rope_ref._config.hf_file import read_config
from rope_ref._config.hf_head import head_dim_of
from rope_ref._config.hf_keys import check_known_keys
from rope_ref._config.hf_layers import (
    layer_config,
    layer_parameters,
    legacy_layer_parameters,
    per_layer_value,
    top_rope_parameters,
)
from rope_ref._config.hf_mrope import pair_map, refuse_fope
from rope_ref._config.hf_precedence import base_of, fraction_of
from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_rules import HF_RULES, RuleInputs, row_of_type
from rope_ref._config.hf_values import keys_of, or_default
from rope_ref._core.aliases import Layout, SectionOrder
from rope_ref._core.spec import RopeSpec, ScalingRule
from rope_ref._core.validation import check_bool

__all__ = ["family_of_config", "loaded_config", "model_config", "spec_from_hf"]


def spec_from_hf(
    config: object,
    *,
    layer_type: str | None = None,
    section_order: SectionOrder | Sequence[int] | None = None,
    strict: bool = False,
) -> RopeSpec:
    """See `RopeSpec.from_hf`."""
    strict = check_bool("strict", strict)
    outer = ConfigReader(loaded_config(config))
    cfg = model_config(outer)
    model_type, family = family_of_config(outer, cfg)
    _refuse_without_rope(family, cfg)
    check_known_keys(cfg, strict=strict)
    if family.local_base_key is not None:  # checked whatever the layer types say
        cfg.real(family.local_base_key, above=1.0)
    top = top_rope_parameters(cfg)
    top = legacy_layer_parameters(top, cfg, family)
    params = layer_parameters(top, cfg, family, layer_type)
    refuse_fope(params, cfg)
    rope_type = _rope_type(params, family)
    base = base_of(params, cfg, family, layer_type, strict=strict)
    layer = layer_config(cfg, layer_type, family)
    head_dim, head_key, head_origin = head_dim_of(layer, cfg, family, rope_type)
    if rope_type == "axial":
        return _axial_spec(head_dim, base)
    fraction, source = fraction_of(
        params, cfg, family, zero_allowed=rope_type == "proportional", strict=strict
    )
    if head_key == "qk_rope_head_dim" and source is not None:
        whole = per_layer_value(cfg, "head_dim")
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
    n_pairs = rotary_dim // 2
    if section_order is None:
        section_order = pair_map(rope_type, family, params, n_pairs)
    if section_order is None:
        section_order = "interleaved" if params.flag("mrope_interleaved") else family.section_order
    if isinstance(section_order, str):
        sections = _sections(sections, section_order, n_pairs, params, family, model_type)
    else:  # a pair-to-axis map counts each axis's pairs itself
        sections = None
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


def _sections(
    sections: tuple[int, ...] | None,
    section_order: str,
    n_pairs: int,
    params: ConfigReader,
    family: Family,
    model_type: str | None,
) -> tuple[int, ...] | None:
    """The config's ``mrope_section`` (else the family's default), checked against n_pairs."""
    given = sections is not None
    if sections is None:
        sections = family.sections
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
    return sections


def loaded_config(config: object) -> object:
    """`config`, or the config.json a path (str or os.PathLike) names: a file or a directory."""
    if isinstance(config, str | os.PathLike):
        return read_config(config)
    return config


def model_config(outer: ConfigReader) -> ConfigReader:
    """The config that holds the model's sizes: `outer`, or its ``text_config`` section."""
    text = outer.section("text_config")
    if text is not None and not (outer.has("head_dim") or outer.has("hidden_size")):
        return text
    return outer


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


def family_of_config(outer: ConfigReader, cfg: ConfigReader) -> tuple[str | None, Family]:
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
    flags = [_flag_holder(cfg, path) for path in family.alibi_flags]  # sections always read
    if reason is None and any(r is not None and r[0].flag(r[1]) for r in flags):
        reason = "`config` describes no RoPE: it sets alibi=true (ALiBi attention biases)"
    if reason is not None:
        msg = f"{reason} ({family.source})."
        raise ValueError(msg)


def _flag_holder(cfg: ConfigReader, path: str) -> tuple[ConfigReader, str] | None:
    """The reader holding the flag at `path` (``key`` or ``section.key``), and its key."""
    *sections, key = path.split(".")
    reader: ConfigReader | None = cfg
    for name in sections:
        reader = None if reader is None else reader.section(name)
    return None if reader is None else (reader, key)


def _layouts(cfg: ConfigReader, family: Family) -> tuple[Layout, Layout | None]:
    """(layout read, layout written or None) of the family, or of its interleave flag."""
    if family.interleave_flag is not None and or_default(
        cfg.flag(family.interleave_flag), family.interleave_default
    ):
        return "interleaved", "half"
    return family.layout, family.output_layout


def _rope_type(params: ConfigReader, family: Family) -> str:
    """The HF rope type of `params`: a legacy alias and the family's renames resolved."""
    key = "rope_type" if params.has("rope_type") else "type"
    written = "rope_type" if "rope_type" in keys_of(params) else "type"
    types = ", ".join(map(repr, HF_RULES))
    if written in keys_of(params) and params.raw(written) is None:
        # HF keeps an explicit null as the type and its rotary modules fail on it
        # (ROPE_INIT_FUNCTIONS[None]: KeyError), whatever else the parameters say.
        requirement = (
            f"one of {types}, or left out for 'default' (HF's rotary modules raise KeyError "
            "for a null type)"
        )
        params.fail(written, requirement, None, ValueError)
    given = params.string(key)
    rope_type = "default" if given is None else given  # "" is a value (an unknown type)
    row = row_of_type(rope_type)
    rope_type = rope_type if row is None else row.rope_type
    rope_type = dict(family.rope_type_renames).get(rope_type, rope_type)
    if rope_type not in HF_RULES:
        msg = (
            f"`{key}` must be one of {types}; got unknown rope_type {rope_type!r} ({params.where})."
        )
        raise ValueError(msg)
    return rope_type


def _axial_spec(head_dim: int, base: float) -> RopeSpec:
    """HF ``"axial"`` (Qwen-VL vision towers): rows and columns each take a quarter-head RoPE."""
    from rope_ref._core.multiaxis import axial_freqs

    if head_dim % 4:
        msg = f"`head_dim` must be a multiple of 4 for axial RoPE; got {head_dim}."
        raise ValueError(msg)
    sections = (head_dim // 4, head_dim // 4)
    return RopeSpec(head_dim, freqs=axial_freqs(sections, base=base), sections=sections)


def _rule(
    rope_type: str,
    params: ConfigReader,
    top: ConfigReader,
    cfg: ConfigReader,
    fraction: float,
) -> ScalingRule | None:
    """The scaling rule its row reads; every value is read (and checked) before any is missing."""
    if rope_type == "default":
        return None
    inputs = RuleInputs(
        rope_type,
        params,
        top,
        cfg,
        fraction,
        factor=params.real("factor", above=0.0),
        max_position=cfg.integer("max_position_embeddings"),
    )
    return HF_RULES[rope_type].read(inputs)
