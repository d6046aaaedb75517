"""Scaling and xPos rules written out in the tests, independently of rope_ref."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class LengthDependent:
    """Frequencies that shrink with seq_len, and a length-dependent attention factor."""

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return inv_freq * (16.0 / max(seq_len, 16.0))

    def attention_factor(self, *, seq_len):
        return 1.0 + 0.1 * math.log(max(seq_len, 16.0) / 16.0)


@dataclasses.dataclass(frozen=True)
class CentredXPos:
    """xPos as in rotary-embedding-torch: zeta_j = (2j + 0.4 d) / (1.4 d), centre seq_len // 2."""

    scale_base: float = 512.0

    def zeta(self, rotary_dim):
        return (np.arange(0, rotary_dim, 2) + 0.4 * rotary_dim) / (1.4 * rotary_dim)

    def center(self, seq_len):
        return float(seq_len // 2)
