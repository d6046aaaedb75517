"""The RoPE implementations `rope-ref survey` knows, each driven with its own settings.

Every entry names the peer, the settings it is built with, the `RopeSpec` those settings
mean, and a function that rotates x of shape ``(batch, heads, seq, head_dim)`` (float32
NumPy) at positions ``(seq,)`` (``(seq, 3)`` for M-RoPE) and returns NumPy. Peers that
take only an offset (``positions="offset"``) are called with contiguous positions.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec

__all__ = ["GROUPS", "Entry", "Group", "cache_length"]

HEAD_DIM = 64
Runner = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Entry:
    """One peer with one setting."""

    peer: str
    settings: str
    spec: RopeSpec
    run: Runner
    positions: str = "ids"  # or "offset": contiguous positions only


@dataclass(frozen=True)
class Group:
    """The entries of one package (`requires` names the modules it needs)."""

    package: str
    requires: tuple[str, ...]
    install: str
    entries: Callable[[], Iterator[Entry]]

    def missing(self) -> str | None:
        """Why the group is skipped, or None when it can run."""
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                return f"{module} is not installed ({self.install})"
        return None


def _quiet_import(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time notices of the peers
        return importlib.import_module(name)


def _torch(x: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(x))


def _numpy(t: Any) -> np.ndarray:
    return np.asarray(t.detach().cpu().float().numpy())


def cache_length(p: np.ndarray) -> int:
    """Rows a peer's cos/sin cache needs for positions `p`: up to the largest one."""
    return int(np.max(p, initial=0)) + 1


# -- transformers -------------------------------------------------------------------------------

