"""Name the most likely cause of a RoPE mismatch by testing alternative explanations.

Each check rebuilds the oracle with one ingredient changed (direction, layout, positions,
rotated range, frequencies, scale, precision) and asks whether that explains the result
under the error model. The checks run from the most specific to the most general.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from rope_ref._core.aliases import Layout, Role
from rope_ref._core.frequencies import attention_factor, inv_freq, pair_axes
from rope_ref.testing._compare import Comparison
from rope_ref.testing._diagnose_numeric import (
    angle_precision,
    frequencies,
    position_precision,
    rounded_inputs,
)
from rope_ref.testing._diagnose_tables import table_layout, yarn_ramp
from rope_ref.testing._diagnose_variants import partly_right_pairs, ranges, scaling, sections
from rope_ref.testing._explain import (
    CAUSES,
    Diagnosis,
    explains,
    failing_pairs,
    fmt,
    pair_angles,
    rotary_mask,
    row_failed,
    row_p,
    wrap,
)
from rope_ref.testing._tolerance import EPS, max_checkable_position

__all__ = ["CAUSES", "Diagnosis", "diagnose"]


def diagnose(c: Comparison) -> Diagnosis:
    """Return the first explanation of the mismatch in `c` (``"unknown"`` if none fits)."""
    if c.dtype_mismatch is not None:
        return Diagnosis("dtype", c.dtype_mismatch)
    if not np.any(c.failed) and not c.checkable:
        return _not_checkable(c)
    checks: tuple[Callable[[Comparison], Diagnosis | None], ...] = (
        _non_finite,
        _zeros,
        _direction_or_layout,
        table_layout,
        _offset,
        _positions_pattern,
        sections,
        _identity_beyond,
        _rotary_range,
        _scale,
        yarn_ramp,
        scaling,
        position_precision,
        rounded_inputs,
        frequencies,
        angle_precision,
        _position_range,
        partly_right_pairs,
    )
    for check in checks:
        try:
            with np.errstate(all="ignore"):  # candidates may overflow (float16 positions)
                found = check(c)
        except ValueError:  # a candidate the oracle rejects (e.g. non-finite positions)
            continue
        if found is not None:
            return found
    return Diagnosis("unknown", _unknown_message(c))


# -- the checks --------------------------------------------------------------------------------


def _not_checkable(c: Comparison) -> Diagnosis:
    s = c.setup
    assert c.unchecked is not None
    assert c.model is not None
    first = float(np.min(np.abs(s.row_positions[c.unchecked])))
    names = {eps: name for name, eps in EPS.items()}
    dtype, angle = names[c.model.eps], names[c.model.angle_eps]
    limit = max_checkable_position(s.spec, dtype, angle_dtype=angle, seq_len=s.seq_len)
    if c.position_eps is not None and first <= limit:
        return Diagnosis(
            "not_checkable",
            f"not checkable here: with positions rounded to {names[c.position_eps]} "
            f"(position_dtype) the error model allows |error| of half a pair's norm or "
            f"more at positions up to {float(np.max(np.abs(s.row_positions))):.10g}: "
            "zeros, the identity or the inverse rotation would pass. Check smaller "
            "positions, or build the grid in a wider dtype.",
        )
    return Diagnosis(
        "not_checkable",
        f"not checkable here: from position {first:.10g} the {dtype} error model allows "
        "|error| of half a pair's norm or more, so zeros, the identity or the inverse "
        f"rotation would pass as well as a correct result. In {dtype} this spec is "
        f"checkable up to position {limit}; check larger positions in a wider dtype.",
    )


def _non_finite(c: Comparison) -> Diagnosis | None:
    bad = ~np.isfinite(c.actual)
    if not np.any(bad):
        return None
    return Diagnosis(
        "non-finite",
        f"{int(np.sum(bad))} element(s) of the result are NaN or infinite "
        "(overflow, a division by zero, or uninitialised memory such as an unwritten output).",
    )


def _zeros(c: Comparison) -> Diagnosis | None:
    failed = c.failed
    if not np.any(failed) or np.any(c.actual[failed] != 0.0):
        return None
    return Diagnosis(
        "zeros",
        f"every mismatched element of the result is 0 ({int(np.sum(failed))} of them) where "
        "the oracle is not: an output buffer left unwritten, or the input overwritten "
        "(zeroed) and returned.",
    )


def _direction_or_layout(c: Comparison) -> Diagnosis | None:
    s = c.setup
    spec = s.spec
    other: Layout = "interleaved" if spec.layout == "half" else "half"
    swapped = dataclasses.replace(spec, layout=other)
    pairs = {
        "half": "(j, j + n/2) (GPT-NeoX / HF rotate_half)",
        "interleaved": "(2j, 2j + 1) (GPT-J / Meta complex / RoFormer)",
    }
    swapped_role = _xpos_role_swapped(c)
    if swapped_role is not None:
        return swapped_role
    if explains(c, s.oracle(inverse=not s.inverse)):
        return Diagnosis(
            "direction",
            "the result is the inverse rotation (every angle negated): sin has the wrong "
            "sign, or rotate_half returns (x2, -x1) instead of (-x2, x1).",
        )
    if explains(c, s.oracle(spec=swapped), spec=swapped):
        return Diagnosis(
            "layout",
            f"the result pairs features {pairs[other]}, but the spec's layout "
            f"{spec.layout!r} pairs {pairs[spec.layout]}; use layout={other!r} in the spec, "
            "or permute the q/k weights (rope_ref.permute_weights).",
        )
    if explains(c, s.oracle(spec=swapped, inverse=not s.inverse), spec=swapped):
        return Diagnosis(
            "layout",
            f"the result pairs features {pairs[other]} and also rotates the other way; "
            f"the spec's layout is {spec.layout!r}.",
        )
    return None


def _xpos_role_swapped(c: Comparison) -> Diagnosis | None:
    """An xPos query scaled like a key, or a key like a query."""
    s = c.setup
    if s.spec.xpos is None or s.role is None:
        return None
    other: Role = "query" if s.role == "key" else "key"
    if not explains(c, dataclasses.replace(s, role=other).oracle()):
        return None
    sign = {"query": "+", "key": "-"}
    return Diagnosis(
        "xpos_role",
        f"the {s.role} was scaled like a {other}: xPos scales queries by "
        "zeta^(+p / scale_base) and keys by zeta^(-p / scale_base); this result carries "
        f"zeta^({sign[other]}p / scale_base). Pass the {s.role}'s role (or the inverse "
        "scale) to the function that scales it.",
    )


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


def _offset(c: Comparison) -> Diagnosis | None:
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


def _positions_pattern(c: Comparison) -> Diagnosis | None:
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


def _identity_beyond(c: Comparison) -> Diagnosis | None:
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


def _rotated_features(c: Comparison) -> np.ndarray:
    changed = np.abs(c.actual - c.setup.x) > c.tolerance
    return np.asarray(np.any(changed.reshape(-1, c.actual.shape[-1]), axis=0))


def _rotary_range(c: Comparison) -> Diagnosis | None:
    s = c.setup
    spec = s.spec
    changed = _rotated_features(c)
    if not np.any(changed):
        return None
    lo, hi = int(np.argmax(changed)), int(len(changed) - np.argmax(changed[::-1]))
    if (lo, hi) == (spec.rotary_start, spec.rotary_stop):
        return None
    want = f"[{spec.rotary_start}, {spec.rotary_stop})"
    # Slowly turning pairs may look unchanged at small positions: the rotated range can be
    # wider than the changed one, so try every range that covers it.
    if spec.freqs is None and spec.sections is None:
        for start in sorted({lo, spec.rotary_start, 0} & set(range(lo + 1))):
            first = hi - start + (hi - start) % 2
            for width in range(max(first, 2), spec.head_dim - start + 1, 2):
                if (start, width) == (spec.rotary_start, spec.rotary_dim):
                    continue
                alt_spec = dataclasses.replace(spec, rotary_dim=width, rotary_start=start)
                if explains(c, s.oracle(spec=alt_spec), spec=alt_spec):
                    return Diagnosis(
                        "rotary_dim",
                        f"the result rotates features [{start}, {start + width}) "
                        f"(rotary_dim={width}, rotary_start={start}), but the spec rotates "
                        f"{want} (rotary_dim={spec.rotary_dim}, rotary_start="
                        f"{spec.rotary_start}); partial rotary was ignored or misplaced.",
                    )
    outside = changed & ~rotary_mask(spec)
    inside_ok = not np.any(c.failed[..., rotary_mask(spec)])
    if np.any(outside) and inside_ok:  # the rotated features are right: that is all
        return Diagnosis(
            "rotary_dim",
            f"features {np.flatnonzero(outside).tolist()[:8]} changed although the spec "
            f"rotates only {want}: the pass-through features must be copied unchanged.",
        )
    return None


def _scale(c: Comparison) -> Diagnosis | None:
    s = c.setup
    mask = rotary_mask(s.spec)
    e, a = c.expected[..., mask], c.actual[..., mask]
    denominator = float(np.sum(e * e))
    if denominator == 0.0:
        return None
    ratio = float(np.sum(a * e)) / denominator
    if not math.isfinite(ratio) or abs(ratio - 1.0) < 1e-6 or ratio <= 0:
        return None
    alt = c.expected.copy()
    alt[..., mask] *= ratio
    if not explains(c, alt, tol=c.tolerance * max(1.0, ratio)):
        return None
    factor = attention_factor(s.spec, s.seq_len)
    got = f"the result is {ratio:.6g} x the oracle"
    if factor != 1.0 and math.isclose(ratio * factor, 1.0, rel_tol=1e-3):
        detail = (
            f"{got}: the spec's attention factor {factor:.6g} was not applied (YaRN / "
            "LongRoPE mscale dropped from cos/sin)."
        )
    elif factor != 1.0 and math.isclose(ratio, factor, rel_tol=1e-3):
        detail = f"{got}: the attention factor {factor:.6g} was applied twice."
    else:
        detail = (
            f"{got}, whose attention factor is {factor:.6g}: cos/sin were scaled by a "
            "different factor (mscale / mscale_all_dim / attention_factor mismatch)."
        )
    return Diagnosis("attention_factor", detail)


def _position_range(c: Comparison) -> Diagnosis | None:
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


def _span(grid: np.ndarray) -> str:
    """``a to b`` per position axis (``(t, h, w)`` ranges for a multi-axis grid)."""
    if grid.ndim == 1:
        return f"{fmt(float(np.min(grid)))} to {fmt(float(np.max(grid)))}"
    return ", ".join(f"axis {a}: {_span(grid[:, a])}" for a in range(grid.shape[-1]))


def _unknown_message(c: Comparison) -> str:
    s = c.setup
    rows = row_failed(c)
    multi = s.spec.sections is not None
    grid = s.grid.reshape(-1, s.grid.shape[-1]) if multi else s.grid.reshape(-1)
    flat = rows.reshape(-1)
    parts = ["no single known cause explains the mismatch"]
    if np.any(flat) and np.any(~flat):
        parts.append(
            f"failing rows sit at positions {_span(grid[flat])}; passing rows at "
            f"{_span(grid[~flat])}"
        )
    pairs = _failing_pairs(c)
    if pairs is not None:
        parts.append(f"only pairs {pairs} differ")
    return "; ".join(parts) + "."


def _failing_pairs(c: Comparison) -> str | None:
    """The failing pairs when only some fail, as ranges."""
    bad = failing_pairs(c) if c.setup.spec.n_pairs else np.zeros(0, dtype=bool)
    if not np.any(bad) or np.all(bad):
        return None
    return f"{ranges(np.flatnonzero(bad).tolist())} (of {c.setup.spec.n_pairs})"
