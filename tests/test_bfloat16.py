"""bfloat16 (and float16) through the public functions, rounded once.

The rounding is checked against exact rational arithmetic (`fractions.Fraction`), and
NumPy's direct float64 -> float16 cast as a second, independent source for float16.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref._core.compat import array_namespace
from rope_ref._core.rounding import round_once, to_grid
from tests._helpers import FORMATS, exact_round
from tests.cuda_host.cases import DTYPES

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
NP = array_namespace(np.empty(0))


def as_float64(a, name):
    return np.asarray(a).astype(np.float64) if name == "float16" else np.asarray(a, np.float64)


def hard_values(name: str) -> np.ndarray:
    """Ties, values next to ties (where rounding through float32 goes wrong), subnormals,
    the overflow threshold, signed zeros, infinities."""
    bits, min_exponent, max_exponent = FORMATS[name]
    grid = 1 + np.arange(0, 2**bits, 7) * 2.0**-bits
    ties = np.concatenate([grid * 2.0**e for e in (-3, 0, 9)]) + 2.0 ** -(bits + 1)
    near = np.concatenate([ties, np.nextafter(ties, 0), np.nextafter(ties, 4), ties + 2.0**-30])
    smallest = 2.0 ** (min_exponent - bits)
    subnormal = smallest * np.array([0.5, 1.5, 2.5, 3.0, 2**bits - 0.5, 2**bits + 0.5])
    largest = (2 - 2.0**-bits) * 2.0**max_exponent
    top = np.array([largest, largest + 2.0 ** (max_exponent - bits - 1), np.nextafter(
        largest + 2.0 ** (max_exponent - bits - 1), 0), 1e300])  # fmt: skip
    special = np.array([0.0, -0.0, np.inf, -np.inf])
    values = np.concatenate([near, subnormal, top, special])
    return np.concatenate([values, -values])


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_to_grid_rounds_once_on_hard_values(name):
    values = hard_values(name)
    got = to_grid(values, name, xp=NP)
    expected = np.array([exact_round(float(v), name) for v in values])
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[finite], expected[finite])
    assert np.all(np.abs(got[~finite]) >= 2.0 ** (FORMATS[name][2] + 1))  # cast sends to inf
    # every cast keeps what is on the grid: the final cast is exact
    with np.errstate(over="ignore"):  # NumPy warns when a float16 cast overflows
        cast = as_float64(round_once(values, DTYPES[name], xp=NP), name)
    np.testing.assert_array_equal(cast, expected)
    assert np.array_equal(np.signbit(cast), np.signbit(expected))


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e40, max_value=1e40))
def test_to_grid_matches_exact_rounding(value):
    for name in FORMATS:
        with np.errstate(over="ignore"):
            got = as_float64(round_once(np.array([value]), DTYPES[name], xp=NP), name)[0]
        assert got == exact_round(value, name)


def test_float16_agrees_with_numpys_direct_cast():
    """NumPy casts float64 to float16 directly (no float32 step): a second exact source."""
    rng = np.random.default_rng(3)
    values = np.concatenate([
        hard_values("float16"), rng.standard_normal(10**5) * 2.0 ** rng.integers(-30, 17, 10**5),
    ])  # fmt: skip
    with np.errstate(over="ignore"):
        direct = values.astype(np.float16)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(round_once(values, np.float16, xp=NP), direct)


# ---- the reference backend rounds once, in every namespace ---------------------------------


def tie_spec(name):
    """An attention factor that puts the rotated x = 1 just above a tie of format `name`:
    rounding through float32 lands on the tie and goes to even (1), one rounding goes up."""
    bits = FORMATS[name][0]
    factor = 1 + 2.0 ** -(bits + 1) + 2.0**-40
    scaling = rr.scaling.YaRN(2.0, original_max_position=64, attention_factor=factor)
    return rr.RopeSpec(head_dim=4, scaling=scaling), 1 + 2.0**-bits


def dtype_in(xp, name):
    """`name` in namespace `xp`; NumPy and CuPy hold bfloat16 as ml_dtypes' type."""
    if hasattr(xp, name):
        return getattr(xp, name)
    if name == "bfloat16" and xp.__name__.split(".")[-1] in ("numpy", "cupy"):
        return BF16
    pytest.skip(f"{xp.__name__} has no {name}")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_reference_rounds_once_past_a_tie(xp, name):
    dtype = dtype_in(xp, name)
    spec, expected = tie_spec(name)
    x = xp.ones((1, 4), dtype=dtype)
    y = rr.apply_rope(x, spec, xp.asarray([0]))
    assert y.dtype == dtype
    assert float(xp.astype(y, xp.float32)[0, 0]) == expected
    cos, _ = rr.rope_cos_sin(spec, xp.asarray([0]), dtype=dtype)
    assert float(xp.astype(cos, xp.float32)[0, 0]) == expected


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_reference_equals_exact_rounding_of_float64(np_rng, name, layout):
    x = np_rng.standard_normal((3, 50, 4, 32)).astype(DTYPES[name])
    spec = rr.RopeSpec(head_dim=32, rotary_dim=16, rotary_start=8, layout=layout)
    positions = np_rng.integers(0, 10**6, size=(3, 50, 1))
    y = rr.apply_rope(x, spec, positions)
    y64 = rr.apply_rope(x.astype(np.float64), spec, positions)
    expected = np.vectorize(lambda v: exact_round(float(v), name))(y64)
    np.testing.assert_array_equal(as_float64(y, name), expected)


