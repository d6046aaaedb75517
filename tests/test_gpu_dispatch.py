"""The GPU path of ``apply_rope`` / ``apply_rope_qk``, run through the host emulation.

NumPy arrays stand in for device arrays: every step of a ``backend="cupy"`` call runs as it
does on a GPU (the call's signature, the device table cache, the launch plan and its
parameter words) and the launch runs every block and thread of the planned grid with the
kernel's thread body compiled for the CPU. Results are checked against the float64
reference within the kernel's error model, and, where the kernel reads cached table rows,
bit for bit against the same kernel given tables built on the host. Needs nvcc, no GPU.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from types import ModuleType, SimpleNamespace
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref._core.compat import array_namespace
from rope_ref._core.positions import lay_out
from tests.cuda_host import emulation
from tests.cuda_host.cases import CASES, DTYPES, LAYOUTS, assert_error_model, random_x, tables

pytestmark = pytest.mark.cuda_host

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
plan_module = emulation.backend_module("cuda.plan")
tables_module = emulation.backend_module("cuda.tables")
CAPACITY = tables_module.FIRST_ROWS


@pytest.fixture
def device(harness):
    """NumPy arrays as device arrays, launched on the host harness; fresh caches."""
    call_module.clear()
    tables_module.device_tables.clear()
    with arrays_module.stand_in(emulation.guarded_host(harness.launch)) as host:
        harness.launches.clear()
        yield host
    call_module.clear()
    tables_module.device_tables.clear()


def kernels(harness):
    return [launch.kernel for launch in harness.launches]


def bits(a):
    return np.asarray(a).view(f"u{a.dtype.itemsize}")


def along(values, ndim, seq_axis):
    """1-D `values` laid along `seq_axis` of the position grid of an ndim-d x."""
    shape = [1] * (ndim - 1)
    shape[seq_axis % ndim] = len(values)
    return np.asarray(values).reshape(shape)


def host_tables_result(harness, x, spec, positions, *, inverse=False):
    """The same kernel (array route) with tables built on the host for `positions`."""
    cos, sin = tables(spec, positions, x.dtype)
    (out,) = harness.rotate([(x, cos, sin, None)], layout=spec.layout,
                            rotary_start=spec.rotary_start, inverse=inverse)  # fmt: skip
    return out


# ---- positions None: rows of the device table cache ------------------------------------------

GEOMETRIES = {
    "bshd": ((2, 7, 4, 64), -3, rr.RopeSpec(head_dim=64)),
    "bhsd": ((2, 4, 7, 64), -2, rr.RopeSpec(head_dim=64, base=500000.0)),
    "partial": ((3, 5, 2, 80), -3, rr.RopeSpec(head_dim=80, rotary_dim=32, rotary_start=16)),
    "yarn": ((2, 6, 3, 32), -3, rr.RopeSpec(
        head_dim=32, scaling=rr.scaling.YaRN(4.0, original_max_position=64))),
}  # fmt: skip


@pytest.mark.parametrize("offset", [0, CAPACITY - 3])
@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_default_positions_read_cached_rows(
    device, harness, np_rng, dtype_name, layout, geometry, offset
):
    shape, seq_axis, spec = GEOMETRIES[geometry]
    spec = dataclasses.replace(spec, layout=layout)
    x = random_x(np_rng, shape, DTYPES[dtype_name])
    y = rr.apply_rope(x, spec, seq_axis=seq_axis, offset=offset, backend="cupy")
    assert kernels(harness) == ["rope_kernel"]
    positions = along(offset + np.arange(shape[seq_axis]), len(shape), seq_axis)
    assert_error_model(y, x, spec, positions)
    # the cached rows are the host's float64 tables rounded once: the same bits
    np.testing.assert_array_equal(bits(y), bits(host_tables_result(harness, x, spec, positions)))
    expected = CAPACITY if offset + shape[seq_axis] <= CAPACITY else 2 * CAPACITY
    assert next(iter(tables_module.device_tables._entries.values())).capacity == expected


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
def test_queries_and_keys_in_one_launch(device, harness, np_rng, dtype_name):
    dtype = DTYPES[dtype_name]
    q = random_x(np_rng, (2, 3, 8, 64), dtype)  # 3 new tokens, 8 query heads
    k = random_x(np_rng, (2, 11, 2, 64), dtype)  # 11 keys, 2 key heads (GQA)
    spec = rr.RopeSpec(head_dim=64)
    q2, k2 = rr.apply_rope_qk(q, k, spec, seq_axis=-3, offset=20, backend="cupy")
    assert kernels(harness) == ["rope_kernel"]
    assert harness.launches[0].fields["n_tensors"] == 2
    q_pos, k_pos = along(np.arange(28, 31), 4, 1), along(np.arange(20, 31), 4, 1)
    np.testing.assert_array_equal(bits(q2), bits(host_tables_result(harness, q, spec, q_pos)))
    np.testing.assert_array_equal(bits(k2), bits(host_tables_result(harness, k, spec, k_pos)))


# ---- positions on the device: the gather kernel ------------------------------------------------


def mixed_positions(rng, shape, dtype):
    """Cached integers, integers outside the cache (negative, past it) and, for floating
    dtypes, fractional positions."""
    values = rng.integers(0, CAPACITY, size=shape).astype(np.float64)
    kind = rng.integers(0, 4, size=shape)
    values[kind == 1] = -rng.integers(1, 50, size=int((kind == 1).sum()))
    values[kind == 2] += 3 * CAPACITY + 10**6
    if np.dtype(dtype).kind == "f":
        values[kind == 3] += 0.375
    return values.astype(dtype)


def cached(positions):
    p = np.asarray(positions, dtype=np.float64)
    return (p >= 0) & (p < CAPACITY) & (p == np.floor(p))


POSITION_GRIDS = {
    "per_token": lambda b, s, h: (b, s, 1),
    "sequence": lambda b, s, h: (s,),
    "per_head": lambda b, s, h: (b, s, h),
    "scalar": lambda b, s, h: (),
}


@pytest.mark.parametrize("grid", POSITION_GRIDS)
@pytest.mark.parametrize("position_dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_device_positions_gather_rows_or_compute(
    device, harness, np_rng, dtype_name, position_dtype, grid
):
    x = random_x(np_rng, (3, 9, 4, 64), DTYPES[dtype_name])
    spec = rr.RopeSpec(head_dim=64, base=500000.0)
    positions = mixed_positions(np_rng, POSITION_GRIDS[grid](3, 9, 4), position_dtype)
    y = rr.apply_rope(x, spec, positions, seq_axis=-3, backend="cupy")
    assert kernels(harness) == ["rope_gather_kernel"]
    grid_positions = positions if grid != "sequence" else along(positions, 4, 1)
    assert_error_model(y, x, spec, grid_positions)
    rows = np.broadcast_to(cached(grid_positions), x.shape[:-1])
    expected = host_tables_result(harness, x, spec, grid_positions)
    np.testing.assert_array_equal(bits(y)[rows], bits(expected)[rows])


@pytest.mark.parametrize("position_dtype", ["int32", "int64", "float32", "float64"])
def test_positions_at_the_edges_of_the_cache(device, harness, np_rng, position_dtype):
    """Rows 0 and capacity - 1 are read; -1 and capacity are computed, never read (the
    tables sit between rows of NaN here, so a read past either end would show)."""
    x = random_x(np_rng, (6, 2, 64), DTYPES["float32"])
    spec = rr.RopeSpec(head_dim=64)
    positions = np.array([0, CAPACITY - 1, CAPACITY, CAPACITY + 1, -1, -2], dtype=position_dtype)
    y = rr.apply_rope(x, spec, positions.reshape(6, 1), seq_axis=-3, backend="cupy")
    assert_error_model(y, x, spec, positions.reshape(6, 1))
    y = rr.apply_rope(x, spec, positions.reshape(6, 1), seq_axis=-3, offset=-1, backend="cupy")
    assert_error_model(y, x, spec, positions.reshape(6, 1) - 1)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_queries_and_keys_with_device_positions(device, harness, np_rng, layout):
    q = random_x(np_rng, (32, 1, 32, 128), DTYPES["bfloat16"])  # decode: 32 sequences
    k = random_x(np_rng, (32, 1, 8, 128), DTYPES["bfloat16"])
    spec = rr.RopeSpec(head_dim=128, base=500000.0, layout=layout)
    positions = mixed_positions(np_rng, (32, 1, 1), np.int64)
    q2, k2 = rr.apply_rope_qk(q, k, spec, positions, seq_axis=-3, backend="cupy")
    assert kernels(harness) == ["rope_gather_kernel"]
    assert_error_model(q2, q, spec, positions)
    assert_error_model(k2, k, spec, positions)
    k_positions = positions[:, :, 0].reshape(32, 1, 1) + 1
    q3, k3 = rr.apply_rope_qk(q, k, spec, positions, k_positions=k_positions, seq_axis=-3,
                              offset=7, backend="cupy")  # fmt: skip
    assert_error_model(q3, q, spec, positions + 7)
    assert_error_model(k3, k, spec, k_positions + 7)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_computed_tables_round_the_float64_value_once(device, harness, dtype_name):
    """x = (1, 0) in every pair returns the kernel's (cos, sin): compared with mpmath's
    cos and sin of the float64 angle fl(p * theta), times the attention factor.

    float64: within 2 ulp (libm's cos and the product by the factor each round once);
    float32: within one float32 ulp (one rounding of that float64 value).
    """
    spec = rr.RopeSpec(head_dim=16, scaling=rr.scaling.YaRN(4.0, original_max_position=64))
    positions = np.array([0.5, 1e3 + 0.25, -77.0, 2**20 + 0.5, 3.0e7 + 0.125, 2.0**40])
    x = np.zeros((len(positions), 16), dtype=DTYPES[dtype_name])
    x[:, :8] = 1
    y = rr.apply_rope(x, spec, positions, backend="cupy").astype(np.float64)
    assert kernels(harness) == ["rope_gather_kernel"]
    theta, factor = rr.inv_freq(spec), rr.attention_factor(spec)
    mpmath.mp.prec = 200
    for row, p in enumerate(positions):
        for j, t in enumerate(theta):
            angle = mpmath.mpf(float(np.float64(p) * t))  # rounded once, as the kernel does
            for got, value in ((y[row, j], mpmath.cos(angle)), (y[row, 8 + j], mpmath.sin(angle))):
                exact = float(value * mpmath.mpf(factor))
                if dtype_name == "float64":
                    bound = 2 * abs(np.spacing(exact))
                else:
                    bound = abs(float(np.spacing(np.float32(exact))))
                assert abs(got - exact) <= bound, (p, j, got, exact)


def test_length_dependent_scaling_computes_every_row(device, harness, np_rng):
    spec = rr.RopeSpec(head_dim=32, scaling=rr.scaling.DynamicNTK(4.0, max_position=64))
    x = random_x(np_rng, (2, 5, 3, 32), DTYPES["float32"])
    positions = np_rng.integers(0, 300, size=(2, 5, 1))
    y = rr.apply_rope(x, spec, positions, seq_axis=-3, seq_len=5000, backend="cupy")
    assert harness.launches[-1].fields["capacity"] == 0  # no rows: seq_len picks frequencies
    assert_error_model(y, x, spec, positions, seq_len=5000)
    assert call_module.apply(x, spec, positions, offset=0, seq_axis=-3, inverse=False,
                             seq_len=None, out=None) is None  # fmt: skip


# ---- caches: the signature, the plan, the tables -------------------------------------------------


def test_repeated_calls_do_no_planning(device, harness, np_rng, monkeypatch):
    planned = []
    real_plan = call_module.plan

    def counting_plan(*args, **kwargs):
        planned.append(1)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(call_module, "plan", counting_plan)
    spec = rr.RopeSpec(head_dim=64)
    x = random_x(np_rng, (4, 1, 8, 64), DTYPES["float16"])
    for step in range(6):  # a decode loop: the offset moves, nothing else
        y = rr.apply_rope(x, spec, seq_axis=-3, offset=100 + step, backend="cupy")
        assert_error_model(y, x, spec, along([100 + step], 4, 1))
    for _ in range(3):  # new arrays of the same geometry, new device positions
        x = random_x(np_rng, (4, 1, 8, 64), DTYPES["float16"])
        positions = np_rng.integers(0, 9000, size=(4, 1, 1))
        assert_error_model(rr.apply_rope(x, spec, positions, seq_axis=-3, backend="cupy"),
                           x, spec, positions)  # fmt: skip
    assert len(planned) == 2  # the table kernel's plan, then the gather kernel's
    misaligned = random_x(np_rng, (4, 1, 8, 65), DTYPES["float16"])[..., 1:]
    y = rr.apply_rope(misaligned, spec, seq_axis=-3, backend="cupy")
    assert (len(planned), harness.launches[-1].vector) == (3, False)
    assert_error_model(y, misaligned, spec, along([0], 4, 1))


def test_host_known_offsets_grow_the_cache_device_positions_do_not(device, harness, np_rng):
    spec = rr.RopeSpec(head_dim=32)
    x = random_x(np_rng, (1, 4, 2, 32), DTYPES["float32"])
    rr.apply_rope(x, spec, seq_axis=-3, backend="cupy")
    cache = tables_module.device_tables
    (first,) = cache._entries.values()
    positions = np.array([5, 3 * CAPACITY, 10**7, 7]).reshape(1, 4, 1)
    y = rr.apply_rope(x, spec, positions, seq_axis=-3, backend="cupy")
    assert_error_model(y, x, spec, positions)
    (same,) = cache._entries.values()
    assert same is first
    y = rr.apply_rope(x, spec, seq_axis=-3, offset=3 * CAPACITY, backend="cupy")
    assert_error_model(y, x, spec, along(3 * CAPACITY + np.arange(4), 4, 1))
    (grown,) = cache._entries.values()
    assert grown.capacity == 4 * CAPACITY
    assert len(cache._retired) == 1
    assert cache._retired[0] is first  # kept alive for CUDA graphs captured before
    y = rr.apply_rope(x, spec, positions, seq_axis=-3, backend="cupy")  # the gather call again
    fields = harness.launches[-1].fields
    assert (fields["capacity"], fields["t0.cos"]) == (grown.capacity, grown.cos_ptr)
    assert_error_model(y, x, spec, positions)


def test_repeated_calls_keep_the_table_cache_until_it_changes(device, harness, np_rng, monkeypatch):
    """A repeated call asks the cache nothing; a cache built, grown or forgotten since is
    asked for again, and the call reads the cache it gets."""
    cache = tables_module.device_tables
    asked = []
    real_get = cache.get

    def counting_get(*args, **kwargs):
        asked.append(1)
        return real_get(*args, **kwargs)

    monkeypatch.setattr(cache, "get", counting_get)
    spec = rr.RopeSpec(head_dim=32, base=500000.0)
    x = random_x(np_rng, (3, 1, 4, 32), DTYPES["float32"])
    positions = np_rng.integers(0, 9000, size=(3, 1, 1))

    def calls(*offsets):  # the gather kernel and the table kernel at each offset
        for offset in offsets:
            for p in (positions, None):
                y = rr.apply_rope(x, spec, p, seq_axis=-3, offset=offset, backend="cupy")
                assert_error_model(y, x, spec, along([offset], 4, 1) if p is None else p + offset)

    calls(0, 0)  # the cache is built, then each call takes it as it now is
    asked.clear()
    calls(5, 0, 17)
    assert asked == []
    rr.apply_rope(x, rr.RopeSpec(head_dim=32), seq_axis=-3, backend="cupy")  # another cache
    calls(3, 4)
    assert len(asked) == 3  # that call's, then once by each kind of call: the same cache
    cache.clear()  # the tables are forgotten: a graph captured before must not be replayed
    for p, kernel in ((positions, "rope_gather_kernel"), (None, "rope_kernel")):
        y = rr.apply_rope(x, spec, p, seq_axis=-3, backend="cupy")
        (fresh,) = cache._entries.values()
        fields = harness.launches[-1].fields
        assert (harness.launches[-1].kernel, fields["t0.cos"]) == (kernel, fresh.cos_ptr)
        assert_error_model(y, x, spec, along([0], 4, 1) if p is None else positions)
    rr.apply_rope(x, spec, seq_axis=-3, offset=2 * CAPACITY, backend="cupy")  # grows it
    (grown,) = cache._entries.values()
    y = rr.apply_rope(x, spec, positions, seq_axis=-3, backend="cupy")
    assert harness.launches[-1].fields["capacity"] == grown.capacity == 4 * CAPACITY
    assert_error_model(y, x, spec, positions)


# ---- what a CUDA graph capture needs ----------------------------------------------------------


def test_capture_needs_no_upload_and_replays_new_positions(device, harness, np_rng):
    q = random_x(np_rng, (32, 1, 32, 128), DTYPES["bfloat16"])
    k = random_x(np_rng, (32, 1, 8, 128), DTYPES["bfloat16"])
    spec = rr.RopeSpec(head_dim=128, base=500000.0)
    positions = np_rng.integers(0, 4000, size=(32, 1, 1)).astype(np.int32)
    rr.apply_rope_qk(q, k, spec, positions, seq_axis=-3, backend="cupy")  # warm-up
    device.capture = True
    device.upload = lambda *a: pytest.fail("a host-to-device copy during capture")
    q2, k2 = rr.apply_rope_qk(q, k, spec, positions, seq_axis=-3, backend="cupy")
    captured = harness.launches[-1]
    positions[...] = np_rng.integers(0, 9000, size=positions.shape)  # written in place
    harness.launch(captured)  # replay: the captured words, new positions
    assert_error_model(q2, q, spec, positions)
    assert_error_model(k2, k, spec, positions)
    with pytest.raises(RuntimeError, match="call once before capturing"):
        rr.apply_rope(q, rr.RopeSpec(head_dim=128), positions, seq_axis=-3, backend="cupy")
    with pytest.raises(RuntimeError, match="call once before capturing"):
        rr.apply_rope(q, spec, seq_axis=-3, offset=5 * CAPACITY, backend="cupy")


# ---- out=, and the calls left to the general path ----------------------------------------------


def test_out_and_in_place(device, harness, np_rng):
    spec = rr.RopeSpec(head_dim=64, rotary_dim=32, rotary_start=16, layout="interleaved")
    x = random_x(np_rng, (2, 5, 3, 64), DTYPES["bfloat16"])
    original = x.copy()
    out = np.empty_like(x)
    assert rr.apply_rope(x, spec, seq_axis=-3, backend="cupy", out=out) is out
    assert rr.apply_rope(x, spec, seq_axis=-3, backend="cupy", out=x) is x
    copies = [launch.fields["t0.copy_chunks"] for launch in harness.launches]
    assert copies[0] > 0
    assert copies[1] == 0  # in place: the pass-through features stay where they are
    np.testing.assert_array_equal(bits(x), bits(out))
    assert_error_model(x, original, spec, along(np.arange(5), 4, 1))


def declined(*args, qk=False, **options):
    base = {"offset": 0, "seq_axis": -3, "inverse": False, "seq_len": None}
    if qk:
        return call_module.apply_qk(*args, **{**base, **options}) is None
    return call_module.apply(*args, **{**base, "out": None, **options}) is None


def test_unusual_calls_are_left_to_the_general_path(device, np_rng):
    x = random_x(np_rng, (2, 5, 3, 16), DTYPES["float32"])
    spec = rr.RopeSpec(head_dim=16)
    positions = np.arange(5).reshape(1, 5, 1)
    assert declined(x, rr.RopeSpec(head_dim=16, xpos=rr.XPos()), None)
    assert declined(x, rr.RopeSpec(head_dim=16, sections=(4, 4)), np.zeros((1, 5, 1, 2)))
    assert declined(x, rr.RopeSpec(head_dim=8), None)  # wrong head_dim: the general path says so
    assert declined(x, spec, None, offset=0.5)  # fractional positions on the host
    assert declined(x, spec, None, offset=-1)
    assert declined(x, spec, positions, offset=2**60)
    assert declined(x, spec, positions.astype(np.int16))
    assert declined(x, spec, positions.astype(bool))
    assert declined(x, spec, np.arange(4))  # does not lay out
    assert declined(x, spec, positions.tolist())  # positions on the host
    assert declined(x, spec, None, seq_axis=-1)
    assert declined(x, spec, None, inverse=1)
    assert declined(x, spec, None, seq_len=[5])
    assert declined(x.astype(np.int32), spec, None)
    assert declined(x, spec, None, out=np.empty_like(x)[:, ::-1][:, ::-1][1:])  # shape
    buffer = np.zeros((3, 5, 3, 16), np.float32)
    assert declined(buffer[1:], spec, None, out=buffer[:2])  # partial overlap
    assert declined(x, x[:, :2].astype(np.float64), spec, None, None, qk=True)
    assert declined(x[:, :3], x, spec, None, positions, qk=True)  # k positions alone
    assert declined(x, x[:, :3], spec, None, None, qk=True)  # more queries than keys
    many, positions, many_spec, _ = CASES["many_axes"](np_rng, DTYPES["float32"], "half")
    assert declined(many, many_spec, positions, seq_axis=-2)  # needs contiguous copies
    assert declined(many, many_spec, positions, seq_axis=-2)  # ... and is remembered


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lead=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    grid_rank=st.integers(0, 5),
    data=st.data(),
)
def test_laying_out_positions_agrees_with_the_general_rule(lead, grid_rank, data):
    """The descriptor rule takes exactly the grids `rope_ref._core.positions.lay_out` takes, and
    gives them the same broadcast layout."""
    lead = tuple(lead)
    axis = data.draw(st.integers(0, len(lead) - 1), label="seq_axis")
    grid = tuple(data.draw(st.sampled_from([1, *lead, 5])) for _ in range(grid_rank))
    p = np.arange(int(np.prod(grid)), dtype=np.int64).reshape(grid)
    xp = array_namespace(p)
    try:
        general = lay_out(p, lead, axis, n_axes=None, xp=xp)  # as laid_out_positions does
    except ValueError:
        general = None
    laid = call_module._lay_out(plan_module.describe_numpy(p), lead, axis)
    assert (laid is None) == (general is None)
    if laid is not None:
        full = np.broadcast_to(general, lead)
        strides = plan_module._broadcast_strides(laid, lead)
        assert tuple(full.strides) == tuple(strides)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.data())
def test_random_calls_match_the_reference(harness, data):
    dtype_name = data.draw(st.sampled_from(list(DTYPES)), label="dtype")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    n = data.draw(st.integers(1, 12), label="n_pairs")
    start = data.draw(st.integers(0, 3), label="rotary_start")
    head_dim = start + 2 * n + data.draw(st.integers(0, 3), label="tail")
    b, s, h = (data.draw(st.integers(1, 4), label=name) for name in "bsh")
    seq_axis = data.draw(st.sampled_from([-3, -2]), label="seq_axis")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    shape = (b, s, h, head_dim) if seq_axis == -3 else (b, h, s, head_dim)
    x = random_x(rng, shape, DTYPES[dtype_name])
    spec = rr.RopeSpec(head_dim=head_dim, rotary_dim=2 * n, rotary_start=start, layout=layout)
    inverse = data.draw(st.booleans(), label="inverse")
    offset = data.draw(st.integers(0, 2 * CAPACITY), label="offset")
    kind = data.draw(st.sampled_from(["default", "device"]), label="positions")
    positions, grid = None, along(offset + np.arange(s), 4, seq_axis % 4)
    if kind == "device":
        grid_shape = (b, s, 1) if seq_axis == -3 else (b, 1, s)
        dtype = data.draw(st.sampled_from(["int32", "int64", "float32", "float64"]))
        positions = mixed_positions(rng, grid_shape, dtype)
        grid = positions.astype(np.float64) + offset
    call_module.clear()
    with arrays_module.stand_in(emulation.guarded_host(harness.launch)):
        y = rr.apply_rope(x, spec, positions, seq_axis=seq_axis, offset=offset, inverse=inverse,
                          backend="cupy")  # fmt: skip
    assert_error_model(y, x, spec, grid, inverse=inverse)


# ---- stand-ins that carry their address, threads, the CuPy adapter ------------------------


def test_device_stand_ins_carry_their_address(np_rng):
    base = random_x(np_rng, (4, 3, 2, 16), DTYPES["bfloat16"])
    a = base.view(arrays_module.DeviceStandIn)
    views = [a, a[1:], a[:, ::-1], a[..., 3:], a.reshape(12, 32), a.T]
    for v in views:
        assert type(v) is arrays_module.DeviceStandIn
        assert v.ptr == v.__array_interface__["data"][0]  # NumPy's own account
    host = arrays_module.HostStandIn(launch=list)
    for v in views:  # both ways of reading a stand-in give one description
        assert host.describe(v) == plan_module.describe_numpy(v)
        assert host.address(v) == host.address(np.asarray(v)) == v.ptr
    out = host.empty(a, a.shape)
    assert type(out) is arrays_module.DeviceStandIn
    assert (out.shape, out.dtype, out.flags.c_contiguous) == (a.shape, a.dtype, True)
    assert out.ptr == out.__array_interface__["data"][0]
    assert type(host.empty(base, base.shape)) is np.ndarray
    grown = arrays_module.DeviceStandIn((4,), np.float32)
    grown.resize((1 << 20,), refcheck=False)  # the memory moves
    assert grown.ptr == grown.__array_interface__["data"][0]
    assert host.geometry(a) == host.geometry(a.copy()) != host.geometry(a[:, ::-1])


def address(a):
    """NumPy's own account of an array's address."""
    return a.__array_interface__["data"][0]


def test_device_stand_ins_take_the_gpu_path_as_plain_stand_ins_do(harness, np_rng):
    q = random_x(np_rng, (32, 1, 32, 128), DTYPES["bfloat16"])
    k = random_x(np_rng, (32, 1, 8, 128), DTYPES["bfloat16"])
    positions = np_rng.integers(0, 9000, size=(32, 1, 1)).astype(np.int32)
    spec = rr.RopeSpec(head_dim=128, base=500000.0)
    results = {}
    for kind in (np.ndarray, arrays_module.DeviceStandIn):
        call_module.clear()
        with arrays_module.stand_in(emulation.guarded_host(harness.launch), kind):
            q_in, k_in, p_in = (a.view(kind) for a in (q, k, positions))
            q2, k2 = rr.apply_rope_qk(q_in, k_in, spec, p_in, seq_axis=-3, backend="cupy")
        assert (type(q2), type(k2)) == (kind, kind)
        fields = harness.launches[-1].fields
        words = ("t0.x", "t0.out", "t1.x", "t1.out", "positions0", "positions1")
        assert [fields[w] for w in words] == [address(a) for a in (q_in, q2, k_in, k2, p_in, p_in)]
        results[kind] = (q2, k2)
    for plain, carried in zip(*results.values(), strict=True):
        np.testing.assert_array_equal(bits(plain), bits(np.asarray(carried)))
    assert_error_model(np.asarray(q2), q, spec, positions)
    assert_error_model(np.asarray(k2), k, spec, positions)


def test_every_launch_keeps_its_own_words_across_threads(np_rng):
    """Threads calling one signature at once: each recorded launch holds its own call's
    addresses and offset, also after the other threads' calls (nothing is shared)."""
    threads, calls = 6, 40
    spec = rr.RopeSpec(head_dim=64)
    row_bytes = 32 * 4  # float32 tables of 32 pairs
    seen: dict[int, list] = {t: [] for t in range(threads)}
    local = threading.local()

    def record(launch):
        seen[local.index].append(launch)

    inputs = [
        [(random_x(np_rng, (4, 1, 8, 64), DTYPES["float16"]),
          random_x(np_rng, (4, 1, 2, 64), DTYPES["float16"]),
          np_rng.integers(0, 9000, size=(4, 1, 1))) for _ in range(3)]
        for _ in range(threads)
    ]  # fmt: skip
    expected: dict[int, list] = {t: [] for t in range(threads)}
    barrier = threading.Barrier(threads)

    def worker(index):
        local.index = index
        barrier.wait()
        for step in range(calls):
            q, k, positions = inputs[index][step % 3]
            gather = step % 2 == 0
            q2, k2 = rr.apply_rope_qk(q, k, spec, positions if gather else None, seq_axis=-3,
                                      offset=index * 100 + step, backend="cupy")  # fmt: skip
            words = {"t0.x": address(q), "t0.out": address(q2), "t1.x": address(k),
                     "t1.out": address(k2)}  # fmt: skip
            if gather:
                words |= {"positions0": address(positions), "positions1": address(positions),
                          "position_offset": index * 100 + step}  # fmt: skip
            expected[index].append((words, None if gather else index * 100 + step))

    call_module.clear()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        with arrays_module.stand_in(arrays_module.HostStandIn(launch=record)):
            pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
    finally:
        sys.setswitchinterval(interval)
        call_module.clear()
    cache_rows = set()  # the table kernel's words: the cache's rows from each call's offset
    for index in range(threads):
        assert len(seen[index]) == calls
        for launch, (words, offset) in zip(seen[index], expected[index], strict=True):
            fields = launch.fields
            assert {name: fields[name] for name in words} == words
            if offset is not None:
                cache_rows |= {fields[t] - offset * row_bytes for t in ("t0.cos", "t1.cos")}
    assert len(cache_rows) == 1


def test_a_call_on_another_device_runs_with_that_device_current(np_rng):
    """Arrays on device 1 while device 0 is current: the launch is made inside a block that
    makes device 1 current, and device 0 is current again after the call."""
    current = [0]
    launched_on = []

    class Device:
        def __init__(self, device):
            self.device = device

        def __enter__(self):
            self.before, current[0] = current[0], self.device

        def __exit__(self, *exc):
            current[0] = self.before

    class SecondDevice(arrays_module.HostStandIn):  # type: ignore[misc, name-defined]
        def device(self, a):
            return 1

        def is_current(self, device):
            return current[0] == device

    host = SecondDevice(launch=lambda launch: launched_on.append(current[0]))
    host.xp = SimpleNamespace(cuda=SimpleNamespace(Device=Device))
    x = random_x(np_rng, (2, 3, 4, 16), DTYPES["float32"])
    call_module.clear()
    with arrays_module.stand_in(host):
        for positions in (None, np.arange(3).reshape(1, 3, 1)):
            rr.apply_rope(x, rr.RopeSpec(head_dim=16), positions, seq_axis=-3, backend="cupy")
    call_module.clear()
    assert launched_on == [1, 1]
    assert current == [0]


def test_cupy_adapter_launches_the_planned_variant_with_one_struct(monkeypatch):
    """The CuPy adapter, given a stand-in for CuPy: the variant each plan names, compiled
    once per kernel and looked up once per variant, the words passed as one struct."""
    compiled, looked_up, calls = [], [], []

    class RawModule:
        def __init__(self, code, name_expressions):
            assert "#include" not in code
            compiled.append(name_expressions)

        def get_function(self, name):
            looked_up.append(name)
            return SimpleNamespace(kernel=lambda *args, **kw: calls.append((name, args, kw)))

    cupy: Any = ModuleType("cupy_stand_in")  # hashable, as the module CuPy is
    cupy.RawModule = RawModule
    cupy.cuda = SimpleNamespace(runtime=SimpleNamespace(getDevice=lambda: 0))
    monkeypatch.setattr(arrays_module, "_FUNCTIONS", {})
    adapter = object.__new__(arrays_module.Arrays)
    adapter.xp = cupy
    d = plan_module.describe_numpy
    x = np.zeros((2, 3, 4, 64), np.float16)
    cos = np.zeros((1, 3, 1, 16), np.float32)
    plans = [
        plan_module.plan([(d(v), (d(cos), d(cos)), d(v))], layout=layout, rotary_start=0,
                         inverse=inverse)
        for v in (x[..., :32], x[..., ::2])  # the vector path where aligned; a feature stride
        for layout in ("half", "interleaved")
        for inverse in (False, True)  # a launch parameter, not a variant
    ]  # fmt: skip
    for launch in plans + plans:
        adapter.launch(launch, stream="the stream")
    names = list(dict.fromkeys(launch.name for launch in plans))
    assert len(names) >= 2  # the layouts
    assert compiled == [plan_module.KERNEL_NAMES["rope_kernel"]]  # one compile
    assert looked_up == names  # once per variant, in the order first launched
    for launch, (name, (grid, block, args), kw) in zip(plans + plans, calls, strict=True):
        assert name == launch.name
        assert (grid, block, kw) == ((launch.grid,), (launch.block,), {"stream": "the stream"})
        (struct,) = args  # CuPy passes a NumPy array of one element by value
        assert struct.size == 1
        assert struct.tobytes() == launch.params.tobytes()
