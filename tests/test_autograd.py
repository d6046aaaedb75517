"""Differentiability with respect to x under torch autograd and jax.grad.

RoPE is linear and orthogonal in x: y = R x, so d/dx sum(y * g) = R^T g, the rotation by the
negative angles, i.e. apply_rope(g, inverse=True). The expected gradient is also built from
explicit cos/sin (numpy) so that the check does not rest on rope_ref alone.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host, max_abs

SPECS = [
    rr.RopeSpec(head_dim=8, layout="half"),
    rr.RopeSpec(head_dim=8, layout="interleaved"),
    rr.RopeSpec(head_dim=12, rotary_dim=6, rotary_start=2, layout="half"),
    rr.RopeSpec(head_dim=12, rotary_dim=4, rotary_start=6, layout="interleaved", base=500.0),
]
IDS = ["half", "interleaved", "half-partial", "interleaved-partial"]
BATCH, SEQ = 2, 3
OFFSET = 37.0
# Gradients are float64 rotations of g with |phi| <= OFFSET + 2: 4 eps (|phi| + 1) max|g|
# bounds the difference between two float64 evaluations (angle rounding plus two products).
# The standard-normal g used here has max|g| < 5.
TOL = 4 * 2.0**-52 * (OFFSET + 3.0) * 5.0


def _transpose_rotation(g: np.ndarray, spec: rr.RopeSpec) -> np.ndarray:
    # R^T g from the formula: pair (a, b) at angle phi maps to (a c + b s, b c - a s).
    n, s0 = spec.n_pairs, spec.rotary_start
    pos = OFFSET + np.arange(g.shape[-2], dtype=np.float64)
    out = g.copy()
    for j in range(n):
        a, b = (s0 + j, s0 + j + n) if spec.layout == "half" else (s0 + 2 * j, s0 + 2 * j + 1)
        inv = spec.base ** (-2.0 * j / (2 * n))
        c, s = np.cos(pos * inv), np.sin(pos * inv)  # (seq,), broadcast over batch
        out[..., a] = g[..., a] * c + g[..., b] * s
        out[..., b] = g[..., b] * c - g[..., a] * s
    return out


def _data(spec: rr.RopeSpec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (BATCH, SEQ, spec.head_dim)
    x, g = rng.standard_normal(shape), rng.standard_normal(shape)
    assert np.max(np.abs(g)) < 5.0  # TOL assumes it
    return x, g


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_torch_autograd_gradient_is_inverse_rotation(spec):
    torch = pytest.importorskip("torch")
    x_np, g_np = _data(spec, 0)
    x = torch.tensor(x_np, requires_grad=True)
    g = torch.tensor(g_np)
    y = rr.apply_rope(x, spec, offset=OFFSET)
    assert y.requires_grad, "apply_rope cut the autograd graph"
    (y * g).sum().backward()
    assert x.grad is not None
    assert max_abs(x.grad, rr.apply_rope(g, spec, offset=OFFSET, inverse=True)) <= TOL
    assert max_abs(x.grad, _transpose_rotation(g_np, spec)) <= TOL


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("form", ["rotate_half", "complex", "matrix"])
def test_torch_gradcheck(spec, form):
    torch = pytest.importorskip("torch")
    x_np, _ = _data(spec, 1)
    x = torch.tensor(x_np, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: rr.apply_rope(t, spec, offset=OFFSET, form=form), (x,), eps=1e-6, atol=1e-8
    )


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_torch_gradient_with_positions_tensor(spec):
    torch = pytest.importorskip("torch")
    x_np, g_np = _data(spec, 2)
    x = torch.tensor(x_np, requires_grad=True)
    positions = torch.arange(SEQ, dtype=torch.float64) + OFFSET
    (rr.apply_rope(x, spec, positions) * torch.tensor(g_np)).sum().backward()
    assert max_abs(x.grad, _transpose_rotation(g_np, spec)) <= TOL


@pytest.fixture
def jax_x64():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("form", ["rotate_half", "complex"])
def test_jax_grad_is_inverse_rotation(jax_x64, spec, form):
    jnp = jax_x64.numpy
    x_np, g_np = _data(spec, 3)
    x, g = jnp.asarray(x_np), jnp.asarray(g_np)
    assert x.dtype == jnp.float64

    def loss(t):
        return jnp.sum(rr.apply_rope(t, spec, offset=OFFSET, form=form) * g)

    grad = jax_x64.grad(loss)(x)
    assert grad.dtype == jnp.float64
    assert max_abs(grad, rr.apply_rope(g, spec, offset=OFFSET, inverse=True)) <= TOL
    assert max_abs(grad, _transpose_rotation(g_np, spec)) <= TOL


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jax_jit_grad(jax_x64, spec):
    jnp = jax_x64.numpy
    x_np, g_np = _data(spec, 4)
    g = jnp.asarray(g_np)
    grad = jax_x64.jit(jax_x64.grad(lambda t: jnp.sum(rr.apply_rope(t, spec, offset=OFFSET) * g)))
    assert max_abs(host(grad(jnp.asarray(x_np))), _transpose_rotation(g_np, spec)) <= TOL


# ----------------------------------------------------------------------------------------
# The Numba kernel: a custom operator whose backward is the kernel's inverse rotation
# ----------------------------------------------------------------------------------------

needs_numba = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)
XPOS = rr.RopeSpec(head_dim=8, xpos=rr.XPos(scale_base=16.0))


@needs_numba
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_kernel_gradient_is_the_transpose_rotation(spec, backend):
    torch = pytest.importorskip("torch")
    x_np, g_np = _data(spec, 5)
    x = torch.tensor(x_np, requires_grad=True)
    y = rr.apply_rope(x, spec, offset=OFFSET, backend=backend)
    assert "rope_ref" in y.grad_fn.name(), y.grad_fn.name()  # the kernel's operator
    (y * torch.tensor(g_np)).sum().backward()
    assert max_abs(x.grad, _transpose_rotation(g_np, spec)) <= TOL
    reference = torch.tensor(x_np, requires_grad=True)  # torch's own autograd
    (rr.apply_rope(reference, spec, offset=OFFSET) * torch.tensor(g_np)).sum().backward()
    assert max_abs(x.grad, reference.grad) <= TOL


@needs_numba
@pytest.mark.parametrize("spec", [SPECS[1], SPECS[2]], ids=IDS[1:3])
def test_kernel_gradcheck(spec):
    torch = pytest.importorskip("torch")
    x = torch.tensor(_data(spec, 6)[0], requires_grad=True)
    positions = torch.tensor([[0.5, 3.0, 9.0], [2.0, 2.0, 70.0]], dtype=torch.float64)

    def rotations(t):
        return (
            rr.apply_rope(t, spec, offset=OFFSET, backend="numba"),
            rr.apply_rope(t, spec, positions, backend="numba"),
            rr.apply_rope(t, spec, offset=2.5, inverse=True, backend="auto"),
        )

    assert torch.autograd.gradcheck(rotations, (x,), eps=1e-6, atol=1e-8)
    assert torch.autograd.gradgradcheck(rotations, (x,), eps=1e-6, atol=1e-8)


@needs_numba
@pytest.mark.parametrize("spec", [SPECS[0], XPOS], ids=["half", "xpos"])
def test_kernel_qk_gradcheck(spec):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    q = torch.tensor(rng.standard_normal((2, 2, 8)), requires_grad=True)
    k = torch.tensor(rng.standard_normal((2, 5, 8)), requires_grad=True)

    def rotations(a, b):
        return rr.apply_rope_qk(a, b, spec, offset=3, backend="numba")

    assert torch.autograd.gradcheck(rotations, (q, k), eps=1e-6, atol=1e-8)
    q_rot, _ = rotations(q, k)
    assert "rope_ref" in q_rot.grad_fn.name()
    q_rot.sum().backward()  # a gradient for q only: k's is zero
    assert k.grad is not None
    assert not k.grad.any()


@needs_numba
def test_kernel_gradient_keeps_the_dtype():
    torch = pytest.importorskip("torch")
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.ones((3, 8), dtype=dtype, requires_grad=True)
        rr.apply_rope(x, backend="auto").sum().backward()
        assert x.grad is not None
        assert x.grad.dtype == dtype


# ----------------------------------------------------------------------------------------
# Float positions: dy/dp through the angles, as torch's autograd of the formula gives it
# ----------------------------------------------------------------------------------------


def _torch_rope(x, positions, spec):
    """RoPE of `spec`'s pairs (either layout, partial) in float64 torch, differentiable in
    x and positions (along axis -2), with frequencies base ** (-2j / rotary_dim)."""
    torch = pytest.importorskip("torch")
    n, s0 = spec.n_pairs, spec.rotary_start
    theta = spec.base ** (-2.0 * torch.arange(n, dtype=torch.float64) / (2 * n))
    angles = positions[:, None] * theta
    cos, sin = torch.cos(angles), torch.sin(angles)
    out = list(x.unbind(-1))
    for j in range(n):
        a, b = (s0 + j, s0 + j + n) if spec.layout == "half" else (s0 + 2 * j, s0 + 2 * j + 1)
        out[a] = x[..., a] * cos[:, j] - x[..., b] * sin[:, j]
        out[b] = x[..., b] * cos[:, j] + x[..., a] * sin[:, j]
    return torch.stack(out, dim=-1)


@needs_numba
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_float_positions_get_the_gradient_of_the_angles(spec, backend):
    """positions.grad (dropped before) equals torch's autograd of the formula; x's
    gradient is still the kernel's inverse rotation."""
    torch = pytest.importorskip("torch")
    x_np, g_np = _data(spec, 9)
    g = torch.tensor(g_np)
    start = [OFFSET + 0.25, OFFSET + 1.5, OFFSET - 3.0]
    x, p = torch.tensor(x_np, requires_grad=True), torch.tensor(start, requires_grad=True)
    y = rr.apply_rope(x, spec, p, backend=backend)
    assert "rope_ref" in y.grad_fn.name(), y.grad_fn.name()  # the kernel's operator
    (y * g).sum().backward()
    want_x, want_p = torch.tensor(x_np, requires_grad=True), torch.tensor(start, requires_grad=True)
    (_torch_rope(want_x, want_p, spec) * g).sum().backward()
    assert p.grad is not None, "the positions' gradient was dropped"
    # each element of dL/dp sums BATCH * n_pairs terms theta_j (g . J y), |.| < 5 * 5 * 2
    assert max_abs(p.grad, want_p.grad) <= TOL * BATCH * spec.n_pairs * 10
    assert max_abs(x.grad, want_x.grad) <= TOL


