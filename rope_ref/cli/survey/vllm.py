"""vLLM: every rotary class `get_rope` builds from an HF-style config, via ``forward_native``.

``pip install --no-deps vllm`` plus the small packages that
``vllm.model_executor.layers.rotary_embedding`` imports (``.ci/run`` lists them); the GPU
kernels (``vllm._C``) are absent and ``forward_native`` runs on the CPU. Modules are built
inside ``set_current_vllm_config`` with a CPU device config, as vLLM's own op tests do.

vLLM builds each cos/sin cache once, for the configured maximum length ``max_position``
(a model's ``max_model_len``): the rows call it at positions below `MAX_MODEL_LEN`, and the
length-dependent rules are compared at that length (dynamic NTK's ``seq_len``), which is
what vLLM computes them from. Each row's spec is ``RopeSpec.from_hf`` of the same config; a
config that ``from_hf`` refuses, or a class with no `RopeSpec` form, gets a skipped row
that says why.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._given import inexpressible
from rope_ref.cli.survey._shims import patched
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _quiet_import, _torch
from rope_ref.cli.survey.positions import position_sets

__all__ = ["GROUP", "MAX_MODEL_LEN", "VllmEntry"]

#: The configured maximum length every module is built for (its cos/sin cache's rows).
MAX_MODEL_LEN = 131072
HEADS = 4


@dataclass(frozen=True)
class VllmEntry(Entry):
    """An entry called below `MAX_MODEL_LEN`, compared at `seq_len` where the rule takes one."""

    seq_len: int | None = None
    inverse: bool = False  # the module's inverse rotation (DeepSeek V4's ``inverse=True``)

    def position_sets(self, max_position: int) -> list[np.ndarray]:
        """The survey's positions, at most the configured maximum length less one."""
        plain = Entry(self.peer, self.settings, self.spec, self.run, self.positions)
        return position_sets(plain, min(max_position, MAX_MODEL_LEN - 1))


@dataclass(frozen=True)
class Case:
    """One `get_rope` call and the HF config that means the same RoPE."""

    label: str
    params: dict[str, Any]  # vLLM's rope_parameters
    hf: dict[str, Any] | None = None  # HF rope_parameters, when they differ from vLLM's
    neox: bool = True
    rotary_last: bool = False  # the rotated features are the last ones (DeepSeek V4)
    inverse: bool = False  # forward_native(..., inverse=True): sin negated (DeepSeek V4)
    model_type: str | None = None
    max_position_embeddings: int = MAX_MODEL_LEN
    seq_len: int | None = None
    why_not: str | None = None  # the class has no RopeSpec form
    #: A class the model builds itself rather than through `get_rope`: its name in
    #: ``vllm.model_executor.layers.rotary_embedding``'s modules, called with
    #: ``params["mrope_section"]`` (Ernie 4.5-VL's text attention).
    module: str | None = None


