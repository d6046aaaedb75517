r"""``rerotate(..., backend="exact")``: the real composite re-rotation, rounded once.

Keys rotated at one sequence length (frequencies :math:`\omega^{from}`, attention factor
:math:`A^{from}`, xPos scale :math:`s^{from}`) are moved to another by multiplying each pair,
read as the complex number :math:`a + ib`, by the real number

.. math::
    \frac{z^{to}}{z^{from}} = \frac{A^{to} s^{to}}{A^{from} s^{from}}\,
    e^{i p (\omega^{to}_j - \omega^{from}_j)},

the inverse of the old map followed by the new one, composed in real arithmetic: a single
rotation by the exact angle difference :math:`p\,\omega^{to}_j - p\,\omega^{from}_j`, scaled
by the exact ratio of the scales (for xPos :math:`\zeta_j^{\pm(c^{from} - c^{to})/b}`,
independent of the position), and rounded once to x's dtype. Where the two lengths give the
same frequencies the angle difference is an exact zero, and sin there is +0.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import Array, ArrayNamespace, Role
from rope_ref._core.compat import dtype_name, to_numpy
from rope_ref._core.reference import join_pairs, split_pairs
from rope_ref._core.spec import RopeSpec

from . import frequencies as freq
from .arrays import back_to, on_host
from .problem import AngleTerms, Problem, rational_zeta
from .rounding import FORMATS

__all__ = ["rerotate"]


def rerotate(
    x: Array,
    spec: RopeSpec,
    positions: Array,
    *,
    from_seq_len: float,
    to_seq_len: float,
    role: Role | None,
    xp: ArrayNamespace,
) -> Array:
    """Return `x` re-rotated from `from_seq_len` to `to_seq_len`, correctly rounded.

    `positions` are the laid-out positions `rope_ref.rerotate` has checked (broadcasting to
    ``x.shape[:-1]``); pairs are read and written in the spec's written layout.
    """
    fmt = FORMATS[dtype_name(x.dtype)]
    problem = _Rerotation(spec, np.asarray(to_numpy(positions)), from_seq_len, to_seq_len, role)
    host = on_host(x)
    stop = spec.rotary_start + 2 * spec.n_pairs
    layout = spec.written_layout
    a, b = split_pairs(host[..., spec.rotary_start : stop].astype(np.float64), layout=layout)
    rows = np.broadcast_to(problem.row_of_grid, a.shape[:-1])[..., None]
    first = problem.rotate(a, b, rows, fmt)
    second = problem.rotate(b, -a, rows, fmt)
    result = host.copy()
    result[..., spec.rotary_start : stop] = join_pairs(first, second, layout=layout, xp=np)
    return back_to(result, x, xp)


class _Rerotation(Problem):
    """The tables of ``z_to / z_from``: angle difference and ratio of scales."""

    def __init__(
        self, spec: RopeSpec, grid: NDArray[Any], from_seq_len: float, to_seq_len: float,
        role: Role | None,
    ) -> None:  # fmt: skip
        self.lengths = (from_seq_len, to_seq_len)
        super().__init__(spec, grid, to_seq_len, role, inverse=False)

    def _terms(self, ctx: Any) -> tuple[AngleTerms, Any, list[Any] | None]:
        old, new = (freq.omegas(ctx, self.spec, length) for length in self.lengths)
        factors = [freq.attention_factor(ctx, self.spec, length) for length in self.lengths]
        log_zeta = None if self.spec.xpos is None else freq.log_zetas(ctx, self.spec)
        terms = [[(1, w_new), (-1, w_old)] for w_new, w_old in zip(new, old, strict=True)]
        return terms, factors[1] / factors[0], log_zeta

    def _scale(self, ctx: Any, factor: Any, log_zeta: list[Any] | None, row: Any, j: int) -> Any:
        if log_zeta is None:
            return factor
        return factor * ctx.exp(self.sign * self._shift(ctx) * log_zeta[j])

    def _shift(self, ctx: Any) -> Any:
        """``(c_from - c_to) / scale_base``: the xPos exponent of the ratio of scales."""
        xpos = self.spec.xpos
        assert xpos is not None
        old, new = (ctx.mpf(xpos.center(length)) for length in self.lengths)
        return (old - new) / ctx.mpf(xpos.scale_base)

    def _rational_scale(self, row: Any, j: int) -> Fraction | None:
        old, new = (freq.rational_attention_factor(self.spec, n) for n in self.lengths)
        if old is None or new is None:
            return None
        ratio = new / old
        xpos = self.spec.xpos
        if xpos is None:
            return ratio
        zeta = rational_zeta(self.spec, j)
        centers = (Fraction(xpos.center(length)) for length in self.lengths)
        shift = (next(centers) - next(centers)) / Fraction(xpos.scale_base)
        if zeta is None or shift.denominator != 1:
            return None
        return ratio * zeta ** (self.sign * shift.numerator)
