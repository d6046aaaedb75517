"""Precision recipes rebuilt exactly: a cause is named only where its error matches.

Each recipe recomputes the rotation the way a lower-precision implementation does (the
inverse frequencies computed in float16 or bfloat16, the angles in float32, the cos/sin
table rounded once to float16 or bfloat16) and names it only where the result equals it
within the error model, element by element: an error of the right size is not enough.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from rope_ref._core.compat import host_namespace
from rope_ref._core.frequencies import attention_factor, inv_freq
from rope_ref._core.reference import rotate
from rope_ref.testing._compare import F64, Comparison, Setup
from rope_ref.testing._diagnosis.focus import explains_by
from rope_ref.testing._diagnosis.frequencies import pair_positions
from rope_ref.testing._diagnosis.precision import round_to
from rope_ref.testing._diagnosis.shared import Diagnosis, oracle_from_angles

__all__ = ["low_precision_inv_freq", "precision_recipes"]

LOW = ("float16", "bfloat16")


def low_precision_inv_freq(base: float, rotary_dim: int, name: str) -> F64:
    """``1 / base ** (arange(0, d, 2, dtype) / d)`` with every operation rounded to `name`.

    The base too is held in `name` (as torch does with a Python number raised to a
    low-precision tensor): 500000 overflows float16, and bfloat16 holds 10000 as 9984.
    """
    j = round_to(np.arange(0, rotary_dim, 2, dtype=np.float64), name)
    exponent = round_to(j / rotary_dim, name)
    with np.errstate(over="ignore", divide="ignore"):
        power = round_to(
            np.power(round_to(np.asarray(base, dtype=np.float64), name), exponent), name
        )
        return round_to(1.0 / power, name)


def _rotate_with(s: Setup, cos: F64, sin: F64) -> F64:
    factor = attention_factor(s.spec, s.seq_len)
    return np.asarray(
        rotate(
            s.x,
            cos * factor,
            sin * factor,
            layout=s.spec.layout,
            rotary_start=s.spec.rotary_start,
            inverse=s.inverse,
            xp=host_namespace(),
            output_layout=s.spec.output_layout,
        )
    )


def _angles(p: F64, theta: F64, in_float32: bool) -> F64:
    if not in_float32:
        return p * theta
    return round_to(round_to(p, "float32") * round_to(theta, "float32"), "float32")


def _with_inv_freq(theta: F64, in_float32: bool) -> Callable[[Setup], F64]:
    def build(s: Setup) -> F64:
        return oracle_from_angles(s, _angles(pair_positions(s), theta, in_float32))

    return build


def _with_table(theta: F64, in_float32: bool, name: str) -> Callable[[Setup], F64]:
    def build(s: Setup) -> F64:
        angles = _angles(pair_positions(s), theta, in_float32)
        return _rotate_with(s, round_to(np.cos(angles), name), round_to(np.sin(angles), name))

    return build


def _inv_freq_recipe(c: Comparison) -> Diagnosis | None:
    """Inverse frequencies computed in float16 or bfloat16 (angles in float32 or float64)."""
    s = c.setup
    spec = s.spec
    if spec.scaling is not None or spec.freqs is not None:
        return None
    for name in LOW:
        low = low_precision_inv_freq(spec.base, spec._rotary_dim, name)
        fits = [
            "float32" if in_float32 else "float64"
            for in_float32 in (True, False)
            if explains_by(c, _with_inv_freq(low, in_float32))
        ]
        if fits:
            angles_note = f", then the angles in {fits[0]}" if len(fits) == 1 else ""
            held = float(round_to(np.asarray(spec.base, dtype=np.float64), name))
            if held != spec.base:
                angles_note += f"; the base {spec.base:g} itself is held as {held:g} in {name}" + (
                    ": every pair but the first stands still" if math.isinf(held) else ""
                )
            return Diagnosis(
                "precision",
                f"the inverse frequencies were computed in {name} (1 / base ** (arange(0, d, "
                f"2, dtype={name}) / d): the power and the reciprocal rounded to {name})"
                f"{angles_note}: compute inv_freq in float32 or better (from an int64 or "
                "float32 arange) and cast only the result.",
            )
    return None


def _residual(c: Comparison, build: Callable[[Setup], F64]) -> float:
    """The largest share of the tolerance by which the result misses `build`'s rotation."""
    miss = np.abs(c.actual - build(c.setup)) / np.maximum(c.tolerance, np.finfo(np.float64).tiny)
    return float(np.max(miss, initial=0.0))


def _closest(
    c: Comparison, fitting: list[str], build: Callable[[str], Callable[[Setup], F64]]
) -> str:
    """Of the low dtypes whose recipe explains the result, the one it matches closest.

    Where the error model is loose (float32 angles at large positions), a coarser recipe's
    error and a finer one's can both fit; the data still tell them apart by how close each
    comes, so the one the result equals is named, not the first tried.
    """
    if len(fitting) == 1:
        return fitting[0]
    return min(fitting, key=lambda name: _residual(c, build(name)))


def _table_recipe(c: Comparison) -> Diagnosis | None:
    """A cos/sin table rounded once to float16 or bfloat16 (angles in float32 or float64)."""
    s = c.setup
    theta = inv_freq(s.spec, s.seq_len)
    found: dict[str, list[str]] = {}
    for name in LOW:
        fits = [
            "float32" if in_float32 else "float64"
            for in_float32 in (True, False)
            if explains_by(c, _with_table(theta, in_float32, name))
        ]
        if fits:
            found[name] = fits
    if not found:
        return None
    name = _closest(c, list(found), lambda low: _with_table(theta, found[low][0] == "float32", low))
    fits = found[name]
    angles_note = f"; angles computed in {fits[0]}" if len(fits) == 1 else ""
    return Diagnosis(
        "precision",
        f"the cos/sin table was rounded once to {name} (a {name} cache{angles_note}), "
        f"and the rotation itself done in {s.dtype}: keep the cos/sin cache in "
        f"{s.dtype} (the dtype of q and k), or cast it to {name} only where q and k "
        f"are {name} too.",
    )


def precision_recipes(c: Comparison) -> Diagnosis | None:
    """The first low-precision recipe the result equals within the error model."""
    s = c.setup
    if s.spec.xpos is not None or s.spec.n_pairs == 0:
        return None  # the angles built here carry no xPos scale
    if c.model is None:
        return None  # explicit rtol/atol: no error model to hold a recipe to
    return _inv_freq_recipe(c) or _table_recipe(c)
