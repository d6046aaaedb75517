"""The CUDA kernel's thread body, compiled for the CPU, against the float64 reference.

The launcher plans the launch (variant, grid, block, packed parameters) from NumPy arrays
exactly as it does from CuPy arrays; the host harness then runs every block and thread of that
grid with the same rope.cuh code the GPU runs. Needs nvcc, no GPU.
"""

from __future__ import annotations

import mmap
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import rope_ref as rr
from tests.cuda_host import emulation
from tests.cuda_host.cases import (
    CASES,
    DTYPES,
    LAYOUTS,
    assert_error_model,
    huge,
    random_x,
    tables,
)

pytestmark = pytest.mark.cuda_host


@pytest.fixture
def cuda():
    return emulation.launcher()


# ---- the thread body against the reference --------------------------------------------------


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_emulation_matches_reference(harness, np_rng, case, layout, dtype_name):
    x, positions, spec, vector = CASES[case](np_rng, DTYPES[dtype_name], layout)
    x_before = x.copy()
    cos, sin = tables(spec, positions, x.dtype)
    harness.launches.clear()
    (out,) = harness.rotate([(x, cos, sin, None)], layout=layout, rotary_start=spec.rotary_start)
    assert [plan.vector for plan in harness.launches] == [vector]
    assert_error_model(out, x, spec, positions)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    np.testing.assert_array_equal(x.view(bits), x_before.view(bits))  # x untouched


