"""Llama 3, LongRoPE and Proportional as real formulas in backend="exact".

Each rule's frequencies are written here from its docstring's formula in mpmath at 320 bits
and compared with the exact backend's (200 bits) to far below a float64 ulp, and with the
float64 code of the rules to a few float64 roundings. End to end, the correctly rounded
cos/sin tables of each rule are compared with the formula rounded here.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref.scaling import Llama3
from tests.test_exact import DTYPES, _finfo, _round, _same
from tests.test_exact_tables import _round_angle

BITS = 320


def _theta(spec: rr.RopeSpec, j: int) -> Any:
    d = spec.rotary_dim
    assert d is not None
    return mpmath.power(mpmath.mpf(spec.base), mpmath.mpf(-2 * j) / d)


def _llama3(rule: Llama3, theta: Any) -> Any:
    """HF's ``_compute_llama3_parameters`` in real numbers (inclusive middle band)."""
    s, context = mpmath.mpf(rule.factor), mpmath.mpf(rule.original_max_position)
    low, high = mpmath.mpf(rule.low_freq_factor), mpmath.mpf(rule.high_freq_factor)
    wavelength = 2 * mpmath.pi / theta
    if wavelength < context / high:
        return theta
    if wavelength > context / low:
        return theta / s
    smooth = (context / wavelength - low) / (high - low)
    return (1 - smooth) * theta / s + smooth * theta


