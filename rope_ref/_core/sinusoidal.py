"""The absolute sinusoidal position embedding of Vaswani et al. (2017), for comparison."""

from __future__ import annotations

from rope_ref._core.aliases import Array
from rope_ref._core.compat import array_namespace, device, has_float64, to_numpy
from rope_ref._core.positions import as_positions
from rope_ref._core.validation import check_int, check_real, check_size

__all__ = ["sinusoidal_embedding"]


def sinusoidal_embedding(positions: Array, /, dim: int, *, base: float = 10000.0) -> Array:
    r"""Absolute sinusoidal position embedding, sin and cos interleaved.

    :math:`PE_{p, 2i} = \sin(p\,b^{-2i/d})` and :math:`PE_{p, 2i+1} = \cos(p\,b^{-2i/d})`,
    computed in float64. It is *added* to token embeddings, whereas RoPE *rotates*
    queries and keys by the same angles.

    Parameters
    ----------
    positions : array_like
        Real positions, any shape.
    dim : int
        Embedding width; even.
    base : float, default 10000.0
        Frequency base :math:`b > 1`.

    Returns
    -------
    array
        Shape ``positions.shape + (dim,)``, float64 (where the namespace has it), in the
        namespace of `positions` (NumPy for Python numbers).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.sinusoidal_embedding([0], 4).tolist()
    [[0.0, 1.0, 0.0, 1.0]]
    """
    dim = check_int("dim", dim, minimum=2)
    if dim % 2:
        msg = f"`dim` must be even; got {dim}."
        raise ValueError(msg)
    base = check_real("base", base)
    if base <= 1.0:
        msg = f"`base` must be greater than 1; got {base!r}."
        raise ValueError(msg)
    p = as_positions(positions)
    check_size(
        "`positions` and `dim`",
        "an embedding",
        (*(float("nan") if n is None else n for n in p.shape), dim),
        hint=": pass the positions in chunks",
    )
    xp, dev = array_namespace(p), device(p)
    if not has_float64(xp, dev):  # build on the host in float64, round once to float32
        host = sinusoidal_embedding(to_numpy(p), dim, base=base)
        return xp.asarray(host, dtype=xp.float32, device=dev)
    exponents = xp.arange(0, dim, 2, dtype=xp.float64, device=dev) / dim
    angles = xp.astype(p, xp.float64)[..., None] * (base**-exponents)
    stacked = xp.stack([xp.sin(angles), xp.cos(angles)], axis=-1)
    return xp.reshape(stacked, (*angles.shape[:-1], dim))
