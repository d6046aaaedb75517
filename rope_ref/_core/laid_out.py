"""Positions laid out against the array they rotate, in the namespace that builds the tables.

The general path, the exact backend and the checker lay positions out alike: validated,
shifted by the offset, broadcast against ``x.shape[:-1]`` along `seq_axis`, in x's
namespace when it has float64 on x's device, else in NumPy on the host.
"""

from __future__ import annotations

from rope_ref._core.aliases import Array, ArrayNamespace
from rope_ref._core.compat import (
    array_namespace,
    device,
    has_float64,
    host_namespace,
    is_array,
    to_numpy,
)
from rope_ref._core.positions import (
    as_positions,
    check_offset,
    default_positions,
    lay_out,
    normalize_seq_axis,
    shift,
)
from rope_ref._core.spec import RopeSpec
from rope_ref._core.validation import check_axis

__all__ = ["laid_out_positions"]


def laid_out_positions(
    x: Array,
    spec: RopeSpec,
    positions: Array | None,
    *,
    offset: object,
    seq_axis: object,
    xp: ArrayNamespace,
) -> tuple[Array, ArrayNamespace]:
    """Validated positions laid out against `x`, and their namespace.

    The namespace is x's when it has float64 on x's device, else NumPy on the host (the
    caller then moves the finished tables with `rope_ref._core.frequencies.move_tables`).

    Examples
    --------
    >>> import numpy as np
    >>> from rope_ref import RopeSpec
    >>> x = np.zeros((2, 3, 8))
    >>> p, pxp = laid_out_positions(x, RopeSpec(8), None, offset=5, seq_axis=-2, xp=np)
    >>> p.tolist(), pxp is np
    ([[5, 6, 7]], True)
    """
    offset = check_offset(offset)
    seq_axis = check_axis("seq_axis", seq_axis)
    dev = device(x)
    on_host = not has_float64(xp, dev)
    pxp, pdev = (host_namespace(), None) if on_host else (xp, dev)
    axis: int | None
    if positions is None:
        axis = normalize_seq_axis(seq_axis, x.ndim)
        p = default_positions(x.shape[axis], offset, xp=pxp, dev=pdev, n_axes=spec.position_axes)
    else:
        if on_host and is_array(positions) and array_namespace(positions) is xp:
            positions = _host_positions(positions)
        p = as_positions(positions, xp=pxp, dev=pdev, n_axes=spec.position_axes)
        p = shift(p, offset, pxp)
        axis = normalize_seq_axis(seq_axis, x.ndim)
    return lay_out(p, tuple(x.shape[:-1]), axis, n_axes=spec.position_axes, xp=pxp), pxp


def _host_positions(positions: Array) -> Array:
    """Copy positions to the host for float64 tables; traced arrays cannot be copied."""
    try:
        return to_numpy(positions)
    except Exception as err:  # e.g. a JAX tracer under jit without x64
        msg = (
            "`positions` must be readable when x's namespace has no float64 (tables are built "
            "on the host in float64): pass NumPy positions, or enable float64 (for JAX, "
            f"jax_enable_x64); got a {type(positions).__name__}."
        )
        raise ValueError(msg) from err
