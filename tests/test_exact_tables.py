"""backend="exact" for rope_angles, rope_cos_sin and rerotate, against mpmath written here.

The oracles evaluate the real numbers from the formulas of the docs at 400 bits and more
(not from rope_ref's code) and round them by comparing with the neighbours of a candidate
(`tests.test_exact._round`), so a double rounding, a wrong tie or a wrong sign of zero shows.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import rope_ref as rr
from tests.test_exact import DTYPES, _finfo, _same
from tests.test_exact import _round as _round_quietly

BITS = 400


def _round(value: Any, dtype: Any) -> float:
    """`tests.test_exact._round`, which may overflow a cast on its way to infinity."""
    with np.errstate(over="ignore"):
        return _round_quietly(value, dtype)


def _omega(spec: rr.RopeSpec, j: int, seq_len: float) -> Any:
    """Inverse frequency of pair j, from the formulas of the docs, as an mpf."""
    if spec.freqs is not None:
        return mpmath.mpf(float(spec.freqs[j]))
    d = spec.rotary_dim
    assert d is not None
    theta = mpmath.power(mpmath.mpf(spec.base), mpmath.mpf(-2 * j) / d)
    rule = spec.scaling
    if rule is None:
        return theta
    if isinstance(rule, rr.scaling.Linear):
        return theta / mpmath.mpf(rule.factor)
    if isinstance(rule, rr.scaling.DynamicNTK):
        length = max(Fraction(seq_len), Fraction(rule.max_position))
        ratio = 1 + Fraction(rule.factor) * (length - rule.max_position) / rule.max_position
        r = mpmath.mpf(ratio.numerator) / ratio.denominator
        return theta * mpmath.power(r, mpmath.mpf(-2 * j) / (d - 2))
    assert isinstance(rule, rr.scaling.YaRN)
    lo, hi = rule.correction_range(base=spec.base, rotary_dim=d)
    ramp = (Fraction(j) - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
    ramp = min(max(ramp, Fraction(0)), Fraction(1))
    r = mpmath.mpf(ramp.numerator) / ramp.denominator
    return theta * (r / mpmath.mpf(rule.factor) + 1 - r)


def _factor(spec: rr.RopeSpec) -> Any:
    rule = spec.scaling
    if isinstance(rule, rr.scaling.YaRN):
        if rule.attention_factor_value is not None:
            return mpmath.mpf(rule.attention_factor_value)
        return mpmath.log(mpmath.mpf(rule.factor)) / 10 + 1
    return mpmath.mpf(1)


def _xpos_scale(spec: rr.RopeSpec, j: int, p: float, length: float, role: str) -> Any:
    """zeta_j ** (+-(p - floor(L / 2)) / scale_base), exactly where the power is an integer."""
    assert spec.xpos is not None
    d = spec.rotary_dim
    assert d is not None
    power = (Fraction(p) - math.floor(length / 2)) / Fraction(spec.xpos.scale_base)
    power = power if role == "query" else -power
    zeta = Fraction(10 * j + 2 * d, 7 * d)
    if power.denominator == 1:
        exact = zeta ** int(power)
        return mpmath.mpf(exact.numerator) / exact.denominator
    ratio = mpmath.mpf(power.numerator) / power.denominator
    return mpmath.power(mpmath.mpf(zeta.numerator) / zeta.denominator, ratio)


def _bits(values: list[float]) -> int:
    exponents = [math.frexp(v)[1] for v in values if v != 0]
    return BITS + 2 * max([0, *(-e for e in exponents)]) + max([0, *exponents])


# -- rope_angles -------------------------------------------------------------------------------


@st.composite
def _angle_problems(draw: st.DrawFn) -> tuple[rr.RopeSpec, list[Any]]:
    """A spec and positions; for custom freqs, ties and near-ties of p * w built on purpose."""
    kind = draw(st.sampled_from(["tie", "default", "linear", "ntk", "yarn", "sections"]))
    n = draw(st.integers(1, 4))
    if kind == "tie":
        # p = (2**52 + i) 2**e1, w = (2**52 + k) 2**e2 with i k = 2**51 + delta: the product's
        # 54th bit is set and what follows is delta (0: an exact tie)
        s = draw(st.integers(1, 50))
        delta = draw(st.sampled_from([-1, 0, 0, 1]))
        i, k = 2**s, 2 ** (51 - s) + delta
        w = math.ldexp(2**52 + k, -52 + draw(st.integers(-8, 0)))
        freqs = [w, *draw(st.lists(st.floats(0, 4), min_size=n - 1, max_size=n - 1))]
        spec = rr.RopeSpec(2 * n, freqs=freqs)
        p = math.ldexp(2**52 + i, -52 + draw(st.integers(-4, 30)))
        return spec, [p, -p]
    kwargs: dict[str, Any] = {"base": draw(st.sampled_from([10000.0, 500000.0, 2.0, 1e6]))}
    if kind == "linear":
        kwargs["scaling"] = rr.scaling.Linear(draw(st.floats(0.5, 64)))
    elif kind == "ntk":
        kwargs["scaling"] = rr.scaling.DynamicNTK(draw(st.floats(1.5, 16)), max_position=64)
        n = max(n, 2)
    elif kind == "yarn":
        kwargs["scaling"] = rr.scaling.YaRN(4.0, 64)
    elif kind == "sections":
        n = 4
        kwargs["sections"] = (1, 2, 1)
    spec = rr.RopeSpec(2 * n, **kwargs)
    position = st.one_of(
        st.integers(0, 2**62),
        st.sampled_from([0, 1, 2**53 + 1, 2**53 + 3, 2**63 - 1]),
        st.floats(0, 2.0**70),
        st.sampled_from([0.0, -0.0, 5e-324, 2.0**-30]),
    )
    if kind not in ("linear", "ntk", "yarn"):
        position = st.one_of(position, st.floats(-1e12, 0))
    width = 3 if kind == "sections" else None
    positions: list[Any] = draw(
        st.lists(
            position if width is None else st.lists(position, min_size=3, max_size=3),
            min_size=1,
            max_size=3,
        )
    )
    return spec, positions


def _positions_array(positions: list[Any]) -> np.ndarray:
    flat = [v for row in positions for v in (row if isinstance(row, list) else [row])]
    kind = np.uint64 if all(isinstance(v, int) for v in flat) else np.float64
    return np.array(positions, dtype=kind)


@given(_angle_problems())
def test_angles_are_the_real_angles_rounded_once(problem: Any) -> None:
    spec, positions = problem
    p = _positions_array(positions)
    got = rr.rope_angles(spec, p, backend="exact")
    assert got.dtype == np.float64
    flat = p.reshape(-1, 3) if spec.sections is not None else p.reshape(-1, 1)
    seq_len = float(np.max(p.astype(np.float64))) + 1.0
    axes = rr.pair_axes(spec)
    want = np.empty((flat.shape[0], spec.n_pairs))
    with mpmath.workprec(_bits([float(v) for v in flat.ravel()]) + 200):
        for r, row in enumerate(flat):
            for j in range(spec.n_pairs):
                value = row[axes[j]]
                exact_p = mpmath.mpf(int(value)) if p.dtype.kind == "u" else mpmath.mpf(value)
                w = _omega(spec, j, seq_len)
                phi = exact_p * w
                # a zero angle takes IEEE's sign of the product p * w
                zero = float(value) * float(w)
                want[r, j] = zero if phi == 0 else _round_angle(phi)
    _same(got.reshape(want.shape), want)


def _round_angle(phi: Any) -> float:
    """`phi` to float64; a value within 2**-300 (relative) of a midpoint is that midpoint.

    A rational frequency can put p w exactly on a midpoint (YaRN's 10**-1 * 5/8 = 1/16),
    which the 400-bit evaluation of the formula only approaches.
    """
    y = _round(phi, np.float64)
    for neighbour in (math.nextafter(y, -math.inf), math.nextafter(y, math.inf)):
        middle = (mpmath.mpf(y) + mpmath.mpf(neighbour)) / 2
        if abs(phi - middle) <= abs(phi) * mpmath.mpf(2) ** -300:
            return _round(middle, np.float64)
    return y


def test_angle_ties_of_a_rational_formula_round_to_even() -> None:
    # YaRN(4) with base 1e4, d = 8: the ramp is 1/2 at pair 1, so w = 10**-1 (1/8 + 1/2)
    # = 1/16, and (2**53 + 1) / 16 = 2**49 + 1/16 lies halfway between float64 values
    # 1/8 apart: to the even one, 2**49 (not 2**49 + 1/8)
    spec = rr.RopeSpec(8, scaling=rr.scaling.YaRN(4.0, 64))
    got = rr.rope_angles(spec, np.array([2**53 + 1], dtype=np.int64), backend="exact")
    assert float(got[0, 1]) == 2.0**49
    got = rr.rope_angles(spec, np.array([2**53 + 3], dtype=np.int64), backend="exact")
    assert float(got[0, 1]) == 2.0**49 + 0.25  # 2**49 + 3/16: halfway, to the even 2/8


def test_angle_ties_round_to_even() -> None:
    # (2**52 + 2**25) (1 + 2**-26) = 2**52 + 2**26 + 2**25 + 1/2: halfway between two
    # float64 values (spaced 1 in [2**52, 2**53)), chosen on purpose
    p = float(2**52 + 2**25)
    w = 1 + 2.0**-26
    spec = rr.RopeSpec(2, freqs=[w])
    exact = Fraction(p) * Fraction(w)
    assert exact.denominator == 2
    assert 2**52 < exact < 2**53
    got = float(rr.rope_angles(spec, [p], backend="exact")[0, 0])
    below = math.floor(exact)
    assert got == (below if below % 2 == 0 else below + 1)  # to the even neighbour
    nearby = math.nextafter(p, math.inf)  # p + 1: 1/2 + 2**-26 past an integer
    near = Fraction(nearby) * Fraction(w)
    got_near = float(rr.rope_angles(spec, [nearby], backend="exact")[0, 0])
    assert got_near == math.ceil(near)  # just above the midpoint: up, whatever the parity
    assert float(rr.rope_angles(spec, [p])[0, 0]) != got or below % 2 == 0


# -- rope_cos_sin ------------------------------------------------------------------------------


@st.composite
def _table_problems(draw: st.DrawFn) -> tuple[Any, ...]:
    dtype_name = draw(st.sampled_from(sorted(DTYPES)))
    n = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["near_tie", "default", "ntk", "yarn", "xpos", "yarn_log"]))
    eps = float(_finfo(DTYPES[dtype_name]).eps)
    kwargs: dict[str, Any] = {}
    if kind == "near_tie":
        # A = 1 + 3 eps / 2 is a tie in the format: A itself at angle 0, and A cos(t), A sin(t)
        # a hair from a midpoint for tiny t
        factor = 1 + 1.5 * eps
        spec = rr.RopeSpec(2 * n, scaling=rr.scaling.YaRN(1.0, 64, attention_factor=factor))
        k = draw(st.integers(12, 40))
        positions = [0.0, 2.0**-k, -(2.0**-k), -0.0]
        return dtype_name, spec, positions, None
    if kind == "ntk":
        kwargs["scaling"] = rr.scaling.DynamicNTK(draw(st.floats(1.5, 16)), max_position=32)
        n = max(n, 2)
    elif kind == "yarn":
        kwargs["scaling"] = rr.scaling.YaRN(4.0, 64, attention_factor=draw(st.floats(0.5, 3)))
    elif kind == "yarn_log":
        kwargs["scaling"] = rr.scaling.YaRN(draw(st.floats(1.5, 40)), 64)
    elif kind == "xpos":
        kwargs["xpos"] = rr.XPos(scale_base=draw(st.sampled_from([4.0, 512.0])))
    spec = rr.RopeSpec(2 * n, **kwargs)
    top = 200 if kind == "xpos" else 2**53
    position = st.one_of(st.integers(0, top).map(float), st.floats(0, float(top)))
    positions = draw(st.lists(position, min_size=1, max_size=3))
    role = draw(st.sampled_from(["query", "key"])) if kind == "xpos" else None
    return dtype_name, spec, positions, role


@given(_table_problems())
# an xPos scale (7/2)**9 past float16's largest value: +-inf, without a warning
@example(problem=("float16", rr.RopeSpec(2, xpos=rr.XPos(scale_base=4.0)), [0.0, 71.0], "query"))
def test_cos_sin_are_the_real_values_rounded_once(problem: Any) -> None:
    dtype_name, spec, positions, role = problem
    dtype = DTYPES[dtype_name]
    cos, sin = rr.rope_cos_sin(spec, np.array(positions), dtype=dtype, role=role, backend="exact")
    assert cos.dtype == np.dtype(dtype)
    seq_len = max(positions) + 1.0
    want_cos = np.empty((len(positions), spec.n_pairs))
    want_sin = np.empty_like(want_cos)
    with mpmath.workprec(_bits(positions)):
        factor = _factor(spec)
        for t, p in enumerate(positions):
            for j in range(spec.n_pairs):
                w = _omega(spec, j, seq_len)
                phi = mpmath.mpf(p) * w
                scale = factor
                if spec.xpos is not None:
                    assert role is not None
                    scale = scale * _xpos_scale(spec, j, p, seq_len, role)
                want_cos[t, j] = _round(scale * mpmath.cos(phi), dtype)
                # sin of a zero angle: the float64 reference's signed zero, sin(p * w)
                zero = math.sin(p * float(w))
                want_sin[t, j] = zero if phi == 0 else _round(scale * mpmath.sin(phi), dtype)
    _same(cos, want_cos)
    _same(sin, want_sin)


@pytest.mark.parametrize("backend", ["reference", "exact"])
def test_cos_sin_past_the_range_of_float16_are_infinite_without_a_warning(backend: str) -> None:
    spec = rr.RopeSpec(2, xpos=rr.XPos(scale_base=4.0))
    # centre floor(72 / 2) = 36: position 0 lies 9 scale bases below it, so the query's
    # scale is zeta**-9 = (7/2)**9, past float16's largest value 65504 (and its half ulp)
    assert Fraction(7, 2) ** 9 > 65504 + 16
    cos, sin = rr.rope_cos_sin(
        spec, np.array([0.0, 71.0]), dtype=np.float16, role="query", backend=backend
    )  # the warnings filter of the suite makes a RuntimeWarning an error
    assert cos[0, 0] == math.inf
    assert sin[0, 0] == 0.0
    with mpmath.workprec(200):  # position 71: (2/7)**(35/4) (cos 71, sin 71), in range
        scale = mpmath.power(mpmath.mpf(2) / 7, mpmath.mpf(35) / 4)
        want = [float(np.float16(float(scale * f(71)))) for f in (mpmath.cos, mpmath.sin)]
    assert [float(cos[1, 0]), float(sin[1, 0])] == pytest.approx(want, rel=2**-10)


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_cos_sin_ties_at_angle_zero_round_to_even(dtype_name: str) -> None:
    # the attention factor is a float64, so only narrower formats can meet a tie at angle 0
    dtype = DTYPES[dtype_name]
    eps = float(_finfo(dtype).eps)
    spec = rr.RopeSpec(2, scaling=rr.scaling.YaRN(1.0, 64, attention_factor=1 + 1.5 * eps))
    cos, sin = rr.rope_cos_sin(spec, [0.0, 2.0**-20], dtype=dtype, backend="exact")
    c = np.asarray(cos, dtype=np.float64)
    assert c[0, 0] == 1 + 2 * eps  # the tie 1 + 1.5 eps goes to the even neighbour
    assert c[1, 0] == 1 + eps  # just below the tie: down
    assert math.copysign(1.0, float(sin[0, 0])) == 1.0


def test_cos_sin_exact_namespaces_and_full_width() -> None:
    torch = pytest.importorskip("torch")
    spec = rr.RopeSpec(8)
    p = torch.arange(5, dtype=torch.int64) * 100_000
    cos, sin = rr.rope_cos_sin(spec, p, dtype=torch.bfloat16, backend="exact")
    assert (cos.dtype, sin.dtype) == (torch.bfloat16, torch.bfloat16)
    want, _ = rr.rope_cos_sin(spec, p.numpy(), dtype=ml_dtypes.bfloat16, backend="exact")
    np.testing.assert_array_equal(cos.float().numpy(), want.astype(np.float32))
    full, _ = rr.rope_cos_sin(spec, p.numpy(), full=True, backend="exact")
    plain, _ = rr.rope_cos_sin(spec, p.numpy(), backend="exact")
    np.testing.assert_array_equal(full, np.concatenate([plain, plain], axis=-1))


def test_table_backends_refuse_bad_values() -> None:
    spec = rr.RopeSpec(4)
    with pytest.raises(ValueError, match="`backend` must be one of 'reference', 'exact'"):
        rr.rope_angles(spec, [1], backend="numba")
    with pytest.raises(ValueError, match=r"`backend`.*got 'fast'"):
        rr.rope_cos_sin(spec, [1], backend="fast")
    with pytest.raises(ValueError, match="`backend`"):
        rr.rerotate(np.ones((2, 4)), spec, from_seq_len=2, to_seq_len=3, backend=None)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="`dtype` must be float64, float32, float16 or bfloat16"):
        rr.rope_cos_sin(spec, torch.arange(3), dtype=torch.float8_e4m3fn, backend="exact")


# -- rerotate ----------------------------------------------------------------------------------


@st.composite
def _rerotations(draw: st.DrawFn) -> tuple[Any, ...]:
    dtype_name = draw(st.sampled_from(sorted(DTYPES)))
    n = draw(st.integers(2, 3))
    kind = draw(st.sampled_from(["ntk", "yarn_log", "linear", "xpos"]))
    kwargs: dict[str, Any] = {"layout": draw(st.sampled_from(["half", "interleaved"]))}
    if kind == "ntk":
        kwargs["scaling"] = rr.scaling.DynamicNTK(draw(st.floats(1.5, 16)), max_position=16)
    elif kind == "yarn_log":
        kwargs["scaling"] = rr.scaling.YaRN(draw(st.floats(1.5, 40)), 64)
    elif kind == "linear":  # the same frequencies at both lengths: an exact zero angle
        kwargs["scaling"] = rr.scaling.Linear(3.0)
    else:
        kwargs["xpos"] = rr.XPos(scale_base=draw(st.sampled_from([2.0, 3.0, 512.0])))
    spec = rr.RopeSpec(2 * n, **kwargs)
    tokens = draw(st.integers(1, 3))
    positions = draw(st.lists(st.integers(0, 40), min_size=tokens, max_size=tokens))
    lengths = draw(st.lists(st.integers(41, 2000).map(float), min_size=2, max_size=2))
    finfo = _finfo(DTYPES[dtype_name])
    value = st.one_of(
        st.floats(-4, 4, width=16),
        st.sampled_from([0.0, -0.0, float(finfo.smallest_subnormal), 1.0]),
    )
    x = draw(st.lists(value, min_size=tokens * 2 * n, max_size=tokens * 2 * n))
    role = draw(st.sampled_from(["query", "key"])) if kind == "xpos" else None
    return dtype_name, spec, positions, lengths, x, role


def _pair_index(spec: rr.RopeSpec, j: int) -> tuple[int, int]:
    n = spec.n_pairs
    return (j, j + n) if spec.layout == "half" else (2 * j, 2 * j + 1)


def _rerotated(
    x: np.ndarray, spec: rr.RopeSpec, positions: list[int], lengths: tuple[float, float],
    role: str | None,
) -> np.ndarray:  # fmt: skip
    """x (tokens, head_dim) times z_to / z_from per pair, rounded once to x's dtype."""
    old, new = lengths
    dtype = DTYPES[x.dtype.name]
    want = np.array(x, dtype=np.float64)
    with mpmath.workprec(BITS):
        for t, p in enumerate(positions):
            for j in range(spec.n_pairs):
                delta = p * (_omega(spec, j, new) - _omega(spec, j, old))
                # the rules drawn here have attention factors that do not depend on length
                scale = mpmath.mpf(1)
                if spec.xpos is not None:
                    assert role is not None
                    scale *= _xpos_scale(spec, j, p, new, role) / _xpos_scale(spec, j, p, old, role)
                c, s = scale * mpmath.cos(delta), scale * mpmath.sin(delta)
                i0, i1 = _pair_index(spec, j)
                a, b = float(x[t, i0]), float(x[t, i1])
                # a zero angle difference: sin is +0, and exact zeros take IEEE's signs
                s_f = 0.0 if delta == 0 else float(s)
                for index, value, zero in (
                    (i0, a * c - b * s, a * float(c) - b * s_f),
                    (i1, b * c + a * s, b * float(c) + a * s_f),
                ):
                    want[t, index] = zero if value == 0 else _round(value, dtype)
    return want


@given(_rerotations())
def test_rerotate_is_the_real_composite_rounded_once(problem: Any) -> None:
    dtype_name, spec, positions, (old, new), values, role = problem
    dtype = DTYPES[dtype_name]
    x = np.array(values, dtype=np.float64).reshape(len(positions), spec.head_dim).astype(dtype)
    got = rr.rerotate(
        x, spec, np.array(positions), from_seq_len=old, to_seq_len=new, role=role, backend="exact"
    )
    assert got.dtype == x.dtype
    _same(got, _rerotated(x, spec, positions, (old, new), role))


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_rerotate_near_ties_are_decided(dtype_name: str) -> None:
    # A tiny angle difference delta (lengths 2**-10 apart) and b chosen so that
    # a cos(delta) - b sin(delta) lands a hair from the midpoint below a = 1.5: b's own
    # rounding leaves it about ulp(b) delta / 2 away, far below 2**-100 in float64.
    dtype = DTYPES[dtype_name]
    eps = float(_finfo(dtype).eps)
    spec = rr.RopeSpec(4, scaling=rr.scaling.DynamicNTK(2.0, max_position=16))
    lengths = (17.0, 17.0 + 2.0**-10)
    with mpmath.workprec(BITS):
        delta = _omega(spec, 1, lengths[1]) - _omega(spec, 1, lengths[0])  # position 1
        a = mpmath.mpf(1.5)
        middle = a - mpmath.mpf(eps) / 2
        b = float((a * mpmath.cos(delta) - middle) / mpmath.sin(delta))
    x = np.array([[0.0, 1.5, 0.0, b]], dtype=dtype)  # pair 1 is (x[1], x[3]) = (a, b)
    got = rr.rerotate(x, spec, np.array([1]), from_seq_len=lengths[0], to_seq_len=lengths[1],
                      backend="exact")  # fmt: skip
    _same(got, _rerotated(x, spec, [1], lengths, None))


def test_rerotate_is_the_identity_where_the_frequencies_agree() -> None:
    # The same frequencies at both lengths: the re-rotation is the identity, exactly.
    spec = rr.RopeSpec(8, scaling=rr.scaling.Linear(2.0))
    k = np.random.default_rng(4).standard_normal((6, 8)).astype(np.float32)
    cached = rr.apply_rope(k, spec, seq_len=6, backend="exact")
    moved = rr.rerotate(cached, spec, from_seq_len=6, to_seq_len=99, backend="exact")
    np.testing.assert_array_equal(moved, cached)