# ---- every public function takes bfloat16 ------------------------------------------------


def as_torch(values):
    """The same bfloat16 values as a PyTorch tensor."""
    torch = pytest.importorskip("torch")
    return torch.from_numpy(values.view(np.int16)).view(torch.bfloat16)


def as_numpy(t):
    return t.view(__import__("torch").int16).numpy().view(BF16)


def bits(a):
    return np.asarray(a).view(np.uint16)


def test_public_functions_take_bfloat16(np_rng):
    x = np_rng.standard_normal((2, 6, 3, 16)).astype(BF16)
    spec = rr.RopeSpec(head_dim=16, base=500.0)
    y = rr.apply_rope(x, spec, seq_axis=-3)
    assert y.dtype == BF16
    np.testing.assert_array_equal(
        bits(rr.apply_rope(x, spec, seq_axis=-3, backend="auto")), bits(y)
    )
    np.testing.assert_array_equal(bits(as_numpy(rr.apply_rope(as_torch(x), spec, seq_axis=-3))),
                                  bits(y))  # fmt: skip
    q2, k2 = rr.apply_rope_qk(x[:, 4:], x, spec, seq_axis=-3)  # 2 new queries, 6 keys
    assert q2.dtype == k2.dtype == BF16
    np.testing.assert_array_equal(bits(k2), bits(y))
    np.testing.assert_array_equal(bits(q2), bits(y[:, 4:]))
    cos, sin = rr.rope_cos_sin(spec, np.arange(6), dtype=ml_dtypes.bfloat16)
    for table, table64 in zip((cos, sin), rr.rope_cos_sin(spec, np.arange(6)), strict=True):
        assert table.dtype == BF16
        expected = np.vectorize(lambda v: exact_round(float(v), "bfloat16"))(table64)
        np.testing.assert_array_equal(table.astype(np.float64), expected)
    back = rr.convert_layout(rr.convert_layout(x, spec), spec, src="half", dst="interleaved")
    np.testing.assert_array_equal(bits(back), bits(x))
    w = x.reshape(-1, 16)[:6].T.copy()  # (16, 6): the rows of one head
    order = rr.feature_order(spec, "interleaved", "half")
    np.testing.assert_array_equal(bits(rr.permute_weights(w, n_heads=1)), bits(w[order]))
    ntk = rr.RopeSpec(head_dim=16, scaling=rr.scaling.DynamicNTK(4.0, max_position=4))
    moved = rr.rerotate(x, ntk, from_seq_len=6, to_seq_len=50, seq_axis=-3)
    moved64 = rr.rerotate(x.astype(np.float64), ntk, from_seq_len=6, to_seq_len=50, seq_axis=-3)
    assert moved.dtype == BF16
    expected = np.vectorize(lambda v: exact_round(float(v), "bfloat16"))(moved64)
    np.testing.assert_array_equal(moved.astype(np.float64), expected)


def test_numba_takes_bfloat16_and_auto_picks_it(np_rng):
    if rr.available_backends()["numba"] is not None:
        pytest.skip("numba is not installed")
    x = np_rng.standard_normal((5, 8)).astype(BF16)
    y = rr.apply_rope(x, backend="numba")
    assert y.dtype == BF16
    np.testing.assert_array_equal(bits(rr.apply_rope(x, backend="auto")), bits(y))
