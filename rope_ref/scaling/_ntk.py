"""NTK-aware base rescaling, static and dynamic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import (
    check_context_length,
    check_divisor,
    check_positive,
    pair_exponents,
    set_field,
)

__all__ = ["DynamicNTK", "NTKAware"]


def _rescaled(inv_freq: NDArray[np.float64], ratio: float, rotary_dim: int) -> NDArray[np.float64]:
    """Inverse frequencies of the base ``base * ratio ** (d / (d - 2))``."""
    return np.asarray(inv_freq, dtype=np.float64) * ratio ** -pair_exponents(rotary_dim)


@dataclass(frozen=True)
class NTKAware:
    r"""NTK-aware scaling: a larger base, :math:`b' = b\,s^{d/(d-2)}`.

    Parameters
    ----------
    factor : float
        Scaling factor :math:`s > 0`.

    Raises
    ------
    ValueError
        If `factor` is not finite, not positive, or too small to divide by
        (below about 5.6e-309 the inverse frequencies would overflow).

    Notes
    -----
    With :math:`d` = `rotary_dim`,

    .. math::
        \theta'_j = (b\,s^{d/(d-2)})^{-2j/d} = \theta_j\,s^{-2j/(d-2)},

    so the first pair keeps its frequency (no interpolation of high frequencies) and the last
    pair is divided by exactly :math:`s` (full interpolation of the lowest). The attention
    factor is 1. This is rotary-embedding-torch's ``theta_rescale_factor`` and vLLM's
    ``DynamicNTKAlphaRotaryEmbedding`` (with :math:`s` = ``alpha``). vLLM's ``ntk`` type
    uses :math:`\theta_j\,s^{-(2j+2)/d}` instead, and HF 5.x has no static NTK type (use
    `DynamicNTK` for its ``"dynamic"``). With :math:`d = 2` the only pair is unchanged.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=6, scaling=rr.scaling.NTKAware(4.0))
    >>> ratio = rr.inv_freq(spec) / rr.inv_freq(rr.RopeSpec(head_dim=6))
    >>> ratio.round(12).tolist()
    [1.0, 0.5, 0.25]
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "ntk"

    factor: float

    def __post_init__(self) -> None:
        set_field(self, "factor", check_divisor("factor", self.factor))

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        r"""Return :math:`\theta_j\,s^{-2j/(d-2)}`."""
        return _rescaled(inv_freq, self.factor, rotary_dim)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0


@dataclass(frozen=True)
class DynamicNTK:
    r"""Dynamic NTK scaling (HF ``"dynamic"``): the base grows with the sequence length.

    Parameters
    ----------
    factor : float
        Scaling factor :math:`s > 0`.
    max_position : int
        :math:`L_{max}`, HF's ``max_position_embeddings``: up to this length the base is
        unchanged.

    Raises
    ------
    ValueError
        If `factor` is not finite or not positive, or `max_position` is not positive.

    Notes
    -----
    With :math:`L = \max(\text{seq\_len}, L_{max})` (:math:`L_{max}` when `seq_len` is
    None) and :math:`d` = `rotary_dim`,

    .. math::
        b' = b\,\Bigl(\frac{s L}{L_{max}} - (s - 1)\Bigr)^{d/(d-2)}, \qquad
        \theta'_j = b'^{-2j/d}.

    The attention factor is 1. Even at :math:`s = 1` the base grows past :math:`L_{max}`
    (by :math:`(L / L_{max})^{d/(d-2)}`). The frequencies depend on `seq_len`, so keys cached at one
    length and queries at another are rotated with different frequencies: attention scores
    then depend on more than the relative position (HF issue #25104). Pass the same
    `seq_len` to both, or re-rotate the cache with `rope_ref.rerotate`.

    Where peers differ: HF sets :math:`L` = ``max(position_ids) + 1`` over the whole batch on
    every forward, only when it grows past the cached length, and resets below
    :math:`L_{max}`; mlx-lm uses ``max(T + offset, max_position_embeddings)`` on every call;
    vLLM computes the base once at start-up from the serving length (static, vLLM #3488);
    rope_ref uses the `seq_len` it is given (default ``max(positions) + 1``).

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=8, scaling=rr.scaling.DynamicNTK(2.0, max_position=1024))
    >>> bool((rr.inv_freq(spec, seq_len=512) == rr.inv_freq(rr.RopeSpec(head_dim=8))).all())
    True
    >>> bool((rr.inv_freq(spec, seq_len=4096) < rr.inv_freq(spec, seq_len=2048)).all())
    False
    >>> bool((rr.inv_freq(spec, seq_len=4096)[1:] < rr.inv_freq(spec, seq_len=2048)[1:]).all())
    True
    """

    #: Its frequencies or attention factor change with seq_len: tables are built per length.
    length_dependent: ClassVar[bool] = True
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "dynamic_ntk"

    factor: float
    max_position: int

    def __post_init__(self) -> None:
        set_field(self, "factor", check_positive("factor", self.factor))
        set_field(self, "max_position", check_context_length("max_position", self.max_position))

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return the inverse frequencies of the rescaled base at `seq_len`."""
        length = max(self.max_position if seq_len is None else seq_len, self.max_position)
        # s L / L_max - (s - 1), written without the cancellation (exactly 1 at L = L_max)
        ratio = 1.0 + self.factor * (length - self.max_position) / self.max_position
        return _rescaled(inv_freq, ratio, rotary_dim)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0
