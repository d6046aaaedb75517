"""mistral-inference: `precompute_freqs_cis`, `apply_rotary_emb` and Pixtral's 2-D table.

``mistral_inference.rope`` imports torch alone. Pairs are (2j, 2j+1), rotated by complex
multiplication in complex64. Pixtral's ``precompute_freqs_cis_2d`` gives the first
``d/4`` pairs the row and the frequencies ``theta_0, theta_2, ...`` and the next ``d/4``
pairs the column and ``theta_1, theta_3, ...``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from rope_ref._core.frequencies import inv_freq
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._given import GivenEntry
from rope_ref.cli.survey._shims import import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch, cache_length

__all__ = ["GROUP"]

#: Pixtral's vision encoder: patch grid side (1024 px / 16 px patches) and rope_theta.
PIXTRAL_SIDE, PIXTRAL_THETA = 64, 10000.0


def _pixtral_spec(head_dim: int, theta: float) -> RopeSpec:
    """Pixtral's 2-D RoPE: even frequencies on rows, odd ones on columns, interleaved pairs."""
    ladder = inv_freq(RopeSpec(head_dim, base=theta))
    freqs = (*ladder[::2].tolist(), *ladder[1::2].tolist())
    quarter = head_dim // 4
    return RopeSpec(head_dim, layout="interleaved", freqs=freqs, sections=(quarter, quarter))


def _grid(max_position: int) -> list[np.ndarray]:
    side = min(PIXTRAL_SIDE, max_position + 1)
    rows, cols = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    return [np.stack([rows.ravel(), cols.ravel()], axis=-1)[:: max(1, side // 4)]]


def _entries() -> Iterator[Entry]:
    rope = import_alone("mistral_inference.rope")

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        table = rope.precompute_freqs_cis(HEAD_DIM, cache_length(p), 1e6)
        t = _torch(np.swapaxes(x, 1, 2)).flatten(0, 1)  # (tokens, heads, dim)
        out, _ = rope.apply_rotary_emb(t, t, table[_torch(np.tile(p, x.shape[0]))])
        return np.swapaxes(_numpy(out).reshape(x.shape[0], -1, *x.shape[1:2], x.shape[3]), 1, 2)

    yield Entry(
        "mistral-inference precompute_freqs_cis",
        "rope_theta=1e6",
        RopeSpec(HEAD_DIM, base=1e6, layout="interleaved"),
        run,
    )
    table_2d = rope.precompute_freqs_cis_2d(HEAD_DIM, PIXTRAL_SIDE, PIXTRAL_SIDE, PIXTRAL_THETA)

    def run_2d(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        cis = table_2d[_torch(p[:, 0]), _torch(p[:, 1])]  # VisionTransformer indexes so
        t = _torch(np.swapaxes(x, 1, 2)).flatten(0, 1)
        out, _ = rope.apply_rotary_emb(t, t, cis.repeat(x.shape[0], 1))
        return np.swapaxes(_numpy(out).reshape(x.shape[0], -1, *x.shape[1:2], x.shape[3]), 1, 2)

    yield GivenEntry(
        "mistral-inference precompute_freqs_cis_2d",
        f"Pixtral 2-D, {PIXTRAL_SIDE}x{PIXTRAL_SIDE} patches, rope_theta=1e4",
        _pixtral_spec(HEAD_DIM, PIXTRAL_THETA),
        run_2d,
        given=_grid,
    )


GROUP = Group(
    "mistral-inference",
    ("mistral_inference", "torch"),
    "pip install --no-deps mistral-inference",
    _entries,
)
