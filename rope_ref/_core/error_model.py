"""How far a correct RoPE result may be from the exact one, by dtype and angle size."""

from __future__ import annotations

import numpy as np

__all__ = ["angle_error", "tolerance"]

_EPS64 = float(np.finfo(np.float64).eps)


def angle_error(max_angle: float, *, angle_eps: float = _EPS64) -> float:
    r"""Bound on the error of an angle :math:`\phi = p\,\theta_j` built in a precision.

    The inverse frequency is off by at most 1 ulp and the product rounds once, so
    :math:`|\Delta\phi| \le 1.5\,\epsilon\,|\phi|`; we return :math:`2\epsilon(|\phi| + 1)`.
    """
    return 2.0 * angle_eps * (abs(max_angle) + 1.0)


def tolerance(eps: float, *, max_angle: float, magnitude: float, roundings: int = 2) -> float:
    """Absolute tolerance for rotated values of size `magnitude` stored with epsilon `eps`.

    float64 angles contribute ``angle_error(max_angle) * magnitude`` (cos and sin are
    1-Lipschitz); each rounding of the result to the storage dtype adds ``eps * magnitude``.
    """
    return magnitude * (roundings * eps + 2.0 * angle_error(max_angle))
