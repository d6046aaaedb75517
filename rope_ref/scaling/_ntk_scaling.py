"""vLLM's ``ntk`` rule: fixed and mixed NTK scaling."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import check_divisor, check_optional_positive, set_field

__all__ = ["NTKScaling"]

#: Largest `mixed_b`: past it ``(j + 1) ** mixed_b`` overflows float64 for some head sizes.
MAX_MIXED_B = 64.0


@dataclass(frozen=True)
class NTKScaling:
    r"""vLLM's ``rope_type: "ntk"``: fixed NTK scaling, or mixed NTK with `mixed_b`.

    Parameters
    ----------
    factor : float
        Scaling factor :math:`s > 0` (``factor``).
    mixed_b : float, optional
        The exponent :math:`\beta` of mixed NTK scaling (``mixed_b``), positive, at most
        64. None: fixed NTK scaling.

    Raises
    ------
    ValueError
        If `factor` is not finite, not positive or too small to divide by, or `mixed_b` is
        not finite, not positive or above 64; the message names the field.

    Notes
    -----
    With :math:`d` = `rotary_dim` and :math:`\theta_j = b^{-2j/d}`, fixed NTK scaling (the
    base times :math:`s`, every frequency divided by :math:`s^{2/d}`) gives

    .. math::
        \theta'_j = (s b)^{-2j/d}\,s^{-2/d} = \theta_j\,s^{-(2j+2)/d},

    and mixed NTK scaling (base unchanged) divides pair :math:`j` by
    :math:`\lambda_j = \exp\bigl(a\,(j+1)^\beta\bigr)` with
    :math:`a = \ln s / (d/2)^\beta`:

    .. math::
        \theta'_j = \theta_j\,s^{-((j+1)/(d/2))^\beta}.

    At :math:`\beta = 1` the two are one formula. Unlike `NTKAware` (which keeps the first
    pair's frequency), every pair is divided, the first by :math:`s^{2/d}` (fixed), the last
    by exactly :math:`s`. The attention factor is 1. This is vLLM's
    ``NTKScalingRotaryEmbedding`` (after Su Jianlin's "fixed and mixed" NTK, kexue.fm 9706);
    vLLM computes :math:`\lambda_j` in float32. It is no HF ``rope_type``: `RopeSpec.from_hf`
    reads it as vLLM's ``get_rope`` does, and ``to_hf`` writes it the same way.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=4, scaling=rr.scaling.NTKScaling(4.0))
    >>> ratio = rr.inv_freq(spec) / rr.inv_freq(rr.RopeSpec(head_dim=4))
    >>> ratio.round(12).tolist()  # 4 ** -(1/2), 4 ** -1
    [0.5, 0.25]
    >>> mixed = rr.RopeSpec(head_dim=4, scaling=rr.scaling.NTKScaling(4.0, mixed_b=2.0))
    >>> (rr.inv_freq(mixed) / rr.inv_freq(rr.RopeSpec(head_dim=4))).round(12).tolist()
    [0.707106781187, 0.25]
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "ntk_scaling"

    factor: float
    mixed_b: float | None = None

    def __post_init__(self) -> None:
        set_field(self, "factor", check_divisor("factor", self.factor))
        mixed_b = check_optional_positive("mixed_b", self.mixed_b)
        if mixed_b is not None and mixed_b > MAX_MIXED_B:
            msg = f"`mixed_b` must be at most {MAX_MIXED_B:g}; got {mixed_b!r}."
            raise ValueError(msg)
        set_field(self, "mixed_b", mixed_b)

    def exponents(self, rotary_dim: int) -> NDArray[np.float64]:
        r"""The power of :math:`s` each pair is divided by: :math:`((j+1)/(d/2))^\beta`.

        Examples
        --------
        >>> from rope_ref.scaling import NTKScaling
        >>> NTKScaling(2.0).exponents(8).tolist()
        [0.25, 0.5, 0.75, 1.0]
        """
        fraction = np.arange(1, rotary_dim // 2 + 1, dtype=np.float64) / (rotary_dim // 2)
        return fraction if self.mixed_b is None else fraction**self.mixed_b

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        r"""Return :math:`\theta_j\,s^{-((j+1)/(d/2))^\beta}` (:math:`\beta = 1` when fixed)."""
        theta = np.asarray(inv_freq, dtype=np.float64)
        return theta * np.exp(-math.log(self.factor) * self.exponents(rotary_dim))

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0
