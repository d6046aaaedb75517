"""backend="exact" against an mpmath computation written here, at 400 bits.

The oracle below evaluates the real-number RoPE from the formulas (not from rope_ref's
code) and rounds it to the target format by comparing the value with the two neighbours
of a candidate, so a wrong rounding, a double rounding, a lost subnormal or a wrong sign
of zero all show as a mismatch.
"""

from __future__ import annotations

import importlib
import math
from fractions import Fraction
from typing import Any

import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rope_ref as rr

DTYPES: dict[str, Any] = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}
UINT = {8: np.uint64, 4: np.uint32, 2: np.uint16}


def _finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(dtype) if dtype is ml_dtypes.bfloat16 else np.finfo(dtype)


BITS = 400


def _oracle_omega(spec: rr.RopeSpec, j: int) -> Any:
    """The inverse frequency of pair j from the formulas of the docs."""
    if spec.freqs is not None:
        return mpmath.mpf(float(spec.freqs[j]))
    d = spec.rotary_dim
    assert d is not None
    theta = mpmath.power(mpmath.mpf(spec.base), mpmath.mpf(-2 * j) / d)
    rule = spec.scaling
    if isinstance(rule, rr.scaling.Linear):
        return theta / mpmath.mpf(rule.factor)
    if isinstance(rule, rr.scaling.NTKAware):
        return theta * mpmath.power(mpmath.mpf(rule.factor), mpmath.mpf(-2 * j) / (d - 2))
    if isinstance(rule, rr.scaling.YaRN):
        lo, hi = rule.correction_range(base=spec.base, rotary_dim=d)
        ramp = (Fraction(j) - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
        ramp = min(max(ramp, Fraction(0)), Fraction(1))
        r = mpmath.mpf(ramp.numerator) / ramp.denominator
        return theta * (r / mpmath.mpf(rule.factor) + 1 - r)
    assert rule is None
    return theta


def _oracle_factor(spec: rr.RopeSpec) -> Any:
    rule = spec.scaling
    if isinstance(rule, rr.scaling.YaRN):
        assert rule.attention_factor_value is not None
        return mpmath.mpf(rule.attention_factor_value)
    return mpmath.mpf(1)


def _neighbours(value: Any, dtype: Any) -> list[Any]:
    """`value` (a scalar of `dtype`) and the next values down and up, by their bits."""
    arr = np.array([value], dtype=dtype)
    bits = arr.view(UINT[arr.itemsize])
    out = [arr[0]]
    for step in (1, -1):
        moved = (bits.astype(np.int64) + step).astype(bits.dtype)
        neighbour = moved.view(dtype)[0]
        if np.isfinite(np.float64(neighbour)):
            out.append(neighbour)
    return out


def _round(value: Any, dtype: Any) -> float:
    """Nearest-even rounding of the mpf `value` to `dtype`, returned as float64."""
    if value == 0:
        return 0.0
    start = np.array([float(value)]).astype(np.float32 if dtype is ml_dtypes.bfloat16 else dtype)
    first = np.array(start, dtype=dtype)[0]
    if not np.isfinite(np.float64(first)):
        top = _finfo(dtype).max
        first = np.array([math.copysign(float(top), float(value))], dtype=dtype)[0]
    candidates = set()
    for c in _neighbours(first, dtype):
        candidates.update(_neighbours(c, dtype))
    best = sorted(
        candidates,
        key=lambda c: (
            abs(mpmath.mpf(float(c)) - value),
            int(np.array([c], dtype=dtype).view(UINT[np.dtype(dtype).itemsize])[0]) & 1,
        ),
    )[0]
    top = float(_finfo(dtype).max)
    ulp_top = top - float(_neighbours(np.array([top], dtype=dtype)[0], dtype)[1])
    if abs(value) >= mpmath.mpf(top) + mpmath.mpf(ulp_top) / 2:
        return math.copysign(math.inf, float(value))
    return math.copysign(float(best), float(value))


def _oracle(
    x: np.ndarray, spec: rr.RopeSpec, positions: list[float], *, inverse: bool, role: str | None
) -> np.ndarray:
    """Expected output for x of shape (seq, head_dim), positions one per token."""
    dtype = x.dtype.type if x.dtype != np.dtype(ml_dtypes.bfloat16) else ml_dtypes.bfloat16
    out = np.array(x, dtype=np.float64)
    n, start = spec.n_pairs, spec.rotary_start
    # cos(t) = 1 - t**2/2 needs twice the bits of a tiny t, a huge t its integer bits
    exponents = [math.frexp(p)[1] for p in positions if p != 0]
    bits = BITS + 2 * max([0, *(-e for e in exponents)]) + max([0, *exponents])
    with mpmath.workprec(bits):
        factor = _oracle_factor(spec)
        for t, p in enumerate(positions):
            for j in range(n):
                if spec.layout == "half":
                    i0, i1 = start + j, start + j + n
                else:
                    i0, i1 = start + 2 * j, start + 2 * j + 1
                a, b = float(x[t, i0]), float(x[t, i1])
                phi = mpmath.mpf(p) * _oracle_omega(spec, j) * (-1 if inverse else 1)
                scale = factor
                if spec.xpos is not None:
                    d = spec.rotary_dim
                    assert d is not None
                    zeta = mpmath.mpf(10 * j + 2 * d) / (7 * d)
                    centre = math.floor((max(positions) + 1) / 2)
                    power = (mpmath.mpf(p) - centre) / mpmath.mpf(spec.xpos.scale_base)
                    power = power if role == "query" else -power
                    if power == int(power):  # a rational scale: exact where it is dyadic
                        ratio = Fraction(10 * j + 2 * d, 7 * d) ** int(power)
                        scale *= mpmath.mpf(ratio.numerator) / ratio.denominator
                    else:
                        scale *= zeta**power
                c, s = mpmath.cos(phi) * scale, mpmath.sin(phi) * scale
                values = (a * c - b * s, b * c + a * s)
                # an exact zero takes the sign IEEE arithmetic gives a cos + (-b) sin with
                # the signs of the real cos and sin; sin of a zero angle is the float64
                # sin(p * w), negated for the inverse (-0.0 for p = -0.0 or inverse)
                c_f, s_f = (1.0 if v > 0 else -1.0 for v in (c, s))  # only signs matter
                if phi == 0:
                    angle = p * float(_oracle_omega(spec, j))
                    s_f = math.sin(angle) * (-1.0 if inverse else 1.0)
                for index, value, zero_sign in (
                    (i0, values[0], a * c_f + (-b) * s_f),
                    (i1, values[1], b * c_f + a * s_f),
                ):
                    exact_zero = value == 0
                    out[t, index] = zero_sign if exact_zero else _round(value, dtype)
    return out


def _same(got: np.ndarray, want: np.ndarray) -> None:
    g = np.asarray(got, dtype=np.float64)
    both_nan = np.isnan(g) & np.isnan(want)
    equal = (g == want) & (np.signbit(g) == np.signbit(want))
    bad = np.argwhere(~(equal | both_nan))
    assert bad.size == 0, [(tuple(i), g[tuple(i)], want[tuple(i)]) for i in bad[:5]]


def _values(dtype_name: str) -> st.SearchStrategy[float]:
    finfo = _finfo(DTYPES[dtype_name])
    tiny = float(finfo.smallest_subnormal)
    return st.one_of(
        st.floats(-4.0, 4.0, width=32),
        st.sampled_from([0.0, -0.0, tiny, -tiny, 3 * tiny, float(finfo.tiny)]),
        st.floats(-1e4, 1e4).map(lambda v: v * tiny),
    )


@st.composite
def _problems(draw: st.DrawFn) -> tuple[Any, ...]:
    dtype_name = draw(st.sampled_from(sorted(DTYPES)))
    n_pairs = draw(st.integers(1, 4))
    rotary_start = draw(st.integers(0, 2))
    head_dim = rotary_start + 2 * n_pairs + draw(st.integers(0, 1))
    kind = draw(st.sampled_from(["default", "freqs", "linear", "ntk", "yarn", "xpos"]))
    kwargs: dict[str, Any] = {
        "rotary_dim": 2 * n_pairs,
        "rotary_start": rotary_start,
        "layout": draw(st.sampled_from(["half", "interleaved"])),
    }
    if kind == "freqs":
        kwargs["freqs"] = draw(st.lists(st.floats(0, 10), min_size=n_pairs, max_size=n_pairs))
    elif kind == "linear":
        kwargs["scaling"] = rr.scaling.Linear(draw(st.floats(0.5, 64)))
    elif kind == "ntk" and n_pairs > 1:
        kwargs["scaling"] = rr.scaling.NTKAware(draw(st.floats(1.5, 64)))
    elif kind == "yarn":
        factor = draw(st.sampled_from([1.5, 1.25, 3.0]))  # x * 1.5 lands on ties often
        kwargs["scaling"] = rr.scaling.YaRN(4.0, 64, attention_factor=factor)
    elif kind == "xpos":
        kwargs["xpos"] = rr.XPos(scale_base=draw(st.sampled_from([8.0, 512.0])))
    spec = rr.RopeSpec(head_dim=head_dim, **kwargs)
    positions = draw(
        st.lists(
            st.one_of(
                st.integers(0, 2**53).map(float),
                st.sampled_from([0.0, 1.0, 2.0**-30, 1e6, 2.0**53, 2.0**60]),
                st.floats(-1e6, 1e6),
            ),
            min_size=1,
            max_size=3,
        )
    )
    if kind in ("linear", "ntk", "yarn"):
        positions = [abs(p) for p in positions]  # seq_len = max + 1 must be positive
    if kind == "xpos":
        positions = [float(round(p)) % 64 for p in positions]  # the scale stays finite
    x = draw(
        st.lists(_values(dtype_name), min_size=head_dim * len(positions),
                 max_size=head_dim * len(positions))
    )  # fmt: skip
    return (
        dtype_name,
        spec,
        positions,
        x,
        draw(st.booleans()),
        draw(st.sampled_from(["query", "key"])),
    )


@given(_problems())
def test_exact_is_correctly_rounded(problem: tuple[Any, ...]) -> None:
    dtype_name, spec, positions, values, inverse, role = problem
    x = np.array(values, dtype=np.float64).reshape(len(positions), spec.head_dim)
    x = x.astype(DTYPES[dtype_name])
    assume(np.all(np.isfinite(x.astype(np.float64))))
    role = role if spec.xpos is not None else None
    got = rr.apply_rope(x, spec, np.array(positions), inverse=inverse, role=role, backend="exact")
    assert got.dtype == x.dtype
    _same(got, _oracle(x, spec, positions, inverse=inverse, role=role))


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_ties_round_to_even(dtype_name: str) -> None:
    # At position 0 the result is factor * x exactly; x * 1.5 with x odd on its grid is a tie.
    dtype = DTYPES[dtype_name]
    eps = float(_finfo(dtype).eps)
    x = np.array([[1 + eps, 1 + 3 * eps, -(1 + eps), 2 - eps]], dtype=dtype)
    spec = rr.RopeSpec(head_dim=4, scaling=rr.scaling.YaRN(4.0, 64, attention_factor=1.5))
    got = rr.apply_rope(x, spec, np.array([0]), backend="exact")
    want = _oracle(x, spec, [0.0], inverse=False, role=None)
    assert want[0, 0] == 1.5 + 2 * eps  # 1.5 + 1.5 eps: a tie, to the even neighbour
    _same(got, want)


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_near_ties_are_decided(dtype_name: str) -> None:
    # a' = a cos(t) - b sin(t) with t = 2**-k: b chosen so that b t is half an ulp of a,
    # so a' lies just below the midpoint a - ulp/2 (by about a t**2 / 2).
    dtype = DTYPES[dtype_name]
    eps = float(_finfo(dtype).eps)
    k = 20
    a = 1.5
    b = eps / 2 * 2.0**k
    x = np.array([[a, b], [a, -b], [-a, b]], dtype=dtype)
    spec = rr.RopeSpec(head_dim=2, freqs=[1.0])
    positions = [2.0**-k] * 3
    got = rr.apply_rope(x, spec, np.array(positions), backend="exact")
    _same(got, _oracle(x, spec, positions, inverse=False, role=None))


def test_signed_zeros_and_subnormal_results() -> None:
    tiny = float(_finfo(np.float32).smallest_subnormal)
    x = np.array([[-0.0, -0.0], [0.0, -0.0], [tiny, 0.0], [-tiny, tiny]], dtype=np.float32)
    spec = rr.RopeSpec(head_dim=2)
    positions = [0.0, 3.0, 1.0, 5.0]
    for inverse in (False, True):
        got = rr.apply_rope(x, spec, np.array(positions), inverse=inverse, backend="exact")
        _same(got, _oracle(x, spec, positions, inverse=inverse, role=None))


def test_cancellation_in_float64_is_exact() -> None:
    # Pairs nearly parallel to the rotated axis: a cos - b sin cancels to far below |a|.
    spec = rr.RopeSpec(head_dim=2, freqs=[1.0])
    p = 1000.0
    x = np.array([[math.sin(p), math.cos(p)], [math.sin(p) * 3, math.cos(p) * 3]])
    got = rr.apply_rope(x, spec, np.array([p, p]), backend="exact")
    _same(got, _oracle(x, spec, [p, p], inverse=False, role=None))


def test_other_namespaces_and_qk() -> None:
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((3, 2, 8)).astype(np.float32)
    spec = rr.RopeSpec(head_dim=8)
    want = rr.apply_rope(x, spec, seq_axis=0, backend="exact")
    got = rr.apply_rope(torch.from_numpy(x).bfloat16(), spec, seq_axis=0, backend="exact")
    assert got.dtype == torch.bfloat16
    want_bf16 = rr.apply_rope(x.astype(ml_dtypes.bfloat16), spec, seq_axis=0, backend="exact")
    np.testing.assert_array_equal(got.float().numpy(), want_bf16.astype(np.float32))
    q2, k2 = rr.apply_rope_qk(x, x, spec, seq_axis=0, backend="exact")
    np.testing.assert_array_equal(q2, want)
    np.testing.assert_array_equal(k2, want)


def test_exact_refuses_out_and_forms() -> None:
    x = np.ones((2, 4))
    with pytest.raises(ValueError, match="`out`"):
        rr.apply_rope(x, backend="exact", out=np.empty_like(x))
    with pytest.raises(ValueError, match="`form`"):
        rr.apply_rope(x, backend="exact", form="complex")


@pytest.mark.parametrize(
    "rule",
    [
        rr.scaling.Linear(3.0),
        rr.scaling.NTKAware(8.0),
        rr.scaling.DynamicNTK(4.0, max_position=4096),
        rr.scaling.YaRN(4.0, 4096),
        rr.scaling.YaRN(4.0, 4096, mscale=1.0, mscale_all_dim=0.5, truncate=False),
        rr.scaling.Llama3(8.0, original_max_position=8192),
    ],
    ids=repr,
)
@pytest.mark.parametrize("seq_len", [100.0, 20000.0])
def test_exact_frequencies_are_the_float64_ones_to_rounding(rule: Any, seq_len: float) -> None:
    # The formulas in real arithmetic and the float64 code of the rules are independent
    # implementations: they agree to a few float64 roundings (a wrong formula is off by far more).
    exact_frequencies = importlib.import_module("rope_ref.backends.exact.frequencies")

    spec = rr.RopeSpec(head_dim=64, scaling=rule)
    ctx = mpmath.MPContext()
    ctx.prec = 200
    exact = np.array([float(w) for w in exact_frequencies.omegas(ctx, spec, seq_len)])
    np.testing.assert_allclose(exact, rr.inv_freq(spec, seq_len), rtol=1e-14, atol=0)
    factor = float(exact_frequencies.attention_factor(ctx, spec, seq_len))
    assert factor == pytest.approx(rr.attention_factor(spec, seq_len), rel=1e-15)


def _interleaved_to_half(y: np.ndarray) -> np.ndarray:
    """Pairs (0, 1), (2, 3), ... rewritten as first members, then second members."""
    return np.concatenate([y[..., 0::2], y[..., 1::2]], axis=-1)


def test_output_layout_writes_the_pairs_in_the_other_order() -> None:
    written = rr.RopeSpec(32, layout="interleaved", output_layout="half")
    plain = rr.RopeSpec(32, layout="interleaved")
    x = np.random.default_rng(3).uniform(-1, 1, (2, 5, 32)).astype(np.float32)
    positions = np.array([0, 1, 70000, 123456, 2**40])
    kw: dict[str, Any] = {"seq_axis": -2, "backend": "exact"}
    forward = rr.apply_rope(x, written, positions, **kw)
    expected = _interleaved_to_half(rr.apply_rope(x, plain, positions, **kw))
    np.testing.assert_array_equal(forward, expected)
    back = rr.apply_rope(_interleaved_to_half(x), written, positions, inverse=True, **kw)
    np.testing.assert_array_equal(back, rr.apply_rope(x, plain, positions, inverse=True, **kw))


def test_xpos_scales_past_float64_round_to_infinity_and_zero() -> None:
    # Keys at 0 and 40000 around the centre 20000 with scale_base 8: zeta ** (-+2500), about
    # 1e-1360 and 1e+1360. The reference refuses them (float64 overflows); exact rounds the
    # real values, to zero and to infinity, with their signs.
    spec = rr.RopeSpec(head_dim=8, xpos=rr.XPos(scale_base=8.0))
    x = np.array([[1, -2, 0, -0.0, 1e-30, 3, 0, 1]] * 2, dtype=np.float32)
    positions = [0.0, 40000.0]
    for role in ("query", "key"):
        got = rr.apply_rope(x, spec, np.array(positions), role=role, backend="exact")
        with np.errstate(over="ignore"):
            want = _oracle(x, spec, positions, inverse=False, role=role)
        _same(got, want)
        assert np.isinf(want).any()
    with pytest.raises(ValueError, match="too far from the xPos centre"):
        rr.apply_rope(x, spec, np.array(positions), role="key")
