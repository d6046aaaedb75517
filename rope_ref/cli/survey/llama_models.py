"""Meta's llama-models: `precompute_freqs_cis`, `apply_scaling` and `apply_rotary_emb`.

``llama_models/llama3/model.py`` imports fairscale's model-parallel layers at the top; a
stand-in replaces fairscale where it is not installed (RoPE never calls it). The rotation is
complex multiplication of (2j, 2j+1) pairs in complex64; ``apply_scaling`` is the Llama 3.1
rule with its constants written in the function (factor 8, bands 1 and 4, 8192 tokens).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._shims import fake_modules, import_alone
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _numpy, _torch, cache_length

__all__ = ["GROUP"]


def _load() -> Any:
    """``llama_models.llama3.model`` with fairscale stood in for."""
    fake_modules("fairscale")
    return import_alone("llama_models.llama3.model")


def _entries() -> Iterator[Entry]:
    model = _load()
    for settings, scaled, spec in (
        ("rope_theta=500000", False, RopeSpec(HEAD_DIM, base=500000.0, layout="interleaved")),
        (
            "rope_theta=500000, use_scaled_rope=True",
            True,
            RopeSpec(
                HEAD_DIM,
                base=500000.0,
                layout="interleaved",
                scaling=rules.Llama3(8.0, original_max_position=8192),
            ),
        ),
    ):

        def run(x: np.ndarray, p: np.ndarray, scaled: bool = scaled) -> np.ndarray:
            length = cache_length(p)
            table = model.precompute_freqs_cis(HEAD_DIM, length, 500000.0, use_scaled=scaled)
            t = _torch(np.swapaxes(x, 1, 2))  # Meta: (batch, seq, heads, dim)
            out, _ = model.apply_rotary_emb(t, t, table[_torch(p)])
            return np.swapaxes(_numpy(out), 1, 2)

        yield Entry("llama-models precompute_freqs_cis", settings, spec, run)


GROUP = Group(
    "llama-models",
    ("llama_models", "torch"),
    "pip install --no-deps llama-models (fairscale stood in for)",
    _entries,
)
