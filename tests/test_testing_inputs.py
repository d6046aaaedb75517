"""rope_ref.testing refuses bad tolerances, magnitudes and results with an error naming them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import (
    ErrorModel,
    RopeOracle,
    angle_error,
    assert_rope_close,
    rope_atol,
    rope_report,
    tolerance,
)

SPEC = rr.RopeSpec(head_dim=8)
X = np.random.default_rng(0).standard_normal((5, 8))
EXACT = rr.apply_rope(X, SPEC)

COMPARISONS = {
    "rope_report": rope_report,
    "assert_rope_close": assert_rope_close,
    "RopeOracle.report": RopeOracle().report,
    "RopeOracle.assert_close": RopeOracle().assert_close,
}

BAD_TOLERANCES = [
    ({"rtol": -1}, ValueError, r"`rtol` must be non-negative; got -1\.0"),
    ({"rtol": math.nan}, ValueError, r"`rtol` must be finite; got nan"),
    ({"atol": math.inf}, ValueError, r"`atol` must be finite; got inf"),
    ({"atol": -1e-3, "rtol": 1e-3}, ValueError, r"`atol` must be non-negative"),
    ({"atol": "1e-3"}, TypeError, r"`atol` must be a real number; got '1e-3'"),
    ({"atol": "abc"}, TypeError, r"`atol` must be a real number; got 'abc'"),
    ({"atol": True}, TypeError, r"`atol` must be a real number; got True"),
    ({"rtol": [1]}, TypeError, r"`rtol` must be a real number; got \[1\]"),
    ({"rtol": np.array([1e-3])}, TypeError, r"`rtol` must be a real number"),
]


@pytest.mark.parametrize("entry", list(COMPARISONS))
@pytest.mark.parametrize(("kwargs", "error", "match"), BAD_TOLERANCES)
def test_bad_rtol_atol_is_refused_by_every_comparison(entry, kwargs, error, match):
    with pytest.raises(error, match=match):
        COMPARISONS[entry](EXACT, X, SPEC, **kwargs)


BAD_RESULTS = [
    (EXACT.tolist(), TypeError, r"`actual` must be an array; got list\."),
    (None, TypeError, r"`actual` must be an array; got NoneType\."),
    (EXACT.astype(np.int64), ValueError, r"`actual` must have one of the floating dtypes .*int64"),
    (EXACT.astype(np.complex128), ValueError, r"`actual` must have one of .*complex128"),
]


@pytest.mark.parametrize("entry", list(COMPARISONS))
@pytest.mark.parametrize(("actual", "error", "match"), BAD_RESULTS)
def test_bad_actual_is_named(entry, actual, error, match):
    with pytest.raises(error, match=match):
        COMPARISONS[entry](actual, X, SPEC)


@pytest.mark.parametrize("entry", list(COMPARISONS))
def test_integer_x_is_named(entry):
    with pytest.raises(ValueError, match=r"`x` must have one of the floating dtypes .*int64"):
        COMPARISONS[entry](EXACT, X.astype(np.int64), SPEC)


@pytest.mark.parametrize(
    ("magnitude", "error", "match"),
    [
        (-1, ValueError, r"`magnitude` must be non-negative; got -1\.0"),
        (math.nan, ValueError, r"`magnitude` must be finite; got nan"),
        (math.inf, ValueError, r"`magnitude` must be finite; got inf"),
        ("1", TypeError, r"`magnitude` must be a real number; got '1'"),
        (True, TypeError, r"`magnitude` must be a real number; got True"),
    ],
)
def test_rope_atol_refuses_bad_magnitude(magnitude, error, match):
    with pytest.raises(error, match=match):
        rope_atol(SPEC, np.arange(5), dtype=np.float32, magnitude=magnitude)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"eps": -1}, ValueError, r"`eps` must be non-negative; got -1\.0"),
        ({"eps": math.nan}, ValueError, r"`eps` must be finite"),
        ({"eps": "1e-7"}, TypeError, r"`eps` must be a real number; got '1e-7'"),
        ({"magnitude": -1}, ValueError, r"`magnitude` must be non-negative"),
        ({"magnitude": math.inf}, ValueError, r"`magnitude` must be finite"),
        ({"max_angle": math.nan}, ValueError, r"`max_angle` must be finite"),
        ({"max_angle": "1"}, TypeError, r"`max_angle` must be a real number; got '1'"),
        ({"roundings": 1.5}, TypeError, r"`roundings` must be an integer; got 1\.5"),
        ({"roundings": True}, TypeError, r"`roundings` must be an integer; got True"),
        ({"roundings": 0}, ValueError, r"`roundings` must be at least 1; got 0"),
    ],
)
def test_tolerance_refuses_bad_arguments(kwargs, error, match):
    args = {"eps": 2.0**-23, "max_angle": 1.0, "magnitude": 1.0} | kwargs
    eps = args.pop("eps")
    with pytest.raises(error, match=match):
        tolerance(eps, **args)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((math.nan,), {}, ValueError, r"`max_angle` must be finite; got nan"),
        ((math.inf,), {}, ValueError, r"`max_angle` must be finite; got inf"),
        (("1",), {}, TypeError, r"`max_angle` must be a real number; got '1'"),
        ((1.0,), {"angle_eps": -1e-7}, ValueError, r"`angle_eps` must be non-negative"),
        ((1.0,), {"angle_eps": math.nan}, ValueError, r"`angle_eps` must be finite"),
        ((1.0,), {"angle_eps": True}, TypeError, r"`angle_eps` must be a real number"),
    ],
)
def test_angle_error_refuses_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        angle_error(*args, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"eps": -1.0}, ValueError, r"`eps` must be non-negative; got -1\.0"),
        ({"angle_eps": math.nan}, ValueError, r"`angle_eps` must be finite; got nan"),
        ({"roundings": -4}, ValueError, r"`roundings` must be non-negative; got -4\.0"),
        ({"roundings": True}, TypeError, r"`roundings` must be a real number; got True"),
        ({"eps": "2e-23"}, TypeError, r"`eps` must be a real number; got '2e-23'"),
    ],
)
def test_error_model_fields_are_checked(kwargs, error, match):
    fields = {"eps": 2.0**-23, "angle_eps": 2.0**-23} | kwargs
    with pytest.raises(error, match=match):
        ErrorModel(**fields)