@needs_numba
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_float_positions_of_queries_and_keys_get_their_gradients(backend):
    torch = pytest.importorskip("torch")
    spec = SPECS[0]
    rng = np.random.default_rng(10)
    q_np, k_np = rng.standard_normal((2, 2, 8)), rng.standard_normal((2, 4, 8))
    gq, gk = (
        torch.tensor(rng.standard_normal((2, 2, 8))),
        torch.tensor(rng.standard_normal((2, 4, 8))),
    )
    grads = []
    for ours in (True, False):
        q, k = torch.tensor(q_np, requires_grad=True), torch.tensor(k_np, requires_grad=True)
        p = torch.tensor([5.5, 9.25], requires_grad=True)
        kp = torch.tensor([0.0, 1.5, 5.5, 9.25], requires_grad=True)
        if ours:
            q_rot, k_rot = rr.apply_rope_qk(q, k, spec, p, k_positions=kp, backend=backend)
        else:
            q_rot, k_rot = _torch_rope(q, p, spec), _torch_rope(k, kp, spec)
        ((q_rot * gq).sum() + (k_rot * gk).sum()).backward()
        grads.append([t.grad for t in (q, k, p, kp)])
    for got, want in zip(*grads, strict=True):
        assert got is not None
        assert max_abs(got, want) <= TOL * 100


@needs_numba
def test_positions_gradient_under_no_grad_or_detached_is_not_recorded():
    torch = pytest.importorskip("torch")
    x = torch.ones((3, 8), dtype=torch.float64)
    p = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        assert not rr.apply_rope(x, SPECS[0], p, backend="numba").requires_grad
    assert rr.apply_rope(x, SPECS[0], p, backend="numba").requires_grad
