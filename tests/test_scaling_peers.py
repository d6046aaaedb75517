"""Linear and NTKAware against rotary-embedding-torch's interpolate_factor and
theta_rescale_factor, and custom frequencies against its custom_freqs.

rotary-embedding-torch builds frequencies and angles in float32: ``theta_j`` is off by at
most ``(|ln theta_j| + 6) u`` relatively (``u = 2^-24``; the exponent's rounding moves
``ln theta_j`` by ``u`` relatively, pow/division/the rescaled base add a few ``u``), and the
angle ``(p / f) * theta_j`` by ``2u`` more (the position division and the product); cos and
sin add ``u``. An output differs by at most ``(|d phi| + 3u) * 2 max|x|``.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
ret = pytest.importorskip("rotary_embedding_torch")

U32 = 2.0**-24


def _tol(spec: rr.RopeSpec, x, max_position: float, slack: float = 0.0) -> float:
    theta = rr.inv_freq(spec)
    rel = (np.abs(np.log(theta)) + 8 + slack) * U32
    dphi = float(np.max(max_position * theta * rel))
    return (dphi + 3 * U32) * 2 * float(torch.max(torch.abs(x)))


def _queries(seq: int, head_dim: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, seq, head_dim, dtype=torch.float64, generator=gen)


@pytest.mark.parametrize("factor", [1.0, 2.0, 7.5, 32.0])
@pytest.mark.parametrize(("dim", "theta"), [(16, 10000.0), (64, 500000.0)])
def test_linear_is_interpolate_factor(factor, dim, theta):
    rotary = ret.RotaryEmbedding(dim, theta=theta, interpolate_factor=factor)
    q = _queries(50, dim + 4, int(factor))
    theirs = rotary.rotate_queries_or_keys(q, offset=100)
    spec = rr.RopeSpec(
        dim + 4, rotary_dim=dim, base=theta, layout="interleaved", scaling=rr.scaling.Linear(factor)
    )
    ours = rr.apply_rope(q, spec, offset=100)
    assert float(torch.max(torch.abs(ours - theirs))) <= _tol(spec, q, 149.0)
    plain = rr.apply_rope(
        q, rr.RopeSpec(dim + 4, rotary_dim=dim, base=theta, layout="interleaved"), offset=100
    )
    if factor != 1.0:  # the comparison can tell Linear from plain RoPE
        assert float(torch.max(torch.abs(plain - theirs))) > 100 * _tol(spec, q, 149.0)


@pytest.mark.parametrize("factor", [1.0, 2.0, 8.0, 64.0])
@pytest.mark.parametrize(("dim", "theta"), [(8, 10000.0), (32, 10000.0), (128, 1e6)])
def test_ntk_aware_is_theta_rescale_factor(factor, dim, theta):
    rotary = ret.RotaryEmbedding(dim, theta=theta, theta_rescale_factor=factor)
    q = _queries(40, dim, int(factor) + dim)
    theirs = rotary.rotate_queries_or_keys(q)
    spec = rr.RopeSpec(dim, base=theta, layout="interleaved", scaling=rr.scaling.NTKAware(factor))
    ours = rr.apply_rope(q, spec)
    assert float(torch.max(torch.abs(ours - theirs))) <= _tol(spec, q, 39.0)


def test_custom_freqs_are_custom_freqs():
    freqs = torch.tensor([3.0, 1.0, 0.25, 0.0], dtype=torch.float32)
    rotary = ret.RotaryEmbedding(8, custom_freqs=freqs)
    q = _queries(30, 8, 0)
    theirs = rotary.rotate_queries_or_keys(q)
    spec = rr.RopeSpec(8, layout="interleaved", freqs=freqs.tolist())
    ours = rr.apply_rope(q, spec)
    # float32 angles p * f (exact frequencies here) add one rounding: |d phi| <= 29 * 3 * u
    assert float(torch.max(torch.abs(ours - theirs))) <= (29 * 3 * U32 + 3 * U32) * 2 * float(
        torch.max(torch.abs(q))
    )
