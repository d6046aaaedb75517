"""A bare attention factor: frequencies unchanged, cos and sin scaled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import check_positive, set_field

__all__ = ["AttentionScale"]


@dataclass(frozen=True)
class AttentionScale:
    r"""An attention factor alone: every frequency kept, cos and sin multiplied by `factor`.

    Parameters
    ----------
    factor : float
        Attention factor :math:`m > 0`.

    Raises
    ------
    ValueError
        If `factor` is not finite or not positive.

    Notes
    -----
    :math:`\theta'_j = \theta_j` and the rotated vector is :math:`m\,R(p\theta)\,x`, so the
    attention logits :math:`q^\top k` grow by :math:`m^2`. OLMo-core's ABF rule
    (``ABFRoPEScalingConfig``: a new base and ``attention_rescale_factor``) is
    ``RopeSpec(base=new_theta, scaling=AttentionScale(attention_rescale_factor))``; its PI
    and Stepwise rules carry the same field, written with `Chain`. Before this rule the
    only spelling was ``YaRN(1.0, ..., attention_factor=m)``, whose factor 1 leaves the
    frequencies alone.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=4, scaling=rr.scaling.AttentionScale(1.5))
    >>> rr.inv_freq(spec).tolist(), rr.attention_factor(spec)
    ([1.0, 0.01], 1.5)
    >>> rr.scaling.AttentionScale(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: `factor` must be positive; got -1.0.
    """

    #: Taken to depend on seq_len (what it wraps may): its tables are built per length.
    length_dependent: ClassVar[bool] = True

    factor: float

    def __post_init__(self) -> None:
        set_field(self, "factor", check_positive("factor", self.factor))

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return `inv_freq` unchanged (as float64)."""
        return np.asarray(inv_freq, dtype=np.float64)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return `factor`."""
        return self.factor
