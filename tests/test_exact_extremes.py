"""backend="exact" at the edges: far positions, exact offsets, extreme magnitudes, real ramps.

Every expected value is computed here, in mpmath at many bits from the formulas of the
docs (or exactly, in integers and fractions), and rounded by `tests.test_exact._round`,
which compares the value with the neighbours of a candidate in the target dtype.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rope_ref as rr
from tests.test_exact import DTYPES, _finfo, _oracle, _round, _same

exact_problem = importlib.import_module("rope_ref.backends.exact.problem")


def _rope_half(
    x: np.ndarray, positions: list[Any], omegas: Callable[[], list[Any]], bits: int
) -> np.ndarray:
    """The real RoPE of x (seq, d), half layout, rounded to float64: positions exact."""
    out = np.array(x, dtype=np.float64)
    with mpmath.workprec(bits):
        omegas_now = omegas()  # at the working precision
        n = len(omegas_now)
        for t, p in enumerate(positions):
            for j, w in enumerate(omegas_now):
                a, b = mpmath.mpf(float(x[t, j])), mpmath.mpf(float(x[t, j + n]))
                exact = Fraction(p) if isinstance(p, int | Fraction) else None
                position = (
                    mpmath.mpf(p)
                    if exact is None
                    else exact.numerator / mpmath.mpf(exact.denominator)
                )
                phi = position * w
                c, s = mpmath.cos(phi), mpmath.sin(phi)
                out[t, j] = _round(a * c - b * s, np.float64)
                out[t, j + n] = _round(b * c + a * s, np.float64)
    return out


def _plain_omegas(d: int, base: float = 10000.0) -> list[Any]:
    return [mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * j) / d) for j in range(d // 2)]


class _NoIntervals:
    """Counts the elements sent to the one-by-one mpmath path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = exact_problem.Problem._by_intervals

        def counted(problem: Any, *args: Any) -> float:
            self.calls += 1
            return original(problem, *args)

        monkeypatch.setattr(exact_problem.Problem, "_by_intervals", counted)


def test_positions_past_2_880_are_computed() -> None:
    x = np.array([[1.0, -0.5, 0.25, 2.0]])
    spec = rr.RopeSpec(head_dim=4)
    for p in (1e270, 2.0**1000, -1e300):
        got = rr.apply_rope(x, spec, np.array([p]), backend="exact")
        want = _rope_half(x, [p], lambda: _plain_omegas(4), 1600)
        _same(got, want)


def test_integer_positions_and_offsets_add_exactly() -> None:
    x = np.array([[1.0, 0.75, -2.0, 0.5]])
    spec = rr.RopeSpec(head_dim=4)
    cases: list[tuple[Any, Any, int | Fraction]] = [
        (np.array([2**55 + 3]), 2, 2**55 + 5),  # the sum fits int64, not float64
        (np.array([2**63 - 1]), 10, 2**63 + 9),  # past int64
        (np.array([2**60], dtype=np.uint64), -(2**62) - 1, 2**60 - 2**62 - 1),
        (np.array([2.0**60]), 3, 2**60 + 3),  # a float position, an integer offset
        (np.array([0.5]), 2.0**80, Fraction(1, 2) + 2**80),  # a float offset: the real sum
    ]
    for positions, offset, exact in cases:
        got = rr.apply_rope(x, spec, positions, offset=offset, backend="exact")
        _same(got, _rope_half(x, [exact], lambda: _plain_omegas(4), 400))


def test_default_positions_take_the_offset_exactly() -> None:
    x = np.array([[1.0, 0.75, -2.0, 0.5], [0.5, 1.0, 1.5, -1.0]])
    spec = rr.RopeSpec(head_dim=4)
    got = rr.apply_rope(x, spec, offset=2**63 - 1, backend="exact")
    _same(got, _rope_half(x, [2**63 - 1, 2**63], lambda: _plain_omegas(4), 400))


def test_ntk_rules_take_head_dim_2() -> None:
    positions = [0, 1, 7, 2**60 + 1]
    for rule in (rr.scaling.NTKAware(2.0), rr.scaling.DynamicNTK(2.0, 4)):
        spec = rr.RopeSpec(head_dim=2, scaling=rule)
        got = rr.rope_angles(spec, np.array(positions), backend="exact")
        # the one pair has inverse frequency 1: the angles are the positions, rounded once
        assert got[:, 0].tolist() == [float(Fraction(p)) for p in positions]
        cos, sin = rr.rope_cos_sin(spec, np.array([3]), backend="exact")
        with mpmath.workprec(200):
            assert (cos.item(), sin.item()) == (float(mpmath.cos(3)), float(mpmath.sin(3)))


def _yarn_omegas(rule: Any, d: int, base: float) -> list[Any]:
    """YaRN's frequencies with the ramp between its real ends (``truncate=False``)."""
    pi = mpmath.pi

    def index(beta: float) -> Any:
        length = mpmath.mpf(rule.original_max_position) / (mpmath.mpf(beta) * 2 * pi)
        return d * mpmath.log(length) / (2 * mpmath.log(mpmath.mpf(base)))

    lo, hi = max(index(rule.beta_fast), 0), min(index(rule.beta_slow), d - 1)
    s = mpmath.mpf(rule.factor)
    out = []
    for j, theta in enumerate(_plain_omegas(d, base)):
        ramp = min(max((j - lo) / (hi - lo), 0), 1)
        out.append(theta * (ramp / s + 1 - ramp))
    return out


