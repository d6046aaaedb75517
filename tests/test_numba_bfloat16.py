"""bfloat16 in the Numba kernel: float32 arithmetic, one round-to-nearest-even at the end.

Three independent checks: the encoder against ml_dtypes' cast on every rounding case of
a structured sample of float32 bit patterns; whole rotations against the float32 kernel
on the same (exactly widened) values, cast by ml_dtypes; and against a textbook float64
rotation (`tests._independent.rope_half`) rounded once, within the documented bound.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine.dispatch import load_backend
from tests._independent import rope_half

ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)
BF16 = np.dtype(ml_dtypes.bfloat16)


def bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def widened_then_rounded(x: np.ndarray, **kwargs: object) -> np.ndarray:
    """The float32 kernel on x's exact float32 values, cast to bfloat16 by ml_dtypes."""
    wide = rr.apply_rope(x.astype(np.float32), backend="numba", **kwargs)
    return wide.astype(BF16)


def test_encoder_rounds_to_nearest_even_like_ml_dtypes():
    """Every low-half pattern (the bits rounding looks at: ties, just above, just below)
    under upper bits spanning zero, subnormals, normals, the largest finite values (which
    round to infinity), infinity and NaN, both signs."""
    low = np.arange(1 << 16, dtype=np.uint32)
    exponents = np.array([0, 1, 2, 100, 126, 127, 128, 200, 253, 254, 255], dtype=np.uint32)
    mantissa_high = np.array([0, 1, 2, 0x3F, 0x40, 0x7E, 0x7F], dtype=np.uint32) << 16
    signs = np.array([0, 1], dtype=np.uint32) << 31
    patterns = (
        signs[:, None, None, None]
        | (exponents << 23)[None, :, None, None]
        | mantissa_high[None, None, :, None]
        | low[None, None, None, :]
    ).ravel()
    got = _encode(patterns)
    with np.errstate(invalid="ignore", over="ignore"):
        want = patterns.view(np.float32).astype(BF16)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(got[~nan], bits(want)[~nan])
    assert np.all(np.isnan(got.view(BF16).astype(np.float32)[nan])), "NaN must stay NaN"


def _encode(patterns: np.ndarray) -> np.ndarray:
    """float32 bit `patterns` rounded by the kernel's bfloat16 store, run under numba."""
    from numba import njit

    narrow = importlib.import_module("rope_ref.backends.numba.convert").narrow

    @njit
    def run(v, out):
        for i in range(v.shape[0]):
            out[i] = narrow(v[i], out)

    out = np.empty(patterns.shape, dtype=np.int16)  # bfloat16 bits, as the kernel stores them
    run(patterns.view(np.float32), out)
    return out.view(np.uint16)


CASES = [
    # (shape, seq_axis, spec): serial (< 256 rows) and parallel, both layouts, partial rotary
    ((3, 7, 64), -2, rr.RopeSpec(64)),
    ((1, 96, 4, 64), -3, rr.RopeSpec(64, layout="interleaved")),
    ((2, 40, 4, 24), -3, rr.RopeSpec(24, rotary_dim=8, rotary_start=3, base=500.0)),
]


@pytest.mark.parametrize(("shape", "seq_axis", "spec"), CASES)
@pytest.mark.parametrize("how", ["new", "out", "in_place", "strided"])
def test_equals_the_float32_kernel_rounded_once(shape, seq_axis, spec, how):
    rng = np.random.default_rng(len(shape) + spec.head_dim)
    base = (rng.standard_normal(shape) * 8.0).astype(BF16)
    base.flat[:4] = [np.inf, -np.inf, np.nan, 3.0e38]  # kept, rounded or overflowing
    x = base[..., ::-1] if how == "strided" else base  # a reversed (negative-stride) view
    kwargs = {"spec": spec, "seq_axis": seq_axis, "offset": 11}
    with np.errstate(invalid="ignore", over="ignore"):
        want = widened_then_rounded(np.ascontiguousarray(x), **kwargs)
    before = bits(x).copy()
    if how == "out":
        out = np.empty_like(x)
        got = rr.apply_rope(x, backend="numba", out=out, **kwargs)
        assert got is out
    elif how == "in_place":
        x = x.copy()
        got = rr.apply_rope(x, backend="numba", out=x, **kwargs)
        assert got is x
    else:
        got = rr.apply_rope(x, backend="numba", **kwargs)
        np.testing.assert_array_equal(bits(x), before)  # the input is not mutated
    assert got.dtype == BF16
    np.testing.assert_array_equal(bits(got), bits(want))


def test_positions_grids_take_the_kernel_too():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9, 32)).astype(BF16)
    positions = rng.integers(0, 5000, size=(2, 9))
    got = rr.apply_rope(x, positions=positions, backend="numba")
    np.testing.assert_array_equal(bits(got), bits(widened_then_rounded(x, positions=positions)))


