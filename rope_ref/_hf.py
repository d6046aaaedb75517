"""Hugging Face transformers configs <-> `RopeSpec` (``RopeSpec.from_hf`` / ``to_hf``).

Mirrors ``transformers.modeling_rope_utils`` (5.x): the standardization of
``rope_parameters`` (legacy ``rope_theta`` + ``rope_scaling``, the priority of a top-level
``original_max_position_embeddings``) and the defaults of each ``ROPE_INIT_FUNCTIONS`` entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rope_ref._spec import RopeSpec, ScalingRule
from rope_ref._typing import SectionOrder
from rope_ref._validation import check_choice
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, Proportional, YaRN

__all__ = ["spec_from_hf", "spec_to_hf"]

#: HF rope types that take `original_max_position_embeddings` (HF's standardize step).
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")
#: Legacy type names and what HF maps them to.
_ALIASES = {"su": "longrope", "mrope": "default"}
#: Model families whose M-RoPE interleaves the axes (Qwen3-VL and its descendants).
_INTERLEAVED_FAMILIES = ("qwen3_vl", "qwen3_5", "qwen3_omni", "qwen4", "cosmos3")
#: mrope_section defaults of HF's rotary modules when a config has none.
_DEFAULT_SECTIONS = {"qwen2_vl": (16, 24, 24), "qwen2_5_vl": (16, 24, 24), "qwen3_vl": (24, 20, 20)}
_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "axial")


class _Config:
    """Uniform read access to a config.json mapping or a transformers config object."""

    def __init__(self, config: object) -> None:
        if config is None or isinstance(config, str | bytes):
            msg = f"`config` must be a config mapping or a transformers config; got {config!r}."
            raise TypeError(msg)
        self.config = config

    def get(self, key: str, default: Any = None) -> Any:
        if isinstance(self.config, Mapping):
            value = self.config.get(key, default)
        else:
            value = getattr(self.config, key, default)
        return default if value is None else value

    def has(self, key: str) -> bool:
        return self.get(key) is not None


def spec_from_hf(
    config: object, *, layer_type: str | None = None, section_order: SectionOrder | None = None
) -> RopeSpec:
    """See `RopeSpec.from_hf`."""
    outer = _Config(config)
    cfg = outer
    text = outer.get("text_config")
    if text is not None and not (outer.has("head_dim") or outer.has("hidden_size")):
        cfg = _Config(text)
    top = _top_rope_parameters(cfg)
    params = _layer_parameters(top, layer_type)
    rope_type = _rope_type(params, cfg)
    base = float(params.get("rope_theta") or cfg.get("rope_theta") or cfg.get("default_theta", 1e4))
    fraction = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    head_dim = _head_dim(cfg, vision=rope_type == "axial")
    if rope_type == "axial":
        return _axial_spec(head_dim, base)
    rotary_dim = head_dim if rope_type == "proportional" else int(head_dim * fraction)
    if rotary_dim % 2:
        msg = (
            f"`partial_rotary_factor` must give an even rotary dimension; got "
            f"int({head_dim} * {fraction!r}) = {rotary_dim}."
        )
        raise ValueError(msg)
    scaling = _rule(rope_type, params, top, cfg, fraction)
    sections = params.get("mrope_section") or _default_sections(outer, cfg)
    if section_order is None:
        section_order = _default_section_order(params, outer, cfg)
    return RopeSpec(
        head_dim,
        rotary_dim=rotary_dim,
        base=base,
        scaling=scaling,
        sections=None if sections is None else tuple(sections),
        section_order=section_order,
    )


def _top_rope_parameters(cfg: _Config) -> dict[str, Any]:
    """HF's priority: a legacy ``rope_scaling`` dict wins over ``rope_parameters``."""
    params = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(params, Mapping):
        msg = f"`config.rope_parameters` must be a mapping; got {params!r}."
        raise TypeError(msg)
    return dict(params)


def _layer_parameters(top: dict[str, Any], layer_type: str | None) -> dict[str, Any]:
    nested = sorted(k for k, v in top.items() if isinstance(v, Mapping))
    if not nested:
        if layer_type is not None:
            msg = f"`layer_type` must be None for a config with one RoPE; got {layer_type!r}."
            raise ValueError(msg)
        return dict(top)
    if layer_type not in nested:
        msg = f"`layer_type` must be one of {', '.join(map(repr, nested))}; got {layer_type!r}."
        raise ValueError(msg)
    return dict(top[layer_type])


def _rope_type(params: Mapping[str, Any], cfg: _Config) -> str:
    rope_type = str(params.get("rope_type", params.get("type", "default")))
    rope_type = _ALIASES.get(rope_type, rope_type)
    if rope_type == "yarn" and cfg.get("model_type") == "phi3":
        rope_type = "longrope"  # Phi-3 configs once called LongRoPE "yarn"
    return check_choice("rope_type", rope_type, _TYPES)


