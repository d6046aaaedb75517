"""How far a correct RoPE result may be from the exact one, by dtype and angle size."""

from __future__ import annotations

import numpy as np

from rope_ref._core.validation import check_int, check_nonnegative, check_real

__all__ = ["angle_error", "tolerance"]

_EPS64 = float(np.finfo(np.float64).eps)


def angle_error(max_angle: float, *, angle_eps: float = _EPS64) -> float:
    r"""Bound on the error of an angle :math:`\phi = p\,\theta_j` built in a precision.

    The inverse frequency is off by at most 1 ulp and the product rounds once, so
    :math:`|\Delta\phi| \le 1.5\,\epsilon\,|\phi|`; we return :math:`2\epsilon(|\phi| + 1)`.

    Parameters
    ----------
    max_angle : float
        The angle :math:`\phi` in radians (finite; only its size matters).
    angle_eps : float, default float64 epsilon
        Machine epsilon of the arithmetic that built the angle (finite, >= 0).

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If an argument is not a real number (bool included).
    ValueError
        If an argument is not finite, or `angle_eps` is negative.
    """
    phi = check_real("max_angle", max_angle)
    eps = check_nonnegative("angle_eps", angle_eps)
    return 2.0 * eps * (abs(phi) + 1.0)


def tolerance(eps: float, *, max_angle: float, magnitude: float, roundings: int = 2) -> float:
    """Absolute tolerance for rotated values of size `magnitude` stored with epsilon `eps`.

    float64 angles contribute ``angle_error(max_angle) * magnitude`` (cos and sin are
    1-Lipschitz); each rounding of the result to the storage dtype adds ``eps * magnitude``.

    Parameters
    ----------
    eps : float
        Machine epsilon of the storage dtype (finite, >= 0).
    max_angle : float
        Largest angle in radians (finite; only its size matters).
    magnitude : float
        Size of the rotated values (finite, >= 0).
    roundings : int, default 2
        Roundings to the storage dtype allowed (a positive integer).

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If an argument has the wrong type (bool is neither a number nor an integer here).
    ValueError
        If a number is not finite or is negative, or `roundings` is less than 1.
    """
    storage_eps = check_nonnegative("eps", eps)
    size = check_nonnegative("magnitude", magnitude)
    count = check_int("roundings", roundings, minimum=1)
    return size * (count * storage_eps + 2.0 * angle_error(max_angle))
