"""timm: axial 2-D `RotaryEmbedding` (EVA, ViT-RoPE) and `RotaryEmbeddingDinoV3`, on timm's grids.

``timm/__init__`` imports its model zoo and torchvision; the driver imports
``timm.layers.pos_embed_sincos`` alone (it needs only torch, through ``timm.layers``'
small helpers, which the stand-in parents let it reach file by file). Each axis rotates
``dim / 4`` pairs with its own frequency ladder: ``in_pixels=False`` the language ladder
``temperature^(-j / (dim/4))``; ``in_pixels=True`` "pixel" bands, pi times ``linspace(1,
max_res / 2)`` (``linear_bands=True``) or ``2^linspace(0, log2(max_res) - 1)`` (the default),
on a grid from -1 to 1. timm builds that grid itself in float32 (``torch.linspace``), and
EVA's ``ref_feat_shape`` rescales it in float32: the positions are compared as the float32
values timm used, read from its own ``_build_grid``. DINOv3 turns by ``2 pi t / period``
(periods ``temperature^(4k / dim)``, or geometric from ``min_period`` to ``max_period``) on
"centered" coordinates in [-1, 1], half layout.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np

from rope_ref._core.multiaxis import axial_freqs
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._given import GivenEntry, inexpressible
from rope_ref.cli.survey._shims import import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]

BANDS = HEAD_DIM // 4


def _load() -> Any:
    """``timm.layers.pos_embed_sincos`` without timm's model zoo."""
    return import_alone("timm.layers.pos_embed_sincos")


def _log_pixel_bands(bands: int, max_res: float) -> tuple[float, ...]:
    r"""The default pixel bands of timm in float64: :math:`\pi\,2^{k \log_2(r/2)/(n-1)}`."""
    top = math.log2(max_res) - 1.0
    return tuple(math.pi * 2.0 ** (top * k / (bands - 1)) for k in range(bands))


def _settings() -> Iterator[tuple[str, dict[str, Any], tuple[float, ...], list[int]]]:
    lang = axial_freqs((BANDS, BANDS))
    yield "in_pixels=False (EVA-02), 16x16", {"in_pixels": False}, lang, [16, 16]
    yield (
        "in_pixels=False, rotate_half=True, 16x16",
        {"in_pixels": False, "rotate_half": True},
        lang,
        [16, 16],
    )
    yield (
        "in_pixels=False, ref_feat_shape=16x16 at 24x24 (EVA fine-tune)",
        {"in_pixels": False, "ref_feat_shape": [16, 16]},
        lang,
        [24, 24],
    )
    yield (
        "in_pixels=True, linear_bands=True, max_res=224, 14x14",
        {"in_pixels": True, "linear_bands": True},
        axial_freqs((BANDS, BANDS), kind="pixel", max_freq=224.0),
        [14, 14],
    )
    log_bands = _log_pixel_bands(BANDS, 224.0)
    yield (
        "in_pixels=True (log bands), max_res=224, 14x14",
        {"in_pixels": True},
        log_bands + log_bands,
        [14, 14],
    )


def _dinov3_settings() -> Iterator[tuple[str, dict[str, Any], tuple[float, ...], list[int]]]:
    # DINOv3: angle 2 pi t / period, periods temperature^(4k / dim) or a geometric
    # ladder from min_period to max_period; coordinates "centered" in [-1, 1]
    two_pi = 2.0 * math.pi
    ladder = tuple(two_pi * f for f in axial_freqs((BANDS,), base=100.0))
    yield "temperature=100, 16x16", {}, ladder + ladder, [16, 16]
    geometric = tuple(two_pi / (0.5 * (40.0 / 0.5) ** (k / (BANDS - 1))) for k in range(BANDS))
    yield (
        "min_period=0.5, max_period=40, normalize_coords=max, 12x20",
        {"min_period": 0.5, "max_period": 40.0, "normalize_coords": "max"},
        geometric + geometric,
        [12, 20],
    )


