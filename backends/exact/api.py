"""The exact backend: the real-number RoPE of the inputs, rounded once to x's dtype.

Reached through ``rope_ref.apply_rope(x, spec, backend="exact")``. Each output element is

    a' = A s (a cos(p w) - b sin(p w)),   b' = A s (b cos(p w) + a sin(p w))

for its pair (a, b), with the position p (the exact sum of the position given and
`offset`: integers past int64 and float positions plus offsets are never rounded first)
and every float input taken as the exact value it holds, w the spec's inverse frequency,
A the attention factor and s the xPos scale as real numbers
(`rope_ref.backends.exact.frequencies` says which rules are formulas), rounded to nearest
even to x's dtype (float64, float32, float16, bfloat16), subnormals and overflow included.

How
---
1. For every distinct position (row of positions for multi-axis specs) and pair, the
   products ``A s cos`` and ``A s sin`` are computed in mpmath with about 128 correct bits
   (the angle with as many more as it has integer bits, for any finite position) and kept
   as double-doubles divided by the power of two of ``|A s|``, with an error bound of
   2**-100 of what is left of ``|A s|``.
2. Each element's members are scaled by the power of two that brings the larger to
   [1/2, 1); ``a C - b S`` is then formed in double-double arithmetic (Dekker products,
   exact sums) with a rigorous error bound, rounded to the target format with both powers
   of two taken back, and kept where the whole error interval rounds to the same value
   (Ziv's test). Magnitudes from subnormals to 2**1023, and xPos scales far from 1, cost
   no more than others.
3. The rest (near a rounding boundary, heavy cancellation, a member below 2**-300 of its
   partner, overflow) are computed one by one in mpmath interval arithmetic, the
   precision doubling from 128 bits until both ends of the interval round alike.

Step 3 ends whenever the exact value is not itself a rounding boundary (a tie or zero).
The value is exactly zero only when both of its products are (a zero member against a zero
angle or a zero partner); those take the sign IEEE arithmetic gives the reference, and are
settled before step 2. At a zero angle, without xPos and without a logarithmic attention
factor, every interval operation is exact, so ties there are decided exactly. Otherwise the
angle is algebraic and non-zero (positions, rational powers of the base, float factors),
and by the Lindemann-Weierstrass theorem ``a cos + b sin`` is then transcendental unless
``a = b = 0``: no tie is possible. (With YaRN's ``0.1 ln s + 1`` factor, LongRoPE's
``sqrt(1 + ln s / ln L0)`` where it is irrational, Llama 3's blended band, whose
frequency involves ``1 / pi``, and YaRN's untruncated ramp, whose ends are logarithms of
``L0 / 2 pi beta``, the same follows from Schanuel's conjecture.) If a value does
stay undecided past 65536 bits, an ArithmeticError says so; no unproven value is ever
returned.

The same tables serve ``rope_angles``, ``rope_cos_sin`` (`rope_ref.backends.exact.tables`)
and ``rerotate`` (`rope_ref.backends.exact.rerotate`) with ``backend="exact"``.
"""

from __future__ import annotations

import numpy as np

from rope_ref._core.aliases import Array, ArrayNamespace, Role
from rope_ref._core.compat import dtype_name, to_numpy
from rope_ref._core.laid_out import laid_out_positions
from rope_ref._core.reference import join_pairs, split_pairs
from rope_ref._core.spec import RopeSpec

from .arrays import back_to, on_host
from .problem import Problem
from .rerotate import rerotate
from .rounding import FORMATS
from .tables import angles, cos_sin

__all__ = ["angles", "apply", "cos_sin", "rerotate"]


def apply(
    x: Array,
    spec: RopeSpec,
    positions: Array | None,
    *,
    offset: object,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    role: Role | None,
    out: Array | None,
    xp: ArrayNamespace,
) -> Array:
    """Return the correctly rounded RoPE of `x` (see the module docstring).

    The arguments are those `rope_ref.apply_rope` has checked.
    """
    if out is not None:
        msg = "`out` is supported by the kernel backends ('numba', 'cupy') only; got an array."
        raise ValueError(msg)
    fmt = FORMATS[dtype_name(x.dtype)]
    p, _ = laid_out_positions(x, spec, positions, offset=offset, seq_axis=seq_axis, xp=xp)
    shifted = np.asarray(to_numpy(p))  # as the reference shifts: for the inferred length
    if offset:  # the positions as given, each plus the offset exactly
        given, _ = laid_out_positions(x, spec, positions, offset=0, seq_axis=seq_axis, xp=xp)
        grid, exact_offset = np.asarray(to_numpy(given)), _real(offset)
    else:
        grid, exact_offset = shifted, 0
    problem = Problem(spec, grid, seq_len, role, inverse, offset=exact_offset, length_grid=shifted)
    host = on_host(x)
    stop = spec.rotary_start + 2 * spec.n_pairs
    # pairs read in `layout`, written in `output_layout`; the inverse reads and writes the other way
    read, written = spec.layout, spec.written_layout
    if inverse:
        read, written = written, read
    a, b = split_pairs(host[..., spec.rotary_start : stop].astype(np.float64), layout=read)
    shape = a.shape
    rows = np.broadcast_to(problem.row_of_grid, shape[:-1])[..., None]
    first = problem.rotate(a, b, rows, fmt)
    second = problem.rotate(b, -a, rows, fmt)
    rotated = join_pairs(first, second, layout=written, xp=np)
    result = host.copy()
    result[..., spec.rotary_start : stop] = rotated.astype(host.dtype)
    return back_to(result, x, xp)


def _real(offset: object) -> int | float:
    """The checked `offset` as a Python int or float of the same value."""
    if isinstance(offset, int | np.integer):
        return int(offset)
    return float(offset)  # type: ignore[arg-type]
