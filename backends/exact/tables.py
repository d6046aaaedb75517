r"""Correctly rounded angles and cos/sin tables: ``rope_angles`` and ``rope_cos_sin`` exact.

- `angles`: the real angle :math:`p\,\omega_j` (the position's exact value, the spec's
  frequency as a real number, `rope_ref.backends.exact.frequencies`) rounded once to
  float64. Where :math:`\omega_j` is rational (custom ``freqs``, float-valued rules, and
  formulas whose roots happen to be rational, e.g. YaRN's blend of :math:`10^{-1}` with
  the multiplier :math:`5/8`), the exact product is rounded, so ties go to even. Elsewhere
  :math:`p\,\omega_j` is irrational (no tie): the product of an exact position and an
  interval holding :math:`\omega_j` is rounded at both ends, the precision doubling from
  128 bits until both ends round alike. A real angle is zero only where the position or
  the frequency is, and then takes the sign IEEE multiplication gives it.
- `cos_sin`: :math:`A\,s\cos(p\,\omega_j)` and :math:`A\,s\sin(p\,\omega_j)` (attention
  factor and xPos scale as real numbers) rounded once to the requested format, through the
  double-double tables and Ziv's test of `rope_ref.backends.exact.problem` (the values are
  the rotation of the pair ``(1, 0)``). At a zero angle sin is a zero with the sign of the
  float64 reference's.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext
from numpy.typing import NDArray

from rope_ref._core.aliases import Role
from rope_ref._core.frequencies import pair_axes
from rope_ref._core.spec import RopeSpec

from . import frequencies as freq
from .problem import Problem, distinct_rows, exact_value, raw_parts
from .rounding import FORMATS, round_dyadic, round_fraction, to_format

__all__ = ["angles", "cos_sin"]

F64 = NDArray[np.float64]
_FIRST_BITS, _LAST_BITS = 128, 1 << 16


def angles(spec: RopeSpec, positions: NDArray[Any], seq_len: float | None) -> F64:
    """Correctly rounded float64 angles, shape ``grid + (n_pairs,)``.

    `positions` are checked host positions (a trailing axis per section for multi-axis
    specs); `seq_len` is the length the scaling rule sees (already resolved).
    """
    rows, row_of_grid = distinct_rows(spec, positions)
    axes = [int(a) for a in pair_axes(spec)]
    n = spec.n_pairs
    out = np.empty((len(rows), n))
    rational = freq.rational_omegas(spec, seq_len)
    todo = []
    for r, row in enumerate(rows):
        for j, w in enumerate(rational):
            if w is None:
                todo.append((r, j))
                continue
            value = row[axes[j]]  # rounded from the exact product: ties decided exactly
            product = _fraction(value) * w
            out[r, j] = round_fraction(product, FORMATS["float64"])
            if product == 0:  # IEEE's sign of p * w
                out[r, j] = math.copysign(1.0, float(value)) * math.copysign(0.0, float(w))
    bits = _FIRST_BITS
    while todo:
        if bits > _LAST_BITS:
            msg = f"backend='exact' could not decide the rounding of an angle at {_LAST_BITS} bits."
            raise ArithmeticError(msg)
        ctx = MPIntervalContext()
        ctx.prec = bits
        intervals = [v._mpi_ for v in freq.omegas(ctx, spec, seq_len)]
        points: dict[tuple[int, int], Any] = {}  # (row, axis): the exact point of a position
        undecided = []
        for r, j in todo:
            value = rows[r][axes[j]]
            p = points.get((r, axes[j]))
            if p is None:
                p = points[r, axes[j]] = exact_value(ctx, value)._mpi_[0]
            ends = [round_dyadic(*raw_parts(libmp.mpf_mul(p, end)), FORMATS["float64"])
                    for end in intervals[j]]  # fmt: skip
            if ends[0] != ends[1]:
                undecided.append((r, j))
            elif ends[0] == 0.0:  # p is zero (an irrational w is not): IEEE's sign of p * w
                out[r, j] = math.copysign(0.0, float(value))
            else:
                out[r, j] = ends[0]
        todo, bits = undecided, 2 * bits
    return np.asarray(out[row_of_grid], dtype=np.float64)


def _fraction(value: Any) -> Fraction:
    return Fraction(int(value)) if isinstance(value, np.integer) else Fraction(float(value))


def cos_sin(
    spec: RopeSpec, positions: NDArray[Any], seq_len: float | None, role: Role | None, fmt: str
) -> tuple[F64, F64]:
    """Correctly rounded ``A s cos`` and ``A s sin`` in format `fmt`, as float64 arrays.

    Shape ``grid + (n_pairs,)``; `seq_len` as `rope_ref.rope_cos_sin` takes it.
    """
    problem = Problem(spec, positions, seq_len, role, inverse=False)
    shape = (*problem.row_of_grid.shape, spec.n_pairs)
    rows = problem.row_of_grid[..., None]
    one, zero = np.ones(shape), np.zeros(shape)
    target = FORMATS[fmt]
    cos = problem.rotate(one, zero, rows, target)
    sin = problem.rotate(zero, -one, rows, target)
    pairs = np.arange(spec.n_pairs)
    zero_angle = problem.tables["zero_angle"][rows, pairs]
    zero_sin = to_format(problem.tables["s_hi"][rows, pairs], target)
    return cos, np.asarray(np.where(zero_angle, zero_sin, sin), dtype=np.float64)
