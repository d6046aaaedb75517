r"""The error model: how far a correct RoPE implementation may be from the oracle.

A pair :math:`(a, b)` of norm :math:`r` rotated by :math:`\phi` in finite precision is off
by at most

.. math::
    r \,\bigl(2\,\epsilon_\phi\,(|\phi|_{\max} + 1) + k\,\epsilon\bigr),

where :math:`\epsilon_\phi` is the machine epsilon of the arithmetic that built the
angles, :math:`|\phi|_{\max}` the largest angle at that position, :math:`\epsilon` the
machine epsilon of the storage dtype and :math:`k = 4` the number of roundings allowed
(table, two products, sum and storage, doubled for slack). The angle term is
`rope_ref._core.error_model.angle_error`; docs/testing.md derives both terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.compat import host_namespace, to_numpy
from rope_ref._core.error_model import angle_error
from rope_ref._core.frequencies import rope_angles
from rope_ref._core.positions import as_positions, check_offset, shift
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_nonnegative

__all__ = [
    "CHECKABLE_SHARE",
    "EPS",
    "ErrorModel",
    "checkable_angle",
    "dtype_name",
    "error_model",
    "max_checkable_position",
    "rope_atol",
]

#: Largest tolerance, as a share of a pair's norm, that still tells a correct result from
#: zeros, the identity or the inverse rotation. Below 1/sqrt(2) a zero result fails on
#: every pair; 1/2 leaves room for the identity and the inverse at large angles.
CHECKABLE_SHARE = 0.5

#: Machine epsilon (distance from 1 to the next float) of the dtypes the model knows.
EPS: dict[str, float] = {
    "float64": 2.0**-52,
    "float32": 2.0**-23,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
}


#: The names of NumPy's floating dtypes of `EPS`, looked up without ``dtype.name``.
_NUMPY_NAMES: dict[np.dtype[Any], str] = {
    np.dtype(name): name for name in ("float64", "float32", "float16")
}


def dtype_name(dtype: object) -> str:
    """Canonical name (``"float32"``, ``"bfloat16"``, ...) of a dtype of any namespace.

    Raises ValueError naming `dtype` when it is not one of the floating dtypes in `EPS`.
    """
    known = _NUMPY_NAMES.get(dtype) if isinstance(dtype, np.dtype) else None
    if known is not None:  # NumPy's own: ``dtype.name`` is computed in Python on each read
        return known
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and issubclass(dtype, np.generic):
        name = np.dtype(dtype).name
    else:
        name = str(getattr(dtype, "name", None) or dtype)
    name = name.rsplit(".", 1)[-1].strip("'>")
    if name not in EPS:
        msg = f"`dtype` must be one of the floating dtypes {sorted(EPS)}; got {dtype!r}."
        raise ValueError(msg)
    return name


@dataclass(frozen=True)
class ErrorModel:
    r"""Tolerance of a RoPE result as a function of the angle and the pair's norm.

    ``atol(max_angle, magnitude) = magnitude * (2 * angle_eps * (|max_angle| + 1)
    + roundings * eps)``. Use `error_model` to build one for a dtype.

    Parameters
    ----------
    eps : float
        Machine epsilon of the dtype the result is stored (and rotated) in.
    angle_eps : float
        Machine epsilon of the arithmetic that built the angles :math:`p\,\theta_j`.
    roundings : float, default 4
        Roundings of size `eps` allowed per element.

    All three must be finite real numbers >= 0 (not bool): TypeError or ValueError naming
    the field otherwise.

    Examples
    --------
    >>> from rope_ref.testing import ErrorModel
    >>> model = ErrorModel(eps=2.0**-23, angle_eps=2.0**-23)
    >>> f"{model.atol(1000.0):.2e}"
    '2.39e-04'
    """

    eps: float
    angle_eps: float
    roundings: float = 4.0

    def __post_init__(self) -> None:
        for name in ("eps", "angle_eps", "roundings"):
            object.__setattr__(self, name, check_nonnegative(name, getattr(self, name)))

    def atol(self, max_angle: Any, magnitude: Any = 1.0) -> Any:
        """Absolute tolerance at `max_angle` (radians) for pairs of norm `magnitude`.

        Both arguments may be NumPy arrays (they broadcast); a float comes back for floats.
        """
        if np.ndim(max_angle) == 0 and np.ndim(magnitude) == 0:
            per_unit = angle_error(float(max_angle), angle_eps=self.angle_eps)
            return float(magnitude) * (per_unit + self.roundings * self.eps)
        phi = np.abs(np.asarray(max_angle, dtype=np.float64))
        per_unit_array = 2.0 * self.angle_eps * (phi + 1.0)  # angle_error, elementwise
        return np.asarray(magnitude, dtype=np.float64) * (
            per_unit_array + self.roundings * self.eps
        )

    def describe(self) -> str:
        """One line stating the model, for failure messages."""
        return (
            f"|error| <= |pair| * (2 * {self.angle_eps:.3g} * (|angle| + 1) + "
            f"{self.roundings:g} * {self.eps:.3g})"
        )


def error_model(dtype: object, *, angle_dtype: object = None) -> ErrorModel:
    """The error model for results stored in `dtype`.

    Parameters
    ----------
    dtype : dtype or str
        Dtype of the result (any namespace's dtype object, or its name).
    angle_dtype : dtype or str, optional
        Precision of the angle arithmetic of the implementation under test: float32 or
        float64. Defaults to float64 for float64 results and float32 otherwise (what
        correct float32, float16 and bfloat16 code does: angles in float32, never in 16
        bits, which is refused).

    Returns
    -------
    ErrorModel

    Examples
    --------
    >>> from rope_ref.testing import error_model
    >>> error_model("bfloat16")
    ErrorModel(eps=0.0078125, angle_eps=1.1920928955078125e-07, roundings=4.0)
    """
    name = dtype_name(dtype)
    if angle_dtype is None:
        angle_name = "float64" if name == "float64" else "float32"
    else:
        try:
            angle_name = dtype_name(angle_dtype)
        except (TypeError, ValueError):
            angle_name = ""
    known = _MODELS.get((name, angle_name))
    if known is not None:
        return known
    if angle_name not in ("float32", "float64"):
        # 16-bit angles are a bug, not a precision: position 1000 in float16 is off by 0.5
        # rad, so a model granting them would pass almost anything
        msg = (
            "`angle_dtype` must be float32 or float64 (RoPE angles computed in 16 bits are "
            f"off by whole radians at long positions); got {angle_dtype!r}."
        )
        raise ValueError(msg)
    model = ErrorModel(eps=EPS[name], angle_eps=EPS[angle_name])
    _MODELS[name, angle_name] = model
    return model


#: The models `error_model` built, by dtype and angle dtype name (frozen: safe to share).
_MODELS: dict[tuple[str, str], ErrorModel] = {}


def checkable_angle(model: ErrorModel) -> float:
    """Largest angle (radians) at which `model`'s tolerance is below `CHECKABLE_SHARE`.

    Past it the tolerance is half the pair's norm or more: zeros, the identity and the
    inverse rotation would pass, so a result there is "not checkable".
    """
    room = CHECKABLE_SHARE - model.roundings * model.eps
    if room <= 0.0:
        return 0.0
    if model.angle_eps == 0.0:
        return math.inf
    return room / (2.0 * model.angle_eps) - 1.0


def max_checkable_position(
    spec: RopeSpec,
    dtype: object,
    *,
    angle_dtype: object = None,
    seq_len: float | None = None,
) -> int:
    """Largest position whose results `assert_rope_close` can check in `dtype`.

    Past it the error model allows half a pair's norm or more, so zeros, the identity and
    the inverse rotation would pass: such results get the verdict "not checkable".

    Parameters
    ----------
    spec : RopeSpec
        The embedding (its fastest frequency sets the largest angle per position).
    dtype : dtype or str
        Dtype of the results.
    angle_dtype : dtype or str, optional
        As for `error_model`.
    seq_len : float, optional
        For length-dependent scalings.

    Returns
    -------
    int
        The position (``2**62`` when every position is checkable).

    Examples
    --------
    >>> import rope_ref as rr
    >>> from rope_ref.testing import max_checkable_position
    >>> spec = rr.RopeSpec(head_dim=128)
    >>> max_checkable_position(spec, "float32")
    2097149
    >>> max_checkable_position(spec, "float64") > 10**14
    True
    """
    check_spec(spec)
    limit = checkable_angle(error_model(dtype, angle_dtype=angle_dtype))
    ones = np.ones((1,) if spec.sections is None else (1, len(spec.sections)))
    fastest = float(np.max(np.abs(to_numpy(rope_angles(spec, ones, seq_len))), initial=0.0))
    if fastest == 0.0 or not math.isfinite(limit):
        return 2**62
    return int(min(max(math.floor(limit / fastest), 0), 2**62))


def rope_atol(
    spec: RopeSpec,
    positions: Any,
    *,
    dtype: object,
    magnitude: float = 1.0,
    offset: float = 0,
    angle_dtype: object = None,
    seq_len: float | None = None,
) -> float:
    """One absolute tolerance for a whole RoPE result: the model at the largest angle.

    For ``torch.testing.assert_close(..., atol=rope_atol(...), rtol=0)`` and the like.
    `assert_rope_close` is tighter: it applies the model per position and pair.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    positions : array_like
        Every position in the result (any namespace; only the largest angle matters).
    dtype : dtype or str
        Dtype of the result.
    magnitude : float, default 1.0
        Largest norm of a rotated pair of the input, times the attention factor if any
        (for inputs bounded by ``m``, ``sqrt(2) * m`` is safe); a finite real number >= 0.
    offset : float, default 0
        Added to `positions`.
    angle_dtype : dtype or str, optional
        As for `error_model`.
    seq_len : float, optional
        For length-dependent scalings.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing import rope_atol
    >>> spec = rr.RopeSpec(head_dim=128)
    >>> atol = rope_atol(spec, np.arange(8192), dtype="float32")
    >>> bool(1e-3 < atol < 2e-3)        # float32 angles near 8191 rad
    True
    >>> rope_atol(spec, np.arange(8192), dtype="float64") < 1e-11
    True
    """
    check_spec(spec)
    size = check_nonnegative("magnitude", magnitude)
    p = as_positions(_host(positions), xp=host_namespace(), n_axes=spec.position_axes)
    p = shift(p, check_offset(offset), host_namespace())
    top = 0.0
    if p.size:
        top = float(np.max(np.abs(to_numpy(rope_angles(spec, p, seq_len)))))
    model = error_model(dtype, angle_dtype=angle_dtype)
    return float(model.atol(top, size))


def _host(a: Any) -> Any:
    """Arrays of any namespace as NumPy (Python numbers and sequences pass through)."""
    from rope_ref._core.compat import is_array

    return host64(a) if is_array(a) else a


def host64(a: Any) -> NDArray[np.float64]:
    """Any array (torch bfloat16 included) as a float64 NumPy array on the host."""
    if type(a) is np.ndarray:  # the common case, without the namespace look-ups below
        return np.asarray(a, dtype=np.float64)
    from rope_ref._core.compat import is_array
    from rope_ref._core.foreign import host_array, is_mlx_array

    if is_mlx_array(a):
        return np.asarray(host_array(a), dtype=np.float64)
    if is_array(a) and "torch" in type(a).__module__:
        import torch

        return np.asarray(a.detach().to(device="cpu", dtype=torch.float64))
    return np.asarray(to_numpy(a) if is_array(a) else a, dtype=np.float64)
