"""Diagnoses of precision: positions, angles, inverse frequencies or cos/sin rounded."""

from __future__ import annotations

import numpy as np

from rope_ref._core.frequencies import inv_freq
from rope_ref.testing._compare import F64, Comparison, position_tolerance, tolerance
from rope_ref.testing._diagnosis.drift import pair_drift
from rope_ref.testing._diagnosis.shared import (
    Diagnosis,
    explains,
    oracle_from_angles,
    row_failed,
)
from rope_ref.testing._tolerance import EPS, ErrorModel

__all__ = ["angle_precision", "position_precision", "round_to", "rounded_inputs"]


def round_to(values: F64, name: str) -> F64:
    """Round float64 values to float32, float16 or bfloat16 (to nearest even), as float64."""
    if name == "float32":
        return values.astype(np.float32).astype(np.float64)
    if name == "float16":
        return values.astype(np.float16).astype(np.float64)
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


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


def angle_precision(c: Comparison) -> Diagnosis | None:
    s = c.setup
    model = c.model
    if model is None:
        return None
    if pair_drift(c) is not None:
        return None  # some pairs turn at a steady other rate: a rule, not a rounding
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
