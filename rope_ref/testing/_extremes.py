"""A passing comparison's largest error and largest share of the tolerance, pair by pair.

The error model gives both features of a rotated pair one tolerance, ``|pair| *
per_row`` (the pair's norm in the oracle's result times its row's ``model.atol(angle,
1)``). The largest share of the tolerance is then the largest over pairs of ``max(e_a,
e_b) / (|pair| * per_row)``: division rounds monotonically, so this is the per-element
``error / tolerance`` maximum to the bit, without the per-element tolerance, the float64
copy of the result or the per-element ratio being built. Copied (pass-through) features
are judged element by element as the full route judges them.

`extremes` returns None wherever the full route must decide (an error that is not
finite, a pair norm outside [1e-150, 1e150] where the norms are computed with `np.hypot`,
an empty result, a result that is not a plain NumPy array of float16, float32 or
float64); the comparison then builds its per-element arrays as before.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.reference import split_pairs
from rope_ref._core.spec import RopeSpec

__all__ = ["Extremes", "extremes"]

F64 = NDArray[np.float64]

#: Result dtypes the pair-wise route reads directly (each converts to float64 exactly).
DIRECT_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
#: Result dtypes the compiled loop of `rope_ref.testing._fused` reads.
KERNEL_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
#: Results of this many elements or more take the compiled loop by default (where Numba
#: is installed): below it the NumPy passes cost less than a millisecond, and a session
#: of small checks never imports Numba.
FUSED_MIN_SIZE = 2**16
#: ``ROPE_REF_ORACLE_NUMBA=0`` keeps every comparison on the NumPy passes.
OPT_OUT = "ROPE_REF_ORACLE_NUMBA"
#: Work arrays of up to this many elements are kept per thread (at most 16 MB in all).
SCRATCH_MAX_SIZE = 2**20
#: Each thread's work arrays (see `_scratch`).
_SCRATCH = threading.local()
#: Pair norms inside this range are ``sqrt(a * a + b * b)`` in the tolerance (see _radii).
NORM_RANGE = (1e-150, 1e150)


class Extremes(NamedTuple):
    """The largest error and the largest ``error / tolerance`` of a comparison."""

    max_error: float
    max_ratio: float


def extremes(
    actual: Any,
    expected: F64,
    per_row: F64,
    spec: RopeSpec,
    *,
    inverse: bool,
    copied_eps: float,
    fused: bool | None = None,
) -> Extremes | None:
    """The extremes of `actual` against `expected` under the error model, or None.

    Parameters
    ----------
    actual : numpy.ndarray
        The result, shape of `expected` (checked by the caller).
    expected : numpy.ndarray
        The oracle's float64 result.
    per_row : numpy.ndarray
        ``model.atol(max_angle, 1)`` of each row, shape ``expected.shape[:-1]``.
    spec : RopeSpec
        Where the rotated pairs are, and in which layout.
    inverse : bool
        Whether `expected` is the inverse rotation (its pairs are in ``spec.layout``).
    copied_eps : float
        Epsilon of the dtype the result is judged at: a copied feature may be off by
        half of it, relative.
    fused : bool, optional
        Find the pairs' extremes with the compiled loop of `rope_ref.testing._fused`
        (True; ValueError where Numba is not installed) or with NumPy passes (False).
        Default: the loop for results of `FUSED_MIN_SIZE` elements or more, where Numba
        is installed and ``ROPE_REF_ORACLE_NUMBA`` is not ``0``. Both give the same
        numbers.

    Returns
    -------
    Extremes or None
        None where the comparison must build its per-element arrays to decide.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=4)
    >>> y = np.array([[3.0, 0.0, 4.0, 1.0]])            # pairs (3, 4) and (0, 1)
    >>> got = y + np.array([[0.0, 0.0, 2.0**-20, 0.0]])  # off by 2**-20 in pair (3, 4)
    >>> found = extremes(got, y, np.array([2.0**-10]), spec, inverse=False, copied_eps=0.0)
    >>> found.max_error == 2.0**-20, found.max_ratio == 2.0**-20 / (5 * 2.0**-10)
    (True, True)
    """
    if type(actual) is not np.ndarray or actual.dtype not in DIRECT_DTYPES or not expected.size:
        return None
    kernel = _kernel() if fused or (fused is None and _loop_wanted(expected.size)) else None
    if fused and kernel is None:
        msg = "`fused=True` needs numba, which is not installed."
        raise ValueError(msg)
    with np.errstate(all="ignore"):  # NaN, infinities, huge or tiny norms: refused below
        found = _found(actual, expected, per_row, spec, inverse, copied_eps, kernel)
    return None if found is None else Extremes(*found)


def _found(
    actual: NDArray[Any],
    expected: F64,
    per_row: F64,
    spec: RopeSpec,
    inverse: bool,
    copied_eps: float,
    kernel: Callable[..., tuple[float, float]] | None,
) -> tuple[float, float] | None:
    """`extremes` as a pair ``(max_error, max_ratio)``, or None (under its errstate)."""
    start, stop = spec.rotary_start, spec.rotary_stop
    found: tuple[float, float] | None = (0.0, 0.0)
    error = None
    if stop > start:
        if kernel is not None and _fits_kernel(actual, expected):
            found = _fused_pairs(kernel, actual, expected, per_row, spec, inverse=inverse)
        else:
            error = _abs_difference(expected, actual)
            found = _pairs(error, expected, per_row, spec, inverse=inverse)
    for kept in (slice(0, start), slice(stop, spec.head_dim)):
        if found is None or kept.stop <= kept.start:
            continue
        kept_error = (
            _abs_difference(expected[..., kept], actual[..., kept])
            if error is None
            else error[..., kept]
        )
        more = _copied(kept_error, expected[..., kept], copied_eps)
        found = None if more is None else (max(found[0], more[0]), max(found[1], more[1]))
    return found


def _abs_difference(expected: F64, actual: NDArray[Any]) -> F64:
    """``|expected - actual|`` in float64 (each dtype of `DIRECT_DTYPES` converts exactly).

    Written to this thread's scratch array: valid until the next call.
    """
    out = _scratch(expected.size, "error").reshape(expected.shape)
    error: F64 = np.subtract(expected, actual, out=out)  # |e - a| is |a - e|, bit for bit
    np.abs(error, out=error)
    return error


def _scratch(size: int, name: str) -> F64:
    """A float64 work array of `size` elements, this thread's own for `name`.

    Kept from call to call up to `SCRATCH_MAX_SIZE` elements (no fresh pages to fault in
    on each check); larger ones are allocated each time. Nothing read from it outlives
    the call of `extremes` that wrote it.
    """
    if size > SCRATCH_MAX_SIZE:
        return np.empty(size)
    held: F64 | None = getattr(_SCRATCH, name, None)
    if held is None or held.size < size:
        held = np.empty(size)
        setattr(_SCRATCH, name, held)
    return held[:size]


def _loop_wanted(size: int) -> bool:
    """Whether a result of `size` elements takes the compiled loop by default.

    From `FUSED_MIN_SIZE` elements on, unless ``ROPE_REF_ORACLE_NUMBA=0`` is set.
    """
    return size >= FUSED_MIN_SIZE and os.environ.get(OPT_OUT, "").strip() != "0"


@functools.cache
def _kernel() -> Callable[..., tuple[float, float]] | None:
    """The compiled loop of `rope_ref.testing._fused`, or None where Numba is not usable."""
    if importlib.util.find_spec("numba") is None:
        return None
    try:
        from rope_ref.testing._fused import pair_extremes
    except (ImportError, RuntimeError, OSError):  # a broken install, or no cache directory
        return None
    return pair_extremes


def _fits_kernel(actual: NDArray[Any], expected: F64) -> bool:
    """Whether the loop reads these arrays as they are (C order, float32 or float64)."""
    return (
        actual.dtype in KERNEL_DTYPES
        and actual.flags.c_contiguous
        and expected.flags.c_contiguous
        and expected.dtype == np.float64
    )


def _fused_pairs(
    kernel: Callable[..., tuple[float, float]],
    actual: NDArray[Any],
    expected: F64,
    per_row: F64,
    spec: RopeSpec,
    *,
    inverse: bool,
) -> tuple[float, float] | None:
    """`_pairs` by the compiled loop: one read of both arrays, nothing allocated."""
    low, high = NORM_RANGE
    if not float(per_row.max(initial=0.0)) < high:
        return None
    layout = spec.layout if inverse else spec.written_layout
    width = expected.shape[-1]
    lead = expected.shape[:-1]
    rows = per_row if per_row.shape == lead else np.broadcast_to(per_row, lead)
    top_error, top_ratio = kernel(
        expected.reshape(-1, width),
        actual.reshape(-1, width),
        np.ascontiguousarray(rows).reshape(-1),
        spec.rotary_start,
        spec.n_pairs,
        layout == "half",
        low,
        high,
    )
    if top_ratio < 0.0:  # BAD: a NaN, an infinity or a norm outside the range
        return None
    return top_error, top_ratio


def _pairs(
    error: F64, expected: F64, per_row: F64, spec: RopeSpec, *, inverse: bool
) -> tuple[float, float] | None:
    """Largest error and ratio over the rotated pairs; `error` is scratch afterwards."""
    start, stop = spec.rotary_start, spec.rotary_stop
    layout = spec.layout if inverse else spec.written_layout
    first_error, second_error = split_pairs(error[..., start:stop], layout=layout)
    shape = first_error.shape
    work = _scratch(2 * math.prod(shape), "pairs")
    worse = np.maximum(first_error, second_error, out=work[: work.size // 2].reshape(shape))
    top_error = float(worse.max())
    if not math.isfinite(top_error):  # NaN or inf: judged element by element
        return None
    first, second = split_pairs(expected[..., start:stop], layout=layout)
    norms = np.square(first, out=work[work.size // 2 :].reshape(shape))
    norms += np.square(second, out=first_error)  # the errors are in `worse` now
    np.sqrt(norms, out=norms)
    low, high = NORM_RANGE
    if not (float(norms.min()) > low and float(norms.max()) < high):
        return None  # the tolerance takes these norms from np.hypot
    if not float(per_row.max(initial=0.0)) < high:
        return None
    norms *= per_row[..., None]  # the pair's tolerance, as _model_tolerance builds it
    np.divide(worse, norms, out=worse)
    return top_error, float(worse.max())


def _copied(error: F64, expected: F64, eps: float) -> tuple[float, float] | None:
    """Largest error and ratio over copied features (tolerance: one rounding)."""
    tolerance = 0.5 * eps * np.abs(expected)
    ratio = error / tolerance
    ratio[np.isnan(ratio)] = 0.0  # 0 / 0: no error where none is allowed
    top_error = float(error.max())
    if not math.isfinite(top_error):
        return None
    return top_error, float(ratio.max())
