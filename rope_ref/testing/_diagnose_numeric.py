"""Diagnoses about numbers: precision of positions, angles and tables; the frequencies."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np

from rope_ref._core.compat import host_namespace
from rope_ref._core.frequencies import attention_factor, inv_freq, rope_angles
from rope_ref._core.reference import rotate
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison, Setup, position_tolerance, tolerance
from rope_ref.testing._explain import (
    COMMON_BASES,
    Diagnosis,
    explains,
    oracle_with_freqs,
    pair_angles,
    row_failed,
    wrap,
)
from rope_ref.testing._tolerance import EPS, ErrorModel

__all__ = ["angle_precision", "frequencies", "position_precision", "rounded_inputs"]


def round_to(values: F64, name: str) -> F64:
    """Round float64 values to float16 or bfloat16 (round to nearest even), back as float64."""
    if name == "float16":
        return values.astype(np.float16).astype(np.float64)
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def oracle_from_angles(s: Setup, angles: F64) -> F64:
    """Rotate x by the given angles (shape ``x.shape[:-1] + (n_pairs,)``), float64."""
    factor = attention_factor(s.spec, s.seq_len)
    cos, sin = np.cos(angles) * factor, np.sin(angles) * factor
    return np.asarray(
        rotate(
            s.x,
            cos,
            sin,
            layout=s.spec.layout,
            rotary_start=s.spec.rotary_start,
            inverse=s.inverse,
            xp=host_namespace(),
            output_layout=s.spec.output_layout,
        )
    )


def position_precision(c: Comparison) -> Diagnosis | None:
    """Non-integer positions that the implementation rounded itself (a float32 grid)."""
    s = c.setup
    if c.model is None or np.all(s.grid == np.round(s.grid)):
        return None  # integer positions below 2**24 are exact in float32: nothing to round
    for name in ("float32", "bfloat16", "float16"):
        extra = position_tolerance(s, c.expected, EPS[name])
        if explains(c, c.expected, tol=c.tolerance + extra, slack=1.0):
            top = float(np.max(np.abs(s.grid)))
            return Diagnosis(
                "position_precision",
                f"the errors fit positions rounded to {name} by the implementation (up to "
                f"about {2 * EPS[name] * (top + 1):.2g} off at every position, 0 included: "
                f"a {name} arange or linspace grid). If your implementation builds its own "
                f"grid in {name}, state position_dtype={name!r} (rope-ref check "
                f"--position-dtype {name}); else build the grid in float64.",
            )
    return None


def rounded_inputs(c: Comparison) -> Diagnosis | None:
    s = c.setup
    exact = {"bfloat16": 256, "float16": 2048}
    theta = inv_freq(s.spec, s.seq_len)
    axis = s.seq_axis % s.x.ndim
    start = np.take(s.grid, [0], axis=axis) if s.x.ndim > 1 else s.grid
    for name in ("bfloat16", "float16"):
        # One rounding of each position, or torch's arange(n, dtype) + offset, which rounds
        # the offset to the dtype first and the sum again.
        single = round_to(s.grid, name)
        double = round_to(round_to(start, name) + round_to(s.grid - start, name), name)
        if any(
            not np.array_equal(rounded, s.grid) and explains(c, s.oracle(grid=rounded))
            for rounded in (single, double)
        ):
            return Diagnosis(
                "precision",
                f"positions were held in {name}, which is exact only up to {exact[name]}: "
                "larger positions were rounded before the angles were built (e.g. an arange "
                "in the input dtype); build positions as integers or float32.",
            )
        if s.spec.sections is not None or s.spec.xpos is not None:
            continue  # the angles below are those of 1-D RoPE, without an xPos scale
        p = s.grid[..., None]
        for angles, what in (
            (round_to(p * theta, name), f"the angles were rounded to {name}"),
            (
                round_to(round_to(p, name) * round_to(theta, name), name),
                f"positions * inv_freq was computed in {name}",
            ),
            (p * round_to(theta, name), f"the inverse frequencies were held in {name}"),
        ):
            if explains(c, oracle_from_angles(s, angles)):
                return Diagnosis(
                    "precision",
                    f"{what} (under autocast or a low-precision buffer): angles need float32 "
                    "at least, and float64 past a few thousand positions.",
                )
    return None


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


def angle_precision(c: Comparison) -> Diagnosis | None:
    s = c.setup
    model = c.model
    if model is None:
        return None
    rows = row_failed(c)
    angles = s.max_angles()
    for name in ("float32", "bfloat16", "float16"):
        if EPS[name] <= model.angle_eps:
            continue
        looser = ErrorModel(eps=model.eps, angle_eps=EPS[name], roundings=model.roundings)
        tol = tolerance(s, c.expected, looser, model.eps)
        # Only where the looser model still pins the angle down (an angle budget under
        # 0.25 rad at every failing row) can it explain the result rather than excuse it.
        informative = 2.0 * EPS[name] * (float(np.max(angles[rows])) + 1.0) < 0.25
        if informative and explains(c, c.expected, tol=tol, slack=1.0):
            return Diagnosis(
                "precision",
                f"the errors grow with the angle and fit angles computed in {name} "
                f"(about {EPS[name]:.2g} x |angle| rad): build positions * inv_freq in "
                f"{'float64' if name == 'float32' else 'float32'} or better.",
            )
    for name in ("bfloat16", "float16"):
        if EPS[name] <= model.eps:
            continue
        looser = ErrorModel(eps=EPS[name], angle_eps=model.angle_eps, roundings=model.roundings)
        if explains(c, c.expected, tol=tolerance(s, c.expected, looser, model.eps), slack=1.0):
            return Diagnosis(
                "precision",
                f"the errors are of the size of {name} rounding although the result is "
                f"{s.dtype}: cos/sin (or the rotation) were computed in {name}.",
            )
    return None
