"""Errors in ulps: the distance of each element from the correctly rounded RoPE.

The correctly rounded result comes from ``backend="exact"`` (it needs mpmath); the unit is
the spacing of the format at the exact result's magnitude (away from zero, the smallest
subnormal at zero), in the dtype the result is judged at.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.validation import check_real
from rope_ref._engine.api import apply_rope
from rope_ref.testing._compare import Comparison, Setup
from rope_ref.testing._tolerance import host64

__all__ = ["check_ulps", "correctly_rounded", "ulp_errors"]

F64 = NDArray[np.float64]


def correctly_rounded(s: Setup) -> F64:
    """The correctly rounded RoPE of the setup's input, in its dtype, as float64."""
    if s.dtype not in _rounding().FORMATS:
        msg = f"errors in ulps need a float64, float32, float16 or bfloat16 `x`; got {s.dtype}."
        raise TypeError(msg)
    x = _in_dtype(s.x, s.dtype)
    exact = apply_rope(
        x, s.spec, s.grid, seq_axis=s.seq_axis, inverse=s.inverse, seq_len=s.seq_len,
        role=s.role, backend="exact",
    )  # fmt: skip
    return np.asarray(host64(exact), dtype=np.float64)


def ulp_errors(c: Comparison) -> F64:
    """Return ``|actual - exact| / ulp(exact)`` per element.

    It is 0 where both are the same infinity, inf where only one is finite or either is NaN.
    """
    rounding = _rounding()
    exact = correctly_rounded(c.setup)
    actual = c.actual
    finite = np.isfinite(exact) & np.isfinite(actual)
    _, spacing = rounding.ulp(np.where(finite, exact, 0.0), rounding.FORMATS[c.setup.dtype])
    with np.errstate(invalid="ignore", over="ignore"):
        distance = np.abs(np.where(finite, actual - exact, 0.0)) / spacing
    same = (actual == exact) | finite
    return np.where(same, distance, np.inf)


def _rounding() -> ModuleType:
    """The exact backend's formats and ulps (a kernel module, loaded by name on first use)."""
    return importlib.import_module("rope_ref.backends.exact_rounding")


def _in_dtype(x64: F64, name: str) -> NDArray[np.generic]:
    if name == "bfloat16":
        import ml_dtypes

        return x64.astype(ml_dtypes.bfloat16)
    return x64.astype(name)


def check_ulps(c: Comparison, max_ulps: object) -> None:
    """AssertionError when the compared result is more than `max_ulps` ulps off anywhere."""
    __tracebackhide__ = True
    bound = check_real("max_ulps", max_ulps)
    if bound < 0:
        msg = f"`max_ulps` must be >= 0; got {bound!r}."
        raise ValueError(msg)
    errors = ulp_errors(c)
    if bool(np.all(errors <= bound)):
        return
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(errors), errors.shape))
    exact = correctly_rounded(c.setup)
    msg = (
        f"RoPE result is {float(errors[worst]):.6g} ulps from the correctly rounded result "
        f"at index {worst} (got {float(c.actual[worst])!r}, correctly rounded "
        f"{float(exact[worst])!r}); allowed: max_ulps={bound:g}. "
        f"{int(np.sum(errors > bound))} of {errors.size} elements are over."
    )
    raise AssertionError(msg)
