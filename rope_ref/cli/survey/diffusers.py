"""diffusers: `get_1d_rotary_pos_embed`, `apply_rotary_emb`, Flux's and Wan's multi-axis RoPE.

``diffusers.models.embeddings`` imports without extra modules. diffusers imports torchvision
whenever one is installed; a CUDA build of torchvision beside a CPU PyTorch fails on import
and takes diffusers' model imports with it, so the driver first hides a torchvision that
does not import (`rope_ref.cli.survey._shims.hide_if_broken`). Settings are those of
``get_1d_rotary_pos_embed``: ``use_real`` with ``repeat_interleave_real`` (Flux, HunyuanDiT,
CogVideoX: pairs (2j, 2j+1)) or without (Stable Audio: half pairs), the complex form
(Lumina), ``linear_factor``, ``ntk_factor`` (the base times the factor) and ``freqs_dtype``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.multiaxis import axial_freqs
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._given import GivenEntry
from rope_ref.cli.survey._shims import hide_if_broken, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]

#: Flux.1's transformer: head size 128, axes_dim (16, 56, 56), theta 10000.
FLUX_AXES = (16, 56, 56)
#: Wan 2.1: head size 128, patch (1, 2, 2); latent video of 8 frames of 16 x 16.
WAN_LATENT = (8, 16, 16)


def _load() -> Any:
    """``diffusers.models.embeddings``, after hiding a torchvision that does not import."""
    hide_if_broken("torchvision")
    import_alone("diffusers")  # its __init__ is lazy: it imports no model
    return import_alone("diffusers.models.embeddings")


def _one_axis(emb: Any) -> Iterator[Entry]:
    import torch

    interleaved = RopeSpec(HEAD_DIM, layout="interleaved")
    for settings, kwargs, unbind, spec in (
        ("use_real, repeat_interleave_real (Flux)", {}, -1, interleaved),
        (
            "use_real, repeat_interleave_real, freqs_dtype=float64",
            {"freqs_dtype": torch.float64},
            -1,
            interleaved,
        ),
        (
            "use_real, repeat_interleave_real=False (Stable Audio)",
            {"repeat_interleave_real": False},
            -2,
            RopeSpec(HEAD_DIM),
        ),
        ("complex form (Lumina)", {"use_real": False}, 0, interleaved),
        (
            "linear_factor=4",
            {"linear_factor": 4.0},
            -1,
            RopeSpec(HEAD_DIM, layout="interleaved", scaling=rules.Linear(4.0)),
        ),
        (
            "ntk_factor=4 (theta x 4)",
            {"ntk_factor": 4.0},
            -1,
            RopeSpec(HEAD_DIM, base=40000.0, layout="interleaved"),
        ),
    ):
        options = {"use_real": True, **kwargs}

        def run(x: np.ndarray, p: np.ndarray, options: Any = options, unbind: int = unbind) -> Any:
            table = emb.get_1d_rotary_pos_embed(HEAD_DIM, p.copy(), **options)
            if not options["use_real"]:  # Lumina: (batch, seq, heads, dim), table (1, seq, d/2)
                t = _torch(np.swapaxes(x, 1, 2))
                out = emb.apply_rotary_emb(t, table[None], use_real=False)
                return np.swapaxes(_numpy(out), 1, 2)
            return _numpy(emb.apply_rotary_emb(_torch(x), table, use_real_unbind_dim=unbind))

        yield Entry("diffusers get_1d_rotary_pos_embed", settings, spec, run)


def _flux(emb: Any) -> Entry:
    flux = import_alone("diffusers.models.transformers.transformer_flux")
    module = flux.FluxPosEmbed(theta=10000, axes_dim=list(FLUX_AXES))
    pairs = tuple(a // 2 for a in FLUX_AXES)

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        cos, sin = module(_torch(p))
        return _numpy(emb.apply_rotary_emb(_torch(x), (cos, sin)))

    return Entry(
        "diffusers FluxPosEmbed",
        f"axes_dim={list(FLUX_AXES)}, theta=10000, (n, 3) ids",
        RopeSpec(sum(FLUX_AXES), layout="interleaved", freqs=axial_freqs(pairs), sections=pairs),
        run,
    )


def _wan(emb: Any) -> Entry:
    import torch

    wan = import_alone("diffusers.models.transformers.transformer_wan")
    module = wan.WanRotaryPosEmbed(128, (1, 2, 2), max_seq_len=1024)
    dims = (module.t_dim, module.h_dim, module.w_dim)
    pairs = tuple(d // 2 for d in dims)
    frames, height, width = WAN_LATENT

    def grid(max_position: int) -> list[np.ndarray]:
        axes = np.meshgrid(
            *(np.arange(n) for n in (frames, height // 2, width // 2)), indexing="ij"
        )
        return [np.stack([a.ravel() for a in axes], axis=-1)]

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        cos, sin = module(torch.zeros(1, 1, *WAN_LATENT))  # (1, tokens, 1, dim)
        t = _torch(np.swapaxes(x, 1, 2))  # Wan: (batch, seq, heads, dim)
        out = emb.apply_rotary_emb(t, (cos[0, :, 0], sin[0, :, 0]), sequence_dim=1)
        return np.swapaxes(_numpy(out), 1, 2)

    return GivenEntry(
        "diffusers WanRotaryPosEmbed",
        f"head 128 = axes {list(dims)}, patch (1, 2, 2), latent {list(WAN_LATENT)}",
        RopeSpec(128, layout="interleaved", freqs=axial_freqs(pairs), sections=pairs),
        run,
        given=grid,
    )


def _entries() -> Iterator[Entry]:
    emb = _load()
    yield from _one_axis(emb)
    yield _flux(emb)
    yield _wan(emb)


GROUP = Group(
    "diffusers",
    ("diffusers", "torch"),
    "pip install --no-deps diffusers (a torchvision that does not import is hidden)",
    _entries,
)
