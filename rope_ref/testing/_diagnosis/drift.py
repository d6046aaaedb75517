"""What is known when some pairs turn at another steady rate: which, how much, which way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rope_ref._core.frequencies import inv_freq
from rope_ref.testing._compare import Comparison
from rope_ref.testing._diagnosis.rules import low_position_freqs
from rope_ref.testing._diagnosis.shared import failing_pairs, pair_angles, ranges, wrap

__all__ = ["Drift", "pair_drift"]

#: Share of a pair's largest angle error a steady rate may leave unexplained.
STEADY = 0.25


@dataclass(frozen=True)
class Drift:
    """Failing pairs that each turn at a steady other rate, all faster or all slower."""

    pairs: list[int]
    smallest: float  # |relative change of the rate|, over the pairs
    largest: float
    slower: bool

    def text(self, has_rule: bool) -> str:
        """``pairs 29-34 turn slower than the spec's by 0.0012 to 0.18 %: ...``."""
        lo, hi = 100.0 * self.smallest, 100.0 * self.largest
        size = f"by {hi:.2g} %" if f"{lo:.2g}" == f"{hi:.2g}" else f"by {lo:.2g} to {hi:.2g} %"
        how = "slower" if self.slower else "faster"
        why = (
            "a scaling rule's band edges or ramp ends (check the rule's parameters)"
            if has_rule
            else "their inverse frequencies differ (check the frequency recipe)"
        )
        return f"pairs {ranges(self.pairs)} turn {how} than the spec's {size}: {why}"


def pair_drift(c: Comparison) -> Drift | None:
    """The failing pairs, if each turns at a steady other rate and all err the same way.

    Each pair's rate is read off the result up a ladder of positions
    (`low_position_freqs`); the pair drifts steadily when turning at that rate leaves under
    `STEADY` of the pair's largest angle error at every row. A rounding error (random from
    row to row) does not; one row alone cannot tell, and is taken as read.
    """
    s = c.setup
    spec = s.spec
    if spec.n_pairs < 2 or spec.xpos is not None or spec.sections is not None:
        return None
    bad = failing_pairs(c)
    if not np.any(bad) or np.all(bad):
        return None
    measured = low_position_freqs(c)
    if measured is None:
        return None
    theta = inv_freq(spec, s.seq_len)
    got, norm = pair_angles(s, c.actual)
    sign = -1.0 if s.inverse else 1.0
    n = spec.n_pairs
    angle = (sign * got).reshape(-1, n)
    p = np.broadcast_to(s.grid[..., None], got.shape).reshape(-1, n)
    usable = (norm.reshape(-1, n) > 0) & (p != 0)
    rates: list[float] = []
    for j in np.flatnonzero(bad).tolist():
        rows = usable[:, j]
        if not np.any(rows) or not theta[j] > 0:
            return None
        error = np.abs(wrap(angle[rows, j] - p[rows, j] * theta[j]))
        left = np.abs(wrap(angle[rows, j] - p[rows, j] * measured[j]))
        rate = float(measured[j] / theta[j] - 1.0)
        if rate == 0.0 or np.max(left) > STEADY * np.max(error):
            return None
        rates.append(rate)
    if not (all(r < 0 for r in rates) or all(r > 0 for r in rates)):
        return None
    size = [abs(r) for r in rates]
    return Drift(np.flatnonzero(bad).tolist(), min(size), max(size), rates[0] < 0)
