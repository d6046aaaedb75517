"""The verdict of the fuzz tests: a correct result, or an error naming the wrong argument.

The oracle of each test returns the expected result, or `invalid(...)` with the names of
the arguments (parameters, config keys) that make the input invalid. A call passes when it
raises TypeError or ValueError whose message names, in backticks, one of those, or when it
returns and the oracle calls the input valid (the test then compares the values); in both
cases no input may have changed. Any other exception, and an error that names an argument
that was fine, fail.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import numpy as np
from hypothesis import event, settings

#: Examples per test: 150 under the derandomized "ci" profile, more under "thorough".
EXAMPLES = max(150, settings().max_examples)


class Invalid:
    """The oracle's verdict that the call must raise, naming one of `names`."""

    def __init__(self, names: set[str]) -> None:
        assert names, "an invalid input is invalid because of some argument"
        self.names = frozenset(names)

    def __repr__(self) -> str:
        return f"invalid({', '.join(sorted(self.names))})"


def invalid(*names: str) -> Invalid:
    """The call must raise an error naming one of `names`."""
    return Invalid(set(names))


def named(error: Exception) -> set[str]:
    """Names in backticks in an error message (``spec.xpos`` counts as ``spec``)."""
    return {m.split(".")[0] for m in re.findall(r"`([A-Za-z_][\w.]*)`", str(error))}


def call(function, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, its TypeError/ValueError returned, inputs unchanged."""
    before = copy.deepcopy((args, kwargs))
    try:
        with np.errstate(all="ignore"):
            result = function(*args, **kwargs)
    except (TypeError, ValueError) as err:
        result = err
    assert_unchanged(before, (args, kwargs))
    return result


def assert_unchanged(before: Any, after: Any) -> None:
    if isinstance(before, np.ndarray):
        assert type(before) is type(after)
        assert before.dtype == after.dtype
        assert before.shape == after.shape
        if before.dtype.kind == "O":
            assert_unchanged(before.ravel().tolist(), after.ravel().tolist())
        else:
            assert np.array_equal(before, after, equal_nan=before.dtype.kind in "fcmM")
        if isinstance(before, np.ma.MaskedArray):
            assert np.array_equal(np.ma.getmaskarray(before), np.ma.getmaskarray(after))
    elif isinstance(before, list | tuple):
        for b, a in zip(before, after, strict=True):
            assert_unchanged(b, a)
    elif isinstance(before, dict):
        assert before.keys() == after.keys()
        for key in before:
            assert_unchanged(before[key], after[key])
    elif isinstance(before, float) and math.isnan(before):
        assert math.isnan(after)
    else:
        assert before == after or before is after


def check(result: Any, expected: Any) -> None:
    """The verdict: an error naming an argument the oracle found wrong iff it found one."""
    event("refused" if isinstance(result, Exception) else "computed")
    if isinstance(result, Exception):
        assert isinstance(expected, Invalid), f"refused a valid input: {result!r}"
        assert named(result) & expected.names, f"{expected!r}, but the error says: {result}"
    else:
        assert not isinstance(expected, Invalid), f"returned {result!r} for {expected!r}"
