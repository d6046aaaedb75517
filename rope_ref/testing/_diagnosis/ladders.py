"""Diagnoses of per-axis frequency ladders given as ``freqs=`` (axial RoPE: timm, Flux).

Each axis of an axial spec restarts its ladder, ``base^(-j / s_a)`` for its ``s_a`` pairs
(`rope_ref.axial_freqs`). A ladder built with another base is refitted axis by axis from
the angles the result turns by, and tried for every axis at once and for each alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from rope_ref._core.frequencies import pair_axes
from rope_ref.testing._compare import F64, Comparison
from rope_ref.testing._diagnosis.focus import explains_by, with_freqs
from rope_ref.testing._diagnosis.frequencies import measured_freqs
from rope_ref.testing._diagnosis.shared import (
    COMMON_BASES,
    Diagnosis,
    ranges,
)

__all__ = ["axis_ladders", "ladder_base"]


def ladder_base(ladder: F64) -> float | None:
    """The base ``b`` of a ladder ``b^(-j/n)`` (n = its length), or None if it is none."""
    n = ladder.size
    if n < 2 or not np.all(ladder > 0) or not math.isclose(float(ladder[0]), 1.0, rel_tol=1e-9):
        return None
    j = np.arange(n, dtype=np.float64)
    base = math.exp(-math.log(float(ladder[1])) * n)
    if base <= 1.0 or not np.allclose(ladder, base ** (-j / n), rtol=1e-9, atol=0.0):
        return None
    return base


def _fitted(measured: F64 | None, n: int) -> list[float]:
    """Bases read off a measured ladder (the median over its pairs), raw and to 4 digits."""
    if measured is None or measured.size < 2 or not np.all(measured[1:] > 0):
        return []
    j = np.arange(1, measured.size, dtype=np.float64)
    base = float(np.exp(np.median(-np.log(measured[1:]) * n / j)))
    if not math.isfinite(base) or base <= 1.0:
        return []
    return [float(f"{base:.4g}"), base]


def _candidates(c: Comparison) -> Iterator[tuple[F64, str]]:
    spec = c.setup.spec
    assert spec.freqs is not None
    freqs = np.asarray(spec.freqs, dtype=np.float64)
    axes = pair_axes(spec)
    n_axes = int(axes.max()) + 1
    bases = [ladder_base(freqs[axes == a]) for a in range(n_axes)]
    if any(b is None for b in bases):
        return  # not restarted ladders of one base per axis: nothing to refit
    measured = measured_freqs(c)
    per_axis: list[list[float]] = []
    for a in range(n_axes):
        n = int(np.sum(axes == a))
        seen = _fitted(None if measured is None else measured[axes == a], n)
        per_axis.append([b for b in dict.fromkeys([*seen, *COMMON_BASES]) if b > 1.0])
    told = sorted({f"{b:.6g}" for b in bases if b is not None})
    everywhere = list(dict.fromkeys(b for axis in per_axis for b in axis))
    for base in everywhere:
        alt = freqs.copy()
        for a in range(n_axes):
            n = int(np.sum(axes == a))
            alt[axes == a] = base ** (-np.arange(n) / n)
        if f"{base:.6g}" not in told or len(told) > 1:
            yield (
                alt,
                f"every axis's frequency ladder follows base {base:.6g}, the spec's freqs= "
                f"follow base {' / '.join(told)}: the per-axis ladders were built with "
                "another base (rope_theta / theta not passed to axial_freqs or its "
                "equivalent).",
            )
    for a in range(n_axes):
        n = int(np.sum(axes == a))
        for base in per_axis[a]:
            if f"{base:.6g}" == f"{bases[a]:.6g}":
                continue
            alt = freqs.copy()
            alt[axes == a] = base ** (-np.arange(n) / n)
            yield (
                alt,
                f"the frequency ladder of axis {a} (pairs "
                f"{ranges(np.flatnonzero(axes == a).tolist())}) follows base {base:.6g}, the "
                f"spec's freqs= follow base {bases[a]:.6g} there: that axis's ladder was "
                "built with another base.",
            )


def axis_ladders(c: Comparison) -> Diagnosis | None:
    """Per-axis ladders (``freqs=`` with `sections`) refitted with another base."""
    spec = c.setup.spec
    if spec.freqs is None or spec.sections is None or spec.xpos is not None:
        return None
    for alt, message in _candidates(c):
        if explains_by(c, with_freqs(alt)):
            return Diagnosis("frequencies", message)
    return None
