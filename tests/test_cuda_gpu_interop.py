"""CuPy, PyTorch and JAX device arrays through the CUDA kernel: ``pytest -m gpu``.

Skipped without CuPy or a CUDA device (and each framework's tests without it). Checks the
results against the float64 reference within the kernel's error model, that they come back
as the caller's kind of array on its device, without copies of the inputs, launched on the
caller's current stream, and that a call with device positions is captured by
``cupy.cuda.Graph`` and ``torch.cuda.graph`` and replays new positions written in place.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host import emulation
from tests.cuda_host.cases import DTYPES, assert_error_model, random_x
from tests.cuda_host.devices import FRAMEWORKS, framework, same_kind_and_device, to_device, to_host

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")
arrays_module = emulation.backend_module("cuda.arrays")
CAPACITY = emulation.backend_module("cuda.tables").FIRST_ROWS


@pytest.fixture
def launches(monkeypatch):
    """(kernel, stream handle) of every launch."""
    seen = []
    real = arrays_module.Arrays.launch

    def spy(self, plan, stream):
        seen.append((plan.kernel, None if stream is None else stream.ptr))
        real(self, plan, stream)

    monkeypatch.setattr(arrays_module.Arrays, "launch", spy)
    return seen


def decode_inputs(rng, dtype_name, *, batch=32):
    q = random_x(rng, (batch, 1, 32, 128), DTYPES[dtype_name])
    k = random_x(rng, (batch, 1, 8, 128), DTYPES[dtype_name])
    return q, k, rr.RopeSpec(head_dim=128, base=500000.0)


POSITIONS = {
    "cached": lambda rng: rng.integers(0, CAPACITY, size=(32, 1, 1)).astype(np.int32),
    "outside": lambda rng: rng.integers(-10, 10**6, size=(32, 1, 1)).astype(np.int64),
    "fractional": lambda rng: (rng.integers(0, 9000, size=(32, 1, 1)) + 0.5).astype(np.float32),
}


@pytest.mark.parametrize("backend", ["cupy", "auto"])
@pytest.mark.parametrize("positions_kind", [None, *POSITIONS])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_framework_through_the_kernel(
    launches, np_rng, name, dtype_name, positions_kind, backend
):
    q, k, spec = decode_inputs(np_rng, dtype_name)
    q_dev, k_dev = to_device(q, name), to_device(k, name)
    if positions_kind is None:
        positions, host_positions = None, np.full((1, 1, 1), 1234)
        kwargs = {"offset": 1234}
    else:
        host_positions = POSITIONS[positions_kind](np_rng)
        positions, kwargs = to_device(host_positions, name), {}
    q2, k2 = rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend=backend,
                              **kwargs)  # fmt: skip
    assert [kernel for kernel, _ in launches] == [
        "rope_kernel" if positions is None else "rope_gather_kernel"
    ]
    assert same_kind_and_device(q2, q_dev)
    assert same_kind_and_device(k2, k_dev)
    assert_error_model(to_host(q2), q, spec, host_positions)
    assert_error_model(to_host(k2), k, spec, host_positions)
    y = rr.apply_rope(q_dev, spec, positions, seq_axis=-3, backend=backend, **kwargs)
    assert same_kind_and_device(y, q_dev)
    assert_error_model(to_host(y), q, spec, host_positions)


@pytest.mark.parametrize("name", ["cupy", "torch"])
def test_what_a_repeated_call_reads_agrees_with_the_descriptor(np_rng, name):
    """`Arrays.geometry` and `Arrays.address` (read per call) against `Arrays.describe`
    (read once per signature) and the framework's own address and device."""
    x = to_device(random_x(np_rng, (3, 5, 4, 16), DTYPES["float16"]), name)
    adapter = arrays_module.arrays_for(x)
    views = [x, x[1:], x[:, ::2], x[..., 8:]]
    for v in views:
        own = (v.data.ptr, v.device.id) if name == "cupy" else (v.data_ptr(), v.get_device())
        assert (adapter.address(v), adapter.device(v)) == own
        assert adapter.describe(v).ptr == own[0]
    same = x.copy() if name == "cupy" else x.clone()
    assert adapter.geometry(same) == adapter.geometry(x)
    assert len({adapter.geometry(v) for v in views}) == len(views)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_general_path_takes_any_cuda_array(launches, np_rng, name):
    """xPos (not on the short road): tables built on the device, then the same kernel."""
    x = random_x(np_rng, (2, 6, 4, 64), DTYPES["bfloat16"])
    spec = rr.RopeSpec(head_dim=64, xpos=rr.XPos())
    y = rr.apply_rope(to_device(x, name), spec, seq_axis=-3, role="query", backend="cupy")
    assert [kernel for kernel, _ in launches] == ["rope_kernel"]
    assert_error_model(to_host(y), x, spec, np.arange(6).reshape(1, 6, 1), role="query")


def test_no_copies_and_outputs_from_the_callers_allocator(np_rng):
    torch = framework("torch")
    q, k, spec = decode_inputs(np_rng, "bfloat16")
    q_dev, k_dev = to_device(q, "torch"), to_device(k, "torch")
    positions = to_device(POSITIONS["cached"](np_rng), "torch")
    rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")  # warm-up
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    pool = cp.get_default_memory_pool().used_bytes()
    q2, k2 = rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before == q2.nbytes + k2.nbytes  # the outputs only
    assert cp.get_default_memory_pool().used_bytes() == pool  # nothing from CuPy's pool
    assert q2.data_ptr() not in (q_dev.data_ptr(), k_dev.data_ptr())
    q_c, k_c = to_device(q, "cupy"), to_device(k, "cupy")
    rr.apply_rope_qk(q_c, k_c, spec, seq_axis=-3, backend="cupy")  # warm-up: CuPy's tables
    before = cp.get_default_memory_pool().used_bytes()
    q3, k3 = rr.apply_rope_qk(q_c, k_c, spec, seq_axis=-3, backend="cupy")
    assert cp.get_default_memory_pool().used_bytes() - before == q3.nbytes + k3.nbytes


