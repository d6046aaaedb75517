"""Positions: validation, shifting by an offset, and laying a grid along the axes of ``x``.

Shifting is exact, rounded or refused, never wrapped (see "Positions and offsets" on the
Precision page of the documentation):

- integer positions plus an integer offset are added exactly in int64 wherever the sum
  fits int64 (``-2**63 <= p + offset < 2**63``);
- everywhere else (a fractional offset, floating positions, or a sum outside int64) the
  position and the offset are rounded to float64 and added in float64;
- a sum that overflows float64 raises ValueError.

Tables are built from float64 positions, so an exact int64 sum is rounded to float64 once,
where the angles are computed.
"""

from __future__ import annotations

import math
import numbers

import array_api_compat
import numpy as np

from rope_ref._core.aliases import Array, ArrayNamespace
from rope_ref._core.compat import (
    array_namespace,
    compute_dtype,
    device,
    finite_or_raise,
    is_array,
)
from rope_ref._core.validation import check_axis, check_dense, check_not_masked

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "as_positions",
    "check_offset",
    "default_positions",
    "grid_axes",
    "lay_out",
    "normalize_seq_axis",
    "shift",
]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def as_positions(
    positions: Array,
    *,
    xp: ArrayNamespace | None = None,
    dev: object = None,
    n_axes: int | None = None,
    name: str = "positions",
) -> Array:
    """Validate `positions` and return them as an array (of namespace `xp` when given).

    Python numbers and sequences, and NumPy arrays, are accepted with any namespace; arrays
    of another namespace than `xp` are a TypeError (no silent device transfers).
    """
    check_not_masked(name, positions)
    check_dense(name, positions)
    if is_array(positions):
        p = positions
        if xp is not None and array_namespace(p, name=name) is not xp:
            if not array_api_compat.is_numpy_array(p):
                msg = (
                    f"`{name}` must be in the namespace of `x` ({xp.__name__}); "
                    f"got {type(p).__name__}."
                )
                raise TypeError(msg)
            p = xp.asarray(p, device=dev)
    else:
        p = _from_python(positions, name)
        if xp is not None:
            p = xp.asarray(p, device=dev)
    if array_api_compat.is_numpy_array(p) and p.dtype.kind == "V":
        p = _from_extension_dtype(p, name)
    pxp = array_namespace(p, name=name)
    if xp is not None and pxp is xp and dev is not None and device(p) != dev:
        msg = f"`{name}` must be on the device of `x` ({dev}); got {device(p)}."
        raise ValueError(msg)
    if not pxp.isdtype(p.dtype, ("integral", "real floating")):
        msg = f"`{name}` must have an integer or real floating dtype; got {p.dtype}."
        raise TypeError(msg)
    if n_axes is not None and (p.ndim == 0 or p.shape[-1] != n_axes):
        msg = (
            f"`{name}` must have a trailing axis of length {n_axes} (one per section); "
            f"got shape {tuple(p.shape)}."
        )
        raise ValueError(msg)
    if pxp.isdtype(p.dtype, "real floating"):
        got = (
            repr(positions)
            if isinstance(positions, float)
            else "an array containing NaN or infinity"
        )
        p = finite_or_raise(p, pxp, f"`{name}` must be finite; got {got}.")
    return p


def _from_extension_dtype(p: np.ndarray, name: str) -> np.ndarray:
    """NumPy positions of an ml_dtypes type, held exactly: floats as float64, ints as int64."""
    kind = p.dtype.name.rstrip("0123456789")  # bfloat, float8_e4m3fn, int, uint
    if kind.startswith(("float", "bfloat")):
        return p.astype(np.float64)
    if kind in ("int", "uint"):
        return p.astype(np.int64)
    msg = f"`{name}` must have an integer or real floating dtype; got {p.dtype}."
    raise TypeError(msg)


