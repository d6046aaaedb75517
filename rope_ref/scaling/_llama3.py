"""Llama 3.1 frequency-band scaling."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import check_context_length, check_divisor, check_positive, set_field

__all__ = ["Llama3"]


@dataclass(frozen=True)
class Llama3:
    r"""Llama 3.1 scaling: interpolate long wavelengths, keep short ones, blend in between.

    Parameters
    ----------
    factor : float
        Interpolation factor :math:`s > 0` of the low-frequency band (8 for Llama 3.1).
    original_max_position : int
        :math:`L_0`, the pre-training context length (8192 for Llama 3.1).
    low_freq_factor, high_freq_factor : float, default 1.0 and 4.0
        :math:`f_{lo} \le f_{hi}`, both positive: wavelengths above :math:`L_0 / f_{lo}` are
        interpolated, those below :math:`L_0 / f_{hi}` kept. Equal factors (Llama 4's
        released configs: 1 and 1) make a step with no blended band.

    Raises
    ------
    ValueError
        If a number is not finite or not positive, `factor` is below about 5.6e-309 (the
        inverse frequencies divided by it would overflow), or
        ``low_freq_factor > high_freq_factor``; the message names the field.

    Notes
    -----
    With wavelength :math:`\lambda_j = 2\pi / \theta_j`,

    .. math::
        \theta'_j = \begin{cases}
            \theta_j & \lambda_j < L_0 / f_{hi} \\
            \theta_j / s & \lambda_j > L_0 / f_{lo} \\
            (1 - \gamma_j)\,\theta_j / s + \gamma_j\,\theta_j &
            \text{otherwise, } \gamma_j = \dfrac{L_0/\lambda_j - f_{lo}}{f_{hi} - f_{lo}}
        \end{cases}

    and the attention factor is 1. This is HF's and Meta's ``apply_scaling`` (the middle band
    includes both ends). vLLM and torchtune test the bands in the other order, and mlx-lm
    excludes both ends of the middle band: they differ from HF only for a wavelength exactly
    equal to :math:`L_0 / f_{lo}` (where the blend equals :math:`\theta_j/s` anyway) or
    :math:`L_0/f_{hi}`. llama.cpp stores the per-pair divisors as a ``rope_freqs`` tensor.

    At :math:`s = 1` this is plain RoPE; when every wavelength exceeds :math:`L_0/f_{lo}` it
    is `Linear` (:math:`s`); when every wavelength is below :math:`L_0/f_{hi}` it is plain
    RoPE. With :math:`f_{lo} = f_{hi}` the middle band is the single wavelength
    :math:`L_0 / f_{lo}`, which takes :math:`\theta_j / s` (the blend's value at that end;
    HF's formula divides 0 by 0 there, a wavelength no power of a float base hits).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rule = rr.scaling.Llama3(8.0, original_max_position=8192)
    >>> spec = rr.RopeSpec(head_dim=128, base=500000.0, scaling=rule)
    >>> theta, plain = rr.inv_freq(spec), rr.inv_freq(rr.RopeSpec(head_dim=128, base=500000.0))
    >>> float(theta[0] / plain[0]), float(theta[-1] / plain[-1])
    (1.0, 0.125)
    >>> step = rr.scaling.Llama3(16.0, 8192, low_freq_factor=1.0, high_freq_factor=1.0)
    >>> rr.scaling.Llama3(8.0, 8192, low_freq_factor=4.0, high_freq_factor=2.0)
    Traceback (most recent call last):
    ...
    ValueError: `low_freq_factor` must be at most high_freq_factor (2.0); got 4.0.
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "llama3"

    factor: float
    original_max_position: int
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0

    def __post_init__(self) -> None:
        set_field(self, "factor", check_divisor("factor", self.factor))
        set_field(
            self,
            "original_max_position",
            check_context_length("original_max_position", self.original_max_position),
        )
        low = check_positive("low_freq_factor", self.low_freq_factor)
        high = check_positive("high_freq_factor", self.high_freq_factor)
        if low > high:
            msg = f"`low_freq_factor` must be at most high_freq_factor ({high!r}); got {low!r}."
            raise ValueError(msg)
        set_field(self, "low_freq_factor", low)
        set_field(self, "high_freq_factor", high)

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return the band-scaled inverse frequencies (see Notes)."""
        theta = np.asarray(inv_freq, dtype=np.float64)
        context, low, high = self.original_max_position, self.low_freq_factor, self.high_freq_factor
        wavelength = 2.0 * math.pi / theta
        band = high - low  # 0: a step, no blended band
        gamma = (context / wavelength - low) / band if band else np.zeros_like(theta)
        blended = (1.0 - gamma) * theta / self.factor + gamma * theta
        out = np.where(wavelength > context / low, theta / self.factor, theta)
        medium = (wavelength >= context / high) & (wavelength <= context / low)
        return np.where(medium, blended, out)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return 1.0."""
        return 1.0