_HF_RULES: tuple[dict[str, Any], ...] = (
    {"rope_type": "default"},
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 4.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
    {
        "rope_type": "longrope",
        "original_max_position_embeddings": 4096,
        "short_factor": [1.0 + 0.05 * j for j in range(HEAD_DIM // 2)],
        "long_factor": [1.0 + 0.5 * j for j in range(HEAD_DIM // 2)],
    },
)


def _hf_entries() -> Iterator[Entry]:
    transformers = _quiet_import("transformers")
    llama = _quiet_import("transformers.models.llama.modeling_llama")
    transformers.logging.set_verbosity_error()
    for params in _HF_RULES:
        config = {
            "hidden_size": 4 * HEAD_DIM,
            "num_attention_heads": 4,
            "head_dim": HEAD_DIM,
            "max_position_embeddings": 32768,
            "rope_parameters": {"rope_theta": 500000.0, **params},
        }
        hf = transformers.LlamaConfig(**config)
        shown = {k: v for k, v in params.items() if not isinstance(v, list)}
        settings = ", ".join(f"{k}={v}" for k, v in shown.items())
        yield Entry(
            "transformers LlamaRotaryEmbedding",
            f"{settings}, rope_theta=5e5",
            RopeSpec.from_hf(config),
            functools.partial(_hf_run, llama.LlamaRotaryEmbedding, hf, llama.apply_rotary_pos_emb),
        )
    yield from _hf_mrope(transformers)


def _hf_run(module_cls: Any, config: Any, apply: Any, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    module = module_cls(config)  # fresh: dynamic and longrope modules keep state
    q = _torch(x)
    ids = _torch(p[None, :]) if p.ndim == 1 else _torch(np.moveaxis(p, -1, 0)[:, None, :])
    cos, sin = module(q, ids)
    out, _ = apply(q, q, cos, sin)
    return _numpy(out)


def _hf_mrope(transformers: Any) -> Iterator[Entry]:
    for model, sections in (("qwen2_vl", (8, 12, 12)), ("qwen3_vl", (12, 10, 10))):
        mod = _quiet_import(f"transformers.models.{model}.modeling_{model}")
        params = {"rope_type": "default", "mrope_section": list(sections), "rope_theta": 1e6}
        common = {"hidden_size": 4 * HEAD_DIM, "num_attention_heads": 4}
        if model == "qwen2_vl":
            config = transformers.Qwen2VLTextConfig(rope_parameters=params, **common)
            module_cls = mod.Qwen2VLRotaryEmbedding
        else:
            config = transformers.Qwen3VLTextConfig(
                head_dim=HEAD_DIM, rope_parameters=params, **common
            )
            module_cls = mod.Qwen3VLTextRotaryEmbedding
        yield Entry(
            f"transformers {module_cls.__name__}",
            f"M-RoPE mrope_section={list(sections)}",
            RopeSpec.from_hf(config),
            functools.partial(_hf_run, module_cls, config, mod.apply_rotary_pos_emb),
        )


# -- rotary-embedding-torch ---------------------------------------------------------------------


def _lucidrains_entries() -> Iterator[Entry]:
    module = _quiet_import("rotary_embedding_torch")
    for settings, kwargs, rule in (
        ("theta=10000", {}, None),
        ("interpolate_factor=4", {"interpolate_factor": 4.0}, rules.Linear(4.0)),
        ("theta_rescale_factor=4", {"theta_rescale_factor": 4.0}, rules.NTKAware(4.0)),
    ):
        rope = module.RotaryEmbedding(dim=HEAD_DIM, **kwargs)

        def run(x: np.ndarray, p: np.ndarray, rope: Any = rope) -> np.ndarray:
            return _numpy(rope.rotate_queries_or_keys(_torch(x), offset=int(p[0])))

        yield Entry(
            "rotary-embedding-torch RotaryEmbedding",
            f"{settings}, rotate_queries_or_keys",
            RopeSpec(HEAD_DIM, layout="interleaved", scaling=rule),
            run,
            positions="offset",
        )


# -- torchtune ----------------------------------------------------------------------------------


def _torchtune_entries() -> Iterator[Entry]:
    tt = _quiet_import("torchtune.modules")
    l31 = _quiet_import("torchtune.models.llama3_1._position_embeddings")
    for cls, settings, spec in (
        (tt.RotaryPositionalEmbeddings, "base=10000", RopeSpec(HEAD_DIM, layout="interleaved")),
        (
            l31.Llama3ScaledRoPE,
            "base=500000, scale_factor=8, old_context_len=8192",
            RopeSpec(
                HEAD_DIM,
                base=500000.0,
                layout="interleaved",
                scaling=rules.Llama3(8.0, original_max_position=8192),
            ),
        ),
    ):

        def run(x: np.ndarray, p: np.ndarray, cls: Any = cls, base: float = spec.base) -> Any:
            module = cls(dim=HEAD_DIM, max_seq_len=cache_length(p), base=int(base))
            t = _torch(np.swapaxes(x, 1, 2))  # torchtune: (batch, seq, heads, dim)
            ids = _torch(np.broadcast_to(p, (x.shape[0], p.shape[0])).copy())
            return np.swapaxes(_numpy(module(t, input_pos=ids)), 1, 2)

        yield Entry(f"torchtune {cls.__name__}", settings, spec, run)


# -- keras-hub ----------------------------------------------------------------------------------


def _keras_hub_entries() -> Iterator[Entry]:
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "torch")  # no TensorFlow needed
    keras = _quiet_import("keras")
    layers = _quiet_import("keras_hub.layers")
    for settings, kwargs, rule in (
        ("max_wavelength=10000", {}, None),
        ("scaling_factor=4", {"scaling_factor": 4.0}, rules.Linear(4.0)),
        # "dynamic" promises NTK-aware scaling: base * s^(d / (d - 2))
        (
            'rope_type="dynamic", scaling_factor=4',
            {"rope_type": "dynamic", "scaling_factor": 4.0},
            rules.NTKAware(4.0),
        ),
    ):
        layer = layers.RotaryEmbedding(sequence_axis=1, feature_axis=-1, **kwargs)

        def run(x: np.ndarray, p: np.ndarray, layer: Any = layer) -> np.ndarray:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # keras' NumPy conversion
                y = layer(np.swapaxes(x, 1, 2), positions=p[None, :])  # (batch, seq, heads, d)
                out = np.asarray(keras.ops.convert_to_numpy(y))
            return np.swapaxes(out, 1, 2)

        yield Entry(
            f"keras-hub RotaryEmbedding ({keras.backend.backend()})",
            settings,
            RopeSpec(HEAD_DIM, scaling=rule),
            run,
        )


# -- MLX ----------------------------------------------------------------------------------------


def _mlx_entries() -> Iterator[Entry]:
    mx = _quiet_import("mlx.core")
    for settings, kwargs, spec in (
        ("traditional=False, base=10000", {}, RopeSpec(HEAD_DIM)),
        (
            "traditional=True, base=500000",
            {"traditional": True, "base": 500000.0},
            RopeSpec(HEAD_DIM, base=500000.0, layout="interleaved"),
        ),
        (
            "scale=0.25 (linear factor 4)",
            {"scale": 0.25},
            RopeSpec(HEAD_DIM, scaling=rules.Linear(4.0)),
        ),
    ):
        options = {"traditional": False, "base": 10000.0, "scale": 1.0, **kwargs}

        def run(x: np.ndarray, p: np.ndarray, options: dict[str, Any] = options) -> np.ndarray:
            y = mx.fast.rope(mx.array(x), HEAD_DIM, offset=int(p[0]), **options)
            return np.array(y, dtype=np.float32)

        yield Entry("MLX mx.fast.rope", settings, spec, run, positions="offset")


# -- pure-PyTorch references of kernel libraries -------------------------------------------------


def _flash_attn_entries() -> Iterator[Entry]:
    from rope_ref._core.frequencies import rope_cos_sin

    rotary = _quiet_import("flash_attn.layers.rotary")
    spec = RopeSpec(HEAD_DIM)

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        cos, sin = (np.asarray(t, dtype=np.float32) for t in rope_cos_sin(spec, p))
        t = _torch(np.swapaxes(x, 1, 2))
        y = rotary.apply_rotary_emb_torch(t, _torch(cos), _torch(sin))
        return np.swapaxes(_numpy(y), 1, 2)

    yield Entry("flash-attn apply_rotary_emb_torch", "interleaved=False, float32 tables", spec, run)


GROUPS: tuple[Group, ...] = (
    Group("transformers", ("transformers", "torch"), "pip install transformers", _hf_entries),
    Group(
        "rotary-embedding-torch",
        ("rotary_embedding_torch",),
        "pip install rotary-embedding-torch",
        _lucidrains_entries,
    ),
    Group(
        "torchtune", ("torchtune", "torchao"), "pip install 'rope-ref[peers]'", _torchtune_entries
    ),
    Group(
        "keras-hub",
        ("keras_hub", "keras", "torch"),
        "pip install --no-deps keras-hub keras (torch backend)",
        _keras_hub_entries,
    ),
    Group("mlx", ("mlx.core",), "pip install 'mlx[cpu]'", _mlx_entries),
    Group(
        "flash-attn", ("flash_attn",), "pip install flash-attn (needs CUDA)", _flash_attn_entries
    ),
)