def _from_python(positions: object, name: str) -> np.ndarray:
    try:
        p = np.asarray(positions)
    except ValueError:
        msg = f"`{name}` must be a real number or a rectangular sequence of them; got ragged."
        raise ValueError(msg) from None
    if p.dtype.kind == "O" and p.size and all(_is_real(v) for v in p.flat):
        p = _beyond_int64(p, name)  # Python ints too large for int64
    if p.dtype.kind not in "iuf":
        msg = f"`{name}` must hold integer or real numbers; got {positions!r}."
        raise TypeError(msg)
    return p


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _beyond_int64(p: np.ndarray, name: str) -> np.ndarray:
    """Python numbers NumPy holds as objects (ints past int64) in float64, rounded once."""
    try:
        rounded: np.ndarray = np.vectorize(float, otypes=[np.float64])(p)
    except OverflowError:
        msg = f"`{name}` must be finite in float64; got an integer beyond 1.8e308."
        raise ValueError(msg) from None
    return rounded  # float(int) rounds correctly


def normalize_seq_axis(seq_axis: object, ndim: int, name: str = "x") -> int:
    """Return `seq_axis` as a non-negative axis of ``x.shape[:-1]`` or raise.

    `name` is the array's parameter name in messages (``q`` and ``k`` for apply_rope_qk).
    """
    seq_axis = check_axis("seq_axis", seq_axis)
    if ndim < 2:
        msg = (
            f"`{name}` must have a sequence axis before the feature axis; got {ndim} dimension(s)."
        )
        raise ValueError(msg)
    if not -ndim <= seq_axis < ndim or seq_axis % ndim == ndim - 1:
        msg = (
            f"`seq_axis` must name an axis of {name} other than the last (from {-ndim} to "
            f"{ndim - 2}, excluding -1); got {seq_axis}."
        )
        raise ValueError(msg)
    return seq_axis % ndim


def default_positions(
    length: int | float,
    offset: float,
    *,
    xp: ArrayNamespace,
    dev: object,
    n_axes: int | None = None,
) -> Array:
    """``offset + arange(length)``, repeated per axis if any (see the module docstring).

    int64 when `offset` is an integer and ``offset + length - 1`` fits int64, else float64
    (``float(offset) + arange(length)``).
    """
    if not isinstance(length, int):  # Dask arrays with unknown chunk sizes have NaN here
        msg = (
            f"`x` must have a known length along seq_axis; got {length!r} "
            "(for Dask, call x.compute_chunk_sizes() first)."
        )
        raise ValueError(msg)
    if float(offset).is_integer() and INT64_MIN <= int(offset) <= INT64_MAX - max(length - 1, 0):
        p = xp.arange(length, dtype=xp.int64, device=dev) + int(offset)
    else:  # a fractional offset, or a sum beyond int64
        p = xp.arange(length, dtype=xp.float64, device=dev) + float(offset)
    if n_axes is not None:
        p = xp.stack([p] * n_axes, axis=-1)
    return p


def lay_out(
    p: Array,
    lead: tuple[int, ...],
    seq_axis: int | None,
    *,
    n_axes: int | None,
    xp: ArrayNamespace,
) -> Array:
    """Reshape validated positions so their grid has ``len(lead)`` axes aligned with x.

    `lead` is ``x.shape[:-1]``; where each axis of the grid goes is `grid_axes`' rule.
    """
    trailing = () if n_axes is None else (n_axes,)
    grid = tuple(p.shape[: p.ndim - len(trailing)])
    if grid == () and n_axes is not None and seq_axis is not None and lead[seq_axis] == n_axes:
        # one (t, h, w) for every token, or 1-D positions of the tokens? Both fit the shape.
        msg = (
            f"`positions` of shape {tuple(p.shape)} can be read two ways when x has "
            f"{n_axes} tokens along seq_axis and the spec {n_axes} position axes: as one "
            "position (one value per axis) for every token, or as one position per token; "
            f"give the grid explicitly: shape (1, {n_axes}) for the first, "
            f"({n_axes}, {n_axes}) for the second."
        )
        raise ValueError(msg)
    shape = _placed(grid, grid_axes(grid, lead, seq_axis), len(lead))
    return xp.reshape(p, (*shape, *trailing))


