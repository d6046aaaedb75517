"""Field checks shared by the scaling rules: each error names the field and the value."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rope_ref._core.validation import check_bool, check_real

__all__ = [
    "check_bool",
    "check_context_length",
    "check_divisor",
    "check_factor_list",
    "check_length",
    "check_optional_positive",
    "check_optional_real",
    "check_positive",
    "pair_exponents",
    "set_field",
]


def set_field(rule: object, name: str, value: object) -> None:
    """Store a validated value on a frozen dataclass."""
    object.__setattr__(rule, name, value)


def check_positive(name: str, value: object) -> float:
    """A finite real number greater than 0, as a float."""
    result = check_real(name, value)
    if result <= 0.0:
        msg = f"`{name}` must be positive; got {result!r}."
        raise ValueError(msg)
    return result


def check_divisor(name: str, value: object) -> float:
    """A positive factor whose reciprocal is finite.

    Inverse frequencies (at most 1) are divided by it, so a tinier one (below about
    5.6e-309) would make them infinite.
    """
    result = check_positive(name, value)
    if not math.isfinite(1.0 / result):
        msg = (
            f"`{name}` must be at least 1 / (largest float64) ~ 5.6e-309: the inverse "
            f"frequencies are divided by it and would overflow to inf; got {result!r}."
        )
        raise ValueError(msg)
    return result


def check_optional_positive(name: str, value: object) -> float | None:
    """None, or a finite real number greater than 0."""
    return None if value is None else check_positive(name, value)


def check_optional_real(name: str, value: object) -> float | None:
    """None, or a finite real number."""
    return None if value is None else check_real(name, value)


def check_context_length(name: str, value: object, *, minimum: float = 0.0) -> int | float:
    """A finite context length greater than `minimum`; an int when it is integer-valued."""
    result = check_real(name, value)
    if result <= minimum:
        msg = f"`{name}` must be greater than {minimum:g}; got {result!r}."
        raise ValueError(msg)
    return int(result) if result.is_integer() else result


def check_factor_list(name: str, value: object) -> tuple[float, ...]:
    """A non-empty sequence of finite positive divisors (see `check_divisor`), as floats."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        msg = f"`{name}` must be a sequence of positive real numbers; got {value!r}."
        raise TypeError(msg)
    if np.ndim(value) != 1 or len(value) == 0:
        msg = f"`{name}` must be a non-empty 1-D sequence; got shape {np.shape(value)}."
        raise ValueError(msg)
    return tuple(check_divisor(name, v) for v in value)


def check_length(name: str, values: tuple[float, ...], rotary_dim: int) -> None:
    """`values` must hold one entry per rotated pair."""
    n_pairs = rotary_dim // 2
    if len(values) != n_pairs:
        msg = (
            f"`{name}` must have one entry per pair (rotary_dim // 2 = {n_pairs}); "
            f"got {len(values)}."
        )
        raise ValueError(msg)


def pair_exponents(rotary_dim: int) -> np.ndarray:
    """``2j / (d - 2)`` for every pair ``j`` (0 for ``d = 2``, whose only pair is ``j = 0``).

    An NTK base rescale ``b -> b * s ** (d / (d - 2))`` multiplies ``b ** (-2j / d)`` by
    ``s ** (-2j / (d - 2))``: the first pair keeps its frequency, the last is divided by s.
    """
    j = np.arange(rotary_dim // 2, dtype=np.float64)
    if rotary_dim == 2:
        return np.zeros(1)
    return 2.0 * j / (rotary_dim - 2)
