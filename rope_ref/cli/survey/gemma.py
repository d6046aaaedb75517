"""Gemma (JAX): `gm.math.apply_rope` with `scale_factor` and `rope_proportion`.

``gemma/__init__`` imports etils, Flax and the checkpoint kit; the driver imports
``gemma.gm.math._positional_embeddings`` alone (it needs only JAX). Gemma rotates half
pairs and computes the angles in float32 (positions divided by float32 timescales).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group

__all__ = ["GROUP"]


def _load() -> Any:
    """Gemma's positional-embedding module, without the rest of the package."""
    return import_alone("gemma.gm.math._positional_embeddings")


def _entries() -> Iterator[Entry]:
    import jax.numpy as jnp

    module = _load()
    for settings, kwargs, spec in (
        ("base_frequency=10000", {}, RopeSpec(HEAD_DIM)),
        (
            "base_frequency=1000000, scale_factor=8 (Gemma 3 global layers)",
            {"base_frequency": 1_000_000, "scale_factor": 8.0},
            RopeSpec(HEAD_DIM, base=1e6, scaling=rules.Linear(8.0)),
        ),
        (
            "rope_proportion=0.25",
            {"rope_proportion": 0.25},
            RopeSpec(HEAD_DIM, scaling=rules.Proportional(0.25)),
        ),
    ):
        options = {"base_frequency": 10_000, **kwargs}

        def run(x: np.ndarray, p: np.ndarray, options: dict[str, Any] = options) -> np.ndarray:
            t = jnp.asarray(np.swapaxes(x, 1, 2))  # Gemma: (batch, seq, heads, dim)
            ids = jnp.asarray(np.broadcast_to(p.astype(np.int32), (x.shape[0], p.shape[0])))
            return np.swapaxes(np.asarray(module.apply_rope(t, ids, **options)), 1, 2)

        yield Entry("Gemma gm.math.apply_rope (JAX)", settings, spec, run)


GROUP = Group(
    "gemma",
    ("gemma", "jax"),
    "pip install --no-deps gemma (imports only JAX for RoPE)",
    _entries,
)
