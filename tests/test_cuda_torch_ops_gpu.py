"""The custom operators on CUDA tensors: ``pytest -m gpu`` with CuPy and a CUDA PyTorch.

What test_cuda_torch_ops.py checks through the host emulation, on a device: a CUDA
tensor that records gradients goes through ``rope_ref::apply_rope`` (``"cupy"`` and
``"auto"``), whose gradient is the inverse rotation (against torch's own autograd of the
reference path, and `gradcheck`); ``torch.compile(fullgraph=True)`` of a step on CUDA
tensors equals eager bit for bit; `torch.library.opcheck` of both operators on CUDA
tensors; the operator's forward is the kernel's own call, bit for bit.
"""

from __future__ import annotations

import importlib

import pytest

import rope_ref as rr
from tests.cuda_host.devices import framework

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

cp = pytest.importorskip("cupy")
torch = pytest.importorskip("torch")

SPEC = rr.RopeSpec(64, rotary_dim=32, rotary_start=8, layout="interleaved")


@pytest.fixture(scope="module", autouse=True)
def cuda():
    return framework("torch")


def randn(*shape, dtype=torch.float64, grad=False):
    return torch.randn(*shape, dtype=dtype, device="cuda", requires_grad=grad)


@pytest.mark.parametrize("backend", ["cupy", "auto"])
def test_gradient_is_the_inverse_rotation(backend):
    x, g = randn(2, 5, 64, grad=True), randn(2, 5, 64)
    y = rr.apply_rope(x, SPEC, offset=7, backend=backend)
    assert "rope_ref_apply_rope" in y.grad_fn.name(), y.grad_fn.name()
    (y * g).sum().backward()
    reference = x.detach().clone().requires_grad_()
    (rr.apply_rope(reference, SPEC, offset=7) * g).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda t: rr.apply_rope_qk(t, t[:, :2], SPEC, offset=3, backend=backend),
        (randn(2, 4, 64, grad=True),), eps=1e-6, atol=1e-8,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_operator_is_the_kernel_call_bit_for_bit(dtype):
    x = randn(3, 6, 4, 64, dtype=dtype, grad=True)
    y = rr.apply_rope(x, SPEC, seq_axis=-3, offset=5, backend="cupy")
    with torch.no_grad():
        want = rr.apply_rope(x, SPEC, seq_axis=-3, offset=5, backend="cupy")
    assert y.grad_fn is not None
    assert want.grad_fn is None
    assert torch.equal(y.detach(), want)


def test_fullgraph_compile_on_cuda_equals_eager():
    torch._dynamo.reset()

    def step(q, k):
        q1 = rr.apply_rope(q, SPEC, seq_axis=-3, offset=9, backend="auto")
        q2, k2 = rr.apply_rope_qk(q, k, SPEC, seq_axis=-3, backend="cupy")
        return q1, q2, k2

    q = randn(1, 4, 4, 64, dtype=torch.bfloat16)
    k = randn(1, 8, 2, 64, dtype=torch.bfloat16)
    for got, want in zip(torch.compile(step, fullgraph=True)(q, k), step(q, k), strict=True):
        assert torch.equal(got, want)


def test_compiled_gradient_on_cuda_equals_eager():
    torch._dynamo.reset()
    g = randn(2, 5, 64)

    def loss(x):
        return (rr.apply_rope(x, SPEC, offset=3, backend="auto") * g).sum()

    eager = randn(2, 5, 64, grad=True)
    compiled = eager.detach().clone().requires_grad_()
    loss(eager).backward()
    torch.compile(loss, fullgraph=True, backend="aot_eager")(compiled).backward()
    assert torch.equal(compiled.grad, eager.grad)


def test_opcheck_on_cuda_tensors():
    numba_torch = importlib.import_module("rope_ref.backends.torch_ops.operators")
    x, k = randn(2, 3, 64, grad=True), randn(2, 5, 64, grad=True)
    key = numba_torch._spec_key(SPEC)
    positions = torch.tensor([1.0, 4.0, 9.0], dtype=torch.float64, device="cuda")
    torch.library.opcheck(
        torch.ops.rope_ref.apply_rope.default, (x, positions, key, 3, None, -2, False, None, None)
    )
    torch.library.opcheck(
        torch.ops.rope_ref.apply_rope_qk.default, (x, k, None, None, key, 0, 2.5, -2, True, None)
    )
