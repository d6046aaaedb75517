"""Diagnoses of the positions: an offset, positions ignored, identity or a short table."""

from __future__ import annotations

import math

import numpy as np

from rope_ref._core.frequencies import inv_freq, pair_axes
from rope_ref.testing._compare import F64, Comparison
from rope_ref.testing._diagnosis.shared import (
    Diagnosis,
    explains,
    fmt,
    pair_angles,
    row_failed,
    row_p,
    wrap,
)

__all__ = ["identity_beyond", "offset", "other_seq_axis", "position_range", "positions_pattern"]


def _offset_estimate(c: Comparison) -> int | None:
    """Constant position shift read off the slowest rotating pair, if the rows agree.

    Only shifts of magnitude below ``2**31`` (what int32 positions and offsets hold) are
    estimated; larger ones are not tried.
    """
    s = c.setup
    theta = inv_freq(s.spec, s.seq_len)
    if theta.size == 0 or s.spec.sections is not None:
        return None
    j = int(np.argmin(np.where(theta > 0, theta, np.inf)))
    if not theta[j] > 0:
        return None
    got, norm = pair_angles(s, c.actual)
    want, _ = pair_angles(s, c.expected)
    sign = -1.0 if s.inverse else 1.0
    shift = sign * wrap(got[..., j] - want[..., j]) / theta[j]
    usable = norm[..., j] > 0
    if not np.any(usable):
        return None
    k = np.round(np.median(shift[usable]))
    return int(k) if k != 0 and abs(k) < 2**31 else None


def offset(c: Comparison) -> Diagnosis | None:
    s = c.setup
    shifts = [1, -1, 2, -2]
    estimate = _offset_estimate(c)
    if estimate is not None and estimate not in shifts:
        shifts.insert(0, estimate)
    for k in shifts:
        if explains(c, s.oracle(grid=s.grid + k), grid=s.grid + k):
            hint = " (off by one)" if abs(k) == 1 else ""
            return Diagnosis(
                "offset",
                f"the result matches positions shifted by {k:+d}{hint}: every token was "
                f"rotated as if it sat at position p {'+' if k > 0 else '-'} {abs(k)}.",
            )
    return None


def positions_pattern(c: Comparison) -> Diagnosis | None:
    s = c.setup
    if s.spec.sections is not None:
        return None
    axis = s.seq_axis % s.x.ndim
    length = s.x.shape[axis]
    shape = [1] * (s.x.ndim - 1)
    shape[axis] = length
    arange = np.broadcast_to(np.arange(length, dtype=np.float64).reshape(shape), s.grid.shape)
    if not np.array_equal(arange, s.grid) and explains(c, s.oracle(grid=arange), grid=arange):
        return Diagnosis(
            "positions",
            "the result matches positions 0, 1, 2, ... along the sequence axis: the given "
            "positions were ignored (e.g. an arange or cache_position used instead of "
            "position_ids).",
        )
    if s.grid.ndim >= 2 and s.grid.shape[0] > 1:
        first = np.broadcast_to(s.grid[:1], s.grid.shape)
        if not np.array_equal(first, s.grid) and explains(c, s.oracle(grid=first), grid=first):
            return Diagnosis(
                "positions",
                "every batch row was rotated with the positions of row 0: per-row positions "
                "(left padding, packed sequences, per-sequence offsets) were ignored.",
            )
    return None


def identity_beyond(c: Comparison) -> Diagnosis | None:
    s = c.setup
    rows = row_failed(c)
    if not np.any(rows):
        return None
    identity = np.all(np.abs(c.actual - s.x) <= c.tolerance + 0.0, axis=-1)
    p = row_p(s)
    if not np.all(identity[rows]):
        return None
    first_bad = float(np.min(p[rows]))
    good = ~rows & (p > 0)
    if np.any(good) and float(np.max(p[good])) >= first_bad:
        return None
    if not np.any(good):
        return Diagnosis(
            "identity",
            f"no row was rotated: the result equals x (identity) at positions "
            f"{fmt(first_bad)} and up; the rotation was skipped, or cos = 1, sin = 0.",
        )
    last_good = float(np.max(p[good]))
    return Diagnosis(
        "identity",
        f"positions up to {fmt(last_good)} are rotated correctly, but from "
        f"{fmt(first_bad)} on the result equals x (identity): a cos/sin table shorter than "
        "the positions is read out of range and masked to cos = 1, sin = 0 (silently).",
    )


def position_range(c: Comparison) -> Diagnosis | None:
    s = c.setup
    rows = row_failed(c)
    p = row_p(s)
    good = ~rows & (p > 0)
    if not np.any(rows) or not np.any(good):
        return None
    first_bad, last_good = float(np.min(p[rows])), float(np.max(p[good]))
    if last_good >= first_bad or first_bad != int(first_bad):
        return None
    wrapped, clamped = _table_lengths(c, last_good, int(first_bad))
    fits = [n for n in wrapped if explains(c, s.oracle(grid=np.mod(s.grid, n)))]
    if fits:
        how = f"wrap around a table of {' or '.join(map(str, fits))} positions"
        if len(fits) > 1:
            how += ", which the given positions cannot tell apart"
    else:
        fits = [n for n in clamped if explains(c, s.oracle(grid=np.minimum(s.grid, n - 1)))]
        if not fits:
            return None
        how = f"are clamped to {fits[0] - 1}"
    return Diagnosis(
        "position_range",
        f"positions up to {fmt(last_good)} are correct; larger positions {how} "
        "(a cos/sin cache shorter than the positions).",
    )