def _grid(rope: Any, module: Any, shape: list[int]) -> list[np.ndarray]:
    """The coordinates timm builds for `module` (float32), as float64."""
    if hasattr(module, "periods"):  # DINOv3
        coords = rope._build_grid(
            shape, grid_type="centered", normalize_coords=module.normalize_coords
        )
    else:
        coords = rope._build_grid(
            shape, grid_type=module.grid_type, ref_feat_shape=module.ref_feat_shape
        )
    return [np.asarray(coords.reshape(-1, 2).numpy(), dtype=np.float64)]


def _entries() -> Iterator[Entry]:
    rope = _load()
    axial = [(rope.RotaryEmbedding, *row) for row in _settings()]
    dinov3 = [(rope.RotaryEmbeddingDinoV3, *row) for row in _dinov3_settings()]
    for cls, settings, kwargs, freqs, shape in axial + dinov3:
        module = cls(HEAD_DIM, **kwargs)
        layout: Literal["half", "interleaved"] = (
            "half" if getattr(module, "rotate_half", False) else "interleaved"
        )
        spec = RopeSpec(HEAD_DIM, layout=layout, freqs=freqs, sections=(BANDS, BANDS))

        def grid(max_position: int, module: Any = module, shape: list[int] = shape) -> Any:
            return _grid(rope, module, shape)

        def run(x: np.ndarray, p: np.ndarray, module: Any = module, shape: Any = shape) -> Any:
            b, h, n, d = x.shape
            t = _torch(x.reshape(b * h, n, d)).transpose(1, 2).reshape(b * h, d, *shape)
            out = module(t).reshape(b * h, d, n).transpose(1, 2)  # channels-first in and out
            return _numpy(out).reshape(b, h, n, d)

        yield GivenEntry(f"timm {cls.__name__}", settings, spec, run, given=grid)
    yield from _mrope(rope)
    yield Entry(
        "timm RotaryEmbeddingMixed",
        "RoPE-Mixed, learned per-head freqs",
        RopeSpec(HEAD_DIM),
        inexpressible(
            "angles t_x f_x + t_y f_y have no RopeSpec form; rope_ref.apply_rope_mixed "
            "states them (tests/test_survey_timm.py compares it with timm)"
        ),
    )


def _clamped(sections: tuple[int, int, int]) -> tuple[int, int, int]:
    """Pairs per axis of timm's interleave, the temporal axis taking the rest.

    Height takes pairs 1, 4, ... below ``3 s_h``, width 2, 5, ... below ``3 s_w``, both cut
    at the last pair (its docstring: (8, 12, 12) of 32 pairs is 11/11/10).
    """
    pairs = HEAD_DIM // 2
    height = len(range(1, min(3 * sections[1], pairs), 3))
    width = len(range(2, min(3 * sections[2], pairs), 3))
    return (pairs - height - width, height, width)


def _mrope(rope: Any) -> Iterator[Entry]:
    """GenLIP's interleaved M-RoPE on images: temporal 0, (row, column) per patch."""
    for sections in ((8, 12, 12), (12, 10, 10)):
        module = rope.RotaryEmbeddingMRope(HEAD_DIM, mrope_section=sections)
        shape = [14, 14]

        def grid(max_position: int, shape: list[int] = shape) -> list[np.ndarray]:
            rows_cols = rope._build_grid(shape, ndim=2).reshape(-1, 2).numpy()
            zeros = np.zeros((rows_cols.shape[0], 1))
            return [np.concatenate([zeros, rows_cols.astype(np.float64)], axis=-1)]

        def run(x: np.ndarray, p: np.ndarray, module: Any = module, shape: Any = shape) -> Any:
            b, h, n, d = x.shape
            embed = module.get_embed(shape)
            out = rope.apply_rot_embed_cat(_torch(x.reshape(b * h, n, d)), embed, half=True)
            return _numpy(out).reshape(b, h, n, d)

        yield GivenEntry(
            "timm RotaryEmbeddingMRope",
            f"mrope_section={sections}, 14x14 (t = 0)",
            RopeSpec(HEAD_DIM, sections=_clamped(sections), section_order="interleaved"),
            run,
            given=grid,
        )


GROUP = Group(
    "timm",
    ("timm", "torch"),
    "pip install --no-deps timm (only timm.layers.pos_embed_sincos is imported)",
    _entries,
)
