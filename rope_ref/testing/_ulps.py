"""Errors in ulps: the distance of each element from the correctly rounded RoPE.

The correctly rounded result comes from ``backend="exact"`` (it needs mpmath); the unit is
the spacing of the format at the exact result's magnitude (away from zero, the smallest
subnormal at zero), in the dtype the result is judged at (`dtype=`, default x's).

For a result judged at a dtype that holds every value of x's (float32 or float64, as wide
as x's or wider), the exact backend rounds once to it. For a narrower one (a float32
result of float64 inputs) the correctly rounded result in x's dtype is rounded again to
it: a double rounding that can move an exact tie of the narrower format, for about one
element in 2**29.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.validation import check_real
from rope_ref._engine.api import apply_rope
from rope_ref.testing._compare import Comparison, Setup
from rope_ref.testing._tolerance import EPS, host64

__all__ = ["check_ulps", "correctly_rounded", "ulp_errors"]

F64 = NDArray[np.float64]


def correctly_rounded(s: Setup, dtype: str | None = None) -> F64:
    """The correctly rounded RoPE of the setup's input in `dtype` (default x's), as float64."""
    formats = _rounding().FORMATS
    name = s.dtype if dtype is None else dtype
    for given in (s.dtype, name):
        if given not in formats:
            msg = f"errors in ulps need a float64, float32, float16 or bfloat16 `x`; got {given}."
            raise TypeError(msg)
    holds_x = name in ("float32", "float64") and EPS[name] <= EPS[s.dtype]
    x = _in_dtype(s.x, name if holds_x else s.dtype)  # x's values, exactly
    exact = apply_rope(
        x, s.spec, s.grid, seq_axis=s.seq_axis, inverse=s.inverse, seq_len=s.seq_len,
        role=s.role, backend="exact",
    )  # fmt: skip
    values = np.asarray(host64(exact), dtype=np.float64)
    return values if holds_x else np.asarray(_rounding().to_format(values, formats[name]))


def ulp_errors(c: Comparison) -> F64:
    """Return ``|actual - exact| / ulp(exact)`` per element.

    It is 0 where both are the same infinity, inf where only one is finite or either is NaN.
    """
    rounding = _rounding()
    exact = correctly_rounded(c.setup, c.judged_dtype)
    actual = c.actual
    finite = np.isfinite(exact) & np.isfinite(actual)
    _, spacing = rounding.ulp(np.where(finite, exact, 0.0), rounding.FORMATS[c.judged_dtype])
    with np.errstate(invalid="ignore", over="ignore"):
        distance = np.abs(np.where(finite, actual - exact, 0.0)) / spacing
    same = (actual == exact) | finite
    return np.where(same, distance, np.inf)


def _rounding() -> ModuleType:
    """The exact backend's formats and ulps (a kernel module, loaded by name on first use)."""
    return importlib.import_module("rope_ref.backends.exact.rounding")


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
    exact = correctly_rounded(c.setup, c.judged_dtype)
    msg = (
        f"RoPE result is {float(errors[worst]):.6g} ulps from the correctly rounded result "
        f"at index {worst} (got {float(c.actual[worst])!r}, correctly rounded "
        f"{float(exact[worst])!r}); allowed: max_ulps={bound:g}. "
        f"{int(np.sum(errors > bound))} of {errors.size} elements are over."
    )
    raise AssertionError(msg)
