"""`rope_ref.testing.diagnose`: the likely cause of a mismatch, as a value."""

from __future__ import annotations

from typing import Any

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._args import CheckArgs
from rope_ref.testing._diagnosis import Diagnosis

__all__ = ["diagnose"]


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
    args = CheckArgs(
        positions=positions,
        offset=offset,
        seq_axis=seq_axis,
        inverse=inverse,
        seq_len=seq_len,
        role=role,
        angle_dtype=angle_dtype,
        dtype=dtype,
        position_dtype=position_dtype,
    )
    return args.diagnosis(actual, x, spec)
