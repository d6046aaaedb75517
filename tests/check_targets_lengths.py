"""Callables for `rope-ref check --seq-len`: dynamic NTK as an engine computes it.

Each is written out here in NumPy from the formula (``base * (s L / M - (s - 1)) **
(d / (d - 2))``, HF's ``"dynamic"`` rule), never from rope_ref: one at a configured length
fixed as vLLM fixes it from ``max_model_len``, one that takes the length as a keyword.
"""

from __future__ import annotations

import numpy as np

BASE, FACTOR, TRAINED, CONFIGURED = 10000.0, 4.0, 8192, 131072

#: The spec of these targets, for ``--hf-config``.
HF_CONFIG = (
    '{"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 8192, '
    '"rope_parameters": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}}'
)


def _dynamic_ntk(x: np.ndarray, positions: np.ndarray, length: float) -> np.ndarray:
    """Half-layout RoPE of x (..., seq, d) with dynamic NTK's base at `length`, float64."""
    d = x.shape[-1]
    length = max(length, TRAINED)
    base = BASE * (FACTOR * length / TRAINED - (FACTOR - 1.0)) ** (d / (d - 2))
    angles = np.asarray(positions, dtype=np.float64)[:, None] * base ** (
        -np.arange(0, d, 2, dtype=np.float64) / d
    )
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., : d // 2].astype(np.float64), x[..., d // 2 :].astype(np.float64)
    out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return out.astype(x.dtype)


def dynamic_ntk_at_131072(x, positions):
    """The base of the configured length 131072 at every call (vLLM's max_model_len)."""
    return _dynamic_ntk(x, positions, CONFIGURED)


def dynamic_ntk_by_seq_len(x, positions, seq_len=None):
    """The base of `seq_len` when given, else of the largest position + 1 (HF's)."""
    length = float(np.max(positions)) + 1.0 if seq_len is None else seq_len
    return _dynamic_ntk(x, positions, length)
