"""Exact re-rotation of cached keys from one sequence length's frequencies to another's."""

from __future__ import annotations

import math
from types import ModuleType

from rope_ref._core import reference
from rope_ref._core.aliases import TABLE_BACKENDS, Array, Role, TableBackend
from rope_ref._core.compat import device
from rope_ref._core.frequencies import move_tables, tables
from rope_ref._core.laid_out import laid_out_positions
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_choice, check_real
from rope_ref._engine.dispatch import load_backend
from rope_ref._engine.runner import check_x, resolve_spec

__all__ = ["rerotate"]


def rerotate(
    x: Array,
    /,
    spec: RopeSpec,
    positions: Array | None = None,
    *,
    from_seq_len: float,
    to_seq_len: float,
    offset: float = 0,
    seq_axis: int = -2,
    role: Role | None = None,
    backend: TableBackend = "reference",
) -> Array:
    r"""Turn RoPE at `from_seq_len`'s frequencies into RoPE at `to_seq_len`'s, exactly.

    For length-dependent scalings (`rope_ref.scaling.DynamicNTK`, `rope_ref.scaling.LongRoPE`)
    and xPos, keys cached while the sequence was shorter were rotated with other
    frequencies (or another attention factor or xPos centre) than new queries use, so their
    scores no longer depend on relative position only. This applies, per pair, the
    scaled rotation :math:`z_{to} / z_{from}` with :math:`z = a\,e^{i\phi}` built in
    float64 (:math:`a` the attention factor times the xPos scale, :math:`\phi` the angle),
    and rounds once: the result equals ``apply_rope(x0, spec, positions,
    seq_len=to_seq_len)`` for the unrotated ``x0`` up to that rounding.

    Parameters
    ----------
    x : array
        Rotated keys (or queries), shape ``(..., head_dim)``.
    spec : RopeSpec
        The embedding they were rotated with.
    positions : array_like, optional
        Their positions, as for `rope_ref.apply_rope` (default ``arange`` along
        `seq_axis`).
    from_seq_len, to_seq_len : float
        The sequence length `x` was rotated at, and the one to move it to.
    offset, seq_axis
        As for `rope_ref.apply_rope`.
    role : {"query", "key"}, optional
        Required when ``spec.xpos`` is set.
    backend : {"reference", "exact"}, default "reference"
        ``"reference"`` builds :math:`z_{to} / z_{from}` in float64 as above. ``"exact"``
        multiplies each pair by the real number :math:`z_{to} / z_{from}` (the inverse of
        the old map composed with the new one in real arithmetic: a rotation by the exact
        angle difference :math:`p\,(\omega^{to}_j - \omega^{from}_j)`, scaled by the exact
        ratio of the scales) and rounds once to x's dtype (needs mpmath; see the Precision
        page).

    Returns
    -------
    array
        Same namespace, device, dtype and shape as `x`.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=8, scaling=rr.scaling.DynamicNTK(4.0, max_position=16))
    >>> k = np.random.default_rng(0).standard_normal((20, 8))
    >>> cached = rr.apply_rope(k, spec, seq_len=20)
    >>> moved = rr.rerotate(cached, spec, from_seq_len=20, to_seq_len=64)
    >>> bool(np.allclose(moved, rr.apply_rope(k, spec, seq_len=64), rtol=0, atol=1e-13))
    True
    """
    from_seq_len = _check_length("from_seq_len", from_seq_len)
    to_seq_len = _check_length("to_seq_len", to_seq_len)
    backend = check_choice("backend", backend, TABLE_BACKENDS)
    xp = check_x(x, "x")
    spec = resolve_spec(check_spec(spec), x)
    p, pxp = laid_out_positions(x, spec, positions, offset=offset, seq_axis=seq_axis, xp=xp)
    c0, s0 = tables(spec, p, xp=pxp, seq_len=from_seq_len, role=role)
    c1, s1 = tables(spec, p, xp=pxp, seq_len=to_seq_len, role=role)
    if backend == "exact":  # the same checks as above, then the real composite
        return load_backend("exact").rerotate(
            x, spec, p, from_seq_len=from_seq_len, to_seq_len=to_seq_len, role=role, xp=xp
        )
    cos, sin = _divide(c1, s1, c0, s0, xp=pxp)
    if pxp is not xp:
        cos, sin = move_tables(cos, sin, xp=xp, dev=device(x))
    return reference.rotate(
        x,
        cos,
        sin,
        layout=spec.written_layout,
        rotary_start=spec.rotary_start,
        inverse=False,
        xp=xp,
    )


def _check_length(name: str, value: object) -> float:
    """A positive finite sequence length, or an error naming `name`."""
    length = check_real(name, value)
    if length <= 0.0:
        msg = f"`{name}` must be positive; got {length!r}."
        raise ValueError(msg)
    return length


def _divide(c1: Array, s1: Array, c0: Array, s0: Array, *, xp: ModuleType) -> tuple[Array, Array]:
    """``(c1 + i s1) / (c0 + i s0)``, scaled so that neither ``|z0|**2`` nor a product overflows.

    xPos scales reach 1e±170 at positions far from their centre, where the textbook
    ``conj(z0) / |z0|**2`` overflows or underflows although the quotient is moderate.
    """
    m = xp.maximum(xp.abs(c0), xp.abs(s0))
    if not bool(xp.all((m > 0) & (m < math.inf))):
        msg = (
            "rerotate: at `from_seq_len` some pairs were scaled to 0 or infinity in float64 "
            "(xPos far from its centre), so the rotation cannot be undone there"
        )
        raise ValueError(msg)
    u, v = c0 / m, s0 / m
    norm = (u * u + v * v) * m
    return (c1 * u + s1 * v) / norm, (s1 * u - c1 * v) / norm
