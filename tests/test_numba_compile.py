"""torch.compile of steps calling rope_ref: one custom operator per call, no graph break.

Compiles are slow, so there are few: one inductor compile of a step calling
`apply_rope` and `apply_rope_qk` (with the spec changed between calls), one of a
training step's gradient, and `torch.library.opcheck` of both operators (schema, fake
tensors, autograd registration), which compiles nothing.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(
        rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
    ),
    # inductor's own modules warn about their internals on some versions
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def _step(q, k, spec, offset):
    q1 = rr.apply_rope(q, spec, seq_axis=-3, offset=offset, backend="auto")
    q2, k2 = rr.apply_rope_qk(q, k, spec, seq_axis=-3, backend="numba")
    return q1, q2, k2


FIRST_CALL_COMPILED = """
import torch, rope_ref as rr
spec = rr.RopeSpec(16)
def step(q, k):
    y = rr.apply_rope(q, spec, offset=3, backend="auto")
    return y, rr.apply_rope_qk(q, k, spec, backend="numba")[1]
q, k = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
got = torch.compile(step, fullgraph=True, backend="aot_eager")(q, k)
want = step(q, k)
print(all(torch.equal(a, b) for a, b in zip(got, want)))
"""


def test_the_first_call_of_a_process_can_be_compiled():
    """Nothing about tensors or the kernel module is known yet when torch.compile traces
    the first call: tracing must neither import the kernel through importlib nor fill
    caches (side effects torch.compile cannot replay)."""
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FIRST_CALL_COMPILED],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.stdout.strip() == "True", result.stderr[-3000:]


def test_fullgraph_compile_equals_eager_bit_for_bit():
    torch._dynamo.reset()
    compiled = torch.compile(_step, fullgraph=True)
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.standard_normal((1, 6, 4, 32)).astype(np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 9, 4, 32)).astype(np.float32))
    for spec, offset in ((rr.RopeSpec(32), 5), (rr.RopeSpec(32, base=500.0), 5)):
        eager = _step(q, k, spec, offset)
        got = compiled(q, k, spec, offset)
        for a, b in zip(got, eager, strict=True):
            assert torch.equal(a, b)
    assert not torch.equal(got[0], _step(q, k, rr.RopeSpec(32), 5)[0])  # the spec counts


def test_compiled_gradient_equals_eager():
    torch._dynamo.reset()
    spec = rr.RopeSpec(16, layout="interleaved")

    def loss(x):
        return (rr.apply_rope(x, spec, offset=3, backend="auto") ** 2 * x).sum()

    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 5, 16)))
    eager = x.clone().requires_grad_()
    loss(eager).backward()
    compiled = x.clone().requires_grad_()
    torch.compile(loss, fullgraph=True, backend="aot_eager")(compiled).backward()
    assert torch.equal(compiled.grad, eager.grad)


def test_opcheck_of_both_operators():
    numba_torch = importlib.import_module("rope_ref.backends.torch_ops.operators")
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    key = numba_torch._spec_key(rr.RopeSpec(8))
    positions = torch.tensor([1.0, 4.0, 9.0], dtype=torch.float64)
    torch.library.opcheck(
        torch.ops.rope_ref.apply_rope.default, (x, positions, key, 3, None, -2, False, None, None)
    )
    torch.library.opcheck(
        torch.ops.rope_ref.apply_rope_qk.default, (x, k, None, None, key, 0, 2.5, -2, True, None)
    )
