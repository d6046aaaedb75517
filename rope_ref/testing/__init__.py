"""rope_ref as an oracle in other projects' tests.

`assert_rope_close` compares a RoPE result of any implementation with the oracle under an
error model that scales with the dtype and the largest angle, and names the likely cause of
a mismatch; `rope_report` returns the same comparison as a `RopeReport` (largest error,
share of the tolerance, angle-precision class, diagnosis); `error_model` and `rope_atol`
give the tolerances themselves to kernel authors.
Hypothesis strategies live in `rope_ref.testing.strategies` (extra ``testing``); this module
does not import Hypothesis. Installing rope-ref also registers a pytest plugin with the
fixtures ``rope_oracle`` and ``xp``.
"""

from __future__ import annotations

from typing import Any

from rope_ref._core.aliases import Role
from rope_ref._core.error_model import angle_error, tolerance
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._assert import assert_rope_close
from rope_ref.testing._compare import compare, setup
from rope_ref.testing._diagnosis import CAUSES, Diagnosis
from rope_ref.testing._diagnosis import diagnose as _diagnose
from rope_ref.testing._oracle import RopeOracle
from rope_ref.testing._report import PRECISION_CLASSES, RopeReport, rope_report
from rope_ref.testing._tolerance import (
    ErrorModel,
    error_model,
    max_checkable_position,
    rope_atol,
)

__all__ = [
    "CAUSES",
    "PRECISION_CLASSES",
    "Diagnosis",
    "ErrorModel",
    "RopeOracle",
    "RopeReport",
    "angle_error",
    "assert_rope_close",
    "diagnose",
    "error_model",
    "max_checkable_position",
    "rope_atol",
    "rope_report",
    "tolerance",
]


def diagnose(
    actual: Any,
    x: Any,
    spec: RopeSpec,
    positions: Any = None,
    *,
    offset: float = 0,
    seq_axis: int = -2,
    inverse: bool = False,
    seq_len: float | None = None,
    role: Role | None = None,
    angle_dtype: object = None,
    dtype: object = None,
    position_dtype: object = None,
) -> Diagnosis | None:
    """The most likely cause of a mismatch between `actual` and the oracle, or None.

    Parameters are those of `assert_rope_close`. Returns None when `actual` is within the
    error model; otherwise a `Diagnosis` whose ``cause`` is a key of `CAUSES`.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing import diagnose
    >>> spec = rr.RopeSpec(head_dim=8)
    >>> x = np.random.default_rng(0).standard_normal((6, 8))
    >>> diagnose(rr.apply_rope(x, spec), x, spec) is None
    True
    >>> diagnose(rr.apply_rope(x, spec, offset=1), x, spec).cause
    'offset'
    >>> half_result = rr.apply_rope(x, spec)
    >>> diagnose(half_result, x, rr.RopeSpec(head_dim=8, layout="interleaved")).cause
    'layout'
    """
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
    c = compare(actual, s, angle_dtype=angle_dtype, dtype=dtype, position_dtype=position_dtype)
    return None if c.ok else _diagnose(c)
