"""torch.func transforms through the kernels' custom operators: vmap, grad, jacrev, jacfwd.

Every expected value is an independent float64 RoPE written here in torch (the textbook
formula, half layout), and every expected derivative torch's own transform of that
formula: RoPE is linear in x (its Jacobian is the rotation) and differentiable in float
positions through the angles.
"""

from __future__ import annotations

import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

SPEC = rr.RopeSpec(8)
BACKENDS = ["numba", "auto"]
# float64 results of two evaluations of the same formula: the angle p * theta (|p| < 16)
# and the products round; 1e-13 is about 450 ulps of 1 and far below any wrong rotation.
TOL = 1e-13


def rope(x, positions, *, inverse=False):
    """Half-layout RoPE of the last axis of `x` at `positions` (along axis -2), float64."""
    n = x.shape[-1] // 2
    theta = 10000.0 ** (-torch.arange(n, dtype=torch.float64) / n)
    angles = positions.to(torch.float64)[:, None] * theta
    angles = -angles if inverse else angles
    cos, sin = torch.cos(angles), torch.sin(angles)
    a, b = x[..., :n], x[..., n:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def data(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=generator)


POSITIONS = torch.tensor([0.5, 2.0, 7.25], dtype=torch.float64)


def close(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert float((got - want).abs().max()) <= TOL


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_over_apply_rope_equals_the_formula(backend):
    x = data(4, 2, 3, 8)
    got = torch.func.vmap(lambda t: rr.apply_rope(t, SPEC, backend=backend))(x)
    close(got, rope(x, torch.arange(3)))
    moved = torch.func.vmap(lambda t: rr.apply_rope(t, SPEC, backend=backend), in_dims=2)(x)
    close(moved, rope(x.movedim(2, 0), torch.arange(2)))  # examples of shape (4, 2, 8)
    # a positive seq_axis counts the example's own axes, not the mapped one
    first = torch.func.vmap(lambda t: rr.apply_rope(t, SPEC, POSITIONS, seq_axis=0,
                                                    backend=backend))  # fmt: skip
    close(first(x[:, 0]), rope(x[:, 0], POSITIONS))


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_with_mapped_positions_rotates_each_example_at_its_own(backend):
    x, positions = data(2, 3, 8), torch.stack([POSITIONS, POSITIONS * 3 + 1])
    got = torch.func.vmap(lambda t, p: rr.apply_rope(t, SPEC, p, backend=backend))(x, positions)
    for i in range(2):
        close(got[i], rope(x[i], positions[i]))
    nested = torch.func.vmap(torch.func.vmap(lambda t: rr.apply_rope(t, SPEC, backend=backend)))
    close(nested(data(2, 3, 5, 8)), rope(data(2, 3, 5, 8), torch.arange(5)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_over_apply_rope_qk_equals_the_formula(backend):
    q, k = data(3, 2, 8, seed=1), data(5, 8, seed=2)  # k is not mapped
    q_rot, k_rot = torch.func.vmap(lambda t: rr.apply_rope_qk(t, k, SPEC, backend=backend))(q)
    close(q_rot, rope(q, torch.arange(3, 5)))  # the queries take the keys' last positions
    close(k_rot, rope(k, torch.arange(5)).expand(3, 5, 8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_and_jacobians_with_respect_to_x_equal_the_formulas(backend):
    x = data(3, 8, seed=3)

    def loss(f):
        return lambda t: (f(t) ** 3).sum()

    ours = lambda t: rr.apply_rope(t, SPEC, POSITIONS, backend=backend)  # noqa: E731
    formula = lambda t: rope(t, POSITIONS)  # noqa: E731
    close(torch.func.grad(loss(ours))(x), torch.func.grad(loss(formula))(x))
    close(torch.func.jacrev(ours)(x), torch.func.jacrev(formula)(x))
    close(torch.func.jacfwd(ours)(x), torch.func.jacfwd(formula)(x))
    close(torch.func.hessian(loss(ours))(x), torch.func.hessian(loss(formula))(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_and_jacobians_with_respect_to_positions_equal_the_formulas(backend):
    x = data(3, 8, seed=4)
    ours = lambda p: rr.apply_rope(x, SPEC, p, backend=backend)  # noqa: E731
    formula = lambda p: rope(x, p)  # noqa: E731
    weights = data(3, 8, seed=5)
    close(torch.func.grad(lambda p: (ours(p) * weights).sum())(POSITIONS),
          torch.func.grad(lambda p: (formula(p) * weights).sum())(POSITIONS))  # fmt: skip
    close(torch.func.jacrev(ours)(POSITIONS), torch.func.jacrev(formula)(POSITIONS))
    close(torch.func.jacfwd(ours)(POSITIONS), torch.func.jacfwd(formula)(POSITIONS))


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacrev_of_apply_rope_qk_equals_the_formula(backend):
    q, k = data(2, 8, seed=6), data(4, 8, seed=7)
    ours = torch.func.jacrev(lambda a, b: rr.apply_rope_qk(a, b, SPEC, backend=backend),
                             argnums=(0, 1))(q, k)  # fmt: skip
    want = torch.func.jacrev(lambda a, b: (rope(a, torch.arange(2, 4)), rope(b, torch.arange(4))),
                             argnums=(0, 1))(q, k)  # fmt: skip
    for got_row, want_row in zip(ours, want, strict=True):
        for got, expected in zip(got_row, want_row, strict=True):
            close(got, expected)


def test_forward_mode_tangents_of_x_equal_the_formula():
    from torch.autograd import forward_ad

    x, tangent = data(3, 8, seed=8), data(3, 8, seed=9)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, tangent)
        got = forward_ad.unpack_dual(rr.apply_rope(dual, SPEC, POSITIONS, backend="auto"))
    assert got.tangent is not None, "the tangent was dropped"
    close(got.tangent, rope(tangent, POSITIONS))
    close(got.primal, rope(x, POSITIONS))


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_over_no_examples_gives_an_empty_batch(backend):
    """A mapped axis of length 0 with mapped positions (one call per example: none)."""
    x, positions = torch.zeros(0, 3, 8, dtype=torch.float64), torch.zeros(0, 3)
    got = torch.func.vmap(lambda t, p: rr.apply_rope(t, SPEC, p, backend=backend))(x, positions)
    assert got.shape == (0, 3, 8)
    pair = torch.func.vmap(lambda t, p: rr.apply_rope_qk(t, t, SPEC, p, backend=backend))(
        x, positions
    )
    assert [tuple(t.shape) for t in pair] == [(0, 3, 8), (0, 3, 8)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_out_under_vmap_gets_the_documented_error(backend):
    """`out` under a transform is refused by name (the tensor has no storage to run it on)."""
    x = data(2, 3, 8)
    for out, error, words in (
        (torch.empty(3, 8, dtype=torch.float64), ValueError, "torch.func transform"),
        ("no tensor", TypeError, "must be a torch tensor"),
    ):
        with pytest.raises(error, match=words):
            torch.func.vmap(lambda t, o=out: rr.apply_rope(t, SPEC, backend=backend, out=o))(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_under_vmap_another_mistake_is_reported_before_out(backend):
    out = torch.empty(3, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match="seq_axis"):
        torch.func.vmap(lambda t: rr.apply_rope(t, SPEC, seq_axis=5, backend=backend, out=out))(
            data(2, 3, 8)
        )