def _omega(spec: rr.RopeSpec, j: int, seq_len: float) -> Any:
    rule = spec.scaling
    theta = _theta(spec, j)
    if isinstance(rule, rr.scaling.Llama3):
        return _llama3(rule, theta)
    if isinstance(rule, rr.scaling.LongRoPE):
        ext = rule.long_factor if seq_len > rule.original_max_position else rule.short_factor
        return theta / mpmath.mpf(ext[j])
    assert isinstance(rule, rr.scaling.Proportional)
    d = spec.rotary_dim
    assert d is not None
    if j >= int(rule.partial_rotary_factor * d // 2):
        return mpmath.mpf(0)
    return theta / mpmath.mpf(rule.factor)


def _factor(spec: rr.RopeSpec) -> Any:
    rule = spec.scaling
    if not isinstance(rule, rr.scaling.LongRoPE):
        return mpmath.mpf(1)
    if rule.attention_factor_value is not None:
        return mpmath.mpf(rule.attention_factor_value)
    if rule.factor is None or rule.factor <= 1:
        return mpmath.mpf(1)
    ratio = mpmath.log(mpmath.mpf(rule.factor)) / mpmath.log(rule.original_max_position)
    return mpmath.sqrt(1 + ratio)


RULES: list[Any] = [
    rr.scaling.Llama3(8.0, original_max_position=8192),
    rr.scaling.Llama3(32.0, original_max_position=8192, low_freq_factor=1.0, high_freq_factor=1.0),
    rr.scaling.Llama3(2.5, original_max_position=1000, low_freq_factor=0.5, high_freq_factor=7.0),
    rr.scaling.LongRoPE(
        [1.0 + j / 16 for j in range(32)], [1.0 + j for j in range(32)], 4096, factor=32.0
    ),
    rr.scaling.LongRoPE([1.5] * 32, [3.0] * 32, 4096, factor=0.5),
    rr.scaling.LongRoPE([1.5] * 32, [3.0] * 32, 4096, attention_factor=1.25),
    rr.scaling.Proportional(0.25),
    rr.scaling.Proportional(0.5, factor=3.0),
]


@pytest.mark.parametrize("rule", RULES, ids=repr)
@pytest.mark.parametrize("seq_len", [100.0, 20000.0])
def test_frequencies_are_the_formulas(rule: Any, seq_len: float) -> None:
    exact_frequencies = importlib.import_module("rope_ref.backends.exact.frequencies")
    spec = rr.RopeSpec(64, base=500000.0, scaling=rule)
    ctx = mpmath.MPContext()
    ctx.prec = 200
    got = exact_frequencies.omegas(ctx, spec, seq_len)
    factor = exact_frequencies.attention_factor(ctx, spec, seq_len)
    with mpmath.workprec(BITS):
        for j in range(spec.n_pairs):
            want = _omega(spec, j, seq_len)
            assert abs(mpmath.mpf(got[j]) - want) <= abs(want) * mpmath.mpf(2) ** -190, j
        want_factor = _factor(spec)
        assert abs(mpmath.mpf(factor) - want_factor) <= want_factor * mpmath.mpf(2) ** -190
    # and the float64 code of the rule: the same numbers to a few float64 roundings
    as_floats = np.array([float(w) for w in got])
    np.testing.assert_allclose(as_floats, rr.inv_freq(spec, seq_len), rtol=2e-15, atol=0)
    assert float(factor) == pytest.approx(rr.attention_factor(spec, seq_len), rel=1e-15)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[Any, ...]:
    rule = draw(st.sampled_from(RULES))
    spec = rr.RopeSpec(64, base=draw(st.sampled_from([10000.0, 500000.0])), scaling=rule)
    positions = draw(
        st.lists(st.integers(0, 2**40).map(float) | st.floats(0, 1e6), min_size=1, max_size=2)
    )
    pairs = sorted(draw(st.sets(st.integers(0, 31), min_size=1, max_size=3)))
    return draw(st.sampled_from(sorted(DTYPES))), spec, positions, pairs


@given(_tables())
def test_cos_sin_of_each_rule_are_correctly_rounded(problem: Any) -> None:
    dtype_name, spec, positions, pairs = problem
    dtype = DTYPES[dtype_name]
    cos, sin = rr.rope_cos_sin(spec, np.array(positions), dtype=dtype, backend="exact")
    seq_len = max(positions) + 1
    want_cos = np.asarray(cos, dtype=np.float64).copy()
    want_sin = np.asarray(sin, dtype=np.float64).copy()
    with mpmath.workprec(BITS + 64):
        factor = _factor(spec)
        for t, p in enumerate(positions):
            for j in pairs:
                phi = mpmath.mpf(p) * _omega(spec, j, seq_len)
                want_cos[t, j] = _round(factor * mpmath.cos(phi), dtype)
                want_sin[t, j] = 0.0 if phi == 0 else _round(factor * mpmath.sin(phi), dtype)
    _same(cos, want_cos)
    _same(sin, want_sin)


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_a_rational_longrope_factor_decides_ties_at_angle_zero(dtype_name: str) -> None:
    # sqrt(1 + ln 32768 / ln 4096) = sqrt(1 + 15/12) = 3/2 exactly, so at position 0 the
    # result is 1.5 x, a tie for x = 1 + eps and 1 + 3 eps: rounded to even, and decided
    rule = rr.scaling.LongRoPE([1.0], [1.0], 4096, factor=32768.0)
    spec = rr.RopeSpec(2, scaling=rule)
    dtype = DTYPES[dtype_name]
    eps = float(_finfo(dtype).eps)
    x = np.array([[1 + eps, -(1 + 3 * eps)]], dtype=dtype)
    got = rr.apply_rope(x, spec, np.array([0]), backend="exact")
    exact = [Fraction(3, 2) * Fraction(float(v)) for v in x[0]]
    assert exact[0] == Fraction(3, 2) + Fraction(3, 2) * Fraction(eps)  # halfway
    np.testing.assert_array_equal(
        np.asarray(got, dtype=np.float64)[0], [1.5 + 2 * eps, -(1.5 + 4 * eps)]
    )


@given(
    st.sampled_from(RULES),
    st.lists(st.integers(0, 2**60) | st.floats(0, 2.0**40), min_size=1, max_size=2),
)
def test_angles_of_each_rule_are_correctly_rounded(rule: Any, positions: list[Any]) -> None:
    spec = rr.RopeSpec(64, base=10000.0, scaling=rule)
    kind = np.uint64 if all(isinstance(p, int) for p in positions) else np.float64
    p = np.array(positions, dtype=kind)
    got = rr.rope_angles(spec, p, backend="exact")
    seq_len = float(np.max(p.astype(np.float64))) + 1
    want = np.empty_like(got)
    with mpmath.workprec(BITS + 64):
        for t, value in enumerate(p.tolist()):
            for j in range(spec.n_pairs):
                w = _omega(spec, j, seq_len)
                phi = mpmath.mpf(value) * w
                want[t, j] = float(value) * float(w) if phi == 0 else _round_angle(phi)
    _same(got, want)
