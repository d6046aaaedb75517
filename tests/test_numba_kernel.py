"""The Numba CPU kernel against the reference backend: differential properties and contract."""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading
import tracemalloc
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref._engine.dispatch import load_backend

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

EPS: dict[Any, float] = {np.float16: 2.0**-11, np.float32: 2.0**-24, np.float64: 2.0**-53}
DTYPES: list[Any] = [np.float16, np.float32, np.float64]
try:
    import ml_dtypes
except ModuleNotFoundError:  # pragma: no cover - ml_dtypes comes with the test set-up
    pass
else:
    EPS[ml_dtypes.bfloat16] = 2.0**-8
    DTYPES.append(ml_dtypes.bfloat16)


def tolerance(x: np.ndarray, dtype: type) -> np.ndarray:
    """Per-element bound on |numba - reference|, derived from the rotation arithmetic.

    The reference rotates in float64 and rounds once. The kernel rounds cos and sin to the
    compute dtype (float32 for 16/32-bit x), then forms a*c - b*s: two products and a
    sum, each rounded. With r the norm of the pair, every term is at most r, so the
    kernel is within 5 eps_compute * r of the exact result, plus the final rounding of
    both results to x's dtype (half an ulp each: eps_x * r). A bound per element by the
    largest pair norm of its row keeps this simple and still tight to a few ulp.
    """
    compute = np.float64 if dtype == np.float64 else np.float32
    r = np.max(np.abs(x.astype(np.float64)), axis=-1, keepdims=True) * np.sqrt(2.0)
    return r * (5 * EPS[compute] + 2 * EPS[dtype]) + np.finfo(np.float64).tiny


def assert_matches_reference(got: np.ndarray, want: np.ndarray, x: np.ndarray) -> None:
    assert got.dtype == want.dtype == x.dtype
    assert got.shape == want.shape == x.shape
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bound = tolerance(x, x.dtype.type)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), f"error {err[worst]:.3g} > {bound[worst]:.3g} at {worst}"


@st.composite
def kernel_cases(draw: st.DrawFn) -> dict:
    """x (possibly a strided view), spec, positions, seq_axis and options."""
    dtype = draw(st.sampled_from(DTYPES))
    n_pairs = draw(st.integers(1, 40))
    rotary_dim = 2 * n_pairs
    rotary_start = draw(st.integers(0, 5))
    head_dim = rotary_start + rotary_dim + draw(st.integers(0, 5))
    layout = draw(st.sampled_from(["half", "interleaved"]))
    spec = rr.RopeSpec(
        head_dim,
        rotary_dim=rotary_dim,
        rotary_start=rotary_start,
        layout=layout,
        base=draw(st.sampled_from([10000.0, 500000.0, 1e6])),
    )
    ndim = draw(st.integers(2, 5))
    lead = draw(st.lists(st.integers(1, 6), min_size=ndim - 1, max_size=ndim - 1))
    seq_axis = draw(st.integers(-ndim, -2))
    shape = (*lead, head_dim)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = (rng.standard_normal(shape) * draw(st.sampled_from([1e-3, 1.0, 1e3]))).astype(dtype)
    view = draw(st.sampled_from(["contiguous", "transposed", "reversed", "sliced", "fortran"]))
    x = strided_copy(base, view, rng)
    kind = draw(st.sampled_from(["none", "offset", "ints", "floats", "grid"]))
    positions: Any = None
    offset = 0
    if kind == "offset":
        offset = draw(st.integers(0, 2**24))
    elif kind == "ints":
        positions = rng.integers(0, 2**20, size=x.shape[seq_axis])
    elif kind == "floats":
        positions = rng.uniform(-1e4, 1e6, size=x.shape[seq_axis])
    elif kind == "grid":  # per-batch positions: (batch, 1, ..., seq) broadcast over heads
        grid = [1] * (ndim - 1)
        grid[0] = x.shape[0]
        grid[seq_axis + 1] = x.shape[seq_axis]
        positions = rng.integers(0, 2**16, size=grid)
    return {
        "x": x,
        "spec": spec,
        "positions": positions,
        "offset": offset,
        "seq_axis": seq_axis,
        "inverse": draw(st.booleans()),
    }


