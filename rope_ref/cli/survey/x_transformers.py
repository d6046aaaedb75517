"""x-transformers: `RotaryEmbedding` (interpolation, NTK base rescale) and `apply_rotary_pos_emb`.

``x_transformers/x_transformers.py`` imports loguru, einx and torch-einops-utils at the top
for layers RoPE does not use; stand-ins replace them where they are not installed. The
rotary pairs features (2j, 2j+1) (``rotate_half`` on ``'... (d r)'``), computes ``inv_freq``
in float32 and the angles in float32 whatever the activations' dtype.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref._core.xpos import XPos
from rope_ref.cli.survey._given import GivenEntry
from rope_ref.cli.survey._shims import fake_modules, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]

#: xPos centres its scales on the middle of the sequence, so it is called on one whole
#: sequence (past ~35,000 positions from the centre its float32 scales leave float32's range).
XPOS_SCALE_BASE, XPOS_LENGTH = 512, 2048


def _load() -> Any:
    """``x_transformers.x_transformers`` with stand-ins for its non-RoPE imports."""
    fake_modules("loguru", "einx", "torch_einops_utils")
    return import_alone("x_transformers.x_transformers")


def _entries() -> Iterator[Entry]:
    xt = _load()
    for settings, kwargs, spec in (
        ("base=10000", {}, RopeSpec(HEAD_DIM, layout="interleaved")),
        (
            "interpolation_factor=4",
            {"interpolation_factor": 4.0},
            RopeSpec(HEAD_DIM, layout="interleaved", scaling=rules.Linear(4.0)),
        ),
        (
            "base_rescale_factor=4 (NTK-aware)",
            {"base_rescale_factor": 4.0},
            RopeSpec(HEAD_DIM, layout="interleaved", scaling=rules.NTKAware(4.0)),
        ),
        (
            "rotary_emb_dim=32 (partial), base=500000",
            {"dim": HEAD_DIM // 2, "base": 500000},
            RopeSpec(HEAD_DIM, rotary_dim=HEAD_DIM // 2, base=500000.0, layout="interleaved"),
        ),
    ):
        module = xt.RotaryEmbedding(**{"dim": HEAD_DIM, **kwargs})

        def run(x: np.ndarray, p: np.ndarray, module: Any = module) -> np.ndarray:
            freqs, scale = module(_torch(p))  # (1, seq, rot_dim)
            return _numpy(xt.apply_rotary_pos_emb(_torch(x), freqs, scale))

        yield Entry("x-transformers RotaryEmbedding", settings, spec, run)
    yield from _xpos(xt)


def _xpos(xt: Any) -> Iterator[Entry]:
    """Queries scaled by xPos, keys by its inverse, as ``Attention`` applies them."""
    module = xt.RotaryEmbedding(HEAD_DIM, use_xpos=True, scale_base=XPOS_SCALE_BASE)
    spec = RopeSpec(HEAD_DIM, layout="interleaved", xpos=XPos(float(XPOS_SCALE_BASE)))
    sides: tuple[tuple[Literal["query", "key"], str, float], ...] = (
        ("query", "queries", 1.0),
        ("key", "keys", -1.0),
    )
    for role, side, power in sides:

        def run(x: np.ndarray, p: np.ndarray, power: float = power) -> np.ndarray:
            freqs, scale = module(_torch(p))
            return _numpy(xt.apply_rotary_pos_emb(_torch(x), freqs, scale**power))

        yield GivenEntry(
            "x-transformers RotaryEmbedding",
            f"use_xpos=True, scale_base={XPOS_SCALE_BASE}, {side}, {XPOS_LENGTH} tokens",
            spec,
            run,
            given=lambda _: [np.arange(XPOS_LENGTH)],
            role=role,
        )


GROUP = Group(
    "x-transformers",
    ("x_transformers", "einops", "torch"),
    "pip install --no-deps x-transformers einops",
    _entries,
)
