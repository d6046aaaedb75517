"""Diagnoses of multi-axis RoPE (M-RoPE): sections, their order, the axes, 1-D."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from rope_ref._config.hf_mrope import ernie_axes, openpangu_axes
from rope_ref._core.frequencies import pair_axes
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import Comparison, pair_norms
from rope_ref.testing._diagnosis.drift import pair_drift
from rope_ref.testing._diagnosis.focus import explains_by, with_spec
from rope_ref.testing._diagnosis.shared import (
    Diagnosis,
    explains,
    failing_pairs,
    ranges,
)

__all__ = ["partly_right_pairs", "sections"]


def _replaced(spec: RopeSpec, **changes: object) -> RopeSpec | None:
    try:
        return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]
    except ValueError:  # e.g. sections the interleaved order cannot hold
        return None


def _section_candidates(spec: RopeSpec) -> Iterator[tuple[RopeSpec | None, str]]:
    assert spec.sections is not None
    other = "interleaved" if spec.section_order == "chunked" else "chunked"
    alt = _replaced(spec, section_order=other)
    order = spec.section_order if isinstance(spec.section_order, str) else "a pair map"
    yield (
        alt,
        f"the pairs are assigned to axes {other} ({other} M-RoPE), but the spec's order is "
        f"{order!r} (Qwen2/2.5-VL chunk, Qwen3-VL interleaves)",
    )
    if alt is None and other == "interleaved":
        yield _interleaved_as_qwen3_vl(spec)
    yield from _engine_orders(spec)
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


def _engine_orders(spec: RopeSpec) -> Iterator[tuple[RopeSpec | None, str]]:
    """The pair maps of Ernie 4.5-VL / Bailing and openPangu, for (t, h, w) sections."""
    assert spec.sections is not None
    if len(spec.sections) != 3:
        return
    t, h, w = spec.sections
    maps = []
    if h == w:
        maps.append(
            (ernie_axes((h, w, t)), "Ernie 4.5-VL's and Bailing's order (h, w, h, w, ..., t)")
        )
    if t >= 2:
        maps.append((openpangu_axes((t, h, w)), "openPangu's order (vLLM rope_type 'openpangu')"))
    for axes, name in maps:
        if tuple(int(a) for a in pair_axes(spec)) != axes:
            yield (
                _replaced(spec, sections=None, section_order=axes),
                f"the pairs follow the axes in {name}, not in the spec's order; "
                "state it with RopeSpec(section_order=<one axis per pair>)",
            )


def qwen3_vl_axes(sections: Sequence[int], n_pairs: int) -> np.ndarray:
    """The axis of each pair as Qwen3-VL's ``apply_interleaved_mrope`` assigns them.

    Axis ``a >= 1`` takes pairs ``a, a + n, a + 2n, ...`` below ``n * sections[a]`` (``n``
    axes), clipped to the pairs there are; axis 0 keeps the rest. Sections that overrun the
    pair count are accepted there and give fewer pairs than they say.
    """
    n = len(sections)
    axes = np.zeros(n_pairs, dtype=np.intp)
    for axis in range(1, n):
        axes[axis : n * sections[axis] : n] = axis
    return axes


def _interleaved_as_qwen3_vl(spec: RopeSpec) -> tuple[RopeSpec | None, str]:
    """The spec's sections in the interleaved order as Qwen3-VL applies them, if expressible."""
    assert spec.sections is not None
    axes = qwen3_vl_axes(spec.sections, spec.n_pairs)
    counts = tuple(int(k) for k in np.bincount(axes, minlength=len(spec.sections)))
    alt = _replaced(spec, sections=counts, section_order="interleaved")
    if alt is not None and not np.array_equal(pair_axes(alt), axes):
        alt = None
    return (
        alt,
        "the pairs are assigned to axes interleaved as Qwen3-VL's interleaved M-RoPE "
        "(transformers' apply_interleaved_mrope) does with mrope_section "
        f"{list(spec.sections)}, which overruns the {spec.n_pairs} "
        f"pairs: the axes get {list(counts)} pairs. RopeSpec refuses sections "
        f"{tuple(spec.sections)} in the interleaved order; the same assignment is "
        f"sections={counts}, section_order='interleaved' (the spec's order is 'chunked')",
    )


def sections(c: Comparison) -> Diagnosis | None:
    """M-RoPE with other sections, order or axes, collapsed to 1-D; or 1-D told for M-RoPE.

    Tried, in order: the other section order (chunked or interleaved); Ernie 4.5-VL's /
    Bailing's and openPangu's pair maps for (t, h, w) sections; every permutation
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
        if explains_by(c, with_spec(alt_spec), spec=alt_spec):
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
    head = (
        f"pairs {ranges(good)} match the given positions and pairs {ranges(wrong)} do not, "
        "and no frequency, scaling or position rule explains it: "
    )
    drift = pair_drift(c)
    if drift is not None:  # a steady other rate: no M-RoPE pattern (that is other positions)
        return Diagnosis("unknown", head + drift.text(spec.scaling is not None) + ".")
    return Diagnosis(
        "unknown",
        head + "the failing pairs turn by other angles (their frequencies, or the positions "
        "they were given, differ). If the implementation is multi-axis RoPE (M-RoPE), give "
        "the spec its sections and the (t, h, w) positions.",
    )
