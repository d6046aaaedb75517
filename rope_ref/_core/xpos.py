"""xPos: length-extrapolatable RoPE, queries and keys scaled oppositely."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.validation import check_real

__all__ = ["XPos"]


@dataclass(frozen=True)
class XPos:
    r"""xPos decay (Sun et al. 2022), as rotary-embedding-torch and flash-attn apply it.

    Put it in ``RopeSpec(xpos=XPos())``. Queries are then scaled by
    :math:`\zeta_j^{(p - c)/s}` and keys by :math:`\zeta_j^{-(p - c)/s}`, so
    :math:`q \cdot k` carries :math:`\zeta_j^{(m - n)/s}`: a decay with the relative
    position. `rope_ref.apply_rope` then needs ``role="query"`` or ``role="key"``;
    `rope_ref.apply_rope_qk` sets both.

    Parameters
    ----------
    scale_base : float, default 512.0
        :math:`s > 0`: the number of positions over which the scale changes by
        :math:`\zeta_j`.

    Raises
    ------
    ValueError
        If `scale_base` is not finite or not positive.

    Notes
    -----
    With :math:`d` = `rotary_dim`,

    .. math::
        \zeta_j = \frac{2j + 0.4\,d}{1.4\,d}, \qquad c = \lfloor L / 2 \rfloor,

    where :math:`L` is `seq_len` (default ``max(positions) + 1``). This is
    rotary-embedding-torch's ``use_xpos=True`` (``rotate_queries_and_keys``, whose
    positions are ``arange(L)``, centre ``len(t) // 2``) and flash-attn's
    ``RotaryEmbedding(scale_base=...)`` (centre ``seqlen // 2``).

    The centre depends on :math:`L`. It cancels in :math:`q \cdot k` only when queries and
    keys share it: pass one `seq_len` to both (`rope_ref.apply_rope_qk` does). The peers
    do not: flash-attn rebuilds its cache, and so moves the centre, when the length grows,
    and rotary-embedding-torch's ``rotate_queries_with_cached_keys`` centres queries on
    ``q_len // 2`` and keys on ``k_len // 2``, which multiplies every score by the constant
    :math:`\zeta_j^{(k_{len}//2 - q_{len}//2)/s}` per pair. Its scale cache also returns
    the scales of an earlier, longer call (centred there) for a shorter sequence.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=4, layout="interleaved", xpos=rr.XPos(scale_base=512.0))
    >>> rr.XPos().zeta(4).round(6).tolist()       # (2j + 1.6) / 5.6
    [0.285714, 0.642857]
    >>> q, k = rr.apply_rope_qk(np.ones((3, 4)), np.ones((3, 4)), spec)
    >>> [round(float(q[i] @ k[i]), 12) for i in range(3)]  # zeta^((m - n)/s) = 1 at m = n
    [4.0, 4.0, 4.0]
    >>> rr.apply_rope(np.ones((3, 4)), spec)
    Traceback (most recent call last):
    ...
    ValueError: `role` must be 'query' or 'key' when spec.xpos is set; got None.
    """

    scale_base: float = 512.0

    def __post_init__(self) -> None:
        scale_base = check_real("scale_base", self.scale_base)
        if scale_base <= 0.0:
            msg = f"`scale_base` must be positive; got {scale_base!r}."
            raise ValueError(msg)
        object.__setattr__(self, "scale_base", scale_base)

    def zeta(self, rotary_dim: int) -> NDArray[np.float64]:
        r"""Per-pair decay bases :math:`\zeta_j = (2j + 0.4d) / (1.4d)`, float64."""
        j = np.arange(rotary_dim // 2, dtype=np.float64)
        return (2.0 * j + 0.4 * rotary_dim) / (1.4 * rotary_dim)

    def center(self, seq_len: float) -> float:
        r"""The position with scale 1, :math:`\lfloor L / 2 \rfloor`."""
        return float(math.floor(seq_len / 2))
