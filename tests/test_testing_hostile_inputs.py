"""The oracle kit on inputs that once passed wrongly or failed wrongly.

Ulps counted in the dtype asked for; elements of the wrong sign at their true ulp distance
(an ulp count written here, not the kit's); ±inf in x; an array whose ``dtype`` lies.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, rope_report

mpmath = pytest.importorskip("mpmath")


def _mpmath_rope(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> list[list]:
    """Half-layout RoPE of x (seq, d) in 200-bit mpmath: the exact values, unrounded."""
    d = x.shape[-1]
    n = d // 2
    rows = []
    with mpmath.workprec(200):
        for s, p in enumerate(positions.tolist()):
            row = [mpmath.mpf(0)] * d
            for i in range(n):
                angle = mpmath.mpf(int(p)) * mpmath.power(base, mpmath.mpf(-2 * i) / d)
                c, sn = mpmath.cos(angle), mpmath.sin(angle)
                a, b = mpmath.mpf(float(x[s, i])), mpmath.mpf(float(x[s, i + n]))
                row[i], row[i + n] = a * c - b * sn, b * c + a * sn
            rows.append(row)
    return rows


def _ulps32(actual: float, exact) -> float:
    """|actual - exact| in units of the float32 spacing at the float32 nearest `exact`."""
    nearest = np.float32(float(exact))
    spacing = float(np.spacing(np.abs(nearest)))
    with mpmath.workprec(200):
        return float(abs(mpmath.mpf(float(actual)) - exact) / spacing)


def test_max_ulps_is_counted_in_the_dtype_asked_for():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(1).standard_normal((3, 8))
    p = np.arange(3) + 5
    y32 = np.asarray(rr.apply_rope(x, spec, p)).astype(np.float32)  # float64 rounded once
    exact = _mpmath_rope(x, p)
    worst = max(_ulps32(y32[s, j], exact[s][j]) for s in range(3) for j in range(8))
    assert worst <= 0.5  # a float32 result as good as float32 gets
    report = assert_rope_close(y32, x, spec, p, dtype="float32", max_ulps=0.5)
    assert report.max_ulps <= 0.5


@pytest.mark.parametrize("flip", [(0, 1), (2, 6)])
def test_an_element_of_the_wrong_sign_is_reported_at_its_true_ulp_distance(flip):
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    p = np.arange(3)
    exact = _mpmath_rope(x, p)
    y = np.array([[np.float32(float(v)) for v in row] for row in exact], dtype=np.float32)
    y[flip] = -y[flip]  # the wrong sign: 2 |y| away
    report = rope_report(y, x, spec, p, atol=10.0)
    expected = max(_ulps32(y[s, j], exact[s][j]) for s in range(3) for j in range(8))
    assert expected > 1e6
    assert report.max_ulps == pytest.approx(expected, rel=1e-6)


def test_values_on_both_sides_of_zero_are_counted_across_it():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    p = np.arange(2)
    exact = _mpmath_rope(x, p)
    y = np.array([[np.float32(float(v)) for v in row] for row in exact], dtype=np.float32)
    j = int(np.argmin(np.abs(y[1])))
    y[1, j] = np.float32(-0.5) * y[1, j]  # across zero, half as far on the other side
    report = rope_report(y, x, spec, p, atol=10.0)
    expected = max(_ulps32(y[s, k], exact[s][k]) for s in range(2) for k in range(8))
    assert report.max_ulps == pytest.approx(expected, rel=1e-6)


def test_the_oracles_own_result_passes_when_x_holds_infinities():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(4).standard_normal((2, 5, 8)).astype(np.float32)
    x[0, 1, 2], x[1, 3, 0] = np.inf, -np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        y = np.asarray(rr.apply_rope(x, spec))
    assert np.isinf(y).any()
    assert_rope_close(y, x, spec)


def test_with_infinities_in_x_only_the_same_values_pass():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(4).standard_normal((2, 5, 8)).astype(np.float32)
    x[0, 1, 2] = np.inf
    with np.errstate(invalid="ignore", over="ignore"):
        y = np.asarray(rr.apply_rope(x, spec))
    index = tuple(int(i) for i in np.argwhere(np.isinf(y))[0])
    for wrong in (-y[index], np.float32(np.nan), np.float32(1.0)):
        bad = y.copy()
        bad[index] = wrong
        with pytest.raises(AssertionError, match="differs from the rope_ref oracle"):
            assert_rope_close(bad, x, spec)


class _SaysFloat32(np.ndarray):
    """A float64 array whose ``dtype`` says float32."""

    @property
    def dtype(self):
        return np.dtype(np.float32)


def test_a_result_whose_dtype_lies_is_judged_by_what_it_stores():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(5).standard_normal((2, 5, 8)).astype(np.float32)
    y64 = np.asarray(rr.apply_rope(x.astype(np.float64), spec)).view(_SaysFloat32)
    assert y64.dtype == np.float32
    with pytest.raises(AssertionError, match="the result is float64 where float32"):
        assert_rope_close(y64, x, spec)
