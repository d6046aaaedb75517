"""`assert_rope_close`: a third-party RoPE result against the oracle, with a diagnosis."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._args import CheckArgs
from rope_ref.testing._compare import Comparison, check_actual
from rope_ref.testing._describe import describe_worst
from rope_ref.testing._diagnosis import Diagnosis, diagnose
from rope_ref.testing._report import RopeReport, max_angle_error, precision_class, report_of
from rope_ref.testing._ulps import check_ulps

__all__ = ["assert_rope_close", "describe_worst", "failure_message"]


def assert_rope_close(
    actual: Any,
    x: Any,
    spec: RopeSpec,
    positions: Any = None,
    *,
    offset: float = 0,
    seq_axis: int = -2,
    inverse: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    seq_len: float | None = None,
    role: Role | None = None,
    angle_dtype: object = None,
    dtype: object = None,
    position_dtype: object = None,
    max_ulps: float | None = None,
) -> RopeReport:
    r"""Assert that `actual` is RoPE of `x` within the error model; diagnose it otherwise.

    The oracle is `rope_ref.apply_rope` on a float64 copy of `x` (exact to float64
    rounding). Each element of `actual` may differ from it by the error model of
    `error_model` applied at its own position and pair: the tolerance grows with the dtype's
    epsilon and with the largest angle at that position, so float32 code at position
    :math:`10^6` passes while a sign or off-by-one bug at position 1 fails.

    Parameters
    ----------
    actual : array
        The result to check, shape of `x`, any array-API namespace (PyTorch bfloat16
        included), in the dtype of `x` (or `dtype`): a result in another dtype fails
        with the cause ``dtype``.
    x : array
        The input the result was computed from.
    spec : RopeSpec
        The embedding `actual` should implement.
    positions : array_like, optional
        As for `rope_ref.apply_rope` (``None``: ``arange`` along `seq_axis`).
    offset : float, default 0
        Added to the positions.
    seq_axis : int, default -2
        Axis of `x` that indexes tokens.
    inverse : bool, default False
        Compare with the inverse rotation (a backward pass).
    rtol, atol : float, optional
        Replace the error model by ``|actual - oracle| <= atol + rtol * |oracle|`` (a
        missing one counts as 0). Each must be a finite real number >= 0 (not a bool or
        a string).
    seq_len : float, optional
        For length-dependent scalings, as for `rope_ref.apply_rope`.
    role : {"query", "key"}, optional
        Required for xPos specs.
    angle_dtype : dtype or str, optional
        Precision the angles must have. By default float32-grade angles pass for results
        of 32 bits or fewer (what HF and most kernels do); ``"float64"`` is the strict
        mode: float32-grade angles fail with the ``precision`` diagnosis.
    dtype : dtype or str, optional
        The precision the result is judged at and must be stored in (default: the dtype
        of `x`). State it to check, say, a float32 result computed from float64 inputs.
    position_dtype : dtype or str, optional
        For an implementation that builds its own position grid in a low precision (a
        float32 ``linspace`` of pixel coordinates): the grid may be off by up to
        ``2 * eps * (max |p| + 1)`` at every position, and the tolerance grows by what
        that turns the fastest pair. Default: positions exact as given.
    max_ulps : float, optional
        Also require every element within this many ulps of the correctly rounded result
        (``backend="exact"``, needs mpmath; the unit is the spacing of x's dtype at the
        exact result): ``max_ulps=0`` demands correct rounding, ``max_ulps=1`` faithful
        rounding.

    Returns
    -------
    RopeReport
        How close the result is: largest error and its share of the tolerance, the worst
        element and the measured angle-precision class (see `rope_report`).

    Raises
    ------
    AssertionError
        When an element is out of tolerance, the shapes differ, the result is in another
        dtype than asked for, or a position is past `max_checkable_position` (where the
        tolerance would pass zeros, the identity or the inverse: "not checkable"). The
        message names the worst element (its index, position, pair and angle), the error
        model, and the most likely cause (see `diagnose`).
    TypeError, ValueError
        For inputs `rope_ref.apply_rope` would reject.

    See Also
    --------
    error_model : the tolerance model.
    diagnose : the likely cause of a mismatch, as a value.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing import assert_rope_close
    >>> spec = rr.RopeSpec(head_dim=8)
    >>> x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    >>> assert_rope_close(rr.apply_rope(x, spec), x, spec).precision
    'float64-grade'
    >>> wrong = rr.apply_rope(x, spec, inverse=True)              # sin with the wrong sign
    >>> try:
    ...     assert_rope_close(wrong, x, spec)
    ... except AssertionError as err:
    ...     print(str(err).splitlines()[-1][:59])
    Likely cause: direction: the result is the inverse rotation
    """
    __tracebackhide__ = True
    args = CheckArgs(
        positions=positions,
        offset=offset,
        seq_axis=seq_axis,
        inverse=inverse,
        rtol=rtol,
        atol=atol,
        seq_len=seq_len,
        role=role,
        angle_dtype=angle_dtype,
        dtype=dtype,
        position_dtype=position_dtype,
    )
    s = args.setup(x, spec)
    actual_name = check_actual(actual)
    a_shape = tuple(actual.shape)
    if a_shape != s.x.shape:
        msg = f"RoPE result has shape {a_shape}; the input x has shape {s.x.shape}."
        raise AssertionError(msg)
    c = args.compare(actual, s, actual_name)
    if not c.ok:
        message = failure_message(c, diagnose(c))
        other = _fitting_seq_axis(c, actual, args)
        if other is not None:
            message += (
                f"\nHint: the result matches the oracle with seq_axis={other} (the sequence "
                f"along axis {other} of x, as in (batch, seq, heads, head_dim) arrays); pass "
                f"seq_axis={other}."
            )
        raise AssertionError(message)
    report = report_of(c)
    if max_ulps is not None:
        check_ulps(c, max_ulps)
    return report


def _fitting_seq_axis(c: Comparison, actual: Any, args: CheckArgs) -> int | None:
    """Another `seq_axis` under which the failing result `actual` is within the tolerance.

    Tried only for positions that do not fix the axis themselves (None, or 1-D of the
    length of that axis), on the axes between the first and the features.
    """
    s = c.setup
    ndim = s.x.ndim
    given = args.seq_axis - ndim if args.seq_axis >= 0 else args.seq_axis
    length = None
    if args.positions is not None:
        shape = tuple(getattr(args.positions, "shape", ()))
        if len(shape) != 1:
            return None
        length = shape[0]
    for axis in range(-2, -ndim, -1):
        if axis == given or s.x.shape[axis] == 1 or length not in (None, s.x.shape[axis]):
            continue
        other = dataclasses.replace(args, seq_axis=axis, dtype=c.judged_dtype)
        try:
            if other.compare(actual, other.setup(s.x, s.spec)).ok:
                return axis
        except (TypeError, ValueError):
            continue
    return None


def failure_message(c: Comparison, diagnosis: Diagnosis) -> str:
    """The assertion message: counts, worst element, error model and likely cause."""
    n_bad = int(np.sum(c.failed))
    total = c.error.size
    if c.model is None:
        model = "explicit tolerance: |error| <= atol + rtol * |expected|"
    else:
        model = f"error model ({c.setup.dtype}): {c.model.describe()}"
    if c.dtype_mismatch is not None:
        headline = "RoPE result is not in the dtype asked for."
    elif not c.checkable and not np.any(c.failed):
        headline = "RoPE result cannot be checked here (not checkable): it is not a pass."
    else:
        headline = "RoPE result differs from the rope_ref oracle."
    return "\n".join(
        [
            headline,
            f"Mismatched elements: {n_bad} / {total} ({100.0 * n_bad / total:.3g}%)",
            f"Worst element: {describe_worst(c)}",
            f"Tolerance: {model}",
            f"Angle precision: {precision_class(c)} (max angle error {max_angle_error(c):.2g} rad)",
            f"Likely cause: {diagnosis}",
        ]
    )
