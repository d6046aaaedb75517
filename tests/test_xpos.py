"""rr.XPos: validation, the role requirement, and agreement with rotary-embedding-torch.

rotary-embedding-torch builds inverse frequencies and angles in float32 (positions are
exact integers below 2^24): an angle is off by at most ``p * theta_j * (|ln theta_j| + 6) u``
with ``u = 2^-24``, cos/sin by ``u`` more. Its xPos scale is ``zeta ** power`` with zeta
rounded to float32 (relative error ``u``), so the scale is off by ``|power| u`` relatively.
An output then differs by at most ``s (|d phi| + 3u + |power| u) * 2 max|x|`` (s the
largest scale).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rope_ref as rr
from tests._helpers import host

U32 = 2.0**-24


def test_xpos_validates_scale_base():
    for bad in (0.0, -1.0):
        with pytest.raises(
            ValueError, match=re.escape(f"`scale_base` must be positive; got {bad}")
        ):
            rr.XPos(scale_base=bad)
    with pytest.raises(ValueError, match=r"`scale_base` must be finite"):
        rr.XPos(scale_base=math.inf)
    with pytest.raises(TypeError, match=r"`scale_base` must be a real number"):
        rr.XPos(scale_base="512")


def test_xpos_is_a_frozen_hashable_xpos_rule():
    rule = rr.XPos(64)
    assert isinstance(rule, rr.XPosRule)
    assert hash(rule) == hash(rr.XPos(64.0))
    assert rule == rr.XPos(64.0)
    with pytest.raises(AttributeError):
        rule.scale_base = 1.0  # type: ignore[misc]


def test_zeta_and_center_follow_the_formula():
    rule = rr.XPos()
    d = 10
    expected = [(2 * j + 0.4 * d) / (1.4 * d) for j in range(d // 2)]
    np.testing.assert_allclose(rule.zeta(d), expected, rtol=2**-52, atol=0)
    assert [rule.center(n) for n in (1, 2, 7, 8.5)] == [0.0, 1.0, 3.0, 4.0]


def test_apply_rope_with_xpos_requires_role():
    spec = rr.RopeSpec(head_dim=8, xpos=rr.XPos())
    x = np.ones((4, 8))
    with pytest.raises(ValueError, match=r"`role` must be 'query' or 'key'"):
        rr.apply_rope(x, spec)
    with pytest.raises(ValueError, match=r"`role` must be one of 'query', 'key'; got 'value'"):
        rr.apply_rope(x, spec, role="value")
    q = rr.apply_rope(x, spec, role="query")
    k = rr.apply_rope(x, spec, role="key")
    plain = rr.apply_rope(x, rr.RopeSpec(head_dim=8))
    # q and k carry reciprocal scales: the product of matching features is plain RoPE's.
    np.testing.assert_allclose(q * k, plain * plain, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize(
    ("dim", "head_dim", "seq", "scale_base"),
    [(8, 8, 5, 512.0), (16, 20, 64, 32.0), (32, 32, 301, 512.0)],
)
def test_matches_rotary_embedding_torch_rotate_queries_and_keys(dim, head_dim, seq, scale_base):
    torch = pytest.importorskip("torch")
    ret = pytest.importorskip("rotary_embedding_torch")
    # A fresh module per call: its scale cache would return an earlier call's centring.
    rotary = ret.RotaryEmbedding(dim, use_xpos=True, xpos_scale_base=scale_base)
    gen = torch.Generator().manual_seed(seq)
    q = torch.randn(2, 3, seq, head_dim, dtype=torch.float64, generator=gen)
    k = torch.randn(2, 3, seq, head_dim, dtype=torch.float64, generator=gen)
    q_lr, k_lr = rotary.rotate_queries_and_keys(q, k)
    spec = rr.RopeSpec(head_dim, rotary_dim=dim, layout="interleaved", xpos=rr.XPos(scale_base))
    q_rr, k_rr = rr.apply_rope_qk(q, k, spec)
    theta = rr.inv_freq(spec)
    dphi = float(np.max((seq - 1) * theta * (np.abs(np.log(theta)) + 6) * U32))
    power = (seq // 2 + 1) / scale_base
    largest = float(np.max(rr.XPos(scale_base).zeta(dim) ** -power))
    tol = largest * (dphi + 3 * U32 + power * U32) * 2 * float(torch.max(torch.abs(q)))
    assert float(torch.max(torch.abs(q_rr - q_lr))) <= tol
    assert float(torch.max(torch.abs(k_rr - k_lr))) <= tol
    assert torch.equal(q_rr[..., dim:], q[..., dim:])


def test_scores_decay_with_relative_distance_only():
    spec = rr.RopeSpec(head_dim=8, xpos=rr.XPos(scale_base=16.0))
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
    scores = []
    for m in (3, 40):
        q_rot, k_rot = rr.apply_rope_qk(q, k, spec, [m], k_positions=[m - 2], seq_len=100)
        scores.append(float((host(q_rot) @ host(k_rot).T)[0, 0]))
    assert scores[0] == pytest.approx(scores[1], rel=1e-12)


@given(
    shift=st.integers(min_value=1, max_value=300),
    seq_len=st.integers(min_value=1, max_value=2000),
    scale_base=st.floats(min_value=1.0, max_value=1e4),
)
def test_property_shared_seq_len_keeps_relative_invariance(shift, seq_len, scale_base):
    # The scale zeta**((p - seq_len // 2) / scale_base) must itself fit in float64:
    # zeta >= 0.4 / 1.4, so |log zeta| < 1.26; a distance term under 200 keeps the
    # exponent under 252, far from float64's limit of 709.
    assume((seq_len / 2 + 300) / scale_base < 200)
    spec = rr.RopeSpec(head_dim=6, xpos=rr.XPos(scale_base))
    rng = np.random.default_rng(shift)
    q, k = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    base_pos = np.arange(4)
    q0, k0 = rr.apply_rope_qk(q, k, spec, base_pos, seq_len=seq_len)
    q1, k1 = rr.apply_rope_qk(q, k, spec, base_pos + shift, seq_len=seq_len)
    s0, s1 = q0 @ k0.T, q1 @ k1.T
    np.testing.assert_allclose(s1, s0, rtol=1e-9, atol=1e-9 * float(np.max(np.abs(s0))))


def test_an_xpos_class_is_refused_like_a_scaling_class() -> None:
    """`xpos=rr.XPos` (the class, not an instance) is a TypeError naming `xpos`."""
    with pytest.raises(TypeError, match=r"`xpos` must be an instance .*got the class XPos"):
        rr.RopeSpec(head_dim=8, xpos=rr.XPos)


def test_xpos_default_scale_base_is_rotary_embedding_torch_own():
    """Catches: a changed default ``scale_base`` (rotary-embedding-torch's is 512)."""
    ret = pytest.importorskip("rotary_embedding_torch")
    default = inspect.signature(ret.RotaryEmbedding).parameters["xpos_scale_base"].default
    assert rr.XPos().scale_base == default == 512


class CustomXPos:
    """An xPos rule of one's own: scale_base, zeta() and center()."""

    def __init__(self, scale_base: float) -> None:
        self.scale_base = scale_base

    def zeta(self, rotary_dim: int) -> np.ndarray:
        return rr.XPos().zeta(rotary_dim)

    def center(self, seq_len: float) -> float:
        return 0.0


def test_xpos_rules_need_a_positive_scale_base():
    """Catches: the sign test of a rule's scale_base inverted."""
    assert rr.RopeSpec(8, xpos=rr.XPos(2.0)).xpos == rr.XPos(2.0)
    custom = CustomXPos(3.0)
    assert rr.RopeSpec(8, xpos=custom).xpos is custom
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=r"`xpos\.scale_base` must be positive"):
            rr.RopeSpec(8, xpos=CustomXPos(bad))
