"""How close a result is to the oracle, as a value: `RopeReport`, `rope_report`.

The report carries the largest error, its share of the tolerance, the worst element, the
measured angle-precision class and, for a mismatch, the diagnosis. The precision class is
the tightest of three error models that the whole result fits: angles exact to float64
("float64-grade"), angles built in float32 as HF and most kernels do ("float32-grade"),
or neither ("coarser than float32"); `max_angle_error` is the largest angle error seen on
pairs whose norm is at least a tenth of the largest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._args import CheckArgs
from rope_ref.testing._compare import Comparison, tolerance
from rope_ref.testing._describe import describe_worst
from rope_ref.testing._diagnosis import Diagnosis, diagnose
from rope_ref.testing._diagnosis.shared import pair_angles, wrap
from rope_ref.testing._tolerance import EPS, ErrorModel

__all__ = ["PRECISION_CLASSES", "RopeReport", "precision_class", "report_of", "rope_report"]

#: The angle-precision classes, tightest first.
PRECISION_CLASSES = ("float64-grade", "float32-grade", "coarser than float32")


@dataclass(frozen=True)
class RopeReport:
    """How a RoPE result compares with the oracle (see `rope_report`).

    Attributes
    ----------
    ok : bool
        Every element within the tolerance.
    max_error : float
        Largest absolute error.
    max_ratio : float
        Largest error as a share of its element's tolerance (``<= 1`` when `ok`).
    worst_index : tuple of int
        Index of the element with the largest share of its tolerance.
    worst : str
        That element described: position, pair, angle, values.
    precision : str
        Angle-precision class, one of `PRECISION_CLASSES`.
    max_angle_error : float
        Largest angle error (radians) of a pair of sizeable norm.
    model : str
        The error model (or explicit tolerance) used.
    diagnosis : Diagnosis or None
        The likely cause of a mismatch; None when `ok`.
    max_ulps : float
        Largest distance from the correctly rounded result, in ulps of that result
        (``backend="exact"``; computed on first access, needs mpmath).
    """

    ok: bool
    max_error: float
    max_ratio: float
    model: str
    diagnosis: Diagnosis | None = None
    comparison: Comparison | None = field(default=None, repr=False, compare=False)

    def _compared(self, what: str) -> Comparison:
        if self.comparison is None:
            msg = f"`{what}` needs the comparison the report was made from; got None."
            raise ValueError(msg)
        return self.comparison

    # What only some readers ask for is computed from the comparison when first asked.

    @functools.cached_property
    def worst_index(self) -> tuple[int, ...]:
        """Index of the element with the largest share of its tolerance."""
        return self._compared("worst_index").worst

    @functools.cached_property
    def worst(self) -> str:
        """The element with the largest share of its tolerance, described."""
        return describe_worst(self._compared("worst"))

    @functools.cached_property
    def precision(self) -> str:
        """The angle-precision class, one of `PRECISION_CLASSES`."""
        return precision_class(self._compared("precision"))

    @functools.cached_property
    def max_angle_error(self) -> float:
        """Largest angle error (radians) of a pair of sizeable norm."""
        return max_angle_error(self._compared("max_angle_error"))

    @functools.cached_property
    def max_ulps(self) -> float:
        """Largest error in ulps of the correctly rounded result (see the class docstring)."""
        from rope_ref.testing._ulps import ulp_errors

        return float(np.max(ulp_errors(self._compared("max_ulps")), initial=0.0))

    def summary(self) -> str:
        """One line: verdict, error, share of the tolerance, precision class."""
        verdict = "conformant" if self.ok else "NOT conformant"
        if self.diagnosis is not None and self.diagnosis.cause == "not_checkable":
            verdict = "not checkable here"
        return (
            f"{verdict}: max |error| {self.max_error:.3g} = {self.max_ratio:.3g} of the "
            f"tolerance; angles {self.precision} (max angle error {self.max_angle_error:.2g} "
            "rad)"
        )

    def __repr__(self) -> str:
        return f"<RopeReport {self.summary()}>"

    def __str__(self) -> str:
        lines = [self.summary(), f"  worst element: {self.worst}", f"  tolerance: {self.model}"]
        if self.diagnosis is not None:
            lines.append(f"  likely cause: {self.diagnosis}")
        return "\n".join(lines)


def max_angle_error(c: Comparison) -> float:
    """Largest |angle error| over pairs whose input norm is >= 0.1 x the largest."""
    spec = c.setup.spec
    if spec.n_pairs == 0 or c.error.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):  # inf or NaN in x: no angle there
        got, norm = pair_angles(c.setup, c.actual)
        want, _ = pair_angles(c.setup, c.expected)
        finite = np.isfinite(norm)
        sizeable = finite & (norm >= 0.1 * float(np.max(norm[finite], initial=0.0)))
        err = np.abs(wrap(got - want))[sizeable & np.isfinite(got) & np.isfinite(want)]
    return float(np.max(err, initial=0.0))


def precision_class(c: Comparison) -> str:
    """The tightest angle-precision class whose error model the whole result fits."""
    storage = c.model.eps if c.model is not None else EPS[c.setup.dtype]
    roundings = c.model.roundings if c.model is not None else 4.0
    for name, angle in zip(PRECISION_CLASSES[:2], ("float64", "float32"), strict=True):
        model = ErrorModel(eps=storage, angle_eps=EPS[angle], roundings=roundings)
        if bool(np.all(c.error <= tolerance(c.setup, c.expected, model, storage))):
            return name
    return PRECISION_CLASSES[2]


def _model_text(c: Comparison) -> str:
    if c.model is None:
        return "explicit tolerance: |error| <= atol + rtol * |expected|"
    return f"error model ({c.setup.dtype}): {_described(c.model)}"


@functools.lru_cache(maxsize=64)
def _described(model: ErrorModel) -> str:
    """`model.describe()`, formatted once per model (models are frozen)."""
    return model.describe()


def report_of(c: Comparison) -> RopeReport:
    """The report of a comparison (diagnosed when it fails)."""
    return RopeReport(
        ok=c.ok,
        max_error=c.max_error,
        max_ratio=c.max_ratio,
        model=_model_text(c),
        diagnosis=None if c.ok else diagnose(c),
        comparison=c,
    )


def rope_report(
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
) -> RopeReport:
    """Compare a RoPE result with the oracle and report how close it is.

    Parameters are those of `assert_rope_close`, which raises where this returns.

    Returns
    -------
    RopeReport
        ``ok``, the largest error and its share of the tolerance, the worst element, the
        angle-precision class and largest angle error, and the diagnosis of a mismatch.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing import rope_report
    >>> spec = rr.RopeSpec(head_dim=64)
    >>> x = np.random.default_rng(0).standard_normal((1, 4, 64)).astype(np.float32)
    >>> p = np.array([0, 1, 2, 10**6])
    >>> rope_report(rr.apply_rope(x, spec, p), x, spec, p).precision
    'float64-grade'
    >>> inv32 = rr.inv_freq(spec).astype(np.float32)              # HF's float32 recipe
    >>> angles = (p.astype(np.float32)[:, None] * inv32).astype(np.float64)
    >>> cos, sin = np.cos(angles), np.sin(angles)
    >>> a, b = x[..., :32], x[..., 32:]
    >>> mine = np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(np.float32)
    >>> report = rope_report(mine, x, spec, p)
    >>> report.ok, report.precision
    (True, 'float32-grade')
    >>> strict = rope_report(mine, x, spec, p, angle_dtype="float64")
    >>> strict.ok, strict.diagnosis.cause
    (False, 'precision')
    """
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
    return report_of(args.comparison(actual, x, spec))
