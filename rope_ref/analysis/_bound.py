r"""The smallest base whose discrimination sum stays non-negative over a context.

Work in :math:`t = \ln b`, where :math:`\theta_i(t) = e^{-g_i t}` with :math:`g_i = 2i/d`
and :math:`B_m(t) = \sum_i \cos(m\,\theta_i(t))`. The feasible set
:math:`\{t : B_m(t) \ge 0,\ m = 0..L\}` is a union of intervals, so the search walks up
from a point known to be infeasible and *proves* every step infeasible:

1. At the current point :math:`t`, find some violated :math:`m` (:math:`B_m(t) < 0`).
   If there is none among all :math:`m \le L`, :math:`t` is the answer.
2. Step past it safely. The quadratic upper bound
   :math:`B_m(t + r) \le B_m(t) + B_m'(t)\,r + K_m(t)\,r^2/2`, where
   :math:`K_m(t) = \sum_i g_i^2 (\varphi_i^2 + \varphi_i)`, :math:`\varphi_i = m\theta_i(t)`,
   bounds :math:`|B_m''|` on :math:`[t, \infty)` (phases only shrink as :math:`t` grows),
   so every point up to its root is infeasible. Take that step for the few violators whose
   step is longest, and one more from each point reached while it is still negative
   (repeated, these steps converge to the first zero of :math:`B_m`).
3. Continue from the furthest point reached.

Nothing is skipped: every point below the answer is covered by an interval on which one
particular :math:`B_m` is negative, and the answer is checked against every :math:`m`.

Finding a violated :math:`m` is the cost. Violations cluster in :math:`m`, so the
neighbours of the last violators are tried first; failing that, :math:`1..L` is scanned in
chunks, starting where the last scan succeeded. All :math:`B_m` of a run of consecutive
:math:`m` are one matrix product,
:math:`\cos((m_0 + k)\theta) = \cos m_0\theta\cos k\theta - \sin m_0\theta\sin k\theta`,
and the cosines of an arithmetic progression of phases come from two short tables the
same way, so few transcendentals are evaluated. The products are made in BLAS calls small
enough to stay on the calling thread (`_products` says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_DIM", "MAX_TERMS", "check_size", "smallest_feasible_log_base"]

#: Largest `dim` searched (512 pairs); rotary dimensions in use are at most a few hundred.
MAX_DIM = 1024
#: Largest ``(dim // 2) * context_length``: one evaluation of every :math:`B_m` costs that
#: many terms, and a search needs thousands of (partial) evaluations. At this size a search
#: takes about a minute (d = 128 with L = 2**22: 48 to 61 s; d = 256 with L = 2**21: 51 s;
#: d = 1024 with L = 2**19: 54 s, on a busy 2-core machine); beyond it the time grows
#: faster than the size (d = 128 with L = 2**23: 125 s).
MAX_TERMS = 1 << 28

Floats = NDArray[np.float64]

_BLOCK = 256  # m = m0 + k with 0 <= k < _BLOCK: one matrix product per chunk of m
_CALL = 1 << 17  # multiply-adds per BLAS call at most (see _products)
_CHUNK = 1 << 15  # values of m per matrix product: small, so a scan stops early
_FOLLOW = 8  # violators followed per step (those that promise the longest steps)
_WINDOW = 32  # m within this of the last violators followed are tried first
_EXTRA_STEPS = 1  # safe steps per violator beyond the first; the next point looks again
_SMALL = 64  # context lengths up to this are scanned from b = 1 directly
_STAGE_WALK = 1.0  # the expected walk in ln b of one doubling of the context (`_Work`)


class _Sums:
    """Evaluation of :math:`B_m`, :math:`B_m'` and :math:`K_m` for one `dim`."""

    def __init__(self, dim: int, context_length: int) -> None:
        self.g = 2.0 * np.arange(dim // 2, dtype=np.float64) / dim
        self.g2 = self.g * self.g
        # Rounding of the float64 sums (64 ulp per term, phases up to L): below this a
        # negative value is indistinguishable from zero and does not count as a violation.
        self.tol = 64.0 * np.finfo(np.float64).eps * (dim // 2) * max(context_length, 1)

    def block(self, t: float, start: int, stop: int) -> Floats:
        """:math:`B_m(t)` for ``m = start .. stop - 1``."""
        theta = np.exp(-self.g * t)
        size = stop - start
        width = min(_BLOCK, size)
        rows = _cis_progression(start, width, -(-size // width), theta)
        return _grid(rows, theta, width).ravel()[:size]

    def windows(self, centres: Floats, half: int, t: float) -> Floats:
        """:math:`B_m(t)` for ``m = c - half .. c + half`` around each centre, one row each."""
        phases = np.multiply.outer(centres - half, np.exp(-self.g * t))
        return _grid((np.cos(phases), np.sin(phases)), np.exp(-self.g * t), 2 * half + 1)

    def rows(self, m: Floats, t: Floats) -> tuple[Floats, Floats, Floats]:
        """:math:`B`, :math:`B'` and :math:`K` for each pair ``(m[r], t[r])``, directly."""
        phi = m[:, None] * np.exp(-self.g * t[:, None])
        values = np.cos(phi).sum(axis=1)
        slopes = (np.sin(phi) * phi * self.g).sum(axis=1)
        curvature = ((phi * phi + phi) * self.g2).sum(axis=1)
        return values, slopes, curvature


def _cis_progression(first: float, step: float, count: int, theta: Floats) -> tuple[Floats, Floats]:
    """``cos`` and ``sin`` of ``(first + step j) theta`` for ``j < count``, shape (count, n).

    Two small tables of phases and the angle-sum identity: about ``2 sqrt(count)`` rows of
    transcendentals instead of `count` (each product adds a few ulp, far below the tolerance).
    """
    fine = max(1, math.isqrt(count - 1) + 1)
    coarse = -(-count // fine)
    big = np.multiply.outer(first + step * fine * np.arange(coarse, dtype=np.float64), theta)
    small = np.multiply.outer(step * np.arange(fine, dtype=np.float64), theta)
    cb, sb = np.cos(big)[:, None], np.sin(big)[:, None]
    cs, ss = np.cos(small), np.sin(small)
    n = theta.shape[0]
    cos = (cb * cs - sb * ss).reshape(-1, n)[:count]
    sin = (sb * cs + cb * ss).reshape(-1, n)[:count]
    return cos, sin


def _grid(rows: tuple[Floats, Floats], theta: Floats, width: int) -> Floats:
    r"""Sums :math:`B_{m_r + k}` for ``k < width``, one row per ``r``, as a matrix product.

    `rows` holds :math:`\cos m_r\theta` and :math:`\sin m_r\theta`; then
    :math:`\cos((m_r + k)\theta) = \cos m_r\theta \cos k\theta - \sin m_r\theta \sin k\theta`.
    """
    cos_k, sin_k = _cis_progression(0.0, 1.0, width, theta)
    left = np.concatenate([rows[0], -rows[1]], axis=1)
    return _products(left, np.concatenate([cos_k, sin_k], axis=1).T)


def _products(left: Floats, right: Floats) -> Floats:
    """``left @ right`` as BLAS calls of at most `_CALL` multiply-adds each.

    A multithreaded BLAS (OpenBLAS in NumPy's wheels) spreads larger products over threads.
    At these sizes the threads cost more than they save, and their workers keep spinning
    between the search's thousands of products, taking the cores the search itself needs:
    on a busy 2-core machine a 1M-token search took 15 to 67 s (median 55 s) with one
    product per scan and 6 to 14 s (median 13 s) like this. Products below OpenBLAS's
    threshold (4 x 65536 multiply-adds) run on the calling thread.
    """
    n_rows, inner = left.shape
    width = right.shape[1]
    per_call, cols = call_shape(n_rows, inner, width)
    if per_call >= n_rows and cols == width:
        return left @ right
    groups = -(-n_rows // per_call)
    if groups * per_call != n_rows:
        left = np.concatenate([left, np.zeros((groups * per_call - n_rows, inner))])
    stacked = left.reshape(groups, per_call, inner)
    parts = [stacked @ right[:, first : first + cols] for first in range(0, width, cols)]
    return np.concatenate(parts, axis=2).reshape(groups * per_call, width)[:n_rows]


def call_shape(n_rows: int, inner: int, width: int) -> tuple[int, int]:
    """Rows and columns of each BLAS call of `_products`: at most `_CALL` multiply-adds.

    At least two rows (a matrix product, not a vector one, which BLAS threads otherwise).
    """
    if n_rows * inner * width <= _CALL:
        return n_rows, width
    cols = max(1, min(width, _CALL // (2 * inner)))
    return max(2, _CALL // (inner * cols)), cols


def _safe_step(values: Floats, slopes: Floats, curvature: Floats) -> Floats:
    """Largest r with ``values + slopes r + curvature r^2 / 2 <= 0`` (values < 0)."""
    root = np.sqrt(slopes * slopes - 2.0 * curvature * values)
    with np.errstate(divide="ignore", invalid="ignore"):
        quadratic = (root - slopes) / curvature
    # curvature 0 only for m = 0, which is never violated; keep the formula total anyway
    return np.where(curvature > 0, quadratic, np.inf)


def _follow(sums: _Sums, m: Floats, ts: Floats) -> float:
    """Furthest point up to which the violators `m` are proven negative (each from `ts`)."""
    for _ in range(_EXTRA_STEPS):
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
        self.centres = np.empty(0, dtype=np.float64)  # the last violators followed
        self.chunks: list[tuple[int, int]] = []

    def _order_chunks(self, first: int) -> None:
        """Chunks of ``1..L``: those from `first` up, then the rest, top down."""
        bounds = []
        stop = self.length + 1
        while stop > 1:
            start = max(1, stop - _CHUNK)
            bounds.append((start, stop))
            stop = start
        self.chunks = [c for c in bounds if c[1] > first] + [c for c in bounds if c[1] <= first]

    def violators(self, t: float) -> tuple[Floats, Floats]:
        """Some violated m at `t`, and the safe first step of each (empty: none is violated)."""
        if self.centres.size:
            near = self.centres[:, None] + np.arange(-_WINDOW, _WINDOW + 1, dtype=np.float64)
            values = self.sums.windows(self.centres, _WINDOW, t)
            found = near[(values < -self.sums.tol) & (near >= 1) & (near <= self.length)]
            if found.size:
                return self._best(np.unique(found), t)
        for i, (start, stop) in enumerate(self.chunks):
            values = self.sums.block(t, start, stop)
            bad = np.flatnonzero(values < -self.sums.tol)
            if bad.size:
                # violators cluster: start the next scan where this one succeeded
                self.chunks = self.chunks[i:] + self.chunks[:i]
                return self._best((bad + start).astype(np.float64), t)
        none = np.empty(0, dtype=np.float64)
        return none, none

    def _best(self, m: Floats, t: float) -> tuple[Floats, Floats]:
        """The violators whose first safe step is longest; remember their neighbours."""
        steps = _safe_step(*self.sums.rows(m, np.full(m.shape, t)))
        order = np.argsort(-steps)[:_FOLLOW]
        self.centres = m[order]
        return self.centres, steps[order]

    def run(self, t: float, first: int, progress: Callable[[float], None] | None) -> float:
        """Smallest feasible t at or above `t`; `first` = smallest m worth checking first."""
        self._order_chunks(first)
        while True:
            if progress is not None:
                progress(t)
            m, steps = self.violators(t)
            if not m.size:
                return t
            t = _follow(self.sums, m, t + steps)


_CACHE: dict[tuple[int, int], float] = {}


def check_size(dim: int, context_length: int) -> None:
    """Raise ValueError, naming the limit and why, for a context too long to search."""
    pairs = dim // 2
    if pairs * context_length > MAX_TERMS:
        msg = (
            f"`context_length` must be at most {MAX_TERMS // pairs:,} for dim = {dim} "
            f"((dim / 2) * context_length <= 2**28: each evaluation of B_m over the context "
            f"costs that many terms and the search needs thousands, about a minute at the "
            f"limit); got {context_length:,}."
        )
        raise ValueError(msg)


def smallest_feasible_log_base(
    dim: int, context_length: int, progress: Callable[[float, float], None] | None = None
) -> float:
    """Natural log of the smallest feasible base (0.0 when every base works).

    Raises ValueError when no base works (``dim == 2`` and a context of 2 or more).
    Contexts are solved from short to long: the answer for ``L // 2`` is a proven start for
    `L`, since a base that fails some distance up to ``L // 2`` fails for `L` too.
    `progress` is called now and then with the proven log-base and the share of the
    search done (an estimate, see `_Work`).
    """
    if dim == 2 and context_length >= 2 and (dim, context_length) not in _CACHE:
        msg = (
            f"no base works for `dim` = 2 and `context_length` = {context_length}: with one "
            "pair, B_2 = cos(2) < 0 whatever the base."
        )
        raise ValueError(msg)
    chain = [context_length]  # the contexts to solve, longest first
    while chain[-1] > _SMALL and (dim, chain[-1]) not in _CACHE:
        chain.append(chain[-1] // 2)
    work = _Work(chain)
    t = 0.0
    for length in reversed(chain):
        if (dim, length) in _CACHE:
            t = _CACHE[(dim, length)]
            continue
        start, first = (0.0, 1) if length <= _SMALL else (t, length // 2 + 1)
        report = None
        if progress is not None:

            def report(now: float, length: int = length, start: float = start) -> None:
                progress(now, work.share(length, now - start))

        t = _Search(dim, length).run(start, first, report)
        _CACHE[(dim, length)] = t
        work.finish(length, t - start)
    return t


class _Work:
    """The share of a search done: each stage costs about its context times its walk in t.

    Every step of a stage evaluates B_m over its context, and the measured time of a stage
    is close to proportional to ``context * (t_end - t_start)``. A stage not yet run is
    expected to walk `_STAGE_WALK` in t (the bound grows about as L^1.4, so ln b by about
    1 per doubling of the context).
    """

    def __init__(self, lengths: list[int]) -> None:
        self.planned = {n: _STAGE_WALK * n for n in lengths}
        self.finished = 0.0

    def share(self, length: int, walked: float) -> float:
        """The share done while the stage of `length` has walked `walked` in t."""
        current = walked * length
        ahead = sum(cost for n, cost in self.planned.items() if n > length)
        expected = self.finished + max(self.planned[length], current) + ahead
        if expected <= 0.0:  # context 0: nothing to walk
            return 0.0
        return min(0.99, (self.finished + current) / expected)  # 1 when the search returns

    def finish(self, length: int, walked: float) -> None:
        """Count the stage of `length` done."""
        self.finished += walked * length
        del self.planned[length]


def log_base_ceiling(value: float) -> float:
    """The base for a log-base result, rounded up so that it stays feasible."""
    return math.nextafter(math.exp(value), math.inf)
