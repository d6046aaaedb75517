"""The CUDA kernel on a real GPU: ``pytest -m gpu`` on a machine with CuPy and a device.

Skipped cleanly without CuPy or without a usable CUDA device. Checks, for every dtype and
layout over the geometry cases of the host tests: the public API with ``backend="cupy"`` (and
``"auto"``) against the float64 reference within the kernel's error model; in-place ``out=``;
queries and keys through ``apply_rope_qk``; bit-for-bit agreement with the host emulation of
the same thread body (when nvcc is present); tensors of more than 2**31 elements. PyTorch,
JAX, streams and CUDA graphs: ``test_cuda_gpu_interop.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host.cases import CASES, DTYPES, LAYOUTS, assert_error_model, random_x, tables
from tests.cuda_host.devices import to_host

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")


@pytest.fixture(scope="module", autouse=True)
def device():
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as err:  # no driver, no device
        pytest.skip(f"no usable CUDA device: {err}")
    if count == 0:
        pytest.skip("no CUDA device")
    return cp.cuda.Device(0)


@pytest.fixture(scope="module")
def kernel():
    from rope_ref._engine.dispatch import load_backend

    return load_backend("cupy")


def gpu_view_like(host_case_x):
    """Device array laid out like the host case: same shape, strides and start alignment."""
    x = host_case_x
    span = x.base if x.base is not None else x
    device_base = cp.asarray(np.ascontiguousarray(span))
    offset = x.__array_interface__["data"][0] - span.__array_interface__["data"][0]
    return cp.ndarray(x.shape, dtype=x.dtype, memptr=device_base.data + offset, strides=x.strides)


def supported(dtype_name):
    if dtype_name == "bfloat16":
        try:
            cp.asarray(np.zeros(1, dtype=DTYPES["bfloat16"]))
        except Exception as err:  # CuPy without bfloat16
            pytest.skip(f"this CuPy has no bfloat16: {err}")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_kernel_matches_reference(kernel, np_rng, case, layout, dtype_name):
    supported(dtype_name)
    x, positions, spec, _ = CASES[case](np_rng, DTYPES[dtype_name], layout)
    cos, sin = tables(spec, positions, x.dtype)
    out = kernel.rotate(
        gpu_view_like(x), cp.asarray(cos), cp.asarray(sin), layout=layout,
        rotary_start=spec.rotary_start, inverse=False,
    )  # fmt: skip
    assert isinstance(out, cp.ndarray)
    assert_error_model(to_host(out), x, spec, positions)


@pytest.mark.parametrize("case", ["bshd", "partial", "misaligned", "many_axes"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("backend", ["cupy", "auto"])
def test_public_api(np_rng, case, layout, dtype_name, backend):
    supported(dtype_name)
    x, positions, spec, _ = CASES[case](np_rng, DTYPES[dtype_name], layout)
    x_gpu = gpu_view_like(x)
    y = rr.apply_rope(x_gpu, spec, cp.asarray(positions), backend=backend)
    assert isinstance(y, cp.ndarray)
    assert y.dtype == x_gpu.dtype
    assert_error_model(to_host(y), x, spec, positions)
    inverse = rr.apply_rope(x_gpu, spec, cp.asarray(positions), backend=backend, inverse=True)
    assert_error_model(to_host(inverse), x, spec, positions, inverse=True)
    same = rr.apply_rope(x_gpu, spec, cp.asarray(positions), backend="cupy")
    assert bool(cp.all(same.view(cp.uint8) == y.view(cp.uint8)))


@pytest.mark.parametrize("case", ["bshd", "misaligned", "partial"])
@pytest.mark.parametrize("dtype_name", ["float16", "float32"])
def test_in_place(np_rng, case, dtype_name):
    x, positions, spec, _ = CASES[case](np_rng, DTYPES[dtype_name], "half")
    x_gpu = gpu_view_like(x)
    y = rr.apply_rope(x_gpu, spec, cp.asarray(positions), backend="cupy", out=x_gpu)
    assert y is x_gpu
    assert_error_model(to_host(x_gpu), x, spec, positions)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", ["float16", "float32", "float64"])
def test_queries_and_keys(np_rng, layout, dtype_name):
    dtype = DTYPES[dtype_name]
    q = random_x(np_rng, (2, 1, 32, 128), dtype)  # decode: one new token, 32 query heads
    k = random_x(np_rng, (2, 9, 8, 128), dtype)  # 9 cached keys, 8 key heads
    spec = rr.RopeSpec(head_dim=128, layout=layout, base=500000.0)
    q2, k2 = rr.apply_rope_qk(cp.asarray(q), cp.asarray(k), spec, seq_axis=-3, backend="cupy")
    assert_error_model(to_host(q2), q, spec, np.full((1, 1, 1), 8))
    assert_error_model(to_host(k2), k, spec, np.arange(9).reshape(1, 9, 1))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_bitwise_equal_to_host_emulation(kernel, harness, np_rng, case, layout, dtype_name):
    """The device runs the emulated thread body: same bits (explicit FMAs, RNE conversions)."""
    supported(dtype_name)
    x, positions, spec, _ = CASES[case](np_rng, DTYPES[dtype_name], layout)
    cos, sin = tables(spec, positions, x.dtype)
    (host,) = harness.rotate([(x, cos, sin, None)], layout=layout, rotary_start=spec.rotary_start)
    gpu = kernel.rotate(
        gpu_view_like(x), cp.asarray(cos), cp.asarray(sin), layout=layout,
        rotary_start=spec.rotary_start, inverse=False,
    )  # fmt: skip
    bits = np.dtype(f"u{x.dtype.itemsize}")
    np.testing.assert_array_equal(to_host(gpu).view(bits), host.view(bits))


def test_numpy_input_is_refused():
    with pytest.raises(TypeError, match=r"`x` must be a CUDA array \(CuPy, PyTorch CUDA or JAX"):
        rr.apply_rope(np.ones((4, 8), dtype=np.float32), backend="cupy")


def test_more_than_2_to_the_31_elements(np_rng):
    """float16 (17, 4096, 32, 1024): 2.3e9 elements, rotated in place; spot checks on the host."""
    shape = (17, 4096, 32, 1024)
    free, _ = cp.cuda.runtime.memGetInfo()
    if free < 3 * np.prod(shape) * 2:
        pytest.skip(f"needs {3 * np.prod(shape) * 2 / 2**30:.1f} GiB free on the device")
    spec = rr.RopeSpec(head_dim=1024)
    x = cp.empty(shape, dtype=cp.float16)
    rows = np_rng.standard_normal((4, 32, 1024)).astype(np.float16)
    for b in range(shape[0]):  # cheap, reproducible content: 4 distinct tokens repeated
        x[b] = cp.asarray(rows)[cp.arange(shape[1]) % 4]
    rr.apply_rope(x, spec, seq_axis=-3, backend="cupy", out=x)
    for b, s in [(0, 0), (8, 2049), (16, 4095)]:
        expected_input = rows[s % 4][None]
        got = to_host(x[b, s])[None]
        assert_error_model(got, expected_input, spec, np.full((1, 1), s))
