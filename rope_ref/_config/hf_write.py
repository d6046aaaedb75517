"""`RopeSpec` -> Hugging Face transformers config (``RopeSpec.to_hf``).

Each rule's parameters come from its row of `rope_ref._config.hf_rules.HF_RULES`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rope_ref._config.hf_mrope import map_parameters
from rope_ref._config.hf_rules import row_of_rule
from rope_ref._config.hf_values import hf_integer
from rope_ref._core.spec import RopeSpec
from rope_ref.scaling import DynamicNTK

__all__ = ["spec_to_hf"]


def spec_to_hf(spec: RopeSpec, *, max_position_embeddings: int | None = None) -> dict[str, Any]:
    """See `RopeSpec.to_hf`."""
    if max_position_embeddings is not None:
        max_position_embeddings = hf_integer(
            "max_position_embeddings", max_position_embeddings, "max_position_embeddings"
        )
    _check_expressible(spec)
    params: dict[str, Any] = {"rope_type": "default", "rope_theta": spec.base}
    extra: dict[str, Any] = {}
    if spec.scaling is not None:
        params.update(_rule_parameters(spec.scaling, spec))
        if isinstance(spec.scaling, DynamicNTK):
            extra["max_position_embeddings"] = hf_integer(
                "spec.scaling.max_position", spec.scaling.max_position, "max_position_embeddings"
            )
    if spec._rotary_dim != spec.head_dim:
        params["partial_rotary_factor"] = _fraction(spec._rotary_dim, spec.head_dim)
    if spec.sections is not None:
        params["mrope_section"] = list(spec.sections)
        if spec.section_order == "interleaved":
            params["mrope_interleaved"] = True
        params.update(map_parameters(spec) or {})
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
    if not isinstance(spec.section_order, str) and map_parameters(spec) is None:
        problems.append(
            f"section_order={spec.section_order} (a pair-to-axis map: rope_parameters state "
            "chunked or Qwen3-VL interleaved sections, and vLLM's openPangu and Bailing "
            "orders; Ernie 4.5-VL's order comes from its model_type, which to_hf does not "
            "write)"
        )
    elif not isinstance(spec.section_order, str) and spec.scaling is not None:
        problems.append(
            f"a scaling rule with section_order={spec.section_order} (vLLM's openPangu and "
            "Bailing rope types take no scaling)"
        )
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
    """The HF parameters of `rule`, written by its row of the rope_type table."""
    row = row_of_rule(rule)
    if row is None or row.write is None:
        msg = f"`spec.scaling` must be a rule with a HF rope_type; got {rule!r}."
        raise ValueError(msg)
    return row.write(rule, spec)
