"""`apply_rope_mixed`: RoPE-Mixed through the reference rotation or the Numba kernel."""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np

from rope_ref._core import reference
from rope_ref._core.mixed import mixed_angles
from rope_ref._core.validation import check_bool, check_choice
from rope_ref._engine.dispatch import load_backend

__all__ = ["apply_rope_mixed"]

_DTYPES = (np.float16, np.float32, np.float64)


def apply_rope_mixed(
    x: Any,
    /,
    freqs: Any,
    positions: Any,
    *,
    layout: str = "interleaved",
    inverse: bool = False,
    backend: str = "reference",
) -> np.ndarray:
    r"""Rotate `x` by RoPE-Mixed: pair :math:`j` of head :math:`h` turns by :math:`t \cdot f_j`.

    Parameters
    ----------
    x : numpy.ndarray
        float16, float32 or float64, ``(..., seq, 2 * pairs)``, or ``(..., heads, seq,
        2 * pairs)`` when `freqs` has a head axis.
    freqs : array_like
        Learned frequencies, ``(axes, pairs)`` or ``(heads, axes, pairs)`` (timm's
        ``RotaryEmbeddingMixed.freqs[:, block]`` is ``(axes, heads, pairs)``: move its
        axis 0 to 1).
    positions : array_like
        Coordinates ``(seq, axes)``, e.g. ``(t_x, t_y)`` per patch; float32 grids are read
        exactly as given.
    layout : {"interleaved", "half"}, default "interleaved"
        Pairs ``(2j, 2j + 1)`` (timm) or ``(j, j + pairs)``.
    inverse : bool, default False
        Rotate by the negated angles.
    backend : {"reference", "numba"}, default "reference"
        The float64 rotation rounded once, or the Numba kernel (float32 tables for 16- and
        32-bit `x`). Both take the float64 angles of `rope_ref._core.mixed.mixed_angles`.

    Returns
    -------
    numpy.ndarray
        A new array of `x`'s shape and dtype.

    Raises
    ------
    TypeError
        If `x` is not a float16/32/64 NumPy array, or `freqs`/`positions` are not real.
    ValueError
        If shapes do not fit, values are not finite, or `layout`/`backend` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> freqs = np.array([[np.pi / 2], [0.0]])        # one pair: f_x = pi/2, f_y = 0
    >>> rr.apply_rope_mixed(np.array([[1.0, 0.0]]), freqs, [[1.0, 5.0]]).round(12)
    array([[0., 1.]])
    """
    if not isinstance(x, np.ndarray) or x.dtype not in _DTYPES:
        msg = f"`x` must be a float16, float32 or float64 NumPy array; got {type(x).__name__}"
        msg += f" of dtype {x.dtype}." if isinstance(x, np.ndarray) else "."
        raise TypeError(msg)
    layout_ = cast(
        Literal["half", "interleaved"], check_choice("layout", layout, ("interleaved", "half"))
    )
    backend_ = check_choice("backend", backend, ("reference", "numba"))
    inverse_ = check_bool("inverse", inverse)
    angles = mixed_angles(freqs, positions)  # (seq, pairs) or (heads, seq, pairs)
    seq, pairs = angles.shape[-2:]
    need = (angles.shape[0], seq, 2 * pairs) if angles.ndim == 3 else (seq, 2 * pairs)
    if x.ndim < len(need) or x.shape[-len(need) :] != need:
        msg = f"`x` must end in shape {need} for these freqs and positions; got {x.shape}."
        raise ValueError(msg)
    cos, sin = np.cos(angles), np.sin(angles)
    if backend_ == "numba":
        compute = np.float64 if x.dtype == np.float64 else np.float32
        kernel = load_backend("numba")
        out: np.ndarray = kernel.rotate(
            x,
            cos.astype(compute),
            sin.astype(compute),
            layout=layout_,
            rotary_start=0,
            inverse=inverse_,
        )
        return out
    rotated = reference.rotate(x, cos, sin, layout=layout_, rotary_start=0, inverse=inverse_, xp=np)
    return np.asarray(rotated)
