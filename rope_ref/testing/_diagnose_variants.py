"""Diagnoses about variants: scaling rules and multi-axis (M-RoPE) sections.

Each check builds whole alternative specs (a scaling rule missing, of another family,
with another factor or original context length; M-RoPE with other sections, section
order or axis order, or collapsed to 1-D) and names the one that explains the result
under its own error model, with the fitted parameters.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.frequencies import inv_freq
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison, pair_norms
from rope_ref.testing._explain import Diagnosis, explains, failing_pairs, pair_angles, wrap

__all__ = ["low_position_freqs", "partly_right_pairs", "ranges", "scaling", "sections"]

#: Pre-training context lengths to try for rules that have one.
COMMON_LENGTHS = (2048, 4096, 8192, 16384, 32768, 131072)
#: Factors to try besides the fitted one.
COMMON_FACTORS = (2.0, 4.0, 8.0, 16.0, 32.0, 40.0)


def low_position_freqs(c: Comparison) -> F64 | None:
    """Per-pair angle per position of the result, refined up a ladder of positions.

    At the smallest non-zero position no pair has turned by more than pi, which gives a
    first estimate; each larger position then unwraps its angle around the prediction of
    the estimate so far (valid while the prediction is within pi), so the estimate sharpens
    with every step up.
    """
    s = c.setup
    p = np.abs(s.row_positions)
    steps = np.unique(p[p > 0])
    if steps.size == 0:
        return None
    got, norm = pair_angles(s, c.actual)
    sign = -1.0 if s.inverse else 1.0
    theta: F64 | None = None
    for step in steps:
        rows = (p == step)[..., None] & (norm > 0)
        if not np.all(np.any(rows.reshape(-1, rows.shape[-1]), axis=0)):
            continue
        angle = sign * got
        masked = np.where(rows, angle, np.nan).reshape(-1, angle.shape[-1])
        at_step = np.asarray(np.nanmedian(masked, axis=0), dtype=np.float64)
        if theta is None:
            theta = wrap(at_step) / step
            continue
        predicted = theta * step
        if np.any(np.abs(theta - (predicted + wrap(at_step - predicted)) / step) * step > 1.0):
            break  # the prediction drifted too far to unwrap safely
        theta = (predicted + wrap(at_step - predicted)) / step
    return theta


def _rule_text(rule: object) -> str:
    if rule is None:
        return "no scaling rule"
    return repr(rule)


def _fitted_factors(c: Comparison) -> list[float]:
    """Factors read off the result, each tidied to 3 significant digits and exact.

    The median ratio of unscaled to measured frequency over all pairs (a linear rule
    scales every pair alike), and the ratio at the slowest pair (which YaRN, Llama 3 and
    NTK-aware scale by the full factor). A pair too slow to turn measurably at the given
    positions reads 0 and its ratio is infinite: the median holds while fewer than half
    the pairs are such. Factors within 1e-3 of 1 are left out (a factor of 1 is no rule);
    factors below 1 are kept: a result that turns faster than the unscaled frequencies
    follows one (e.g. positions multiplied by the factor instead of divided).
    """
    spec = c.setup.spec
    measured = low_position_freqs(c)
    if measured is None or spec.freqs is not None or not np.all(measured >= 0):
        return []
    plain = inv_freq(dataclasses.replace(spec, scaling=None))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = plain / measured
    found: list[float] = []
    for factor in (float(np.median(ratios)), float(ratios[-1])):
        if math.isfinite(factor) and abs(factor - 1.0) > 1e-3:
            found += [float(f"{factor:.3g}"), factor]
    return list(dict.fromkeys(found))


def _candidate_rules(c: Comparison) -> Iterator[object]:
    """Rules to try, most likely first.

    No rule; then every family with the spec's own factor (and every common length), then
    with the fitted and the common factors (and the spec's length, or two common ones).
    """
    spec = c.setup.spec
    rule = spec.scaling
    if rule is not None:
        yield None
    original = getattr(rule, "original_max_position", None)
    every_length = list(dict.fromkeys([*([original] if original else []), *COMMON_LENGTHS]))
    few_lengths = [original] if original else [8192, 4096]
    factor = getattr(rule, "factor", None)
    fitted = _fitted_factors(c)

    def family(f: float, lengths: list[int]) -> Iterator[object]:
        yield rules.Linear(f)
        if rule is not None:  # without a rule, NTK-aware is another base: `frequencies`
            yield rules.NTKAware(f)
        for n in lengths:
            yield rules.YaRN(f, original_max_position=n)
            yield rules.Llama3(f, original_max_position=n)

    if factor:
        yield from family(factor, every_length)
    for f in dict.fromkeys([*fitted, *COMMON_FACTORS]):
        if f != factor:
            yield from family(f, few_lengths)
    if isinstance(rule, rules.DynamicNTK):
        for n in every_length:
            yield rules.DynamicNTK(rule.factor, max_position=n)


def scaling(c: Comparison) -> Diagnosis | None:
    """A scaling rule missing, of another family, or with other parameters.

    Tried, in order: no rule (where the spec has one); every family (Linear, NTK-aware
    where the spec has a rule, YaRN, Llama 3) with the spec's factor, YaRN and Llama 3 at
    the spec's original context length and at each common one (`COMMON_LENGTHS`: 2048,
    4096, 8192, 16384, 32768, 131072); then every family with the factors read off the
    result (`_fitted_factors`) and the common factors (`COMMON_FACTORS`: 2, 4, 8, 16, 32,
    40), at the spec's length (8192 and 4096 where the spec has none); for a dynamic NTK
    rule, its factor at the spec's and each common context length. M-RoPE and xPos specs
    are tried alike (a rule scales their frequencies as any other's).
    """
    spec = c.setup.spec
    if spec.freqs is not None:  # explicit frequencies take no rule
        return None
    for rule in _candidate_rules(c):  # at most 84 rules
        if rule == spec.scaling:
            continue
        try:
            alt = dataclasses.replace(spec, scaling=rule)  # type: ignore[arg-type]
            expected = c.setup.oracle(spec=alt)
        except ValueError:
            continue
        if explains(c, expected, spec=alt):
            return Diagnosis("scaling", _scaling_message(spec.scaling, rule))
    return None


def _scaling_message(want: object, got: object) -> str:
    head = f"the result follows {_rule_text(got)}, but the spec says {_rule_text(want)}"
    if got is None:
        why = "the scaling rule was not applied (plain RoPE frequencies)"
    elif want is None:
        why = "a scaling rule was applied that the spec does not have"
    elif type(got) is not type(want):
        why = f"{type(got).__name__} used where {type(want).__name__} belongs"
    elif getattr(got, "factor", None) != getattr(want, "factor", None):
        why = f"the factor is {got.factor:g}, not {want.factor:g}"  # type: ignore[attr-defined]
    else:
        why = "the original (pre-training) context length differs"
    return f"{head}: {why}."


# -- M-RoPE ------------------------------------------------------------------------------------


def _replaced(spec: RopeSpec, **changes: object) -> RopeSpec | None:
    try:
        return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]
    except ValueError:  # e.g. sections the interleaved order cannot hold
        return None


def _section_candidates(spec: RopeSpec) -> Iterator[tuple[RopeSpec | None, str]]:
    assert spec.sections is not None
    other = "interleaved" if spec.section_order == "chunked" else "chunked"
    yield (
        _replaced(spec, section_order=other),
        f"the pairs are assigned to axes {other} ({other} M-RoPE), but the spec's order is "
        f"{spec.section_order!r} (Qwen2/2.5-VL chunk, Qwen3-VL interleaves)",
    )
    for perm in sorted(set(itertools.permutations(spec.sections))):
        if perm != tuple(spec.sections):
            yield (
                _replaced(spec, sections=perm),
                f"the sections are {list(perm)}, not the spec's {list(spec.sections)} "
                "(mrope_section read in another order)",
            )
    for sections in ((16, 24, 24), (24, 20, 20), (8, 12, 12), (2, 3, 3)):
        fits = len(sections) == len(spec.sections) and sum(sections) == spec.n_pairs
        if fits and sorted(sections) != sorted(spec.sections):
            yield (
                _replaced(spec, sections=sections),
                f"the sections are {list(sections)}, not the spec's {list(spec.sections)}",
            )


def sections(c: Comparison) -> Diagnosis | None:
    """M-RoPE with other sections, order or axes, collapsed to 1-D; or 1-D told for M-RoPE.

    Tried, in order: the other section order (chunked or interleaved); every permutation
    of the spec's sections; each common split of the same number of pairs that is no
    permutation of the spec's ((16, 24, 24) as Qwen2-VL and Qwen2.5-VL, (24, 20, 20) as
    Qwen3-VL, both for head_dim 128; (8, 12, 12) for 64; (2, 3, 3) for 16); the position
    axes in every other order; 1-D RoPE at the positions of each single axis.
    """
    s = c.setup
    spec = s.spec
    if spec.sections is None:
        return None
    for alt_spec, why in _section_candidates(spec):
        if alt_spec is None:
            continue
        if explains(c, s.oracle(spec=alt_spec), spec=alt_spec):
            return Diagnosis("sections", why + ".")
    n_axes = len(spec.sections)
    for perm in itertools.permutations(range(n_axes)):
        if perm == tuple(range(n_axes)):
            continue
        grid = s.grid[..., list(perm)]
        if explains(c, s.oracle(grid=grid), grid=grid):
            return Diagnosis(
                "sections",
                f"the position axes are read in the order {list(perm)} (e.g. (h, t, w) for "
                "(t, h, w)): the position ids' axes are permuted.",
            )
    flat_spec = dataclasses.replace(spec, sections=None)
    for axis in range(n_axes):
        grid = s.grid[..., axis]
        setup_1d = dataclasses.replace(s, spec=flat_spec, grid=grid)
        if explains(c, setup_1d.oracle(), spec=flat_spec, grid=grid):
            return Diagnosis(
                "sections",
                f"the result is 1-D RoPE at the positions of axis {axis} on every pair: the "
                "multi-axis positions were collapsed to one axis (M-RoPE sections ignored).",
            )
    return None


def partly_right_pairs(c: Comparison) -> Diagnosis | None:
    """1-D positions were given, but only some pairs match (checked after the frequencies).

    The spec has no sections and the positions are 1-D, so no multi-axis cause is named:
    the message says which pairs match and which do not.
    """
    spec = c.setup.spec
    if spec.n_pairs < 2 or spec.sections is not None:
        return None
    bad = failing_pairs(c)
    passthrough = np.ones(spec.head_dim, dtype=bool)
    passthrough[spec.rotary_start : spec.rotary_stop] = False
    if not np.any(bad) or np.all(bad) or np.any(c.failed[..., passthrough]):
        return None
    # Only a rotation by other angles: every pair keeps its norm (a corrupted value does not).
    got, want = (pair_norms(spec, y, inverse=c.setup.inverse) for y in (c.actual, c.expected))
    kept = np.abs(got - want) <= 2 * c.tolerance
    if not np.all(kept[c.failed]):
        return None
    good = np.flatnonzero(~bad).tolist()
    wrong = np.flatnonzero(bad).tolist()
    return Diagnosis(
        "unknown",
        f"pairs {ranges(good)} match the given positions and pairs {ranges(wrong)} do not, "
        "and no frequency, scaling or position rule explains it: the failing pairs turn by "
        "other angles (their frequencies, or the positions they were given, differ). If the "
        "implementation is multi-axis RoPE (M-RoPE), give the spec its sections and the "
        "(t, h, w) positions.",
    )


def ranges(idx: list[int]) -> str:
    """``0-3, 7, 9-11`` for a sorted list of indices."""
    parts: list[str] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(parts)
