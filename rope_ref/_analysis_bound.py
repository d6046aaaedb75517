r"""The smallest base whose discrimination sum stays non-negative over a context.

Work in :math:`t = \ln b`, where :math:`\theta_i(t) = e^{-g_i t}` with :math:`g_i = 2i/d`
and :math:`B_m(t) = \sum_i \cos(m\,\theta_i(t))`. The feasible set
:math:`\{t : B_m(t) \ge 0,\ m = 0..L\}` is a union of intervals, so the search walks up
from a point known to be infeasible and *proves* every step infeasible:

1. At the current point :math:`t`, find some violated :math:`m` (:math:`B_m(t) < 0`).
   If there is none among all :math:`m \le L`, :math:`t` is the answer.
2. Follow that :math:`m` to the first point where :math:`B_m` stops being negative. Each
   step uses the quadratic upper bound
   :math:`B_m(t + r) \le B_m(t) + B_m'(t)\,r + K_m(t)\,r^2/2`, where
   :math:`K_m(t) = \sum_i g_i^2 (\varphi_i^2 + \varphi_i)`, :math:`\varphi_i = m\theta_i(t)`,
   bounds :math:`|B_m''|` on :math:`[t, \infty)` (phases only shrink as :math:`t` grows).
   Stepping to the root of that bound never passes a zero of :math:`B_m`, so every point
   passed over is infeasible, and the steps converge to the first zero.
3. Continue from the furthest such zero among the violators followed.

Nothing is skipped: every point below the answer is covered by an interval on which one
particular :math:`B_m` is negative. Evaluating all :math:`B_m` at one point is a matrix
product, :math:`\cos((m_0 + k)\theta) = \cos m_0\theta\cos k\theta - \sin m_0\theta\sin
k\theta`, done in blocks of :math:`m`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["smallest_feasible_log_base"]

Floats = NDArray[np.float64]

_BLOCK = 1024  # m = m0 + k with 0 <= k < _BLOCK: one matrix product per chunk of m
_CHUNK = 1 << 18  # values of m evaluated per matrix product (bounds memory)
_FOLLOW = 8  # violators followed per step (those that promise the longest steps)
_WINDOW = 16  # neighbours of followed violators checked first at the next point
_MAX_NEWTON = 60  # safe steps per follow; an unfinished follow is still a proven advance
_SMALL = 64  # context lengths up to this are scanned from b = 1 directly


class _Sums:
    """Evaluation of :math:`B_m`, :math:`B_m'` and :math:`K_m` for one `dim`."""

    def __init__(self, dim: int, context_length: int) -> None:
        self.g = 2.0 * np.arange(dim // 2, dtype=np.float64) / dim
        self.g2 = self.g * self.g
        # Rounding of the float64 sums (64 ulp per term, phases up to L): below this a
        # negative value is indistinguishable from zero and does not count as a violation.
        self.tol = 64.0 * np.finfo(np.float64).eps * (dim // 2) * max(context_length, 1)

    def block(self, t: float, start: int, stop: int) -> Floats:
        """:math:`B_m(t)` for ``m = start .. stop - 1``, as matrix products."""
        theta = np.exp(-self.g * t)
        size = stop - start
        width = min(_BLOCK, size)
        k = np.arange(width, dtype=np.float64)[:, None] * theta
        table = np.concatenate([np.cos(k), np.sin(k)], axis=1).T  # (2n, width)
        m0 = (start + width * np.arange(-(-size // width), dtype=np.float64))[:, None] * theta
        values: Floats = (np.concatenate([np.cos(m0), -np.sin(m0)], axis=1) @ table).ravel()
        return values[:size]

    def rows(self, m: Floats, t: Floats) -> tuple[Floats, Floats, Floats]:
        """:math:`B`, :math:`B'` and :math:`K` for each pair ``(m[r], t[r])``, directly."""
        phi = m[:, None] * np.exp(-self.g * t[:, None])
        values = np.cos(phi).sum(axis=1)
        slopes = (np.sin(phi) * phi * self.g).sum(axis=1)
        curvature = ((phi * phi + phi) * self.g2).sum(axis=1)
        return values, slopes, curvature


def _safe_step(values: Floats, slopes: Floats, curvature: Floats) -> Floats:
    """Largest r with ``values + slopes r + curvature r^2 / 2 <= 0`` (values < 0)."""
    root = np.sqrt(slopes * slopes - 2.0 * curvature * values)
    with np.errstate(divide="ignore", invalid="ignore"):
        quadratic = (root - slopes) / curvature
    # curvature 0 only for m = 0, which is never violated; keep the formula total anyway
    return np.where(curvature > 0, quadratic, np.inf)


def _follow(sums: _Sums, m: Floats, t: float) -> float:
    """Furthest point up to which some of the violators `m` are proven negative from `t`."""
    ts = np.full(m.shape, t)
    for _ in range(_MAX_NEWTON):
        values, slopes, curvature = sums.rows(m, ts)
        negative = values < -sums.tol
        if not negative.any():
            break
        step = _safe_step(values, slopes, curvature)
        ts = np.where(negative, ts + step, ts)
    return float(ts.max())


class _Search:
    """The walk of the module docstring for one `dim` and context length."""

    def __init__(self, dim: int, context_length: int) -> None:
        self.sums = _Sums(dim, context_length)
        self.length = context_length
        self.near = np.empty(0, dtype=np.float64)  # neighbours of recent violators

    def _chunks(self, first: int) -> list[tuple[int, int]]:
        """Chunks of ``1..L``: those from `first` up, then the rest, top down."""
        bounds = []
        stop = self.length + 1
        while stop > 1:
            start = max(1, stop - _CHUNK)
            bounds.append((start, stop))
            stop = start
        return [c for c in bounds if c[1] > first] + [c for c in bounds if c[1] <= first]

    def violators(self, t: float, first: int) -> Floats:
        """Some violated m at `t` (empty only when every m is non-negative)."""
        if self.near.size:
            values = self.sums.rows(self.near, np.full(self.near.shape, t))[0]
            found = self.near[values < -self.sums.tol]
            if found.size:
                return self._best(found, t)
        for start, stop in self._chunks(first):
            values = self.sums.block(t, start, stop)
            bad = np.flatnonzero(values < -self.sums.tol)
            if bad.size:
                return self._best((bad + start).astype(np.float64), t)
        return np.empty(0, dtype=np.float64)

    def _best(self, m: Floats, t: float) -> Floats:
        """The violators whose first safe step is longest; remember their neighbours."""
        values, slopes, curvature = self.sums.rows(m, np.full(m.shape, t))
        order = np.argsort(-_safe_step(values, slopes, curvature))[:_FOLLOW]
        chosen = m[order]
        window = chosen[:, None] + np.arange(-_WINDOW, _WINDOW + 1, dtype=np.float64)
        self.near = np.unique(np.clip(window, 1, self.length))
        return chosen

    def run(self, t: float, first: int, progress: Callable[[float], None] | None) -> float:
        """Smallest feasible t at or above `t`; `first` = smallest m worth checking first."""
        while True:
            if progress is not None:
                progress(t)
            m = self.violators(t, first)
            if not m.size:
                return t
            t = _follow(self.sums, m, t)


_CACHE: dict[tuple[int, int], float] = {}


def smallest_feasible_log_base(
    dim: int, context_length: int, progress: Callable[[float], None] | None = None
) -> float:
    """Natural log of the smallest feasible base (0.0 when every base works).

    Raises ValueError when no base works (``dim == 2`` and a context of 2 or more).
    Contexts are solved from short to long: the answer for ``L // 2`` is a proven start for
    `L`, since a base that fails some distance up to ``L // 2`` fails for `L` too.
    """
    key = (dim, context_length)
    if key in _CACHE:
        return _CACHE[key]
    if dim == 2 and context_length >= 2:
        msg = (
            f"no base works for `dim` = 2 and `context_length` = {context_length}: with one "
            "pair, B_2 = cos(2) < 0 whatever the base."
        )
        raise ValueError(msg)
    if context_length <= _SMALL:
        start, first = 0.0, 1
    else:
        start = smallest_feasible_log_base(dim, context_length // 2, progress)
        first = context_length // 2 + 1
    result = _Search(dim, context_length).run(start, first, progress)
    _CACHE[key] = result
    return result


def log_base_ceiling(value: float) -> float:
    """The base for a log-base result, rounded up so that it stays feasible."""
    return math.nextafter(math.exp(value), math.inf)
