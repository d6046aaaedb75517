"""The positions each survey entry is called with."""

from __future__ import annotations

import numpy as np

from rope_ref.cli.survey.peers import Entry

__all__ = ["OFFSET_RUN", "position_sets"]

#: Contiguous runs for peers that take only an offset.
OFFSET_RUN = 16


def position_sets(entry: Entry, max_position: int) -> list[np.ndarray]:
    """Positions to call `entry` with: one probe of many, or contiguous runs at offsets."""
    if hasattr(entry, "position_sets"):  # the library computes its positions itself
        return list(entry.position_sets(max_position))
    if entry.positions == "offset":
        starts = sorted({0, min(2040, max_position), max(max_position - OFFSET_RUN + 1, 0)})
        return [np.arange(s, s + OFFSET_RUN, dtype=np.int64) for s in starts]
    edges = [2**k + d for k in (8, 11, 14, 16) for d in (-1, 0, 1)]
    probe = np.array([0, 1, 2, 3, 7, *edges, max_position], dtype=np.int64)
    probe = np.unique(probe[probe <= max_position])
    if entry.spec.sections is None:
        return [probe]
    # M-RoPE: a text run (t = h = w) then image tokens with distinct (t, h, w)
    n = len(entry.spec.sections)
    axes = [probe] + [(probe // (3 + a)) % (97 + a) for a in range(n - 1)]
    return [np.stack([probe] * n, axis=-1), np.stack(axes, axis=-1)]
