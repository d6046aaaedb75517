"""Diagnoses of the frequencies: another base, exponent or rotary_dim in the exponent."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np

from rope_ref._core.frequencies import inv_freq, rope_angles
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison, Setup
from rope_ref.testing._diagnosis.shared import (
    COMMON_BASES,
    Diagnosis,
    explains,
    oracle_with_freqs,
    pair_angles,
    wrap,
)

__all__ = ["frequencies", "frequency_candidates", "measured_freqs", "pair_positions"]


def pair_positions(s: Setup) -> F64:
    """The position each pair turns with, shape ``x.shape[:-1] + (n_pairs,)``.

    1-D specs: the row's position for every pair; multi-axis specs: the position of the
    axis each pair belongs to (read off the angles at unit positions).
    """
    n = s.spec.n_pairs
    if s.spec.sections is None:
        return np.broadcast_to(s.grid[..., None], (*s.grid.shape, n))
    n_axes = len(s.spec.sections)
    units = np.eye(n_axes)
    axis_of_pair = np.argmax(np.abs(np.asarray(rope_angles(s.spec, units, s.seq_len))), axis=0)
    return np.asarray(s.grid[..., axis_of_pair], dtype=np.float64)


def measured_freqs(c: Comparison) -> F64 | None:
    """Inverse frequencies read off the result, from rows at two or more positions."""
    s = c.setup
    p = pair_positions(s)
    if not np.any(p != 0):
        return None
    got, norm = pair_angles(s, c.actual)
    want, _ = pair_angles(s, c.expected)
    sign = -1.0 if s.inverse else 1.0
    unwrapped = want + wrap(got - want)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = sign * unwrapped / p
    usable = (p != 0) & (norm > 0)
    flat_theta = theta.reshape(-1, theta.shape[-1])
    flat_ok = usable.reshape(-1, theta.shape[-1])
    out = np.empty(theta.shape[-1])
    for j in range(theta.shape[-1]):
        values = flat_theta[flat_ok[:, j], j]
        if values.size == 0:
            return None
        out[j] = np.median(values)
    return out


def frequency_candidates(c: Comparison) -> Iterator[tuple[RopeSpec | F64, str]]:
    spec = c.setup.spec
    if spec.freqs is not None:
        return
    d, n = spec._rotary_dim, spec.n_pairs
    j = np.arange(n, dtype=np.float64)
    base = spec.base
    if d != spec.head_dim:
        yield (
            base ** (-2.0 * j / spec.head_dim),
            f"the exponent uses head_dim = {spec.head_dim} instead of rotary_dim = {d}: "
            f"theta_j = base^(-2j/{spec.head_dim}) (partial rotary needs base^(-2j/{d})).",
        )
    yield (
        base ** (-j / d),
        f"theta_j = base^(-j/{d}) instead of base^(-2j/{d}): the exponent steps by 1/d, "
        "not 2/d (arange(0, d) used where arange(0, d, 2) belongs).",
    )
    doubled = (
        base ** (-4.0 * j / d),
        f"theta_j = base^(-2j/{n}) instead of base^(-2j/{d}): the exponent is divided by "
        f"the pair count {n}, not the rotary dim {d} (arange(0, d, 2) / (d // 2)), which "
        f"doubles it; the same as base {base:.6g}^2 = {base * base:.6g}, but the fix is the "
        "exponent's divisor, not rope_theta.",
    )
    if base * base not in COMMON_BASES:  # else a default base is the likelier mistake
        yield doubled
    measured = measured_freqs(c)
    fitted: list[float] = []
    if measured is not None and n > 1 and np.all(measured[1:] > 0):
        logs = -np.log(measured[1:]) * d / (2.0 * j[1:])
        fitted.append(float(np.exp(np.median(logs))))
    rounded = [float(f"{b:.4g}") for b in fitted]
    for candidate in (*COMMON_BASES, *rounded, *fitted):
        # A base the message would print as the spec's own is no explanation.
        if candidate > 1.0 and math.isfinite(candidate) and f"{candidate:.6g}" != f"{base:.6g}":
            try:
                alt = dataclasses.replace(spec, base=candidate)
            except ValueError:
                continue
            yield (
                alt,
                f"the frequencies follow base {candidate:.6g} instead of the spec's base "
                f"{base:.6g} (rope_theta / base not passed through).",
            )
    if base * base in COMMON_BASES:
        yield doubled
    p = np.abs(c.setup.row_positions)
    if measured is not None and np.all(measured >= 0) and np.unique(p[p != 0]).size >= 2:
        expected = inv_freq(spec, c.setup.seq_len)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.abs(measured / expected - 1.0)
        worst = int(np.nanargmax(rel)) if np.any(np.isfinite(rel)) else 0
        if f"{measured[worst]:.6g}" == f"{expected[worst]:.6g}":
            return  # no pair turns visibly otherwise: not a frequency mistake
        yield (
            measured,
            f"the result is a rotation with other inverse frequencies: pair {worst} turns by "
            f"{measured[worst]:.6g} rad per position, the spec says {expected[worst]:.6g} "
            "(check the frequency recipe and any scaling rule).",
        )


def frequencies(c: Comparison) -> Diagnosis | None:
    s = c.setup
    for candidate, message in frequency_candidates(c):
        try:
            if isinstance(candidate, RopeSpec):
                alt = s.oracle(spec=candidate)
            else:
                alt = oracle_with_freqs(s, candidate)
        except ValueError:  # e.g. measured frequencies that no spec can hold
            continue
        if explains(c, alt):
            return Diagnosis("frequencies", message)
    return None