def grid_axes(
    grid: tuple[int, ...], lead: tuple[int, ...], seq_axis: int | None
) -> tuple[int, ...]:
    """The axis of x that each axis of a position grid runs along; shapes only.

    `lead` is ``x.shape[:-1]``. A 1-D grid whose length is ``lead[seq_axis]`` is laid along
    `seq_axis`. A 2-D grid that fits ``(batch, seq)`` ids (HF ``position_ids``) is read
    along axis 0 and `seq_axis`, never against the trailing axes when seq and heads happen
    to match; if it also broadcasts right-aligned to a different layout while `seq_axis` is
    the last axis of `lead` (``(batch, seq)`` or ``(heads, seq)``? an image's ``(rows,
    cols)``?), it raises. Any other grid must broadcast to `lead` (right-aligned).

    Examples
    --------
    >>> grid_axes((16,), (2, 16, 8), 1)          # 1-D along seq_axis
    (1,)
    >>> grid_axes((2, 8), (2, 8, 8), 1)          # (batch, seq) ids, though heads == seq
    (0, 1)
    >>> grid_axes((8, 8), (2, 8, 8), None)       # a full grid: right-aligned
    (1, 2)
    """
    if seq_axis is not None and len(grid) == 1 and grid[0] == lead[seq_axis]:
        return (seq_axis,)
    broadcasts = len(grid) <= len(lead) and all(
        g in (1, n) for g, n in zip(reversed(grid), reversed(lead), strict=False)
    )
    right_aligned = tuple(range(len(lead) - len(grid), len(lead)))
    by_rows = _batch_seq_axes(grid, lead, seq_axis)
    if (
        by_rows is not None
        and broadcasts
        and _placed(grid, by_rows, len(lead)) != _placed(grid, right_aligned, len(lead))
    ):
        # Both readings fit and differ: HF ids are never broadcast against trailing axes.
        if seq_axis == len(lead) - 1:
            msg = (
                f"`positions` of shape {grid} can be read two ways against x.shape[:-1] = "
                f"{lead}: as (batch, seq) ids along axes 0 and {seq_axis}, or broadcast "
                "right-aligned; give every axis explicitly (e.g. positions[:, None, :] for "
                "(batch, seq) ids)."
            )
            raise ValueError(msg)
        return by_rows
    if by_rows is not None:
        return by_rows
    if not broadcasts:
        msg = (
            f"`positions` must broadcast to x.shape[:-1] = {lead} (or be 1-D of length "
            f"x.shape[seq_axis], or (batch, seq) ids); got a position grid of shape {grid}."
            f"{seq_axis_hint(grid, lead, seq_axis)}"
        )
        raise ValueError(msg)
    return right_aligned


def seq_axis_hint(grid: tuple[int, ...], lead: tuple[int, ...], seq_axis: int | None) -> str:
    """``" seq_axis=-2 has length 8, ...: pass seq_axis=-3."`` for a grid fitting another axis.

    A 1-D grid, or ``(batch, seq)`` ids, whose sequence length is that of another axis of
    x than `seq_axis` most likely means the sequence axis is that one (``(batch, seq,
    heads, head_dim)`` arrays need ``seq_axis=-3``). Axes are counted from the end of x.

    Examples
    --------
    >>> seq_axis_hint((16,), (2, 16, 8), 2)
    " seq_axis=-2 has length 8, but axis -3 has the positions' length 16: pass seq_axis=-3."
    >>> seq_axis_hint((5,), (2, 16, 8), 2)
    ''
    """
    if seq_axis is None or len(grid) not in (1, 2):
        return ""
    length, ndim = grid[-1], len(lead) + 1
    first = 1 if len(grid) == 2 else 0  # (batch, seq) ids: axis 0 is the batch
    matches = [a for a in range(first, len(lead)) if lead[a] == length and a != seq_axis]
    if not matches:
        return ""
    return (
        f" seq_axis={seq_axis - ndim} has length {lead[seq_axis]}, but axis "
        f"{matches[0] - ndim} has the positions' length {length}: pass "
        f"seq_axis={matches[0] - ndim}."
    )