_LONG = [1.0 + 0.5 * j for j in range(HEAD_DIM // 2)]
_SHORT = [1.0 + 0.05 * j for j in range(HEAD_DIM // 2)]
_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
_DEEPSEEK = {
    "factor": 40.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
#: DeepSeek V4's: DeepSeek's YaRN on the last rotary_dim features (``is_deepseek_v4``).
_DEEPSEEK_V4 = {**_DEEPSEEK, "is_deepseek_v4": True, "partial_rotary_factor": 0.5}

CASES: tuple[Case, ...] = (
    Case("RotaryEmbedding, is_neox_style=True", {"rope_type": "default"}),
    Case(
        "RotaryEmbedding, is_neox_style=False (GPT-J pairs)", {"rope_type": "default"}, neox=False
    ),
    Case(
        "RotaryEmbedding, partial_rotary_factor=0.5",
        {"rope_type": "default", "partial_rotary_factor": 0.5},
    ),
    Case("LinearScalingRotaryEmbedding, factor=4", {"rope_type": "linear", "factor": 4.0}),
    Case(
        "DynamicNTKScalingRotaryEmbedding, factor=4, max_trained_positions=8192 "
        f"(compared at seq_len={MAX_MODEL_LEN}, the configured length)",
        {"rope_type": "dynamic", "factor": 4.0, "max_trained_positions": 8192},
        hf={"rope_type": "dynamic", "factor": 4.0},
        max_position_embeddings=8192,
        seq_len=MAX_MODEL_LEN,
    ),
    Case(
        "DynamicNTKAlphaRotaryEmbedding, alpha=1000 (Hunyuan)",
        {"rope_type": "dynamic", "alpha": 1000.0},
        model_type="hunyuan_v1_dense",
    ),
    Case(
        "NTKScalingRotaryEmbedding (rope_type=ntk), factor=4", {"rope_type": "ntk", "factor": 4.0}
    ),
    Case(
        "NTKScalingRotaryEmbedding (rope_type=ntk), factor=4, mixed_b=0.5",
        {"rope_type": "ntk", "factor": 4.0, "mixed_b": 0.5},
    ),
    Case("YaRNScalingRotaryEmbedding, factor=4, original 32768", dict(_YARN)),
    Case(
        "YaRNScalingRotaryEmbedding, factor=4, original 32768, truncate=False",
        {**_YARN, "truncate": False},
    ),
    Case(
        "DeepseekScalingRotaryEmbedding, factor=40, mscale=mscale_all_dim=1",
        {"rope_type": "deepseek_yarn", **_DEEPSEEK},
        hf={"rope_type": "yarn", **_DEEPSEEK},
        max_position_embeddings=163840,
    ),
    Case(
        "Llama3RotaryEmbedding, factor=8, low/high 1/4, original 8192",
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    Case(
        "DeepseekScalingRotaryEmbedding (rope_type=deepseek_llama_scaling), factor=40",
        {"rope_type": "deepseek_llama_scaling", **_DEEPSEEK},
        hf={"rope_type": "yarn", **_DEEPSEEK},
        max_position_embeddings=163840,
    ),
    Case(
        "DeepseekV4ScalingRotaryEmbedding (is_deepseek_v4), factor=40, GPT-J pairs, "
        "partial_rotary_factor=0.5 (the last 32 features rotate)",
        {**_DEEPSEEK_V4, "rope_type": "deepseek_yarn"},
        hf={**_DEEPSEEK_V4, "rope_type": "yarn"},
        neox=False,
        max_position_embeddings=163840,
        rotary_last=True,
    ),
    Case(
        "DeepseekV4ScalingRotaryEmbedding (is_deepseek_v4), forward_native(inverse=True)",
        {**_DEEPSEEK_V4, "rope_type": "deepseek_yarn"},
        hf={**_DEEPSEEK_V4, "rope_type": "yarn"},
        neox=False,
        max_position_embeddings=163840,
        rotary_last=True,
        inverse=True,
    ),
    Case(
        "Phi3LongRoPEScaledRotaryEmbedding, original 4096 (long factors: compared at "
        f"seq_len={MAX_MODEL_LEN}, the configured length)",
        {
            "rope_type": "longrope",
            "short_factor": _SHORT,
            "long_factor": _LONG,
            "original_max_position_embeddings": 4096,
        },
        seq_len=MAX_MODEL_LEN,
    ),
    Case(
        "Gemma4RotaryEmbedding (rope_type=proportional), partial_rotary_factor=0.25",
        {"rope_type": "proportional", "partial_rotary_factor": 0.25},
    ),
    Case(
        "MRotaryEmbedding, mrope_section=[8, 12, 12] (Qwen2-VL)",
        {"rope_type": "default", "mrope_section": [8, 12, 12]},
        model_type="qwen2_vl",
    ),
    Case(
        "MRotaryEmbedding, mrope_section=[12, 10, 10], mrope_interleaved (Qwen3-VL)",
        {"rope_type": "default", "mrope_section": [12, 10, 10], "mrope_interleaved": True},
        model_type="qwen3_vl",
    ),
    Case(
        "MRotaryEmbedding with YaRN, factor=4, mrope_section=[8, 12, 12]",
        {**_YARN, "mrope_section": [8, 12, 12]},
        model_type="qwen2_vl",
    ),
    Case(
        "BailingMRotaryEmbedding (rope_type=bailing_mrope), mrope_section=[8, 12, 12] "
        "(t, h, w), is_neox_style=False (pairs h, w, h, w, ..., then t)",
        {"rope_type": "bailing_mrope", "mrope_section": [8, 12, 12]},
        neox=False,
    ),
    Case(
        "MRotaryEmbeddingInterleaved (rope_type=openpangu), mrope_section=[8, 12, 12]",
        {"rope_type": "openpangu", "mrope_section": [8, 12, 12], "mrope_interleaved": True},
    ),
    Case(
        "Ernie4_5_VLRotaryEmbedding (Ernie 4.5-VL), mrope_section=[12, 12, 8] (h, w, t), "
        "is_neox_style=False",
        {"rope_type": "default", "mrope_section": [12, 12, 8]},
        neox=False,
        model_type="ernie4_5_vl_moe",
        module="Ernie4_5_VLRotaryEmbedding",
    ),
    Case(
        "FourierRotaryEmbedding (use_fope)",
        {"rope_type": "default", "use_fope": True, "num_key_value_heads": HEADS},
    ),
    Case(
        "DualChunkRotaryEmbedding, chunk_size=8192, local_size=1024",
        {"rope_type": "default"},
        why_not="dual-chunk attention rotates the queries at three position sets (intra-, "
        "successive- and inter-chunk) and returns them side by side; a RopeSpec rotates at one",
    ),
    Case(
        "Llama4VisionRotaryEmbedding (rope_type=mllama4)",
        {"rope_type": "mllama4"},
        why_not="not driven: forward_native takes no positions (the module rotates at its own "
        "patch grid, fixed by max_position, with a class-token row), so the survey cannot "
        "call it at positions of its choosing",
    ),
)


def hf_config(case: Case) -> dict[str, Any]:
    """The HF-style config of `case`, for ``RopeSpec.from_hf``."""
    params = dict(case.params if case.hf is None else case.hf)
    config: dict[str, Any] = {
        "hidden_size": HEADS * HEAD_DIM,
        "num_attention_heads": HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": case.max_position_embeddings,
        "rope_parameters": {"rope_theta": 1e6, **params},
    }
    if case.model_type is not None:
        config["model_type"] = case.model_type
    return config


def spec_of(case: Case) -> RopeSpec | str:
    """``RopeSpec.from_hf`` of the case's config (GPT-J pairs for ``neox=False``), or why not."""
    if case.why_not is not None:
        return case.why_not
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = RopeSpec.from_hf(hf_config(case))
    except (ValueError, TypeError, KeyError, NotImplementedError) as err:
        return f"RopeSpec.from_hf refuses the config: {err}".splitlines()[0][:240]
    if case.rotary_last:
        spec = dataclasses.replace(spec, rotary_start=spec.head_dim - spec._rotary_dim)
    return spec if case.neox else dataclasses.replace(spec, layout="interleaved")


def _context() -> Any:
    """The config context of vLLM, with a CPU device (custom ops read it when built)."""
    config = _quiet_import("vllm.config")
    vllm_config = config.VllmConfig(device_config=config.DeviceConfig(device="cpu"))
    return config.set_current_vllm_config(vllm_config)


def _configured() -> Any:
    """What LongRoPE reads of the model's config: the configured maximum length."""
    return types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=MAX_MODEL_LEN))


def build(case: Case) -> Any:
    """The module `get_rope` builds for `case` (float32, cached by vLLM per config)."""
    import torch

    rotary = _quiet_import("vllm.model_executor.layers.rotary_embedding")
    longrope = _quiet_import(
        "vllm.model_executor.layers.rotary_embedding.phi3_long_rope_scaled_rope"
    )
    params = {"rope_theta": 1e6, **case.params}
    if case.module is not None:
        ernie = _quiet_import("vllm.model_executor.layers.rotary_embedding.ernie45_vl_rope")
        cls = getattr(ernie, case.module)
        with _context():
            return cls(
                HEAD_DIM,
                HEAD_DIM,
                MAX_MODEL_LEN,
                params["rope_theta"],
                case.neox,
                torch.float32,
                mrope_section=params["mrope_section"],
            )
    with _context(), patched(longrope, "get_current_vllm_config", _configured):
        return rotary.get_rope(HEAD_DIM, MAX_MODEL_LEN, case.neox, params, dtype=torch.float32)


def make_runner(case: Case) -> Any:
    """A survey runner: ``forward_native`` on the tokens, ``(tokens, heads * head_dim)``.

    LongRoPE's module has no ``forward_native``: its ``forward`` is PyTorch. A class that
    overrides ``forward`` but not ``forward_native`` (``MRotaryEmbeddingInterleaved``) runs
    its ``forward``, as vLLM does: the inherited ``forward_native`` is its parent's.
    """

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        module = build(case)
        b, h, s, d = x.shape
        tokens = np.swapaxes(x, 1, 2).reshape(b * s, h, d)  # DeepSeek's takes them so
        q = _torch(tokens if "Deepseek" in type(module).__name__ else tokens.reshape(b * s, -1))
        ids = np.tile(p, b) if p.ndim == 1 else np.tile(p.T, (1, b))  # M-RoPE: (3, tokens)
        forward = getattr(module, "forward_native", module.forward)
        if "forward" in vars(type(module)) and "forward_native" not in vars(type(module)):
            forward = module.forward  # its own forward bypasses the inherited native one
        with _context():
            out, _ = forward(_torch(ids), q, q.clone())
        return np.swapaxes(_numpy(out).reshape(b, s, h, d), 1, 2)

    return run


def inverse_runner(case: Case) -> Any:
    """`make_runner` with ``forward_native(..., inverse=True)`` (DeepSeek V4's sin negated).

    The module is vLLM's cached one, shared with the forward row: the keyword is bound on
    the instance for the call only.
    """
    forward = make_runner(case)

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        module = build(case)
        native = type(module).forward_native
        module.forward_native = functools.partial(native, module, inverse=True)
        try:
            return np.asarray(forward(x, p))
        finally:
            del module.forward_native

    return run


def _entries() -> Iterator[Entry]:
    for case in CASES:
        spec = spec_of(case)
        if isinstance(spec, str):
            yield VllmEntry("vLLM get_rope", case.label, RopeSpec(HEAD_DIM), inexpressible(spec))
            continue
        yield VllmEntry(
            "vLLM get_rope + forward_native",
            case.label,
            spec,
            (inverse_runner if case.inverse else make_runner)(case),
            seq_len=case.seq_len,
            inverse=case.inverse,
        )


GROUP = Group(
    "vllm",
    ("vllm", "torch"),
    "pip install --no-deps vllm; pip install pyzmq cbor2 aiohttp openai-harmony openai "
    "pybase64 cachetools msgspec uvloop py-cpuinfo prometheus-client xgrammar fastapi "
    "partial-json-parser llguidance",
    _entries,
)