@pytest.mark.parametrize("case", ["bshd", "misaligned", "partial", "many_axes"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_in_place_and_inverse(harness, np_rng, case, layout, dtype_name):
    x, positions, spec, _ = CASES[case](np_rng, DTYPES[dtype_name], layout)
    original = x.copy()
    cos, sin = tables(spec, positions, x.dtype)
    (out,) = harness.rotate(
        [(x, cos, sin, x)], layout=layout, rotary_start=spec.rotary_start, inverse=True
    )
    assert out is x
    assert_error_model(x, original, spec, positions, inverse=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_q_and_k_in_one_launch(harness, np_rng, layout, dtype_name):
    dtype = DTYPES[dtype_name]
    q = random_x(np_rng, (2, 3, 8, 64), dtype)  # 3 new tokens, 8 query heads
    k = random_x(np_rng, (2, 11, 2, 64), dtype)  # 11 cached keys, 2 key heads (GQA)
    spec = rr.RopeSpec(head_dim=64, layout=layout)
    q_pos, k_pos = np.arange(8, 11).reshape(1, 3, 1), np.arange(11).reshape(1, 11, 1)
    cq, sq = tables(spec, q_pos, dtype)
    ck, sk = tables(spec, k_pos, dtype)
    harness.launches.clear()
    q_out, k_out = harness.rotate([(q, cq, sq, None), (k, ck, sk, None)], layout=layout)
    assert len(harness.launches) == 1
    assert harness.launches[0].fields["n_tensors"] == 2
    assert_error_model(q_out, q, spec, q_pos)
    assert_error_model(k_out, k, spec, k_pos)


def test_q_and_k_of_different_dtypes_take_two_launches(harness, np_rng):
    spec = rr.RopeSpec(head_dim=32)
    q = random_x(np_rng, (4, 2, 32), np.float16)
    k = random_x(np_rng, (4, 2, 32), np.float64)
    pos = np.arange(4).reshape(4, 1)
    harness.launches.clear()
    q_out, k_out = harness.rotate(
        [(q, *tables(spec, pos, q.dtype), None), (k, *tables(spec, pos, k.dtype), None)],
        layout="half",
    )
    assert [p.element for p in harness.launches] == ["rope_f16", "double"]
    assert_error_model(q_out, q, spec, pos)
    assert_error_model(k_out, k, spec, pos)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_geometry(harness, data):
    dtype_name = data.draw(st.sampled_from(list(DTYPES)), label="dtype")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    n = data.draw(st.integers(1, 20), label="n_pairs")
    start = data.draw(st.integers(0, 5), label="rotary_start")
    tail = data.draw(st.integers(0, 5), label="tail")
    head_dim = start + 2 * n + tail
    lead = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4), label="lead")
    shared = data.draw(st.lists(st.booleans(), min_size=len(lead), max_size=len(lead)))
    shift = data.draw(st.integers(0, 3), label="element offset")
    inverse = data.draw(st.booleans(), label="inverse")
    in_place = data.draw(st.booleans(), label="in_place")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    dtype = DTYPES[dtype_name]
    base = random_x(rng, (*lead, head_dim + shift), dtype)
    x = base[..., shift:]
    grid = tuple(1 if s else size for size, s in zip(lead, shared, strict=True))
    positions = rng.integers(0, 70000, size=grid).astype(np.float64)
    spec = rr.RopeSpec(head_dim=head_dim, rotary_dim=2 * n, rotary_start=start, layout=layout)
    original = x.copy()
    cos, sin = tables(spec, positions, dtype)
    (out,) = harness.rotate(
        [(x, cos, sin, x if in_place else None)],
        layout=layout, rotary_start=start, inverse=inverse,
    )  # fmt: skip
    assert_error_model(out, original, spec, positions, inverse=inverse)


# ---- grid and index arithmetic --------------------------------------------------------------


def all_threads(harness, plan):
    for block in range(plan.grid):
        for thread in range(plan.block):
            where = harness.locate(plan.params, block, thread, plan.block)
            if where is not None:
                yield where


@pytest.mark.parametrize(
    ("shape", "grid_shape"),
    [((3, 7, 5, 64), (1, 7, 1)), ((2, 5, 7, 40), (1, 1, 7)), ((300, 9, 16), (300, 1))],
)
def test_grid_covers_every_pair_once(harness, cuda, shape, grid_shape):
    """Every (row, head, chunk) is owned by exactly one thread of the planned grid."""
    spec = rr.RopeSpec(head_dim=shape[-1])
    x = np.zeros(shape, dtype=np.float32)
    cos, sin = tables(spec, np.zeros(grid_shape), x.dtype)
    plan = cuda.plan_launch(
        [(x, cos, sin, np.empty_like(x))], layout="half", rotary_start=0, inverse=False, xp=np
    )
    fields = dict(zip(cuda.PARAM_FIELDS, plan.params.tolist(), strict=True))
    chunks = fields["rot_chunks"] + fields["t0.copy_chunks"]
    owned = []
    for _, chunk, head0, x_row, _, _ in all_threads(harness, plan):
        for k in range(fields["t0.heads_per_thread"]):
            if head0 + k < fields["t0.heads"]:
                owned.append((x_row + k * fields["t0.x_head_stride"], chunk))
    row_starts = np.arange(x.size).reshape(shape)[..., 0].ravel()
    expected = {(int(r), c) for r in row_starts for c in range(chunks)}
    assert len(owned) == len(set(owned)) == len(expected)
    assert set(owned) == expected


def test_params_layout_matches_the_header(harness, cuda):
    assert harness.params_size() == 8 * len(cuda.PARAM_FIELDS)
    assert harness.offsets() == [8 * i for i in range(len(cuda.PARAM_FIELDS))]


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_index_arithmetic_beyond_2_to_the_32(harness, cuda, np_rng, layout):
    """Thread -> offset mapping for a (2^14, 2^14, 32, 128) float16 tensor (2^40 elements)."""
    B, S, H, D = 2**14, 2**14, 32, 128
    n = D // 2
    if layout == "bshd":
        x = huge((B, S, H, D), np.float16)
        grid_shape = (1, S, 1)
    else:  # memory (B, H, S, D), seen as (B, S, H, D): heads not innermost
        x = huge((B, H, S, D), np.float16, order=(0, 2, 1, 3))
        grid_shape = (1, S, 1)
    cos = np_rng.standard_normal((*grid_shape, n)).astype(np.float32)
    plan = cuda.plan_launch([(x, cos, cos, x)], layout="half", rotary_start=0, inverse=False, xp=np)
    fields = dict(zip(cuda.PARAM_FIELDS, plan.params.tolist(), strict=True))
    per_thread, chunks = fields["t0.heads_per_thread"], fields["rot_chunks"]
    assert (per_thread, chunks, plan.vector) == (4, 8, True)
    items = B * S * (H // per_thread) * chunks
    assert items > 2**33
    assert plan.grid == items // plan.block
    strides = {"b": x.strides[0] // 2, "s": x.strides[1] // 2, "h": x.strides[2] // 2}
    picks = [0, 2**31 // plan.block, 2**32 // plan.block + 3, plan.grid - 1]
    picks += np_rng.integers(0, plan.grid, size=20).tolist()
    for block in picks:
        for thread in (0, 1, 77, plan.block - 1):
            item = block * plan.block + thread
            rest, chunk = divmod(item, chunks)
            row, group = divmod(rest, H // per_thread)
            b, s = divmod(row, S)
            x_row = b * strides["b"] + s * strides["s"] + group * per_thread * strides["h"]
            expected = (0, chunk, group * per_thread, x_row, x_row, s * n)
            assert harness.locate(plan.params, block, thread, plan.block) == expected


def test_real_data_at_offsets_beyond_4_gib(harness, np_rng):
    """Loads and stores more than 2^31 elements (4 GiB) from the start of the tensor."""
    stride = 2**31 + 64  # elements between the two batch rows
    size = 2 * (stride + 8 * 64)
    try:
        buffer = mmap.mmap(-1, size)  # virtual; only the touched pages get memory
    except (OSError, OverflowError) as err:
        pytest.skip(f"cannot map {size} bytes: {err}")
    memory = np.frombuffer(buffer, dtype=np.float16)  # the map is freed with its last view
    x = as_strided(memory, shape=(2, 8, 64), strides=(2 * stride, 128, 2))
    x[...] = random_x(np_rng, x.shape, np.float16)
    original = x.copy()
    spec = rr.RopeSpec(head_dim=64)
    positions = np.arange(8).reshape(1, 8) + 10**5
    harness.launches.clear()
    (out,) = harness.rotate([(x, *tables(spec, positions, x.dtype), x)], layout="half")
    assert [plan.vector for plan in harness.launches] == [True]
    harness.launches.clear()
    assert_error_model(out, original, spec, positions)


# ---- element conversions, exhaustively --------------------------------------------------------


def test_f16_conversions_match_numpy(harness, np_rng):
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    expected = bits.view(np.float16).astype(np.float32)
    got = harness.convert("f16", bits, to_float=True)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    finite = expected[np.isfinite(expected)].astype(np.float64)
    ordered = np.unique(finite)
    ties = (ordered[:-1] + ordered[1:]) / 2  # exact in float32
    ties32 = ties.astype(np.float32)
    floats = np.concatenate([
        finite.astype(np.float32), ties32, np.nextafter(ties32, np.float32(np.inf)),
        np.nextafter(ties32, np.float32(-np.inf)), np.float32([65519.0, 65520.0, 1e6]),
        np_rng.integers(0, 2**32, size=2**20, dtype=np.uint64).astype(np.uint32).view(np.float32),
    ])  # fmt: skip
    got = harness.convert("f16", floats, to_float=False)
    with np.errstate(over="ignore", invalid="ignore"):
        want = floats.astype(np.float16).view(np.uint16)
    nan = np.isnan(floats)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(got[nan].view(np.float16)))


def test_bf16_conversions_match_ml_dtypes(harness, np_rng):
    bf16 = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    expected = bits.view(bf16).astype(np.float32)
    got = harness.convert("bf16", bits, to_float=True)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    upper = (np.arange(2**16, dtype=np.uint32) << 16).view(np.float32)
    floats = np.concatenate([
        upper, (upper.view(np.uint32) | 0x8000).view(np.float32),  # ties
        (upper.view(np.uint32) | 0x8001).view(np.float32),
        (upper.view(np.uint32) | 0x7FFF).view(np.float32),
        np_rng.integers(0, 2**32, size=2**20, dtype=np.uint64).astype(np.uint32).view(np.float32),
    ])  # fmt: skip
    got = harness.convert("bf16", floats, to_float=False)
    with np.errstate(over="ignore", invalid="ignore"):
        want = floats.astype(bf16).view(np.uint16)
    nan = np.isnan(floats)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(got[nan].view(bf16).astype(np.float32)))


# ---- launcher contract (plain Python, no compiler needed) --------------------------------------


def test_importing_the_launcher_does_not_import_cupy():
    code = (
        "import importlib, sys; importlib.import_module('rope_ref.backends.cuda.cupy_kernel');"
        "print('cupy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def plan_one(cuda, x, cos, sin, out=None, **kw):
    options = {"layout": "half", "rotary_start": 0, "inverse": False, **kw}
    return cuda.plan_launch([(x, cos, sin, x if out is None else out)], xp=np, **options)


def test_plan_rejects_bad_input(cuda):
    x = np.zeros((4, 2, 8), dtype=np.float32)
    c = np.zeros((4, 1, 4), dtype=np.float32)
    with pytest.raises(TypeError, match=r"`cos` must be float32 for float32 `x`; got float64"):
        plan_one(cuda, x, c.astype(np.float64), c)
    with pytest.raises(TypeError, match=r"`x` must be float16, bfloat16, float32 or float64"):
        plan_one(cuda, x.astype(np.int32), c, c)
    with pytest.raises(ValueError, match=r"`cos` and `sin` must broadcast to \(4, 2, 4\)"):
        plan_one(cuda, x, np.zeros((3, 1, 4), np.float32), np.zeros((3, 1, 4), np.float32))
    with pytest.raises(ValueError, match=r"`sin` must have n_pairs = 4 on its last axis"):
        plan_one(cuda, x, c, np.zeros((4, 1, 3), np.float32))
    with pytest.raises(ValueError, match=r"`rotary_start` \+ 2 \* n_pairs must fit"):
        plan_one(cuda, x, c, c, rotary_start=1)
    with pytest.raises(ValueError, match=r"`out` must have the shape and dtype of `x`"):
        plan_one(cuda, x, c, c, out=np.zeros((4, 2, 8), np.float64))
    with pytest.raises(ValueError, match=r"`layout` must be 'half' or 'interleaved'"):
        plan_one(cuda, x, c, c, layout="neox")
    buffer = np.zeros((5, 2, 8), dtype=np.float32)
    with pytest.raises(ValueError, match=r"`out` must be `x` itself \(in-place\) or not overlap"):
        plan_one(cuda, buffer[1:], c, c, out=buffer[:4])


def test_plan_of_the_canonical_shape(cuda):
    """bf16 (4, 4096, 32, 128): vector path, 4 heads per thread, tables indexed per token."""
    x = huge((4, 4096, 32, 128), np.dtype(pytest.importorskip("ml_dtypes").bfloat16))
    cos = np.zeros((1, 4096, 1, 64), dtype=np.float32)
    plan = plan_one(cuda, x, cos, cos)
    fields = dict(zip(cuda.PARAM_FIELDS, plan.params.tolist(), strict=True))
    assert plan.name == "rope_kernel<rope_bf16, false, true>"
    assert (plan.block, plan.grid) == (256, 4 * 4096 * 8 * 8 // 256)
    assert (fields["t0.heads"], fields["t0.heads_per_thread"], fields["t0.ndim"]) == (32, 4, 2)
    assert fields["t0.table_stride0"] == 64  # per token
    assert fields["t0.table_stride1"] == 0  # batch shares the table