def strided_copy(a: np.ndarray, view: str, rng: np.random.Generator) -> np.ndarray:
    """`a`'s values in an array of the named memory layout."""
    if view == "transposed" and a.ndim >= 3:
        return np.ascontiguousarray(np.swapaxes(a, 0, 1)).swapaxes(0, 1)
    if view == "reversed":
        return np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]
    if view == "sliced":  # every other element of a wider buffer: feature stride 2
        wide = np.empty((*a.shape[:-1], 2 * a.shape[-1]), dtype=a.dtype)
        wide[..., ::2] = a
        wide[..., 1::2] = rng.standard_normal(a.shape).astype(a.dtype)
        return wide[..., ::2]
    if view == "fortran":
        return np.asfortranarray(a)
    return a


@given(kernel_cases())
def test_numba_matches_reference(case: dict) -> None:
    x = case.pop("x")
    before = x.copy()
    want = rr.apply_rope(x, **case)
    got = rr.apply_rope(x, **case, backend="numba")
    assert_matches_reference(got, want, x)
    np.testing.assert_array_equal(x, before)  # input untouched


@pytest.mark.parametrize(
    ("shape", "seq_axis", "positions"),
    [
        ((2, 300, 4, 20), -3, None),  # threads split tokens; heads share a table row
        ((2, 4, 300, 20), -2, None),  # threads split (batch, head); the table row moves
        ((2, 300, 4, 20), -3, "grid"),  # per-batch positions
        ((1, 1, 2048, 20), -2, None),  # too few outer rows: threads split single rows
        ((1, 2, 100, 20), -2, None),  # under the parallel threshold: the calling thread
    ],
)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_every_thread_split_matches_reference(shape, seq_axis, positions, layout):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    spec = rr.RopeSpec(20, rotary_dim=16, rotary_start=2, layout=layout)
    if positions == "grid":
        positions = rng.integers(0, 2**16, size=(shape[0], shape[1], 1))
    want = rr.apply_rope(x, spec, positions, seq_axis=seq_axis)
    got = rr.apply_rope(x, spec, positions, seq_axis=seq_axis, backend="numba")
    assert_matches_reference(got, want, x)


@given(kernel_cases(), st.sampled_from(["preallocated", "in_place"]))
def test_out_and_in_place_equal_the_allocating_call(case: dict, how: str) -> None:
    x = case.pop("x")
    want = rr.apply_rope(x, **case, backend="numba")
    if how == "preallocated":
        out = np.full_like(x, np.nan)
        result = rr.apply_rope(x, **case, backend="numba", out=out)
    else:
        out = x.copy()
        result = rr.apply_rope(out, **case, backend="numba", out=out)
    assert result is out
    np.testing.assert_array_equal(result, want)


@given(kernel_cases())
@settings(max_examples=30)
def test_pass_through_features_are_bit_identical(case: dict) -> None:
    x, spec = case.pop("x"), case["spec"]
    got = rr.apply_rope(x, **case, backend="numba")
    start, stop = spec.rotary_start, spec.rotary_start + spec.rotary_dim
    np.testing.assert_array_equal(got[..., :start], x[..., :start])
    np.testing.assert_array_equal(got[..., stop:], x[..., stop:])


