r"""The oracle's rotation, in plain array-API code: three forms, two layouts.

Every form computes, for each pair :math:`(a, b)` with angle tables ``cos``/``sin``,

.. math::
    a' = a\cos\phi - b\sin\phi, \qquad b' = b\cos\phi + a\sin\phi,

with :math:`\sin \to -\sin` for the inverse rotation. Pairs are ``(j, j + n)`` in the
"half" layout and ``(2j, 2j + 1)`` in the "interleaved" one (``n`` = number of pairs,
offsets relative to ``rotary_start``).
"""

from __future__ import annotations

import array_api_compat

from rope_ref._core.aliases import Array, ArrayNamespace, Form, Layout
from rope_ref._core.compat import device
from rope_ref._core.rounding import round_once

__all__ = ["rotate"]


def rotate(
    x: Array,
    cos: Array,
    sin: Array,
    /,
    *,
    layout: Layout,
    rotary_start: int,
    inverse: bool,
    form: Form = "rotate_half",
    xp: ArrayNamespace,
    output_layout: Layout | None = None,
) -> Array:
    """Rotate ``x[..., rotary_start:rotary_start + 2n]`` in the dtype of `cos`; round once.

    Pairs are read in `layout` and written in `output_layout` (None: `layout`); the
    inverse rotation reads in `output_layout` and writes in `layout`, undoing the forward one.

    The one rounding to a 16-bit `x` is exact (see `rope_ref._core.rounding`), not the cast
    through float32 that PyTorch, JAX and ml_dtypes would do.

    `cos` and `sin` have shape broadcastable to ``x.shape[:-1] + (n,)``. Features outside
    the rotary slice are copied from `x` unchanged.
    """
    n = cos.shape[-1]
    stop = rotary_start + 2 * n
    xr = xp.astype(x[..., rotary_start:stop], cos.dtype)
    written = layout if output_layout is None else output_layout
    if inverse:
        sin = -sin
        layout, written = written, layout
    if form == "complex":
        rotated = _complex(xr, cos, sin, layout=layout, xp=xp)
    elif form == "matrix":
        rotated = xp.matmul(block_matrix(cos, sin, layout=layout, xp=xp), xr[..., None])[..., 0]
    else:
        rotated = _rotate_half(xr, cos, sin, layout=layout, xp=xp)
    if written != layout:
        rotated = join_pairs(*split_pairs(rotated, layout=layout), layout=written, xp=xp)
    rotated = round_once(rotated, x.dtype, xp=xp)
    parts = [x[..., :rotary_start], rotated, x[..., stop:]]
    return _laid_out_as(xp.concat([part for part in parts if part.shape[-1] != 0], axis=-1), x)


def _laid_out_as(result: Array, x: Array) -> Array:
    """`result` with the sharding of JAX array `x` where x is split over several devices.

    A concatenation along a split axis comes back whole on each device (replicated).
    """
    dev = array_api_compat.device(x)
    if getattr(dev, "is_fully_replicated", True) or array_api_compat.device(result) == dev:
        return result
    import jax

    return jax.device_put(result, dev)


def split_pairs(xr: Array, *, layout: Layout) -> tuple[Array, Array]:
    """First and second members of every pair of `xr`, each of shape ``(..., n)``."""
    if layout == "interleaved":
        return xr[..., 0::2], xr[..., 1::2]
    n = xr.shape[-1] // 2
    return xr[..., :n], xr[..., n:]


def join_pairs(first: Array, second: Array, *, layout: Layout, xp: ArrayNamespace) -> Array:
    """Inverse of `split_pairs`."""
    if layout == "interleaved":
        stacked = xp.stack([first, second], axis=-1)
        return xp.reshape(stacked, (*stacked.shape[:-2], 2 * stacked.shape[-2]))
    return xp.concat([first, second], axis=-1)


def _rotate_half(xr: Array, cos: Array, sin: Array, *, layout: Layout, xp: ArrayNamespace) -> Array:
    # x * cos + rotate_half(x) * sin, with cos/sin spread over both members of each pair.
    a, b = split_pairs(xr, layout=layout)
    spread_cos = join_pairs(cos, cos, layout=layout, xp=xp)
    spread_sin = join_pairs(sin, sin, layout=layout, xp=xp)
    return xr * spread_cos + join_pairs(-b, a, layout=layout, xp=xp) * spread_sin


def _complex(xr: Array, cos: Array, sin: Array, *, layout: Layout, xp: ArrayNamespace) -> Array:
    # (a + ib) * e^{i phi}
    ctype = xp.complex128 if cos.dtype == xp.float64 else xp.complex64
    a, b = split_pairs(xr, layout=layout)
    z = xp.astype(a, ctype) + xp.astype(b, ctype) * 1j
    w = z * (xp.astype(cos, ctype) + xp.astype(sin, ctype) * 1j)
    return join_pairs(xp.real(w), xp.imag(w), layout=layout, xp=xp)


def block_matrix(cos: Array, sin: Array, *, layout: Layout, xp: ArrayNamespace) -> Array:
    """Rotation matrices R of shape ``cos.shape + (2n,)`` with ``R @ v`` rotating v."""
    n = cos.shape[-1]
    eye = xp.eye(n, dtype=cos.dtype, device=device(cos))
    c = cos[..., :, None] * eye
    s = sin[..., :, None] * eye
    matrix = xp.concat(
        [xp.concat([c, -s], axis=-1), xp.concat([s, c], axis=-1)], axis=-2
    )  # half layout: [[C, -S], [S, C]]
    if layout == "half":
        return matrix
    order = xp.asarray(half_index_of_interleaved(n), device=device(cos))
    return xp.take(xp.take(matrix, order, axis=-2), order, axis=-1)


def half_index_of_interleaved(n: int) -> list[int]:
    """Feature ``i`` of the interleaved layout is feature ``result[i]`` of the half layout."""
    return [j + n * member for j in range(n) for member in (0, 1)]
