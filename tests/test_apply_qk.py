"""Queries and keys rotated together (`apply_rope_qk`): key positions, the offset counted
once in a joint `seq_len`, empty inputs, JAX positions, and the refusals that name `q`,
`k` or the key positions.

Expected values are the RoPE formula written in NumPy here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import rope_rotate_half as _rotate_half


def test_numba_takes_jax_positions_of_any_dtype_and_key_positions():
    """Catches: JAX positions (int or float) handed on unconverted, and keys' own positions
    passed over when only they are given."""
    pytest.importorskip("numba")
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 8)).astype(np.float32)
    k = rng.standard_normal((5, 8)).astype(np.float32)
    spec = rr.RopeSpec(8)
    for p in (np.array([7, 2, 9, 0, 4], dtype=np.int32), np.array([3.0, 1, 4, 1, 5], np.float32)):
        y = rr.apply_rope(jnp.asarray(k), spec, jnp.asarray(p), backend="numba")
        np.testing.assert_allclose(np.asarray(y), _rotate_half(k, p), atol=1e-5)
    k_positions = np.array([7, 2, 9, 0, 4])
    for given in (k_positions, jnp.asarray(k_positions, dtype=jnp.int32)):
        q_rot, k_rot = rr.apply_rope_qk(jnp.asarray(q), jnp.asarray(k), spec,
                                        k_positions=given, backend="numba")  # fmt: skip
        # Queries take the last two of the keys' positions, as when decoding.
        np.testing.assert_allclose(np.asarray(q_rot), _rotate_half(q, [0, 4]), atol=1e-5)
        np.testing.assert_allclose(np.asarray(k_rot), _rotate_half(k, k_positions), atol=1e-5)


def test_bad_key_positions_are_named_as_such():
    """Catches: the error for key positions that do not fit `k` speaking of `positions`."""
    q, k = np.ones((2, 8)), np.ones((5, 8))
    with pytest.raises(ValueError, match="`k_positions`") as err:
        rr.apply_rope_qk(q, k, k_positions=np.arange(4))
    assert "`positions`" not in str(err.value)


def test_queries_take_the_newest_key_positions_of_each_batch_row():
    """Catches: the newest key positions read along the batch axis instead of the sequence
    axis of (batch, seq) key positions (their count, their start, or their slice)."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 1, 3, 8))  # (batch, heads, seq, head_dim)
    k = rng.standard_normal((2, 1, 5, 8))
    k_positions = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])
    q_rot, k_rot = rr.apply_rope_qk(q, k, k_positions=k_positions)
    for b in range(2):
        np.testing.assert_allclose(
            q_rot[b, 0], _rotate_half(q[b, 0], k_positions[b, 2:]), atol=1e-13
        )
        np.testing.assert_allclose(k_rot[b, 0], _rotate_half(k[b, 0], k_positions[b]), atol=1e-13)


def test_multi_axis_key_positions_have_a_trailing_axis_of_coordinates():
    """Catches: the trailing axis of multi-axis key positions counted as a grid axis (or two
    axes dropped) when they are checked against `k` and when the queries take the newest."""
    spec = rr.RopeSpec(12, sections=(2, 2, 2))
    rng = np.random.default_rng(8)
    q, k = rng.standard_normal((2, 12)), rng.standard_normal((4, 12))
    k_positions = np.array([[0, 0, 0], [1, 2, 3], [2, 4, 6], [3, 6, 9]])
    q_rot, k_rot = rr.apply_rope_qk(q, k, spec, k_positions=k_positions)
    want_q = rr.apply_rope(q, spec, k_positions[2:])
    want_k = rr.apply_rope(k, spec, k_positions)
    np.testing.assert_array_equal(q_rot, want_q)
    np.testing.assert_array_equal(k_rot, want_k)


def test_a_joint_seq_len_counts_the_offset_once():
    """Catches: the offset subtracted from (not added to) max(positions) + 1 in the seq_len
    shared by queries and keys: passing `offset` must equal adding it to the positions."""
    spec = rr.RopeSpec(16, scaling=rr.scaling.DynamicNTK(4.0, max_position=64))
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((2, 16)), rng.standard_normal((3, 16))
    p = np.array([1, 2, 3])
    shifted = rr.apply_rope_qk(q, k, spec, p[1:], k_positions=p + 200)
    given = rr.apply_rope_qk(q, k, spec, p[1:] - 200, k_positions=p, offset=200)
    for got, want in zip(given, shifted, strict=True):
        np.testing.assert_array_equal(got, want)


