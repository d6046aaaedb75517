"""`assert_rope_close`: a third-party RoPE result against the oracle, with a diagnosis."""

from __future__ import annotations

from typing import Any

import numpy as np

from rope_ref._core.aliases import Role
from rope_ref._core.frequencies import rope_angles
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import Comparison, check_actual, compare, setup
from rope_ref.testing._diagnose import Diagnosis, diagnose
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
        included); float16/bfloat16 results get the model of their own dtype.
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
        When an element is out of tolerance, or the shapes differ. The message names the
        worst element (its index, position, pair and angle), the error model, and the most
        likely cause (see `diagnose`).
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
    s = setup(
        x,
        spec,
        positions,
        offset=offset,
        seq_axis=seq_axis,
        inverse=inverse,
        seq_len=seq_len,
        role=role,
    )
    check_actual(actual)
    a_shape = tuple(actual.shape)
    if a_shape != s.x.shape:
        msg = f"RoPE result has shape {a_shape}; the input x has shape {s.x.shape}."
        raise AssertionError(msg)
    c = compare(actual, s, rtol=rtol, atol=atol, angle_dtype=angle_dtype)
    if not c.ok:
        raise AssertionError(failure_message(c, diagnose(c)))
    report = report_of(c)
    if max_ulps is not None:
        check_ulps(report, max_ulps)
    return report


def _axis_names(ndim: int, seq_axis: int) -> list[str]:
    lead = [i for i in range(ndim - 1) if i != seq_axis]
    names = ["batch", "head"] if len(lead) == 2 else ["batch"] if len(lead) == 1 else []
    labels = [f"axis {i}" for i in range(ndim)]
    for i, name in zip(lead, names or [f"axis {i}" for i in lead], strict=True):
        labels[i] = name
    labels[seq_axis] = "seq"
    labels[-1] = "feature"
    return labels


def describe_worst(c: Comparison) -> str:
    """The worst element of `c`: where it is, its position, pair and angle, and its error."""
    s = c.setup
    spec = s.spec
    index = c.worst
    if not index:
        return "the result is empty"
    labels = _axis_names(s.x.ndim, s.seq_axis % s.x.ndim)
    where = ", ".join(f"{label} {i}" for label, i in zip(labels, index, strict=True))
    feature = index[-1]
    row = index[:-1]
    position = s.grid[row]
    pos_text = ", ".join(f"{v:.10g}" for v in np.atleast_1d(position))
    if spec.rotary_start <= feature < spec.rotary_stop:
        k = feature - spec.rotary_start
        n = spec.n_pairs
        if spec.layout == "half":
            pair, partners = k % n, (k % n, k % n + n)
        else:
            pair, partners = k // 2, (2 * (k // 2), 2 * (k // 2) + 1)
        angle = float(np.asarray(rope_angles(spec, s.grid[row], s.seq_len))[..., pair])
        first, second = (spec.rotary_start + f for f in partners)
        what = (
            f"pair {pair} (features {first} and {second}, layout {spec.layout!r}), "
            f"position {pos_text}, angle {angle:.6g} rad"
        )
    else:
        what = f"a pass-through feature (outside [{spec.rotary_start}, {spec.rotary_stop}))"
    err, tol = c.error[index], c.tolerance[index]
    ratio = f"{err / tol:.3g} x the tolerance {tol:.3g}" if tol > 0 else f"tolerance {tol:.3g}"
    return (
        f"{where}: {what}; actual {c.actual[index]:.8g}, expected {c.expected[index]:.8g}, "
        f"|error| {err:.3g} = {ratio}"
    )


def failure_message(c: Comparison, diagnosis: Diagnosis) -> str:
    """The assertion message: counts, worst element, error model and likely cause."""
    n_bad = int(np.sum(c.failed))
    total = c.error.size
    if c.model is None:
        model = "explicit tolerance: |error| <= atol + rtol * |expected|"
    else:
        model = f"error model ({c.setup.dtype}): {c.model.describe()}"
    return "\n".join(
        [
            "RoPE result differs from the rope_ref oracle.",
            f"Mismatched elements: {n_bad} / {total} ({100.0 * n_bad / total:.3g}%)",
            f"Worst element: {describe_worst(c)}",
            f"Tolerance: {model}",
            f"Angle precision: {precision_class(c)} (max angle error {max_angle_error(c):.2g} rad)",
            f"Likely cause: {diagnosis}",
        ]
    )
