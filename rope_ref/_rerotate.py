"""Exact re-rotation of cached keys from one sequence length's frequencies to another's."""

from __future__ import annotations

import array_api_compat

from rope_ref import _reference
from rope_ref._compat import array_namespace, device, has_float64, host_namespace, to_numpy
from rope_ref._frequencies import move_tables, tables
from rope_ref._positions import (
    as_positions,
    check_offset,
    default_positions,
    lay_out,
    normalize_seq_axis,
    shift,
)
from rope_ref._spec import RopeSpec, check_spec
from rope_ref._typing import Array, ArrayNamespace, Role

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
    xp = _check_x(x)
    spec = check_spec(spec)
    if x.shape[-1] != spec.head_dim:
        msg = (
            f"`x` must have spec.head_dim = {spec.head_dim} features on its last axis; "
            f"got shape {tuple(x.shape)}."
        )
        raise ValueError(msg)
    dev = device(x)
    on_host = not has_float64(xp, dev)
    pxp, pdev = (host_namespace(), None) if on_host else (xp, dev)
    offset = check_offset(offset)
    n_axes = spec.position_axes
    axis: int | None = None
    if positions is None:
        axis = normalize_seq_axis(seq_axis, x.ndim)
        p = default_positions(x.shape[axis], offset, xp=pxp, dev=pdev, n_axes=n_axes)
    else:
        if on_host and array_api_compat.is_array_api_obj(positions):
            positions = to_numpy(positions)
        p = shift(as_positions(positions, xp=pxp, dev=pdev, n_axes=n_axes), offset, pxp)
        if p.ndim == (1 if n_axes is None else 2):
            axis = normalize_seq_axis(seq_axis, x.ndim)
    p = lay_out(p, tuple(x.shape[:-1]), axis, n_axes=n_axes, xp=pxp)
    c0, s0 = tables(spec, p, xp=pxp, seq_len=from_seq_len, role=role)
    c1, s1 = tables(spec, p, xp=pxp, seq_len=to_seq_len, role=role)
    norm = c0 * c0 + s0 * s0
    cos, sin = (c1 * c0 + s1 * s0) / norm, (s1 * c0 - c1 * s0) / norm
    if on_host:
        cos, sin = move_tables(cos, sin, xp=xp, dev=dev)
    return _reference.rotate(
        x, cos, sin, layout=spec.layout, rotary_start=spec.rotary_start, inverse=False, xp=xp
    )


def _check_x(x: Array) -> ArrayNamespace:
    if not array_api_compat.is_array_api_obj(x):
        msg = f"`x` must be an array; got {type(x).__name__}."
        raise TypeError(msg)
    xp = array_namespace(x, name="x")
    if not xp.isdtype(x.dtype, "real floating"):
        msg = f"`x` must have a real floating dtype; got {x.dtype}."
        raise TypeError(msg)
    return xp
