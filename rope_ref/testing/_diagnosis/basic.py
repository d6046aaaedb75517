"""Diagnoses of the result as a whole: not checkable, non-finite values, zeros."""

from __future__ import annotations

import numpy as np

from rope_ref.testing._compare import Comparison
from rope_ref.testing._diagnosis.shared import Diagnosis
from rope_ref.testing._tolerance import EPS, max_checkable_position

__all__ = ["non_finite", "not_checkable", "zeros"]


def not_checkable(c: Comparison) -> Diagnosis:
    s = c.setup
    assert c.unchecked is not None
    assert c.model is not None
    first = float(np.min(np.abs(s.row_positions[c.unchecked])))
    names = {eps: name for name, eps in EPS.items()}
    dtype, angle = names[c.model.eps], names[c.model.angle_eps]
    limit = max_checkable_position(s.spec, dtype, angle_dtype=angle, seq_len=s.seq_len)
    if c.position_eps is not None and first <= limit:
        return Diagnosis(
            "not_checkable",
            f"not checkable here: with positions rounded to {names[c.position_eps]} "
            f"(position_dtype) the error model allows |error| of half a pair's norm or "
            f"more at positions up to {float(np.max(np.abs(s.row_positions))):.10g}: "
            "zeros, the identity or the inverse rotation would pass. Check smaller "
            "positions, or build the grid in a wider dtype.",
        )
    return Diagnosis(
        "not_checkable",
        f"not checkable here: from position {first:.10g} the {dtype} error model allows "
        "|error| of half a pair's norm or more, so zeros, the identity or the inverse "
        f"rotation would pass as well as a correct result. In {dtype} this spec is "
        f"checkable up to position {limit}; check larger positions in a wider dtype.",
    )


def non_finite(c: Comparison) -> Diagnosis | None:
    bad = ~np.isfinite(c.actual)
    if not np.any(bad):
        return None
    return Diagnosis(
        "non-finite",
        f"{int(np.sum(bad))} element(s) of the result are NaN or infinite "
        "(overflow, a division by zero, or uninitialised memory such as an unwritten output).",
    )


def zeros(c: Comparison) -> Diagnosis | None:
    failed = c.failed
    if not np.any(failed) or np.any(c.actual[failed] != 0.0):
        return None
    return Diagnosis(
        "zeros",
        f"every mismatched element of the result is 0 ({int(np.sum(failed))} of them) where "
        "the oracle is not: an output buffer left unwritten, or the input overwritten "
        "(zeroed) and returned.",
    )