def test_launched_on_the_callers_stream(launches, np_rng):
    torch = framework("torch")
    q, k, spec = decode_inputs(np_rng, "float16")
    q_dev, k_dev = to_device(q, "torch"), to_device(k, "torch")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        q2, k2 = rr.apply_rope_qk(q_dev, k_dev, spec, seq_axis=-3, offset=9, backend="cupy")
    side.synchronize()
    assert launches[-1][1] == side.cuda_stream
    assert_error_model(to_host(q2), q, spec, np.full((1, 1, 1), 9))
    assert_error_model(to_host(k2), k, spec, np.full((1, 1, 1), 9))
    with cp.cuda.Stream(non_blocking=True) as stream:
        y = rr.apply_rope(to_device(q, "cupy"), spec, seq_axis=-3, offset=9, backend="cupy")
        stream.synchronize()
    assert launches[-1][1] == stream.ptr
    assert_error_model(to_host(y), q, spec, np.full((1, 1, 1), 9))


def test_cupy_graph_replays_new_positions(np_rng):
    q, k, spec = decode_inputs(np_rng, "bfloat16")
    q_dev, k_dev = to_device(q, "cupy"), to_device(k, "cupy")
    positions = cp.asarray(POSITIONS["cached"](np_rng))
    cp.cuda.Stream.null.synchronize()  # written on the legacy stream; read on another below
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")  # warm-up
        stream.begin_capture()
        q2, k2 = rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")
        graph = stream.end_capture()
        for step in range(3):
            new = np_rng.integers(0, 10**5, size=(32, 1, 1)).astype(np.int32) + step
            positions[...] = cp.asarray(new)  # in place, on the stream
            graph.launch(stream=stream)
            stream.synchronize()
            assert_error_model(to_host(q2), q, spec, new)
            assert_error_model(to_host(k2), k, spec, new)


def test_torch_graph_replays_new_positions(np_rng):
    torch = framework("torch")
    q, k, spec = decode_inputs(np_rng, "bfloat16")
    q_dev, k_dev = to_device(q, "torch"), to_device(k, "torch")
    positions = to_device(POSITIONS["cached"](np_rng).astype(np.int64), "torch")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph asks
        for _ in range(3):
            rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q2, k2 = rr.apply_rope_qk(q_dev, k_dev, spec, positions, seq_axis=-3, backend="cupy")
    for step in range(3):
        new = np_rng.integers(-5, 10**5, size=(32, 1, 1)) + step
        positions.copy_(torch.from_numpy(new))
        graph.replay()
        torch.cuda.synchronize()
        assert_error_model(to_host(q2), q, spec, new)
        assert_error_model(to_host(k2), k, spec, new)


def test_tensors_that_record_gradients(np_rng):
    torch = framework("torch")
    host = random_x(np_rng, (2, 5, 4, 32), DTYPES["float32"])
    x = to_device(host, "torch").requires_grad_()
    for backend in ("cupy", "auto"):  # the custom operator: the kernel, differentiable
        y = rr.apply_rope(x, seq_axis=-3, backend=backend)
        assert "rope_ref_apply_rope" in y.grad_fn.name()
    xpos = rr.RopeSpec(head_dim=32, xpos=rr.XPos())  # a role: not the operator's call
    with pytest.raises(TypeError, match="must not require grad for backend='cupy'"):
        rr.apply_rope(x, xpos, seq_axis=-3, backend="cupy", role="query")
    y = rr.apply_rope(x, xpos, seq_axis=-3, backend="auto", role="query")  # the reference
    assert y.grad_fn is not None
    with torch.no_grad():
        z = rr.apply_rope(x, seq_axis=-3, backend="cupy")
    assert_error_model(to_host(z), host, rr.RopeSpec(head_dim=32), np.arange(5).reshape(1, 5, 1))


def test_bfloat16_reference_on_cupy(np_rng):
    x = random_x(np_rng, (3, 7, 2, 32), DTYPES["bfloat16"])
    try:
        y = rr.apply_rope(to_device(x, "cupy"), seq_axis=-3)
    except (TypeError, NotImplementedError) as err:  # a CuPy without bfloat16 arithmetic
        pytest.skip(f"this CuPy cannot compute in bfloat16: {err}")
    expected = rr.apply_rope(x, seq_axis=-3)  # NumPy + ml_dtypes: the host stand-in
    np.testing.assert_array_equal(to_host(y).view(np.uint16), expected.view(np.uint16))


def test_gather_kernel_equals_the_host_emulation(np_rng):
    """The device runs the emulated thread body: for cached rows, the same bits."""
    if emulation.nvcc() is None:
        pytest.skip("nvcc is not on PATH: no host emulation to compare bits with")
    harness = emulation.shared_harness()
    q, k, spec = decode_inputs(np_rng, "bfloat16")
    positions = POSITIONS["cached"](np_rng)
    with arrays_module.stand_in(arrays_module.HostStandIn(launch=harness.launch)):
        host = rr.apply_rope_qk(q, k, spec, positions, seq_axis=-3, backend="cupy")
    gpu = rr.apply_rope_qk(to_device(q, "cupy"), to_device(k, "cupy"), spec,
                           cp.asarray(positions), seq_axis=-3, backend="cupy")  # fmt: skip
    for h, g in zip(host, gpu, strict=True):
        np.testing.assert_array_equal(to_host(g).view(np.uint16), h.view(np.uint16))