def _table_lengths(c: Comparison, last_good: float, bad: int) -> tuple[list[int], list[int]]:
    """Table lengths ``n`` (last_good < n <= bad) to try: wrapped ones, then clamped ones.

    The rows at the first failing position `bad` carry the angles of some table row ``q``:
    a clamped table has ``n = q + 1``; a wrapped one ``bad = k n + q``, so
    ``n = (bad - q) / k``, tried for k up to 64, smallest n first (a cost bound: a table
    wrapped more than 64 times before `bad` is not tried).
    """
    wrapped, clamped = [bad], [bad]
    q = _table_row(c, bad)
    if q is not None:
        clamped.append(q + 1)
        span = bad - q
        wrapped += [span // k for k in range(64, 0, -1) if span % k == 0 and span // k > q]
    return (
        sorted(n for n in set(wrapped) if last_good < n <= bad),
        [n for n in dict.fromkeys(clamped) if last_good < n <= bad],
    )


def _table_row(c: Comparison, position: int) -> int | None:
    """The table row, in ``[0, position)``, whose angles the rows at `position` carry best.

    No table gives `position` its own row (a wrapped one gives ``position mod n < n <=
    position``, a clamped one ``n - 1 < position``), so the best fit among the rows a
    table can give is returned even where `position` itself fits better: `explains`
    judges the tables it leads to.

    The slowest pair fixes the position up to whole turns; each branch is refined up the
    pairs from slow to fast (each step's error is far below half a turn of the next pair)
    and the branch that fits every pair best wins. A multi-axis grid's rows sit at their
    first axis's position (`row_p`): only the pairs that axis drives are read. To bound
    its cost, the search gives up (None) when `position` lies 4096 or more whole turns of
    the slowest pair in.
    """
    s = c.setup
    first_axis = pair_axes(s.spec) == 0
    theta = inv_freq(s.spec, s.seq_len)[first_axis]
    if theta.size == 0 or not np.all(theta > 0):
        return None
    got, norm = pair_angles(s, c.actual)
    got, norm = got[..., first_axis], norm[..., first_axis]
    rows = (row_p(s) == position)[..., None] & (norm > 0)
    sign = -1.0 if s.inverse else 1.0
    angles = np.where(rows, sign * got, np.nan).reshape(-1, theta.size)
    usable = np.any(np.isfinite(angles), axis=0)
    if not np.any(usable):
        return None
    order = np.argsort(theta[usable])
    angle = np.nanmedian(angles[:, usable], axis=0)[order]
    theta = theta[usable][order]
    turns = int(position * theta[0] / (2 * math.pi)) + 1
    if turns > 4096:
        return None
    best: int | None = None
    best_cost = math.inf
    for turn in range(turns + 1):
        q = (wrap(angle[0]) + 2 * math.pi * turn) / theta[0]
        for a, t in zip(angle[1:], theta[1:], strict=True):
            q += wrap(a - q * t) / t
        row = round(q)
        cost = float(np.sum(np.abs(wrap(angle - row * theta))))
        if 0 <= row < position and cost < best_cost:
            best, best_cost = row, cost
    return best


def other_seq_axis(c: Comparison) -> Diagnosis | None:
    """The positions laid along another axis of x than `seq_axis` (e.g. bshd data as bhsd).

    The positions along `seq_axis` are laid along each other axis of the same length; a
    run of consecutive positions (the default ``offset + arange``) also along axes of any
    length, from the same start.
    """
    s = c.setup
    ndim = s.x.ndim
    if s.spec.sections is not None or ndim < 3:
        return None
    axis = s.seq_axis % ndim
    index = tuple(slice(None) if i == axis else 0 for i in range(ndim - 1))
    line = s.grid[index]
    if not np.array_equal(np.broadcast_to(_along(line, axis, ndim), s.grid.shape), s.grid):
        return None  # per-row positions: no single line to lay elsewhere
    consecutive = bool(np.all(np.diff(line) == 1.0))
    for other in range(ndim - 1):
        if other == axis:
            continue
        length = s.x.shape[other]
        if length == line.size:
            moved = line
        elif consecutive:
            moved = line[0] + np.arange(length, dtype=np.float64)
        else:
            continue
        grid = np.broadcast_to(_along(moved, other, ndim), s.grid.shape).copy()
        if np.array_equal(grid, s.grid):
            continue
        if explains(c, s.oracle(grid=grid), grid=grid):
            return Diagnosis(
                "positions",
                f"the result matches the positions laid along axis {other - ndim} of x, not "
                f"seq_axis={s.seq_axis}: the sequence runs along axis {other - ndim} (e.g. x "
                f"is (batch, seq, heads, head_dim)); pass seq_axis={other - ndim}, as "
                "apply_rope takes it.",
            )
    return None


def _along(line: F64, axis: int, ndim: int) -> F64:
    """`line` shaped to lie along `axis` of an ``ndim - 1``-dimensional grid."""
    shape = [1] * (ndim - 1)
    shape[axis] = line.size
    return line.reshape(shape)