def _axial_spec(head_dim: int, base: float) -> RopeSpec:
    """HF ``"axial"`` (Qwen-VL vision towers): rows and columns each take a quarter-head RoPE."""
    from rope_ref._multiaxis import axial_freqs

    if head_dim % 4:
        msg = f"`head_dim` must be a multiple of 4 for axial RoPE; got {head_dim}."
        raise ValueError(msg)
    sections = (head_dim // 4, head_dim // 4)
    return RopeSpec(head_dim, freqs=axial_freqs(sections, base=base), sections=sections)


def _head_dim(cfg: _Config, *, vision: bool = False) -> int:
    head_dim = cfg.get("head_dim")
    if head_dim:
        return int(head_dim)
    hidden = (vision and cfg.get("embed_dim")) or cfg.get("hidden_size")
    heads = cfg.get("num_attention_heads")
    if not (hidden and heads):
        msg = (
            "`config` must give head_dim, or hidden_size and num_attention_heads; "
            f"got head_dim={head_dim!r}, hidden_size={hidden!r}, num_attention_heads={heads!r}."
        )
        raise ValueError(msg)
    return int(hidden) // int(heads)


def _original_max_position(params: Mapping[str, Any], cfg: _Config) -> Any:
    """HF: a top-level value wins, then the rope parameters, then max_position_embeddings."""
    for value in (
        cfg.get("original_max_position_embeddings"),
        params.get("original_max_position_embeddings"),
        cfg.get("max_position_embeddings"),
    ):
        if value is not None:
            return value
    msg = "`config` must give original_max_position_embeddings or max_position_embeddings."
    raise ValueError(msg)


def _max_position(cfg: _Config) -> Any:
    value = cfg.get("max_position_embeddings")
    if value is None:
        msg = "`config` must give max_position_embeddings for rope_type 'dynamic'."
        raise ValueError(msg)
    return value


def _rule(
    rope_type: str,
    params: Mapping[str, Any],
    top: Mapping[str, Any],
    cfg: _Config,
    fraction: float,
) -> ScalingRule | None:
    factor: Any = params.get("factor")
    if rope_type == "default":
        return None
    if rope_type == "linear":
        return Linear(factor)
    if rope_type == "dynamic":
        return DynamicNTK(factor, max_position=_max_position(cfg))
    if rope_type == "proportional":
        return Proportional(fraction, factor=1.0 if factor is None else factor)
    original = _original_max_position(params, cfg)
    if rope_type == "llama3":
        return Llama3(
            factor,
            original,
            low_freq_factor=params.get("low_freq_factor", 1.0),
            high_freq_factor=params.get("high_freq_factor", 4.0),
        )
    if factor is None and cfg.has("max_position_embeddings"):
        factor = cfg.get("max_position_embeddings") / original
    if rope_type == "longrope":
        return LongRoPE(
            params.get("short_factor"),
            params.get("long_factor"),
            original,
            factor=factor,
            attention_factor=params.get("attention_factor"),
        )
    return YaRN(
        factor,
        original,
        beta_fast=params.get("beta_fast") or 32.0,
        beta_slow=params.get("beta_slow") or 1.0,
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
        attention_factor=params.get("attention_factor"),
        truncate=top.get("truncate", True),  # HF reads it from the top-level parameters
    )


def _default_sections(outer: _Config, cfg: _Config) -> tuple[int, ...] | None:
    """The sections HF's Qwen-VL text rotary modules assume when the config has none."""
    for model_type in (cfg.get("model_type"), outer.get("model_type")):
        for family, sections in _DEFAULT_SECTIONS.items():
            if isinstance(model_type, str) and model_type.startswith(family):
                return sections
    return None


def _default_section_order(params: Mapping[str, Any], outer: _Config, cfg: _Config) -> SectionOrder:
    if params.get("mrope_interleaved"):
        return "interleaved"
    for model_type in (cfg.get("model_type"), outer.get("model_type")):
        if isinstance(model_type, str) and model_type.startswith(_INTERLEAVED_FAMILIES):
            return "interleaved"
    return "chunked"


# --- RopeSpec -> HF ---------------------------------------------------------------------


def spec_to_hf(spec: RopeSpec, *, max_position_embeddings: int | None = None) -> dict[str, Any]:
    """See `RopeSpec.to_hf`."""
    _check_expressible(spec)
    params: dict[str, Any] = {"rope_type": "default", "rope_theta": spec.base}
    extra: dict[str, Any] = {}
    if spec.scaling is not None:
        params.update(_rule_parameters(spec.scaling, spec))
        if isinstance(spec.scaling, DynamicNTK):
            extra["max_position_embeddings"] = spec.scaling.max_position
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
    return {"head_dim": spec.head_dim, "rope_parameters": params, **extra}


def _check_expressible(spec: RopeSpec) -> None:
    problems = []
    if spec.layout != "half":
        problems.append("layout='interleaved' (HF rotates half-split pairs)")
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
            "original_max_position_embeddings": rule.original_max_position,
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


def _yarn_parameters(rule: YaRN) -> dict[str, Any]:
    params: dict[str, Any] = {
        "rope_type": "yarn",
        "factor": rule.factor,
        "original_max_position_embeddings": rule.original_max_position,
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
        "original_max_position_embeddings": rule.original_max_position,
    }
    if rule.factor is not None:
        params["factor"] = rule.factor
    if rule.attention_factor_value is not None or rule.factor is None:
        # Without a factor HF would derive one from max_position_embeddings: pin the value.
        params["attention_factor"] = rule.attention_factor(seq_len=None)
    return params
