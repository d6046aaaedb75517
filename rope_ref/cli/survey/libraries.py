"""The survey's libraries beyond the model zoos: one driver module each, in this order."""

from __future__ import annotations

from rope_ref.cli.survey import (
    diffusers,
    gemma,
    ggml,
    litgpt,
    llama_models,
    megatron_core,
    mistral_inference,
    olmo_core,
    onnxruntime,
    timm,
    vllm,
    x_transformers,
)
from rope_ref.cli.survey.peers import Group

__all__ = ["LIBRARY_GROUPS"]

LIBRARY_GROUPS: tuple[Group, ...] = (
    litgpt.GROUP,
    diffusers.GROUP,
    timm.GROUP,
    x_transformers.GROUP,
    llama_models.GROUP,
    mistral_inference.GROUP,
    olmo_core.GROUP,
    megatron_core.GROUP,
    gemma.GROUP,
    onnxruntime.GROUP,
    vllm.GROUP,
    ggml.GROUP,
)
