"""The verdict of the fuzz tests: a correct result, or an error naming a parameter.

A call passes when it raises TypeError or ValueError whose message names, in backticks, a
parameter of the function (or a config key) and the oracle also calls the input invalid,
or when it returns and the oracle calls the input valid (the test then compares the
values); in both cases no input may have changed. Any other exception fails.
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

INVALID = object()  # the oracle's verdict: the call must raise


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


def check(result: Any, expected: Any, names: set[str]) -> None:
    """The verdict: an error naming one of `names` iff the oracle says INVALID."""
    event("refused" if isinstance(result, Exception) else "computed")
    if isinstance(result, Exception):
        assert expected is INVALID, f"refused a valid input: {result!r}"
        assert named(result) & names, f"the error names none of {sorted(names)}: {result}"
    else:
        assert expected is not INVALID, f"returned a result for an invalid input: {result!r}"
