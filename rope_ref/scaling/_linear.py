"""Linear scaling: position interpolation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import check_divisor, set_field

__all__ = ["Linear"]


@dataclass(frozen=True)
class Linear:
    r"""Position interpolation: every inverse frequency divided by `factor`.

    Parameters
    ----------
    factor : float
        Context-extension factor :math:`s > 0`; positions are squeezed by :math:`1/s`.

    Raises
    ------
    ValueError
        If `factor` is not finite, not positive, or too small to divide by
        (below about 5.6e-309 the inverse frequencies would overflow).

    Notes
    -----
    :math:`\theta'_j = \theta_j / s`, so the angle at position :math:`p` is that of plain
    RoPE at :math:`p / s`. The attention factor is 1.

    Peers agree on the formula but differ in where the division happens: HF divides
    ``inv_freq`` (rope_type ``"linear"``), MLX multiplies positions by ``scale = 1/s``,
    ggml multiplies angles by ``freq_scale = 1/s`` and rotary-embedding-torch divides
    positions by ``interpolate_factor``. The results agree to rounding. TransformerEngine
    switches to a length-dependent scale when the requested length exceeds
    ``s * pretrained_max_position_embeddings``; this rule never does.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=4, scaling=rr.scaling.Linear(4.0))
    >>> rr.inv_freq(spec).tolist()
    [0.25, 0.0025]
    >>> rr.scaling.Linear(0.0)
    Traceback (most recent call last):
    ...
    ValueError: `factor` must be positive; got 0.0.
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "linear"

    factor: float

    def __post_init__(self) -> None:
        set_field(self, "factor", check_divisor("factor", self.factor))

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return ``inv_freq / factor``."""
        return np.asarray(inv_freq, dtype=np.float64) / self.factor

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0
