"""A cheap first test for many candidates: the comparison cut down to its telling rows.

An alternative that explains the whole result explains any of its rows (each element's
tolerance depends only on its own row), so testing a candidate on a few rows first and on
the whole only if it passes there never changes a verdict; it only saves time on the many
candidates that fail.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison, Setup
from rope_ref.testing._diagnosis.shared import explains, oracle_with_freqs

__all__ = ["FOCUS_ROWS", "explains_by", "focus", "with_freqs", "with_spec"]


#: Rows a focused comparison keeps: the worst failing ones, and as many passing ones.
FOCUS_ROWS = 32

#: The last focused comparison, as (weak reference to the whole, cut down one).
_FOCUSED: list[tuple[weakref.ref[Comparison], Comparison]] = []


def focus(c: Comparison) -> Comparison:
    """`c` cut down to a few rows (the worst failing and evenly spread passing ones).

    A cheap first test for many candidates: an alternative that explains the whole result
    explains these rows too (each element's tolerance depends only on its own row), so
    rejecting on them never changes a verdict. `c` itself when it is small already. The
    last one built is kept (one entry: a comparison is diagnosed check after check).
    """
    for whole, cut in list(_FOCUSED):
        if whole() is c:
            return cut
    s = c.setup
    d = s.x.shape[-1]
    n_rows = s.x.size // d if d else 0
    if n_rows <= 4 * FOCUS_ROWS or s.spec.xpos is not None:
        return c  # small, or xPos (whose scale depends on seq_len and role alone: kept)
    failing = np.asarray(np.any(c.failed, axis=-1)).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = np.max(np.where(c.error == 0.0, 0.0, c.error / c.tolerance), axis=-1)
    worst = np.where(np.isnan(worst), np.inf, worst).reshape(-1)
    bad = np.flatnonzero(failing)
    bad = bad[np.argsort(-worst[bad], kind="stable")][:FOCUS_ROWS]
    good = np.flatnonzero(~failing)
    good = good[np.linspace(0, good.size - 1, min(FOCUS_ROWS, good.size)).astype(int)]
    rows = np.sort(np.concatenate([bad, good]))
    trailing = s.grid.shape[len(s.x.shape) - 1 :]
    small = Setup(
        x=s.x.reshape(-1, d)[rows],
        spec=s.spec,
        grid=s.grid.reshape(-1, *trailing)[rows],
        seq_axis=-2,
        inverse=s.inverse,
        seq_len=s.seq_len,
        role=s.role,
        dtype=s.dtype,
    )
    cut = dataclasses.replace(
        c,
        setup=small,
        actual=c.actual.reshape(-1, d)[rows],
        expected=c.expected.reshape(-1, d)[rows],
        error=c.error.reshape(-1, d)[rows],
        tolerance=c.tolerance.reshape(-1, d)[rows],
        unchecked=None if c.unchecked is None else c.unchecked.reshape(-1)[rows],
    )
    _FOCUSED[:] = [(weakref.ref(c), cut)]
    return cut


def explains_by(
    c: Comparison,
    build: Callable[[Setup], F64],
    *,
    spec: RopeSpec | None = None,
) -> bool:
    """`explains` for an alternative built from a setup: first on `focus(c)`, then whole."""
    small = focus(c)
    if small is not c and not explains(small, build(small.setup), spec=spec):
        return False
    return explains(c, build(c.setup), spec=spec)


def with_spec(spec: RopeSpec) -> Callable[[Setup], F64]:
    """Build the oracle of a setup with `spec` in place of its own (for `explains_by`)."""

    def build(s: Setup) -> F64:
        return s.oracle(spec=spec)

    return build


def with_freqs(freqs: F64) -> Callable[[Setup], F64]:
    """Build the oracle of a setup with other frequencies (for `explains_by`)."""

    def build(s: Setup) -> F64:
        return oracle_with_freqs(s, freqs)

    return build