def test_key_positions_that_cannot_give_the_queries_theirs_are_refused_by_name():
    """Catches: a single (0-d) key position reaching an index error, and multi-axis key
    positions of the wrong length refused under the name `positions` (or not checked)."""
    with pytest.raises(ValueError, match="`q` must not have more tokens"):
        rr.apply_rope_qk(np.ones((2, 8)), np.ones((5, 8)), k_positions=np.int64(3))
    spec = rr.RopeSpec(12, sections=(2, 2, 2))
    with pytest.raises(ValueError, match=r"`k_positions` must broadcast to k\.shape"):
        rr.apply_rope_qk(np.ones((2, 12)), np.ones((4, 12)), spec, k_positions=np.zeros((3, 3)))


def test_an_odd_last_axis_without_a_spec_is_refused_naming_the_array():
    """Catches: RopeSpec's own error let out when spec is None, without naming `x` or `q`."""
    with pytest.raises(ValueError, match=r"`x` must give a valid head_dim when spec is None"):
        rr.apply_rope(np.ones((3, 7)))
    with pytest.raises(ValueError, match=r"`q` must give a valid head_dim when spec is None"):
        rr.apply_rope_qk(np.ones((3, 7)), np.ones((3, 7)))


def test_empty_queries_and_keys_with_a_negative_offset_are_accepted_as_by_apply_rope():
    """Catches: the offset added to the seq_len of no positions at all, which refused empty
    queries and keys at an offset below -1 where `apply_rope` accepts each of them."""
    spec = rr.RopeSpec(8, scaling=rr.scaling.DynamicNTK(4.0, max_position=64))
    empty, none = np.ones((0, 8)), np.arange(0)
    for offset in (-1.5, -2.5, 3):
        assert rr.apply_rope(empty, spec, none, offset=offset).shape == (0, 8)
        q_rot, k_rot = rr.apply_rope_qk(empty, empty, spec, none, offset=offset)
        assert q_rot.shape == k_rot.shape == (0, 8)


def test_default_key_positions_stay_on_the_host_where_jax_has_no_float64():
    """Catches: the default key positions of `apply_rope_qk` made by JAX without x64 (int32,
    which wraps past 2**31) instead of on the host in int64."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        rng = np.random.default_rng(11)
        q, k = rng.standard_normal((2, 8)), rng.standard_normal((5, 8))
        offset = 2**40
        q_rot, k_rot = rr.apply_rope_qk(
            jnp.asarray(q, dtype=jnp.float32), jnp.asarray(k, dtype=jnp.float32), offset=offset
        )
        q_rot, k_rot = np.asarray(q_rot), np.asarray(k_rot)
    finally:
        jax.config.update("jax_enable_x64", was)
    positions = offset + np.arange(5, dtype=np.float64)
    np.testing.assert_allclose(k_rot, _rotate_half(k, positions), atol=2e-5)
    np.testing.assert_allclose(q_rot, _rotate_half(q, positions[3:]), atol=2e-5)


def test_jax_positions_without_float64_are_read_on_the_host_or_refused_by_name():
    """Catches: JAX positions left on a device without float64 (not copied to the host for
    the float64 tables), and a traced array's own conversion error let out unnamed."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        x = np.random.default_rng(12).standard_normal((3, 8))
        p = np.array([5, 1, 7])
        got = np.asarray(
            rr.apply_rope(jnp.asarray(x, jnp.float32), None, jnp.asarray(p), offset=2**40)
        )
        traced = jax.jit(lambda a, b: rr.apply_rope(a, None, b))
        with pytest.raises(ValueError, match="`positions` must be readable"):
            traced(jnp.asarray(x, jnp.float32), jnp.asarray(p))
    finally:
        jax.config.update("jax_enable_x64", was)
    np.testing.assert_allclose(got, _rotate_half(x, 2.0**40 + p), atol=2e-5)


def test_auto_rotates_numpy_queries_and_keys_past_the_cuda_short_road():
    """Catches: the CUDA short road of `apply_rope_qk` returning its "not for me" (None)
    for arrays it does not take, instead of handing them on."""
    rng = np.random.default_rng(13)
    q, k = rng.standard_normal((2, 8)), rng.standard_normal((5, 8))
    q_rot, k_rot = rr.apply_rope_qk(q, k, backend="auto")
    np.testing.assert_allclose(k_rot, _rotate_half(k, np.arange(5)), atol=1e-13)
    np.testing.assert_allclose(q_rot, _rotate_half(q, np.arange(3, 5)), atol=1e-13)