def test_within_one_ulp_of_the_float64_rotation_rounded_once():
    """|kernel - RNE(exact)| <= 1 ulp of the result, plus 4 * 2**-24 of the pair's norm:
    float32 tables and products are within about 4 * 2**-24 * r of the exact result, which
    only shows where cancellation makes an output ~2**16 times smaller than its pair."""
    spec = rr.RopeSpec(128)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 512, 8, 128)).astype(BF16)
    got = rr.apply_rope(x, spec, seq_axis=-3, offset=1000, backend="numba").astype(np.float64)
    x64 = x.astype(np.float64)
    theta = 10000.0 ** (-np.arange(64) * 2.0 / 128)
    positions = (1000.0 + np.arange(512))[None, :, None]
    exact = rope_half(x64, positions, theta)
    rounded = exact.astype(BF16).astype(np.float64)  # ml_dtypes rounds float64 once (RNE)
    magnitude = np.maximum(np.abs(rounded), 2.0**-126)
    ulp = 2.0 ** (np.floor(np.log2(magnitude)) - 7)
    norm = np.sqrt(x64[..., :64] ** 2 + x64[..., 64:] ** 2)
    r = np.concatenate([norm, norm], axis=-1)
    err = np.abs(got - rounded)
    assert np.all(err <= ulp + 4 * 2.0**-24 * r)
    assert np.mean(err <= ulp) > 0.9999  # beyond one ulp only by cancellation, rarely


def test_kernel_refuses_tables_of_another_dtype():
    x = np.ones((2, 8), dtype=BF16)
    cos = np.ones((2, 4), dtype=np.float64)
    with pytest.raises(TypeError, match=r"`cos` and `sin` must be float32 for bfloat16 `x`"):
        load_backend("numba").rotate(x, cos, cos, layout="half", rotary_start=0, inverse=False)


@pytest.mark.parametrize(
    ("head_dim", "rotary"),
    [(32, None), (64, None), (128, None), (160, None), (48, None), (72, (32, 8))],
)
@pytest.mark.parametrize("how", ["new", "in_place", "threads"])
def test_rows_rounded_sixteen_at_a_time_equal_the_loop(head_dim, rotary, how):
    """Where the processor has AVX512-BF16, half-layout rows of a multiple of 16 pairs
    round 16 results per instruction (`backends/numba/bf16_rows.py`), and vectors with a
    zero or subnormal result by the loop's integer rounding: every element is still the
    float32 kernel's result rounded once by ml_dtypes. Results here: subnormal (inputs
    near 1e-39), zero (zero rows), overflowing (3.3e38 pairs), infinite and NaN, and
    ordinary values; 48 features (24 pairs) take the loop; 16 pairs from feature 8 of 72
    (partial rotary), the features around them copied."""
    rng = np.random.default_rng(head_dim)
    rows = 600 if how == "threads" else 12
    shape = (1, rows, 2, head_dim)
    values = rng.standard_normal(shape) * rng.choice([1e-39, 1e-3, 1.0, 3e3], shape)
    x = values.astype(BF16)
    x[0, 1] = 0.0  # a token of zeros: zero results
    x[0, 2, 0, 3] = 3.3e38  # with its pair partner below: a sum past the largest float
    x[0, 2, 0, 3 + head_dim // 2] = -3.3e38
    x[0, 3, 1, 0] = np.nan
    x[0, 4, 0, 5] = np.inf
    x[0, 5, 1, :] = 1e-39  # subnormal inputs: subnormal results
    x[0, 6, 0, 7] = 1e-39  # one subnormal result among ordinary ones
    if rotary is None:
        spec = rr.RopeSpec(head_dim)
    else:
        spec = rr.RopeSpec(head_dim, rotary_dim=rotary[0], rotary_start=rotary[1])
    kwargs = {"spec": spec, "seq_axis": 1, "offset": 777}
    with np.errstate(invalid="ignore", over="ignore"):
        want = widened_then_rounded(x, **kwargs)
    if how == "in_place":
        got = x.copy()
        assert rr.apply_rope(got, backend="numba", out=got, **kwargs) is got
    else:
        got = rr.apply_rope(x, backend="numba", **kwargs)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_the_sixteen_lane_rows_run_where_the_processor_has_them():
    bf16_rows = importlib.import_module("rope_ref.backends.numba.bf16_rows")
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            has = "avx512_bf16" in f.read().split()
    except OSError:
        has = False
    assert has == bf16_rows.HARDWARE_BF16
    if not has:
        pytest.skip("needs an x86 processor with AVX512-BF16")
    from numba import njit

    kernel = load_backend("numba")
    fresh = njit(nogil=True)(kernel._rows_serial.py_func)  # compiled afresh: readable
    x = np.zeros((1, 4, 2, 64), dtype=np.int16)
    cos = np.ones((4, 32), dtype=np.float32)
    fresh(x, np.empty_like(x), cos, cos, 0, (0, 1, 0), 0, 0, np.float32(1.0), False)
    asm = str(fresh.inspect_asm(fresh.signatures[0]))
    assert "vcvtneps2bf16" in asm
