"""Argument checks shared by the public functions: one check per condition."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import numpy as np

__all__ = [
    "check_axis",
    "check_bool",
    "check_callable",
    "check_choice",
    "check_dense",
    "check_int",
    "check_known_shape",
    "check_nonnegative",
    "check_not_masked",
    "check_real",
    "check_size",
]

#: The most values of one array that a function builds from its arguments: 2**28 (2 GiB
#: in float64). A call holds a few such arrays at once (angles, cos, sin), so the working
#: set stays near 10 GiB; larger tables are built in chunks of positions by the caller.
MAX_ELEMENTS = 2**28

T = TypeVar("T", bound=str)


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return `value` as an int, or raise naming `name`; bool is not an integer here."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = f"`{name}` must be an integer; got {value!r}."
        raise TypeError(msg)
    result = int(value)
    if minimum is not None and result < minimum:
        msg = f"`{name}` must be at least {minimum}; got {result}."
        raise ValueError(msg)
    return result


def check_size(names: str, what: str, shape: Sequence[float], *, hint: str = "") -> None:
    """Raise ValueError, before any work, if an array of `shape` would exceed `MAX_ELEMENTS`.

    `names` are the parameters the size comes from (quoted in the message), `what` the
    array (``"cos/sin tables"``), `hint` what to do instead. Sizes not known yet (NaN, as
    lazy arrays have) pass.
    """
    count = math.prod(shape)
    if not count > MAX_ELEMENTS:
        return
    dims = " x ".join(f"{int(n):,}" for n in shape)
    msg = (
        f"{names} too large: {what} of {dims} = {int(count):,} values would exceed the "
        f"limit of {MAX_ELEMENTS:,} values ({MAX_ELEMENTS * 8 / 2**30:g} GiB in float64) per "
        f"array{hint}."
    )
    raise ValueError(msg)


def check_bool(name: str, value: object) -> bool:
    """`value` if it is True or False (NumPy's bool too), never 0, 1, "no" or None."""
    if not isinstance(value, bool | np.bool_):
        msg = f"`{name}` must be True or False; got {value!r}."
        raise TypeError(msg)
    return bool(value)


def check_real(name: str, value: object) -> float:
    """Return `value` as a finite float, or raise naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"`{name}` must be a real number; got {value!r}."
        raise TypeError(msg)
    try:
        result = float(value)
    except OverflowError:  # an int past float64's range, with its sign
        result = math.inf if cast("int", value) > 0 else -math.inf
    if not math.isfinite(result):
        msg = f"`{name}` must be finite; got {result!r}."
        raise ValueError(msg)
    return result


def check_nonnegative(name: str, value: object) -> float:
    """Return `value` as a finite float >= 0, or raise naming `name` (as `check_real` does)."""
    result = check_real(name, value)
    if result < 0.0:
        msg = f"`{name}` must be non-negative; got {result!r}."
        raise ValueError(msg)
    return result


def check_axis(name: str, value: object) -> int:
    """Return `value` as an int axis (NumPy integers too), or raise TypeError naming it."""
    if isinstance(value, bool):
        msg = f"`{name}` must be an integer; got {value!r}."
        raise TypeError(msg)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        msg = f"`{name}` must be an integer; got {value!r}."
        raise TypeError(msg) from None


def check_choice(name: str, value: object, choices: Sequence[T]) -> T:
    """Return `value` if it is one of `choices`, or raise ValueError listing them."""
    for choice in choices:
        if isinstance(value, str) and value == choice:
            return choice
    msg = f"`{name}` must be one of {', '.join(map(repr, choices))}; got {value!r}."
    raise ValueError(msg)


def check_callable(name: str, value: object) -> Callable[..., object] | None:
    """Return `value` if it is None or callable, or raise TypeError naming `name`."""
    if value is not None and not callable(value):
        msg = f"`{name}` must be a callable or None; got {value!r}."
        raise TypeError(msg)
    return value


def check_not_masked(name: str, value: object) -> None:
    """Raise TypeError if `value` is a NumPy masked array: its mask would be dropped silently.

    The masked elements of a masked array still hold values, and every array operation
    that rope_ref uses would read them; there is no rotation of "no value", so the caller
    must decide (``a.filled(v)``, or the data with the mask kept aside).
    """
    if isinstance(value, np.ma.MaskedArray):
        msg = (
            f"`{name}` must not be a masked array (its mask would be ignored and the masked "
            f"values used); got a masked array of shape {value.shape}: pass {name}.filled(...) "
            "or the data with the mask kept aside."
        )
        raise TypeError(msg)


def check_dense(name: str, value: object) -> None:
    """Raise TypeError if `value` is a PyTorch sparse or nested tensor.

    Neither has the strided storage that array operations read; PyTorch's own errors
    ("Cannot access storage of SparseTensorImpl") would not say which argument it was.
    """
    if not type(value).__module__.startswith("torch"):
        return
    if getattr(value, "is_nested", False):
        msg = (
            f"`{name}` must be a dense (strided) tensor; got a nested tensor: rotate each "
            f"tensor of {name}.unbind() on its own."
        )
        raise TypeError(msg)
    layout = str(getattr(value, "layout", "torch.strided"))
    if layout != "torch.strided":
        msg = (
            f"`{name}` must be a dense (strided) tensor; got a tensor of layout {layout}: "
            f"pass {name}.to_dense()."
        )
        raise TypeError(msg)


def check_known_shape(name: str, value: object) -> None:
    """Raise ValueError if an axis of `value` has no known size (a lazy Dask array's NaN)."""
    shape = tuple(getattr(value, "shape", ()))
    if any(n is None or math.isnan(n) for n in shape):  # None (array API), NaN (Dask)
        msg = (
            f"`{name}` must have a known size on every axis; got shape {shape} (for Dask, "
            f"call {name}.compute_chunk_sizes() first)."
        )
        raise ValueError(msg)
