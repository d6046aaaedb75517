"""torch.compile with its default backend (inductor) of the documented compiled step.

The CUDA page's example compiles a step calling `rr.apply_rope_qk`; the statement is
taken from the page as written and run on small CPU tensors (inductor compiles C++ for
them: one small shape, so one compile of some seconds), and its results are compared
with a float64 RoPE written here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import REPO

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(
        rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
    ),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # inductor's internals
]


def rope64(x: np.ndarray, base: float) -> np.ndarray:
    """Half-layout RoPE in float64 of (batch, seq, heads, head_dim), positions 0.. on seq."""
    n = x.shape[-1] // 2
    angles = np.arange(x.shape[1], dtype=np.float64)[:, None] * base ** (-np.arange(n) / n)
    c, s = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def documented_step() -> str:
    """The ``step = torch.compile(...)`` statement of docs/kernels/cuda.md, as written."""
    lines = (REPO / "docs" / "kernels" / "cuda.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("step = torch.compile("))
    statement = []
    for line in lines[start:]:
        statement.append(line)
        text = "\n".join(statement)
        if text.count("(") == text.count(")"):
            return text
    msg = "the compiled step of the CUDA page is not closed"
    raise AssertionError(msg)


def test_the_documented_compiled_step_runs_with_inductor_and_equals_the_formula():
    statement = documented_step()
    assert "backend=" not in statement.split("fullgraph")[-1], "inductor: the default"
    spec = rr.RopeSpec(128, base=500000.0)  # the page's spec
    namespace = {"torch": torch, "rr": rr, "spec": spec}
    torch._dynamo.reset()
    exec(statement, namespace)  # the documentation's own line
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 3, 2, 128)), rng.standard_normal((1, 3, 1, 128))
    q_rot, k_rot = namespace["step"](torch.from_numpy(q), torch.from_numpy(k))
    for got, x in ((q_rot, q), (k_rot, k)):
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), rope64(x, 500000.0), rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Dynamo's notes on the caches it meets
def test_the_reference_path_under_fullgraph_says_to_use_the_kernels_operators():
    """The default backend builds its tables on the host, which Dynamo cannot trace: a
    fullgraph compile fails saying what to call instead; without fullgraph the call runs
    eagerly and equals the formula."""
    spec = rr.RopeSpec(16, base=4321.0)  # frequencies not built before in this process
    x = np.random.default_rng(1).standard_normal((1, 4, 1, 16))
    torch._dynamo.reset()
    strict = torch.compile(lambda t: rr.apply_rope(t, spec, seq_axis=-3), fullgraph=True,
                           backend="aot_eager")  # fmt: skip
    with pytest.raises(Exception, match="backend='auto'"):
        strict(torch.from_numpy(x))
    torch._dynamo.reset()
    lenient = torch.compile(lambda t: rr.apply_rope(t, spec, seq_axis=-3), backend="aot_eager")
    np.testing.assert_allclose(lenient(torch.from_numpy(x)).numpy(), rope64(x, 4321.0),
                               rtol=0, atol=1e-12)  # fmt: skip
