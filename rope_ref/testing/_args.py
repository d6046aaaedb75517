"""The checker's keywords, written once: `CheckArgs`.

`assert_rope_close`, `rope_report`, `rope_ref.testing.diagnose`, `RopeOracle` and
`rope-ref check` all take the same keywords (positions, offset, sequence axis, direction,
tolerances, sequence length, role and the three dtypes). Each builds one `CheckArgs`,
which checks them once, and asks it for the setup and the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import (
    Comparison,
    Setup,
    check_dtype,
    check_tolerances,
    compare_checked,
    setup,
)
from rope_ref.testing._diagnosis import Diagnosis, diagnose

__all__ = ["CheckArgs"]


@dataclass(frozen=True)
class CheckArgs:
    """The keywords of a comparison with the oracle, checked when built.

    The meaning of each is that of `rope_ref.testing.assert_rope_close`. `rtol` and `atol`
    become floats (each finite and >= 0), `dtype` and `position_dtype` dtype names; a bad
    value raises TypeError or ValueError naming the keyword. The inputs (`x`, `spec`,
    `positions`, `offset`, `seq_axis`) are checked by `setup`, as `apply_rope` checks them.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.testing._args import CheckArgs
    >>> spec = rr.RopeSpec(head_dim=8)
    >>> x = np.ones((4, 8), dtype=np.float32)
    >>> CheckArgs(offset=1).comparison(rr.apply_rope(x, spec, offset=1), x, spec).ok
    True
    >>> CheckArgs(rtol=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: `rtol` must be non-negative; got -1.0.
    """

    positions: Any = None
    offset: float = 0
    seq_axis: int = -2
    inverse: bool = False
    rtol: float | None = None
    atol: float | None = None
    seq_len: float | None = None
    role: Role | None = None
    angle_dtype: object = None
    dtype: object = None
    position_dtype: object = None

    def __post_init__(self) -> None:
        rtol, atol = check_tolerances(self.rtol, self.atol)
        object.__setattr__(self, "rtol", rtol)
        object.__setattr__(self, "atol", atol)
        if self.dtype is not None:
            object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if self.position_dtype is not None:
            name = check_dtype(self.position_dtype, "position_dtype")
            object.__setattr__(self, "position_dtype", name)

    def setup(self, x: Any, spec: RopeSpec) -> Setup:
        """The oracle's setup of `x` under `spec` with these positions, axis and direction."""
        return setup(
            x,
            spec,
            self.positions,
            offset=self.offset,
            seq_axis=self.seq_axis,
            inverse=self.inverse,
            seq_len=self.seq_len,
            role=self.role,
        )

    def compare(self, actual: Any, s: Setup, actual_name: str | None = None) -> Comparison:
        """`actual` compared with the oracle of `s` under these tolerances and dtypes.

        `actual_name`: the dtype name `check_actual` gave for `actual`, if already checked.
        """
        return compare_checked(
            actual,
            s,
            rtol=self.rtol,
            atol=self.atol,
            angle_dtype=self.angle_dtype,
            dtype=None if self.dtype is None else str(self.dtype),  # names since built
            position_dtype=None if self.position_dtype is None else str(self.position_dtype),
            actual_name=actual_name,
        )

    def diagnosis(self, actual: Any, x: Any, spec: RopeSpec) -> Diagnosis | None:
        """The likely cause of a mismatch of `actual`, or None when it is within tolerance."""
        c = self.comparison(actual, x, spec)
        return None if c.ok else diagnose(c)

    def comparison(self, actual: Any, x: Any, spec: RopeSpec) -> Comparison:
        """`actual` compared with the oracle of `x` under `spec`: `setup`, then `compare`."""
        return self.compare(actual, self.setup(x, spec))
