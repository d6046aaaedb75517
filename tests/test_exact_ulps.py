"""Errors in ulps: RopeReport.max_ulps, assert_rope_close(max_ulps=...), and the ulp bounds
of the reference and Numba backends against the correctly rounded result."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, rope_report

SPEC = rr.RopeSpec(head_dim=64)
POSITIONS = np.array([0, 1, 2, 3, 100, 4095, 8191, 131071, 999_999])


def _x(dtype: Any, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, len(POSITIONS), 64)).astype(dtype)


def _moved(y: np.ndarray, index: tuple[int, ...], ulps: int) -> np.ndarray:
    """`y` with one element moved `ulps` steps away from zero (counted here, by bits)."""
    out = y.copy()
    width = {8: np.uint64, 4: np.uint32, 2: np.uint16}[y.itemsize]
    bits = out.view(width)
    bits[index] = bits[index] + ulps  # sign-magnitude: away from zero for either sign
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("ulps", [1, 3])
def test_max_ulps_counts_steps_on_the_grid(dtype: Any, ulps: int) -> None:
    x = _x(dtype)
    exact = rr.apply_rope(x, SPEC, POSITIONS, backend="exact")
    assert rope_report(exact, x, SPEC, POSITIONS).max_ulps == 0.0
    index = (1, 4, 7)
    wrong = _moved(exact, index, ulps)
    # away from zero by `ulps` steps of the grid, within one binade: exactly `ulps`,
    # unless the moved value crossed into the next binade (then between ulps/2 and ulps)
    report = rope_report(wrong, x, SPEC, POSITIONS)
    same_binade = np.frexp(np.float64(wrong[index]))[1] == np.frexp(np.float64(exact[index]))[1]
    assert report.max_ulps == ulps if same_binade else ulps / 2 <= report.max_ulps <= ulps
    assert_rope_close(wrong, x, SPEC, POSITIONS, max_ulps=ulps)
    with pytest.raises(AssertionError, match=r"ulps from the correctly rounded result"):
        assert_rope_close(wrong, x, SPEC, POSITIONS, max_ulps=ulps - 1)


def test_max_ulps_rejects_bad_bounds() -> None:
    x = _x(np.float32)
    y = rr.apply_rope(x, SPEC, POSITIONS)
    with pytest.raises(ValueError, match="max_ulps"):
        assert_rope_close(y, x, SPEC, POSITIONS, max_ulps=-1)
    with pytest.raises(TypeError, match="max_ulps"):
        assert_rope_close(y, x, SPEC, POSITIONS, max_ulps="1")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_reference_is_within_one_ulp_below_float64(dtype: Any) -> None:
    # The reference rounds a float64 value once: off by at most one ulp of the result
    # while its float64 error (about |p| 2**-53 of the pair's norm) is far below an ulp.
    for seed in range(3):
        x = _x(dtype, seed)
        assert_rope_close(rr.apply_rope(x, SPEC, POSITIONS), x, SPEC, POSITIONS, max_ulps=1)


def _pair_norm_ulps(y: np.ndarray, exact: np.ndarray, x: np.ndarray, eps: float) -> float:
    """Largest |y - exact| in units of eps * (|a| + |b|) of the element's pair."""
    a, b = x[..., :32].astype(np.float64), x[..., 32:].astype(np.float64)
    norm = np.concatenate([np.abs(a) + np.abs(b)] * 2, axis=-1)
    err = np.abs(y.astype(np.float64) - exact.astype(np.float64))
    return float(np.max(err / (eps * norm)))


def test_float64_reference_error_grows_with_the_angle_only() -> None:
    # float64 angles p * w are off by up to |p w| 2**-53; the rotation adds a few roundings.
    x = _x(np.float64)
    exact = rr.apply_rope(x, SPEC, POSITIONS, backend="exact")
    y = rr.apply_rope(x, SPEC, POSITIONS)
    for i, p in enumerate(POSITIONS):
        bound = 4.0 + float(p)  # in units of 2**-53 (|a| + |b|); the largest w is 1
        assert _pair_norm_ulps(y[:, i], exact[:, i], x[:, i], 2.0**-53) <= bound


def test_numba_kernel_ulp_bounds() -> None:
    pytest.importorskip("numba")
    # float16 through float32 arithmetic: one rounding of a float32 value, within 1 ulp
    x16 = _x(np.float16)
    y16 = rr.apply_rope(x16, SPEC, POSITIONS, backend="numba")
    assert_rope_close(y16, x16, SPEC, POSITIONS, max_ulps=1)
    # float32: cos/sin rounded to float32 and two float32 products and a sum, so at most
    # 2 units of 2**-24 of the pair's |a| + |b| (cancellation makes ulps of the result
    # unbounded, so the bound is on the pair's scale)
    x32 = _x(np.float32)
    exact = rr.apply_rope(x32, SPEC, POSITIONS, backend="exact")
    y32 = rr.apply_rope(x32, SPEC, POSITIONS, backend="numba")
    assert _pair_norm_ulps(y32, exact, x32, 2.0**-24) <= 2.0


def test_survey_ulps_column() -> None:
    pytest.importorskip("torchtune")
    from rope_ref.cli.survey import table_lines
    from rope_ref.cli.survey.run import survey

    rows = [r for r in survey(64, only=("torchtune",), ulps=True) if r.verdict != "skipped"]
    assert rows
    for row in rows:
        assert row.max_ulps is not None
        assert row.median_ulps is not None
        # float32 angles at positions <= 64 are off by ~64 * 2**-24 rad: a few ulps of a
        # typical result, and at least one element somewhere is not correctly rounded
        assert 0 <= row.median_ulps <= 4 < row.max_ulps
    text = "\n".join(table_lines(rows))
    assert "ulps max / median" in text
    assert f"{rows[0].max_ulps:.4g} / {rows[0].median_ulps:.3g}" in text
    plain = survey(64, only=("torchtune",))
    assert all(r.max_ulps is None for r in plain)
    assert "ulps max" not in "\n".join(table_lines(plain))
