"""The order the diagnosis checks run in, and `diagnose`, which runs them.

Each check rebuilds the oracle with one ingredient changed (direction, layout, positions,
rotated range, frequencies, scale, precision) and asks whether that explains the result
under the error model. The checks run from the most specific to the most general; the
first that explains the result names the cause.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rope_ref.testing._compare import Comparison
from rope_ref.testing._diagnosis.basic import non_finite, not_checkable, zeros
from rope_ref.testing._diagnosis.features import rotary_range, scale
from rope_ref.testing._diagnosis.frequencies import frequencies
from rope_ref.testing._diagnosis.ladders import axis_ladders
from rope_ref.testing._diagnosis.layout import direction_or_layout, table_layout
from rope_ref.testing._diagnosis.lengths import configured_length
from rope_ref.testing._diagnosis.multi_axis import partly_right_pairs, sections
from rope_ref.testing._diagnosis.positions import (
    identity_beyond,
    offset,
    other_seq_axis,
    position_range,
    positions_pattern,
)
from rope_ref.testing._diagnosis.precision import (
    angle_precision,
    position_precision,
    rounded_inputs,
)
from rope_ref.testing._diagnosis.recipes import precision_recipes
from rope_ref.testing._diagnosis.rule_fits import rule_parameters
from rope_ref.testing._diagnosis.rules import scaling, yarn_ramp
from rope_ref.testing._diagnosis.shared import Diagnosis
from rope_ref.testing._diagnosis.unknown import unknown_message

__all__ = ["CHECKS", "diagnose"]

Check = Callable[[Comparison], Diagnosis | None]

#: Every check, in the order they run (the first that explains the result names it).
CHECKS: tuple[Check, ...] = (
    non_finite,
    zeros,
    direction_or_layout,
    table_layout,
    offset,
    positions_pattern,
    other_seq_axis,
    sections,
    axis_ladders,
    identity_beyond,
    rotary_range,
    scale,
    yarn_ramp,
    rule_parameters,
    configured_length,
    scaling,
    position_precision,
    rounded_inputs,
    precision_recipes,
    frequencies,
    angle_precision,
    position_range,
    partly_right_pairs,
)


def diagnose(c: Comparison) -> Diagnosis:
    """Return the first explanation of the mismatch in `c` (``"unknown"`` if none fits)."""
    if c.dtype_mismatch is not None:
        return Diagnosis("dtype", c.dtype_mismatch)
    if not np.any(c.failed) and not c.checkable:
        return not_checkable(c)
    for check in CHECKS:
        try:
            with np.errstate(all="ignore"):  # candidates may overflow (float16 positions)
                found = check(c)
        except ValueError:  # a candidate the oracle rejects (e.g. non-finite positions)
            continue
        if found is not None:
            return found
    return Diagnosis("unknown", unknown_message(c))