def _placed(grid: tuple[int, ...], axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """The shape of `grid` with its axes at `axes` of `ndim` (1 elsewhere)."""
    shape = [1] * ndim
    for size, axis in zip(grid, axes, strict=True):
        shape[axis] = size
    return tuple(shape)


def _batch_seq_axes(
    grid: tuple[int, ...], lead: tuple[int, ...], seq_axis: int | None
) -> tuple[int, ...] | None:
    """Axes ``(0, seq_axis)`` when `grid` fits ``(batch, seq)`` ids against `lead`, else None."""
    if seq_axis is None or seq_axis == 0 or len(grid) != 2 or len(lead) < 3:
        return None
    if grid[1] != lead[seq_axis] or grid[0] not in (1, lead[0]):
        return None
    return (0, seq_axis)


def check_offset(offset: object) -> float:
    """Return `offset` if it is a finite real number, else raise naming it."""
    if isinstance(offset, bool) or not isinstance(offset, int | float | np.integer | np.floating):
        msg = f"`offset` must be a real number; got {offset!r}."
        raise TypeError(msg)
    try:
        finite = math.isfinite(offset)
    except OverflowError:  # an int beyond float range
        finite = False
    if not finite:
        msg = f"`offset` must be finite; got {offset!r}."
        raise ValueError(msg)
    return int(offset) if isinstance(offset, int | np.integer) else float(offset)


def shift(p: Array, offset: float, xp: ArrayNamespace) -> Array:
    """``p + offset`` for validated positions: exact in int64 or rounded in float64, never wrapped.

    See the module docstring. The result is int64 when the dtype of `p` guarantees that
    every sum fits int64, else float64 (the compute dtype of `xp`).
    """
    if offset == 0:
        return p
    if xp.isdtype(p.dtype, "integral") and float(offset).is_integer():
        return _shift_integers(p, int(offset), xp)
    with np.errstate(over="ignore"):  # overflow is reported below, naming `offset`
        shifted = xp.astype(p, compute_dtype(xp, device(p))) + float(offset)
    msg = (
        f"`offset` moves `positions` beyond float64 (positions + offset must be finite); "
        f"got offset={offset!r}."
    )
    return finite_or_raise(shifted, xp, msg)


def _shift_integers(p: Array, offset: int, xp: ArrayNamespace) -> Array:
    """Integer `p` plus `offset`: exact where the sum fits int64, float64 elsewhere."""
    info = xp.iinfo(p.dtype)
    lowest, highest = info.min + offset, info.max + offset
    if lowest >= INT64_MIN and highest <= INT64_MAX:
        return xp.astype(p, xp.int64) + offset  # the dtype's range guarantees the fit
    rounded = xp.astype(p, xp.float64) + float(offset)  # |p| < 2**64: never overflows
    if not INT64_MIN <= offset <= INT64_MAX:
        return rounded
    # Elementwise: p and p + offset within int64, compared in int64 without forming the sum
    # (PyTorch cannot compare uint64; array-api-strict refuses negative bounds for it).
    # uint64 values from 2**63 on wrap to negative int64 under the cast: they never fit.
    q = xp.astype(p, xp.int64)
    fits = (q <= INT64_MAX - offset) if offset > 0 else (q >= INT64_MIN - offset)
    if info.max > INT64_MAX:
        fits = fits & (q >= 0)
    exact = xp.where(fits, q, xp.zeros_like(q)) + offset
    return xp.where(fits, xp.astype(exact, xp.float64), rounded)
