"""Proportional RoPE (Gemma 4): frequencies over the whole head, only the first few rotate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.validation import check_real
from rope_ref.scaling._checks import check_divisor, set_field

__all__ = ["Proportional"]


@dataclass(frozen=True)
class Proportional:
    r"""Proportional RoPE (HF ``"proportional"``, Gemma 4): rotate a fraction of the pairs.

    Use it with ``rotary_dim == head_dim``: the exponents run over the whole head, and the
    pairs past the fraction get frequency 0 (the identity).

    Parameters
    ----------
    partial_rotary_factor : float
        Fraction :math:`p \in [0, 1]` of the pairs that rotate.
    factor : float, default 1.0
        Linear interpolation factor :math:`s > 0` applied on top.

    Raises
    ------
    ValueError
        If `partial_rotary_factor` is outside [0, 1] or `factor` is not positive or too
        small to divide by (below about 5.6e-309 the inverse frequencies would overflow).

    Notes
    -----
    With :math:`H` = `rotary_dim` and :math:`k = \lfloor p H / 2 \rfloor` (HF's
    ``int(p * head_dim // 2)``),

    .. math::
        \theta'_j = b^{-2j/H} / s \;(j < k), \qquad \theta'_j = 0 \;(j \ge k),

    and the attention factor is 1. Unlike ``partial_rotary_factor`` of the other HF types,
    which shortens `rotary_dim` (and so changes every exponent), this keeps the exponents of
    the full head. At :math:`p = 1, s = 1` it is plain RoPE. vLLM (``Gemma4RotaryEmbedding``)
    and mlx-lm (``ProportionalRoPE``, with infinite periods) do the same.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=8, scaling=rr.scaling.Proportional(0.5))
    >>> rr.inv_freq(spec).tolist()
    [1.0, 0.1, 0.0, 0.0]
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "proportional"

    partial_rotary_factor: float
    factor: float = 1.0

    def __post_init__(self) -> None:
        fraction = check_real("partial_rotary_factor", self.partial_rotary_factor)
        if not 0.0 <= fraction <= 1.0:
            msg = f"`partial_rotary_factor` must be between 0 and 1; got {fraction!r}."
            raise ValueError(msg)
        set_field(self, "partial_rotary_factor", fraction)
        set_field(self, "factor", check_divisor("factor", self.factor))

    def n_rotated(self, rotary_dim: int) -> int:
        """Number of pairs that rotate, ``int(partial_rotary_factor * rotary_dim // 2)``."""
        return int(self.partial_rotary_factor * rotary_dim // 2)

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return the first pairs' frequencies divided by `factor`, zeros after."""
        theta = np.asarray(inv_freq, dtype=np.float64) / self.factor
        theta[self.n_rotated(rotary_dim) :] = 0.0
        return theta

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0
