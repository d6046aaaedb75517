"""`RopeOracle`: the object behind the ``rope_oracle`` pytest fixture."""

from __future__ import annotations

from typing import Any

from rope_ref._core.aliases import Role
from rope_ref._core.frequencies import rope_angles, rope_cos_sin
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope, apply_rope_qk
from rope_ref.testing._args import CheckArgs
from rope_ref.testing._assert import assert_rope_close
from rope_ref.testing._diagnosis import Diagnosis
from rope_ref.testing._report import rope_report
from rope_ref.testing._tolerance import rope_atol

__all__ = ["RopeOracle"]


class RopeOracle:
    """rope_ref's reference functions in one object, for tests that take a fixture.

    The ``rope_oracle`` fixture of the pytest plugin returns one. Every method is the
    rope_ref function of the same meaning; `assert_close` is `assert_rope_close` and
    `report` is `rope_report`.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing import RopeOracle
    >>> oracle = RopeOracle()
    >>> spec = rr.RopeSpec(head_dim=4)
    >>> x = np.ones((3, 4))
    >>> oracle.assert_close(oracle.apply(x, spec), x, spec).ok
    True
    >>> oracle.diagnose(oracle.apply(x, spec, offset=1), x, spec).cause
    'offset'
    """

    apply = staticmethod(apply_rope)
    apply_qk = staticmethod(apply_rope_qk)
    angles = staticmethod(rope_angles)
    cos_sin = staticmethod(rope_cos_sin)
    assert_close = staticmethod(assert_rope_close)
    atol = staticmethod(rope_atol)
    report = staticmethod(rope_report)

    @staticmethod
    def diagnose(
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
    ) -> Diagnosis | None:
        """`rope_ref.testing.diagnose`, with the tolerances `rtol` and `atol` too.

        The keywords are those of `assert_rope_close` (but `max_ulps`): None when `actual`
        is within the tolerance, else the likely cause of the mismatch.
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
        return args.diagnosis(actual, x, spec)

    def __repr__(self) -> str:
        return "RopeOracle()"
