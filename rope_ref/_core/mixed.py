r"""RoPE-Mixed angles: every pair turns by a learned mix of the position's axes.

RoPE-Mixed (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer"; timm's
``RotaryEmbeddingMixed``) gives each head its own frequency vector per axis,
:math:`f^{(h)}_{a,j}`, and pair :math:`j` of head :math:`h` at position
:math:`t = (t_0, t_1, \dots)` turns by

.. math::
    \phi^{(h)}_j(t) = \sum_a t_a\, f^{(h)}_{a,j}
    \quad (\text{2-D: } t_x f_x + t_y f_y).

Axial RoPE is the special case where each pair's vector has one non-zero axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["check_mixed_freqs", "mixed_angles"]


def check_mixed_freqs(freqs: Any) -> NDArray[np.float64]:
    """`freqs` as float64 of shape ``(axes, pairs)`` or ``(heads, axes, pairs)``, finite."""
    if isinstance(freqs, str | bytes | dict) or np.ndim(freqs) == 0:
        msg = f"`freqs` must be an array (axes, pairs) or (heads, axes, pairs); got {freqs!r}."
        raise TypeError(msg)
    array = np.asarray(freqs)
    if array.dtype.kind not in "fiu" or array.dtype == np.bool_:
        msg = f"`freqs` must hold real numbers; got dtype {array.dtype}."
        raise TypeError(msg)
    if array.ndim not in (2, 3) or 0 in array.shape:
        msg = f"`freqs` must have shape (axes, pairs) or (heads, axes, pairs); got {array.shape}."
        raise ValueError(msg)
    result = array.astype(np.float64)
    if not np.all(np.isfinite(result)):
        msg = "`freqs` must be finite; got non-finite values."
        raise ValueError(msg)
    return result


def mixed_angles(freqs: Any, positions: Any) -> NDArray[np.float64]:
    r"""Angles of RoPE-Mixed in float64: :math:`\phi_j(t) = \sum_a t_a f_{a,j}`, per head.

    Parameters
    ----------
    freqs : array_like
        Frequencies of shape ``(axes, pairs)`` (one head) or ``(heads, axes, pairs)``.
    positions : array_like
        Coordinates of shape ``(seq, axes)``, real (float32 grids are read exactly).

    Returns
    -------
    numpy.ndarray
        float64, ``(seq, pairs)`` or ``(heads, seq, pairs)``.

    Raises
    ------
    TypeError
        If `freqs` or `positions` is not a real array.
    ValueError
        If a shape does not fit, or a value is not finite.

    Examples
    --------
    >>> from rope_ref._core.mixed import mixed_angles
    >>> mixed_angles([[1.0, 0.5], [2.0, 0.0]], [[3.0, 1.0]]).tolist()   # t_x f_x + t_y f_y
    [[5.0, 1.5]]
    """
    f = check_mixed_freqs(freqs)
    p = np.asarray(positions)
    if p.dtype.kind not in "fiu" or p.dtype == np.bool_:
        msg = f"`positions` must hold real numbers; got dtype {p.dtype}."
        raise TypeError(msg)
    axes = f.shape[-2]
    if p.ndim != 2 or p.shape[-1] != axes:
        msg = f"`positions` must have shape (seq, {axes}) for {axes} axes; got {p.shape}."
        raise ValueError(msg)
    t = p.astype(np.float64)
    if not np.all(np.isfinite(t)):
        msg = "`positions` must be finite; got non-finite values."
        raise ValueError(msg)
    terms = t[:, :, None] * np.expand_dims(f, -3)  # ([heads,] seq, axes, pairs)
    return np.asarray(np.sum(terms, axis=-2), dtype=np.float64)
