"""Megatron-core's CPU path: `RotaryEmbedding`, `YarnRotaryEmbedding` and the unfused apply.

Megatron builds tables on the GPU: ``get_emb`` moves ``inv_freq`` to
``torch.cuda.current_device()`` on the first call, so the driver patches that function to
name the CPU for the call (and builds with ``use_cpu_initialization=True``). Tensors are
``[s, b, h, d]``; the driver rotates through ``_apply_rotary_pos_emb_bshd``, the unfused
path ``apply_rotary_pos_emb`` takes without Transformer Engine. Megatron takes an offset
(``forward(max_seq_len, offset)``), not position ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import import_alone, patched
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]

#: Qwen2-VL's sections, scaled to the survey's head size (16, 24, 24 of 128 features).
MROPE_SECTION = (8, 12, 12)


def _load() -> tuple[Any, Any, Any]:
    """Megatron's rotary, YaRN rotary and rope-utils modules."""
    base = "megatron.core.models.common.embeddings"
    return (
        import_alone(f"{base}.rotary_pos_embedding"),
        import_alone(f"{base}.yarn_rotary_pos_embedding"),
        import_alone(f"{base}.rope_utils"),
    )


def _settings(rotary: Any, yarn: Any) -> Iterator[tuple[str, Any, dict[str, Any], RopeSpec]]:
    cls = rotary.RotaryEmbedding
    yield "rotary_base=10000", cls, {}, RopeSpec(HEAD_DIM)
    yield (
        "rotary_interleaved=True",
        cls,
        {"rotary_interleaved": True},
        RopeSpec(HEAD_DIM, layout="interleaved"),
    )
    yield (
        "rotary_percent=0.5",
        cls,
        {"rotary_percent": 0.5},
        RopeSpec(HEAD_DIM, rotary_dim=HEAD_DIM // 2),
    )
    yield (
        "seq_len_interpolation_factor=4",
        cls,
        {"seq_len_interpolation_factor": 4.0},
        RopeSpec(HEAD_DIM, scaling=rules.Linear(4.0)),
    )
    yield (
        "rope_scaling=True, rope_scaling_factor=8, rotary_base=500000",
        cls,
        {"rope_scaling": True, "rope_scaling_factor": 8.0, "rotary_base": 500000},
        RopeSpec(HEAD_DIM, base=500000.0, scaling=rules.Llama3(8.0, original_max_position=8192)),
    )
    ycls = yarn.YarnRotaryEmbedding
    yield (
        "YaRN scaling_factor=4, original_max_position_embeddings=4096",
        ycls,
        {"scaling_factor": 4.0, "original_max_position_embeddings": 4096},
        RopeSpec(HEAD_DIM, scaling=rules.YaRN(4.0, original_max_position=4096)),
    )
    yield (
        "YaRN scaling_factor=40, mscale=mscale_all_dim=1 (DeepSeek-V3)",
        ycls,
        {"scaling_factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        RopeSpec(
            HEAD_DIM,
            scaling=rules.YaRN(40.0, original_max_position=4096, mscale=1.0, mscale_all_dim=1.0),
        ),
    )


def _entries() -> Iterator[Entry]:
    import torch

    rotary, yarn, utils = _load()
    for settings, cls, kwargs, spec in _settings(rotary, yarn):
        with patched(torch.cuda, "current_device", lambda: "cpu"):
            module = cls(
                kv_channels=HEAD_DIM,
                **{"rotary_percent": 1.0, "use_cpu_initialization": True, **kwargs},
            )

        def run(x: np.ndarray, p: np.ndarray, module: Any = module) -> np.ndarray:
            with patched(torch.cuda, "current_device", lambda: "cpu"):
                emb = module(x.shape[2], offset=int(p[0]))
            freqs, mscale = emb if isinstance(emb, tuple) else (emb, 1.0)
            t = _torch(np.ascontiguousarray(np.moveaxis(x, 2, 0)))  # [s, b, h, d]
            out = utils._apply_rotary_pos_emb_bshd(
                t, freqs, rotary_interleaved=module.rotary_interleaved, mscale=mscale
            )
            return np.moveaxis(_numpy(out), 0, 2)

        yield Entry(f"Megatron-core {cls.__name__}", settings, spec, run, positions="offset")
    yield from _mrope(rotary, utils)
    yield _mla(rotary, utils)


def _mla(rotary: Any, utils: Any) -> Entry:
    """Multi-latent attention: interleaved pairs read, written in half order."""
    import torch

    with patched(torch.cuda, "current_device", lambda: "cpu"):
        module = rotary.RotaryEmbedding(
            kv_channels=HEAD_DIM, rotary_percent=1.0, use_cpu_initialization=True
        )

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        with patched(torch.cuda, "current_device", lambda: "cpu"):
            freqs = module(x.shape[2], offset=int(p[0]))
        t = _torch(np.ascontiguousarray(np.moveaxis(x, 2, 0)))  # [s, b, h, d]
        out = utils._apply_rotary_pos_emb_bshd(t, freqs, multi_latent_attention=True)
        return np.moveaxis(_numpy(out), 0, 2)

    return Entry(
        "Megatron-core _apply_rotary_pos_emb_bshd",
        "multi_latent_attention=True (MLA)",
        RopeSpec(HEAD_DIM, layout="interleaved", output_layout="half"),
        run,
        positions="offset",
    )


def _mrope(rotary: Any, utils: Any) -> Iterator[Entry]:
    """Qwen2-VL's M-RoPE: ``MultimodalRotaryEmbedding`` with ``mrope_section``."""
    import torch

    sections = MROPE_SECTION
    for interleaved in (False, True):
        with patched(torch.cuda, "current_device", lambda: "cpu"):
            module = rotary.MultimodalRotaryEmbedding(
                HEAD_DIM, 1.0, rotary_interleaved=interleaved, rotary_base=1000000
            )

        def run(x: np.ndarray, p: np.ndarray, module: Any = module) -> np.ndarray:
            ids = _torch(np.broadcast_to(p.T[:, None, :], (3, x.shape[0], p.shape[0])).copy())
            emb = module(ids, list(sections))  # (seq, batch, 1, dim)
            t = _torch(np.ascontiguousarray(np.moveaxis(x, 2, 0)))
            out = utils._apply_rotary_pos_emb_bshd(
                t, emb, rotary_interleaved=module.rotary_interleaved
            )
            return np.moveaxis(_numpy(out), 0, 2)

        layout: Literal["half", "interleaved"] = "interleaved" if interleaved else "half"
        yield Entry(
            "Megatron-core MultimodalRotaryEmbedding",
            f"mrope_section={list(sections)}, rotary_base=1e6, rotary_interleaved={interleaved}",
            RopeSpec(HEAD_DIM, base=1e6, layout=layout, sections=sections),
            run,
        )


GROUP = Group(
    "megatron-core",
    ("megatron.core", "torch"),
    "pip install --no-deps megatron-core (CPU path: torch.cuda.current_device patched)",
    _entries,
)
