"""rr.rerotate: exact re-rotation of cached keys between sequence lengths, in every namespace."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host, max_abs

EPS = 2.0**-52


def test_rerotate_in_every_namespace(xp):
    spec = rr.RopeSpec(
        12, rotary_dim=8, rotary_start=2, scaling=rr.scaling.DynamicNTK(4.0, max_position=32)
    )
    rng = np.random.default_rng(0)
    k = xp.asarray(rng.standard_normal((2, 40, 12)))
    cached = rr.apply_rope(k, spec, seq_len=40)
    moved = rr.rerotate(cached, spec, from_seq_len=40, to_seq_len=400)
    fresh = rr.apply_rope(k, spec, seq_len=400)
    assert type(moved) is type(fresh)
    assert moved.dtype == k.dtype
    assert moved.shape == k.shape
    assert max_abs(moved, fresh) <= 64 * EPS * 40 * float(np.max(np.abs(host(k))))
    np.testing.assert_array_equal(host(moved)[..., :2], host(k)[..., :2])  # pass-through
    np.testing.assert_array_equal(host(moved)[..., 10:], host(k)[..., 10:])


def test_rerotate_float32_rounds_once():
    spec = rr.RopeSpec(8, scaling=rr.scaling.LongRoPE([1.0] * 4, [4.0] * 4, 16, factor=8.0))
    k = np.random.default_rng(1).standard_normal((20, 8))
    cached = rr.apply_rope(k, spec, seq_len=10)
    moved = rr.rerotate(cached.astype(np.float32), spec, from_seq_len=10, to_seq_len=20)
    assert moved.dtype == np.float32
    # from the float32-rounded cache: at most its rounding (2^-24 relative) plus the final one
    np.testing.assert_allclose(
        moved,
        rr.apply_rope(k, spec, seq_len=20),
        rtol=0,
        atol=4 * 2.0**-24 * float(np.max(np.abs(k))) * 2,
    )


def test_rerotate_with_positions_offset_and_xpos():
    spec = rr.RopeSpec(8, xpos=rr.XPos(scale_base=32.0))
    k = np.random.default_rng(2).standard_normal((3, 5, 8))
    positions = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [2, 2, 2, 2, 2]])
    cached = rr.apply_rope(k, spec, positions, offset=3, seq_len=15, role="key")
    moved = rr.rerotate(
        cached, spec, positions, offset=3, from_seq_len=15, to_seq_len=90, role="key"
    )
    fresh = rr.apply_rope(k, spec, positions, offset=3, seq_len=90, role="key")
    np.testing.assert_allclose(moved, fresh, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match=r"`role` must be 'query' or 'key'"):
        rr.rerotate(cached, spec, positions, from_seq_len=15, to_seq_len=90)


def test_rerotate_to_the_same_length_is_the_identity_up_to_rounding():
    spec = rr.RopeSpec(8, scaling=rr.scaling.DynamicNTK(2.0, 8))
    k = np.random.default_rng(3).standard_normal((30, 8))
    same = rr.rerotate(k, spec, from_seq_len=30, to_seq_len=30)
    np.testing.assert_allclose(same, k, rtol=0, atol=4 * EPS)


def test_rerotate_errors():
    spec = rr.RopeSpec(8)
    with pytest.raises(TypeError, match=r"`x` must have a real floating dtype"):
        rr.rerotate(np.ones((2, 8), dtype=np.int64), spec, from_seq_len=2, to_seq_len=3)
    with pytest.raises(ValueError, match=r"`x` must have spec.head_dim = 8"):
        rr.rerotate(np.ones((2, 6)), spec, from_seq_len=2, to_seq_len=3)
    with pytest.raises(ValueError, match=r"`from_seq_len` must be positive"):
        rr.rerotate(np.ones((2, 8)), spec, from_seq_len=0, to_seq_len=3)
    with pytest.raises(TypeError, match=r"`x` must be an array"):
        rr.rerotate([[1.0] * 8], spec, from_seq_len=2, to_seq_len=3)


@pytest.mark.parametrize("role", ["query", "key"])
def test_rerotate_xpos_far_from_its_centre(role):
    # 4-dim xPos, scale base 64: at position 20000 the scales reach about 3.5^(±312) = 1e±170,
    # whose squares leave float64; the quotient of the two rotations is still moderate.
    spec = rr.RopeSpec(4, xpos=rr.XPos(scale_base=64.0))
    k = np.random.default_rng(4).standard_normal((3, 4))
    positions = np.array([19_000, 19_999, 20_000])
    cached = rr.apply_rope(k, spec, positions, seq_len=1, role=role)
    with np.errstate(all="raise"):
        moved = rr.rerotate(cached, spec, positions, from_seq_len=1, to_seq_len=5, role=role)
    fresh = rr.apply_rope(k, spec, positions, seq_len=5, role=role)
    np.testing.assert_allclose(moved, fresh, rtol=1e-9)


def test_rerotate_refuses_pairs_scaled_to_zero():
    # at position 40000 the query scale 0.2857^625 is below float64's smallest subnormal
    spec = rr.RopeSpec(4, xpos=rr.XPos(scale_base=64.0))
    q = rr.apply_rope(np.ones((1, 4)), spec, np.array([40_000]), seq_len=1, role="query")
    with pytest.raises(ValueError, match=r"rerotate: at `from_seq_len` some pairs were scaled"):
        rr.rerotate(q, spec, np.array([40_000]), from_seq_len=1, to_seq_len=5, role="query")
