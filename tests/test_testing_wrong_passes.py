"""Wrong results that must never pass: a result in another dtype than asked for, and results
at positions where the error model cannot tell a correct result from zeros, the identity or
the inverse rotation ("not checkable")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import rope_ref as rr
from rope_ref.testing import assert_rope_close, max_checkable_position, rope_report
from rope_ref.testing.strategies import rope_cases

SPEC = rr.RopeSpec(head_dim=16)


def _rope64(x: np.ndarray, positions: np.ndarray, sign: float = 1.0) -> np.ndarray:
    """RoPE (half layout, base 10000) written out in float64, independently of rope_ref."""
    d = x.shape[-1]
    n = d // 2
    inv = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., :n].astype(np.float64), x[..., n:].astype(np.float64)
    return np.concatenate([a * cos - sign * b * sin, b * cos + sign * a * sin], axis=-1)


def _x(dtype: str, seq: int = 4) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1.0, 1.0, (2, seq, 16)).astype(dtype)


def test_a_float32_result_of_float64_input_fails_as_a_dtype_mismatch():
    x = _x("float64")
    p = np.array([0, 1, 1000, 30000])
    downcast = _rope64(x.astype(np.float32), p).astype(np.float32)
    with pytest.raises(AssertionError, match="not in the dtype asked for") as info:
        assert_rope_close(downcast, x, SPEC, p)
    assert "Likely cause: dtype: the result is float32 where float64 was asked for" in str(
        info.value
    )
    diagnosis = rope_report(downcast, x, SPEC, p).diagnosis
    assert diagnosis is not None
    assert diagnosis.cause == "dtype"


def test_a_stated_dtype_allows_it_and_judges_at_that_precision():
    x = _x("float64")
    p = np.array([0, 1, 1000, 30000])
    downcast = _rope64(x, p).astype(np.float32)
    assert assert_rope_close(downcast, x, SPEC, p, dtype="float32").ok
    # computed in float32 but returned as float64: judged at float64, it fails on values
    upcast = _rope64(x.astype(np.float32), p).astype(np.float32).astype(np.float64)
    with pytest.raises(AssertionError, match="differs from the rope_ref oracle"):
        assert_rope_close(upcast, x, SPEC, p)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_a_half_precision_result_of_float32_input_fails(low):
    torch = pytest.importorskip("torch")
    x = _x("float32")
    p = np.arange(4)
    y = torch.from_numpy(_rope64(x, p)).to(getattr(torch, low))
    with pytest.raises(AssertionError, match=f"the result is {low} where float32"):
        assert_rope_close(y, x, SPEC, p)


def test_b_max_checkable_position_is_where_the_tolerance_reaches_half_a_pair():
    # tolerance per unit norm: 2 * eps_angle * (angle + 1) + 4 * eps; fastest pair: 1 rad/token
    eps = 2.0**-23
    limit = (0.5 - 4 * eps) / (2 * eps) - 1
    assert max_checkable_position(SPEC, "float32") == int(np.floor(limit))
    slow = rr.RopeSpec(head_dim=16, freqs=np.full(8, 0.25))
    assert max_checkable_position(slow, "float32") == int(np.floor(limit / 0.25))


@pytest.mark.parametrize("wrong", ["zeros", "identity", "inverse", "correct"])
def test_b_nothing_passes_past_the_checkable_position_in_float32(wrong):
    x = _x("float32", seq=2)
    p = np.array([5, 2**23 + 1])
    results = {
        "zeros": np.zeros_like(x),
        "identity": x.copy(),
        "inverse": _rope64(x, p, sign=-1.0).astype(np.float32),
        "correct": _rope64(x, p).astype(np.float32),
    }
    with pytest.raises(AssertionError) as info:
        assert_rope_close(results[wrong], x, SPEC, p)
    message = str(info.value)
    if wrong in ("zeros", "identity", "inverse"):  # row 0 still tells it
        return
    assert "not checkable" in message
    assert f"checkable up to position {max_checkable_position(SPEC, 'float32')}" in message
    report = rope_report(results[wrong], x, SPEC, p)
    assert not report.ok
    assert report.summary().startswith("not checkable here")


@pytest.mark.parametrize("wrong", ["zeros", "identity", "inverse"])
def test_b_vacuous_rows_alone_never_pass(wrong):
    x = _x("float32", seq=1)
    p = np.array([2**23])
    results = {
        "zeros": np.zeros_like(x),
        "identity": x.copy(),
        "inverse": _rope64(x, p, sign=-1.0).astype(np.float32),
    }
    with pytest.raises(AssertionError, match="not checkable"):
        assert_rope_close(results[wrong], x, SPEC, p)


def test_b_zeros_fail_at_the_last_checkable_position():
    x = _x("float32", seq=1)
    p = np.array([max_checkable_position(SPEC, "float32")])
    assert assert_rope_close(_rope64(x, p).astype(np.float32), x, SPEC, p).ok
    with pytest.raises(AssertionError, match="Likely cause: zeros"):
        assert_rope_close(np.zeros_like(x), x, SPEC, p)


@settings(max_examples=40)
@given(rope_cases(dtypes=["float32"]))
def test_b_strategies_stop_drawing_at_the_checkable_position(case):
    p = np.abs(np.asarray(case.positions)) if case.positions is not None else None
    top = case.offset + case.x.shape[case.seq_axis] - 1 if p is None else int(p.max())
    assert top <= max_checkable_position(case.spec, "float32")


def test_b_float64_cases_still_reach_the_float32_edges():
    seen = []

    @settings(max_examples=60, derandomize=True)
    @given(rope_cases(dtypes=["float64"], min_position=2**24 - 2, max_position=2**24 + 2))
    def collect(case):
        seen.append(case)

    collect()
    assert seen
