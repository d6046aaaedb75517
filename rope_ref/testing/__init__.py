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

from rope_ref._core.error_model import angle_error, tolerance
from rope_ref.testing._assert import assert_rope_close
from rope_ref.testing._cause import diagnose
from rope_ref.testing._diagnosis import CAUSES, Diagnosis
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
