"""x-transformers: `RotaryEmbedding` (interpolation, NTK base rescale) and `apply_rotary_pos_emb`.

``x_transformers/x_transformers.py`` imports loguru, einx and torch-einops-utils at the top
for layers RoPE does not use; stand-ins replace them where they are not installed. The
rotary pairs features (2j, 2j+1) (``rotate_half`` on ``'... (d r)'``), computes ``inv_freq``
in float32 and the angles in float32 whatever the activations' dtype.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import fake_modules, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch

__all__ = ["GROUP"]


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


GROUP = Group(
    "x-transformers",
    ("x_transformers", "einops", "torch"),
    "pip install --no-deps x-transformers einops",
    _entries,
)