@given(
    st.integers(0, 2**20),
    st.integers(1, 40),
    st.sampled_from([np.float32, np.float64]),
    st.sampled_from(["half", "interleaved"]),
)
@settings(max_examples=40)
def test_offset_calls_equal_explicit_positions_exactly(offset, seq, dtype, layout):
    """Calls with an offset (served from cached table blocks) rotate with the very tables
    that explicit positions build: the results are bit-identical."""
    spec = rr.RopeSpec(64, layout=layout)
    x = np.random.default_rng(seq).standard_normal((2, seq, 4, 64)).astype(dtype)
    by_offset = rr.apply_rope(x, spec, offset=offset, seq_axis=-3, backend="numba")
    explicit = rr.apply_rope(x, spec, np.arange(seq) + offset, seq_axis=-3, backend="numba")
    np.testing.assert_array_equal(by_offset, explicit)


@pytest.mark.parametrize("how", ["kernel", "integer"])
def test_float16_rounds_to_nearest_even_like_numpy(how):
    """The kernel's float32 -> float16 rounding equals NumPy's cast on every float32 bit
    pattern of a structured sample: all 2**13 low-mantissa patterns (the bits rounding
    looks at) for exponents spanning zero, subnormal, normal, overflow, inf and nan.
    "kernel" is the conversion the kernel uses here (F16C where the processor has it);
    "integer" the arithmetic one it uses on processors without."""
    low = np.arange(1 << 13, dtype=np.uint32)
    high = np.arange(0, 1 << 10, 7, dtype=np.uint32) << 13  # upper mantissa bits
    exponents = np.array([0, 1, 90, 101, 102, 103, 110, 111, 112, 113, 127, 141, 142, 143, 255])
    signs = np.array([0, 1], dtype=np.uint32) << 31
    bits = (
        signs[:, None, None, None]
        | (exponents.astype(np.uint32) << 23)[None, :, None, None]
        | high[None, None, :, None]
        | low[None, None, None, :]
    ).ravel()
    values = bits.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(np.float16)
    got = _round_to_f16(values, how)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert np.all(same), values[~same][:5]


@pytest.mark.parametrize("how", ["kernel", "integer"])
def test_float16_widens_exactly_like_numpy(how):
    """Every one of the 65536 float16 bit patterns widens to NumPy's float32 of it (NaN to
    a NaN of the same sign)."""
    from numba import njit

    convert = importlib.import_module("rope_ref.backends.numba.convert")
    widen = convert.widen if how == "kernel" else convert._f16_bits_to_f32

    @njit
    def run(h, out):
        for i in range(h.shape[0]):
            out[i] = widen(h[i])

    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got = np.empty(patterns.shape, dtype=np.float32)
    run(patterns, got)
    want = patterns.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    assert np.all(np.isnan(got[nan]))
    assert np.array_equal(np.signbit(got[nan]), np.signbit(want[nan]))


def _round_to_f16(values: np.ndarray, how: str) -> np.ndarray:
    """Round float32 `values` to float16 with the kernel's encoder, run under numba."""
    from numba import njit

    convert = importlib.import_module("rope_ref.backends.numba.convert")
    if how == "kernel":
        narrow = convert.narrow

        @njit
        def run(v, out):
            for i in range(v.shape[0]):
                out[i] = narrow(v[i], out)
    else:
        encode = convert._f32_to_f16_bits

        @njit
        def run(v, out):
            for i in range(v.shape[0]):
                out[i] = encode(v[i])

    out = np.empty(values.shape, dtype=np.uint16)
    run(values, out)
    return out.view(np.float16)


def test_heads_share_one_table_row():
    """Every call is planned (`prepare`) for tables that broadcast over heads (shape
    (1, S, 1, n)), never a per-head copy: offset calls and explicit positions alike."""
    kernel = load_backend("numba")
    seen = []
    prepare = kernel.prepare

    def spy(shape, strides, dtype, table_shape, *args):
        seen.append(table_shape)
        return prepare(shape, strides, dtype, table_shape, *args)

    x = np.ones((2, 7, 8, 16), dtype=np.float32)
    mp = pytest.MonkeyPatch()
    mp.setattr(kernel, "prepare", spy)
    try:
        rr.apply_rope(x, None, seq_axis=-3, offset=123456, backend="numba")
        rr.apply_rope(x, None, np.arange(7), seq_axis=-3, backend="numba")
    finally:
        mp.undo()
    assert seen == [(1, 7, 1, 8), (1, 7, 1, 8)]