@pytest.mark.parametrize("beta_fast", [32.0, 24.5])
def test_yarn_without_truncation_takes_the_real_ramp(beta_fast: float) -> None:
    d, base = 64, 10000.0
    rule = rr.scaling.YaRN(4.0, 4096, beta_fast=beta_fast, truncate=False, attention_factor=1.0)
    spec = rr.RopeSpec(head_dim=d, base=base, scaling=rule)
    positions = [10**7, 10**6 + 17, 3]
    with mpmath.workprec(400):
        omegas = _yarn_omegas(rule, d, base)
        want_angles = [[_round(mpmath.mpf(p) * w, np.float64) for w in omegas] for p in positions]
        want_cos = [[_round(mpmath.cos(p * w), np.float64) for w in omegas] for p in positions]
    angles = rr.rope_angles(spec, np.array(positions), backend="exact")
    assert angles.tolist() == want_angles
    cos, _ = rr.rope_cos_sin(spec, np.array(positions), backend="exact")
    assert cos.tolist() == want_cos
    x = np.random.default_rng(0).standard_normal((len(positions), d))
    got = rr.apply_rope(x, spec, np.array(positions), backend="exact")
    _same(got, _rope_half(x, positions, lambda: _yarn_omegas(rule, d, base), 400))


@pytest.mark.parametrize("magnitude", [2.0**-1000, 2.0**900, 2.0**-1060])
def test_extreme_magnitudes_are_scaled_not_sent_to_mpmath(
    magnitude: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _NoIntervals(monkeypatch)
    x = np.random.default_rng(1).standard_normal((3, 8)) * magnitude
    x[1, 2] = x[1, 6] * 2.0**-400  # a member far below its partner
    spec = rr.RopeSpec(head_dim=8)
    positions = [5, 1000, 70000]
    got = rr.apply_rope(x, spec, np.array(positions), backend="exact")
    _same(got, _rope_half(x, positions, lambda: _plain_omegas(8), 400))
    assert counter.calls <= 1  # at most the element whose partner is 2**400 times larger


def test_far_xpos_positions_are_scaled_not_sent_to_mpmath(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _NoIntervals(monkeypatch)
    spec = rr.RopeSpec(head_dim=8, xpos=rr.XPos(scale_base=512))
    x = np.random.default_rng(2).standard_normal((2, 8))
    positions = [0.0, 300000.0]  # scales near 2**+-528
    for role in ("query", "key"):
        got = rr.apply_rope(x, spec, np.array(positions), role=role, backend="exact")
        _same(got, _oracle(x, spec, positions, inverse=False, role=role))
    assert counter.calls == 0


def test_rope_angles_grow_about_linearly_in_head_dim() -> None:
    start = time.perf_counter()
    spec = rr.RopeSpec(head_dim=1024, scaling=rr.scaling.NTKAware(2.0))
    got = rr.rope_angles(spec, np.array([3, 10**6]), backend="exact")
    plain = rr.rope_angles(rr.RopeSpec(head_dim=8192), np.array([10**6]), backend="exact")
    elapsed = time.perf_counter() - start
    assert elapsed < 30.0  # a few tenths of a second; the powers of the bases took minutes
    with mpmath.workprec(300):
        for j in (0, 1, 255, 256, 511):
            w = mpmath.power(10000, mpmath.mpf(-2 * j) / 1024)
            w *= mpmath.power(2, mpmath.mpf(-2 * j) / 1022)
            assert got[1, j] == _round(10**6 * w, np.float64)
        for j in (0, 2048, 4095):  # 10000 ** (-2j / 8192): rational at j = 2048 (1 / 100)
            w = mpmath.power(10000, mpmath.mpf(-2 * j) / 8192)
            assert plain[0, j] == _round(10**6 * w, np.float64)
    assert math.isclose(got[0, 0], 3.0)


@st.composite
def _wide_problems(draw: st.DrawFn) -> tuple[Any, ...]:
    """Members of every magnitude of their dtype, alone or far from their partners."""
    dtype_name = draw(st.sampled_from(sorted(DTYPES)))
    finfo = _finfo(DTYPES[dtype_name])
    low, high = math.frexp(float(finfo.smallest_subnormal))[1], math.frexp(float(finfo.max))[1]
    xpos = draw(st.booleans())
    spec = rr.RopeSpec(head_dim=4, xpos=rr.XPos(scale_base=8.0) if xpos else None)
    positions = draw(st.lists(st.integers(0, 200 if xpos else 2**40), min_size=1, max_size=2))
    member = st.tuples(st.floats(-1.0, 1.0, exclude_max=True), st.integers(low - 1, high)).map(
        lambda m: math.ldexp(m[0], m[1])
    )
    values = draw(st.lists(member, min_size=4 * len(positions), max_size=4 * len(positions)))
    return dtype_name, spec, [float(p) for p in positions], values, draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(_wide_problems())
def test_members_of_every_magnitude_are_correctly_rounded(problem: tuple[Any, ...]) -> None:
    dtype_name, spec, positions, values, query = problem
    with np.errstate(over="ignore"):
        x = np.array(values).reshape(len(positions), 4).astype(DTYPES[dtype_name])
    assume(bool(np.all(np.isfinite(x.astype(np.float64)))))
    role = ("query" if query else "key") if spec.xpos is not None else None
    got = rr.apply_rope(x, spec, np.array(positions), role=role, backend="exact")
    with np.errstate(over="ignore"):  # the oracle's first guess of an overflowing value
        want = _oracle(x, spec, positions, inverse=False, role=role)
    _same(got, want)