def test_no_temporaries_the_size_of_x():
    x = np.random.default_rng(0).standard_normal((1, 512, 16, 128)).astype(np.float32)
    spec = rr.RopeSpec(128)
    rr.apply_rope(x, spec, seq_axis=-3, backend="numba", out=x)  # compile, fill caches
    rr.apply_rope(x, spec, seq_axis=-3, backend="numba")
    tracemalloc.start()
    try:
        rr.apply_rope(x, spec, seq_axis=-3, backend="numba", out=x)
        in_place_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        rr.apply_rope(x, spec, seq_axis=-3, backend="numba")
        allocating_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert in_place_peak < x.nbytes // 50
    assert allocating_peak < x.nbytes + x.nbytes // 50


def test_respects_numba_thread_count():
    import numba

    x = np.random.default_rng(1).standard_normal((4, 300, 2, 32))
    want = rr.apply_rope(x, seq_axis=-3, backend="numba")
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        got = rr.apply_rope(x, seq_axis=-3, backend="numba")
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(got, want)


def test_concurrent_calls_share_tables_safely():
    spec = rr.RopeSpec(64)
    xs = [np.random.default_rng(i).standard_normal((1, 64, 4, 64)) for i in range(8)]
    want = [rr.apply_rope(x, spec, offset=100, seq_axis=-3) for x in xs]
    got: list = [None] * len(xs)

    def work(i: int) -> None:
        got[i] = rr.apply_rope(xs[i], spec, offset=100, seq_axis=-3, backend="numba")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w, x in zip(got, want, xs, strict=True):
        assert_matches_reference(g, w, x)


def test_auto_picks_numba_for_numpy():
    x = np.random.default_rng(2).standard_normal((3, 5, 8)).astype(np.float32)
    np.testing.assert_array_equal(
        rr.apply_rope(x, backend="auto"), rr.apply_rope(x, backend="numba")
    )


def test_empty_arrays():
    x = np.empty((0, 5, 8), dtype=np.float32)
    assert rr.apply_rope(x, backend="numba").shape == (0, 5, 8)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"out": np.empty((3, 4, 8), dtype=np.float32)}, ValueError, "`out` must have x's shape"),
        ({"out": np.empty((3, 4, 6), dtype=np.float64)}, ValueError, "`out` must have x's shape"),
        ({"out": [0.0]}, TypeError, "`out` must be a NumPy array"),
    ],
)
def test_bad_out_is_refused(kwargs, error, match):
    x = np.ones((3, 4, 6), dtype=np.float32)
    with pytest.raises(error, match=match):
        rr.apply_rope(x, backend="numba", **kwargs)


def test_partly_overlapping_out_is_refused():
    buf = np.ones((5, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="`out` must be `x` itself or not overlap it"):
        rr.apply_rope(buf[:4], backend="numba", out=buf[1:])


def test_read_only_out_is_refused():
    out = np.empty((3, 8))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="`out` must be writeable"):
        rr.apply_rope(np.ones((3, 8)), backend="numba", out=out)


def test_other_array_types_are_refused():
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="backend='numba' needs plain NumPy arrays"):
        rr.apply_rope(xp.ones((3, 8)), backend="numba")


def test_integer_dtypes_are_refused_with_a_clear_message():
    with pytest.raises(TypeError, match=r"`x` must have a real floating dtype"):
        rr.apply_rope(np.ones((3, 8), dtype=np.int16), backend="numba")


def test_import_compiles_nothing():
    code = (
        "import rope_ref.backends.numba.cpu as k\n"
        "d = [v for v in vars(k).values() if hasattr(v, 'signatures')]\n"
        "assert d and all(not f.signatures for f in d), [f.signatures for f in d]\n"
        "print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr
