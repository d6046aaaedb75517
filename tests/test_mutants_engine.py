"""The engine's routing where a planted mistake in rope_ref/_engine hides."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import api
from rope_ref._engine.table_cache import table_cache


def test_numpy_calls_with_positions_go_through_the_table_cache(monkeypatch):
    """Catches: the cache skipped for plain NumPy positions (or used only without a key)."""
    keys = []
    original = table_cache.get_or_build

    def counting(key, build):
        keys.append(key)
        return original(key, build)

    monkeypatch.setattr(table_cache, "get_or_build", counting)
    x = np.random.default_rng(0).standard_normal((4, 8))
    spec = rr.RopeSpec(8)
    first = rr.apply_rope(x, spec, np.arange(4) + 3)
    second = rr.apply_rope(x, spec, np.arange(4) + 3)
    assert len(keys) == 2
    assert keys[0] is not None
    assert keys[0] == keys[1]
    np.testing.assert_array_equal(first, second)
    rr.apply_rope(x, spec, [3, 4, 5, 6])  # a Python list: validated by the build, not cached
    assert len(keys) == 2


def test_auto_falls_back_to_the_reference_when_numba_is_missing(monkeypatch):
    """Catches: a missing kernel module raised instead of "auto" taking the reference."""

    def missing(name):
        msg = f"No module named {name!r}"
        raise ModuleNotFoundError(msg)

    monkeypatch.setattr(api, "load_backend", missing)
    monkeypatch.setattr(api, "unusable_reason", lambda name: "numba is not installed")
    x = np.random.default_rng(1).standard_normal((3, 8))
    got = rr.apply_rope(x, backend="auto")
    np.testing.assert_array_equal(got, rr.apply_rope(x, backend="reference"))


def test_auto_sends_only_cuda_arrays_to_the_cuda_kernel(monkeypatch):
    """Catches: an array that is neither NumPy nor CUDA (array-api-strict, Dask) sent to
    the CUDA kernel whenever it is usable."""
    xp = pytest.importorskip("array_api_strict")
    monkeypatch.setattr(api, "unusable_reason", lambda name: None)  # as if CuPy were there
    x = xp.ones((3, 8), dtype=xp.float64)
    assert api._resolve_backend("auto", x) == "reference"


def test_feature_order_between_equal_layouts_is_the_identity():
    """Catches: the identity order of src == dst broken (only the crossings were read)."""
    for spec in (rr.RopeSpec(6), rr.RopeSpec(10, rotary_dim=4, rotary_start=2)):
        for layout in ("half", "interleaved"):
            assert rr.feature_order(spec, layout, layout) == list(range(spec.head_dim))


def test_a_cleared_cache_holds_no_bytes():
    """Catches: the byte count left over after `clear`, which then evicts too early."""
    from rope_ref._engine.table_cache import TableCache

    cache = TableCache(max_entries=None, max_bytes=1 << 20)
    cache.get_or_build("a", lambda: (np.zeros(8), np.zeros(8)))
    assert cache.nbytes > 0
    cache.clear()
    assert cache.nbytes == 0


def test_numba_fast_path_refuses_a_negative_seq_len_as_the_reference_does():
    """The fast path's own seq_len test is backed by the tables' check: both refuse."""
    pytest.importorskip("numba")
    x = np.ones((3, 8))
    for backend in ("reference", "numba", "auto"):
        for seq_len in (-5.0, 0.0, -1):
            with pytest.raises(ValueError, match="`seq_len` must be positive"):
                rr.apply_rope(x, rr.RopeSpec(8), seq_len=seq_len, backend=backend)


def test_numba_fast_path_shifts_offsets_below_2_62_exactly():
    """Offsets near 2**61 are added exactly, block-cached or not: 2**61 + 767 + 1 is the tie
    2**61 + 768 and rounds once to even, 2**61 + 1024; rounding the offset first (to
    2**61 + 512) then adding 1 would give 2**61 + 512."""
    pytest.importorskip("numba")
    spec = rr.RopeSpec(2, freqs=[1.0])
    x = np.tile([[1.0, 0.0]], (2, 1))
    phi = np.array([float(2**61 + 767), float(2**61 + 768)])
    assert phi[1] == 2.0**61 + 1024
    want = np.stack([np.cos(phi), np.sin(phi)], axis=-1)
    for backend in ("numba", "reference"):
        got = rr.apply_rope(x, spec, offset=2**61 + 767, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


def _rotate_half(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """RoPE by its formula in float64: pair j of features (j, j + d/2) turned by p base^(-2j/d)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1] // 2
    angle = np.asarray(positions, dtype=np.float64)[:, None] * base ** (
        -2.0 * np.arange(n) / (2 * n)
    )
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                           b * np.cos(angle) + a * np.sin(angle)], axis=-1)  # fmt: skip


def test_numba_jax_output_is_adopted_by_jax_without_a_copy(monkeypatch):
    """Catches: outputs aligned to other than XLA's 64 bytes, which JAX then copies."""
    pytest.importorskip("numba")
    jnp = pytest.importorskip("jax.numpy")
    from rope_ref._engine import jax_arrays

    written = []
    aligned_empty = jax_arrays.aligned_empty

    def recorded(shape, dtype):
        written.append(aligned_empty(shape, dtype))
        return written[-1]

    monkeypatch.setattr(jax_arrays, "aligned_empty", recorded)
    rng = np.random.default_rng(3)
    for seq in (5, 7, 11):
        x = rng.standard_normal((seq, 8)).astype(np.float32)
        y = rr.apply_rope(jnp.asarray(x), rr.RopeSpec(8), backend="numba")
        assert y.unsafe_buffer_pointer() == written[-1].ctypes.data  # the kernel's own buffer
        np.testing.assert_allclose(np.asarray(y), _rotate_half(x, np.arange(seq)), atol=2e-6)


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


def test_numba_refuses_a_bad_role_for_torch_tensors_as_for_numpy():
    """Catches: PyTorch's short road taken for calls with a role, which it never checks."""
    pytest.importorskip("numba")
    torch = pytest.importorskip("torch")
    for x in (np.ones((4, 8)), torch.ones(4, 8, dtype=torch.float64)):
        for role in ("bogus", 3):
            with pytest.raises(ValueError, match="`role` must be one of"):
                rr.apply_rope(x, rr.RopeSpec(8), role=role, backend="numba")


# ----------------------------------------------------------------------------------------
# Layout conversion: which axis moves, and the shapes of weights that are taken or refused
# ----------------------------------------------------------------------------------------


def _half_from_interleaved(n: int) -> list[int]:
    """Half-layout feature h is interleaved feature 2h (first halves) or 2(h - n) + 1."""
    return [2 * h if h < n else 2 * (h - n) + 1 for h in range(2 * n)]


def _hf_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """HF's ``convert_llama_weights_to_hf`` permute: (heads, d/2, 2, in) -> (heads, 2, d/2, in)."""
    rows = w.shape[0]
    flat = w.reshape(n_heads, rows // n_heads // 2, 2, -1)
    return np.swapaxes(flat, 1, 2).reshape(w.shape)


def test_convert_layout_moves_the_feature_axis_of_every_token():
    """Catches: the permutation taken along another axis than the last (tokens reordered)."""
    x = np.arange(3 * 6, dtype=np.float64).reshape(3, 6)
    got = rr.convert_layout(x, rr.RopeSpec(6), src="interleaved", dst="half")
    np.testing.assert_array_equal(got, x[:, _half_from_interleaved(3)])
    back = rr.convert_layout(got, rr.RopeSpec(6), src="half", dst="interleaved")
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize(("n_heads", "in_features"), [(1, 3), (2, 3), (3, 5), (2, 16)])
def test_permute_weights_permutes_rows_of_a_projection_as_hf_does(n_heads, in_features):
    """Catches: 2-D weights refused, head_dim or divisibility read from the input features
    (the last axis), columns permuted instead of rows, and a single head refused."""
    head_dim = 8
    w = np.random.default_rng(n_heads).standard_normal((n_heads * head_dim, in_features))
    got = rr.permute_weights(w, n_heads=n_heads)
    np.testing.assert_array_equal(got, _hf_permute(w, n_heads))
    bias = w[:, 0].copy()
    np.testing.assert_array_equal(rr.permute_weights(bias, n_heads=n_heads), got[:, 0])


@pytest.mark.parametrize(
    ("shape", "n_heads", "match"),
    [
        ((2, 8, 3), 2, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # 3-D
        ((2, 4, 2, 3), 2, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # 4-D
        ((12,), 5, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # rows not divisible
        ((12, 4), 0, r"`n_heads` must be at least 1; got 0"),
    ],
)
def test_permute_weights_refuses_shapes_it_cannot_split_into_heads(shape, n_heads, match):
    """Catches: weights of more than two axes accepted, the divisibility check dropped when
    the weight has one or two axes, and zero heads reaching a division."""
    with pytest.raises(ValueError, match=match):
        rr.permute_weights(np.ones(shape), n_heads=n_heads)


# ----------------------------------------------------------------------------------------
# The table caches: their documented bounds, the exact byte bound, an eviction race
# ----------------------------------------------------------------------------------------


def test_the_caches_have_their_documented_bounds():
    """Catches: the bounds of docs/kernels/numba.md changed (the positions cache holds at
    most 32 entries and 256 MiB, the offsets cache 64 MiB with no bound on entries)."""
    from rope_ref._engine.table_cache import offset_cache

    assert (table_cache.max_bytes, offset_cache.max_bytes) == (256 * 2**20, 64 * 2**20)
    assert offset_cache.max_entries is None
    spec = rr.RopeSpec(4, base=7777.0)
    x = np.ones((1, 4))
    table_cache.clear()
    for p in range(33):  # 33 calls with positions of their own: 33 tables
        rr.apply_rope(x, spec, np.array([p]))
    assert len(table_cache) == 32


def test_a_table_of_exactly_the_byte_bound_is_kept():
    """Catches: a pair whose size equals `max_bytes` refused (only larger ones are)."""
    from rope_ref._engine.table_cache import ENTRY_OVERHEAD, TableCache

    cache = TableCache(max_entries=None, max_bytes=2 * 4 * 8 + ENTRY_OVERHEAD)
    builds = []

    def build():
        builds.append(1)
        return np.zeros(4), np.zeros(4)

    first = cache.get_or_build("k", build)
    assert cache.get_or_build("k", build)[0] is first[0]
    assert builds == [1]
    assert len(cache) == 1


def test_a_hit_evicted_by_another_thread_before_its_move_is_still_returned():
    """Catches: the KeyError of `move_to_end` let out when another thread evicts the entry
    between the look-up and the move (the race is made certain here)."""
    from collections import OrderedDict

    from rope_ref._engine.table_cache import TableCache

    class EvictedRightAfterLookUp(OrderedDict):
        def get(self, key, default=None):
            hit = super().get(key, default)
            self.pop(key, None)  # another thread evicts it now
            return hit

    cache = TableCache(max_entries=4, max_bytes=1 << 20)
    stored = cache.get_or_build("k", lambda: (np.arange(3.0), np.ones(3)))
    cache._entries = EvictedRightAfterLookUp(cache._entries)
    assert cache.get("k") is stored


# ----------------------------------------------------------------------------------------
# RoPE-Mixed: which backend rotates
# ----------------------------------------------------------------------------------------


def test_rope_mixed_reference_rounds_the_float64_rotation_once():
    """Catches: the reference and Numba branches swapped. The reference rotates in float64
    and rounds once, so every float32 output is within half an ulp (and a float64 hair) of
    the formula; the kernel's float32 tables are off by more somewhere in 4096 values."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    freqs = rng.uniform(0.1, 3.0, size=(2, 8))  # (axes, pairs)
    positions = rng.uniform(0.0, 50.0, size=(256, 2))  # (seq, axes): (t_x, t_y)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    phi = positions @ freqs  # phi_j(t) = t_x f_xj + t_y f_yj
    a, b = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    want = np.empty((256, 16))
    want[:, 0::2] = a * np.cos(phi) - b * np.sin(phi)
    want[:, 1::2] = b * np.cos(phi) + a * np.sin(phi)
    got = rr.apply_rope_mixed(x, freqs, positions)
    assert got.dtype == np.float32
    half_ulp = np.spacing(np.abs(want).astype(np.float32)) / 2
    assert np.all(np.abs(got - want) <= half_ulp * (1 + 1e-6) + 1e-300)


# ----------------------------------------------------------------------------------------
# apply_rope / apply_rope_qk: routing of "auto", key positions, joint seq_len, caching
# ----------------------------------------------------------------------------------------


def test_auto_picks_numba_for_plain_native_numpy_arrays_only():
    """Catches: "auto" sending plain NumPy arrays to the reference, or memmaps and
    byte-swapped arrays (which the kernel does not take) to the kernel."""
    pytest.importorskip("numba")
    plain = np.ones((3, 8), dtype=np.float32)
    assert api._resolve_backend("auto", plain) == "numba"
    assert api._resolve_backend("auto", plain.astype(">f4")) == "reference"
    assert api._resolve_backend("auto", plain.view(np.recarray)) == "reference"


def test_calls_without_positions_are_cached_too(monkeypatch):
    """Catches: the table cache skipped for default positions (positions=None)."""
    keys = []
    original = table_cache.get_or_build

    def counting(key, build):
        keys.append(key)
        return original(key, build)

    monkeypatch.setattr(table_cache, "get_or_build", counting)
    x = np.random.default_rng(5).standard_normal((4, 8))
    rr.apply_rope(x, rr.RopeSpec(8))
    assert len(keys) == 1


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


def test_the_kernel_writes_pairs_in_the_spec_s_output_layout():
    """Catches: the spec's `output_layout` not handed to the kernel (pairs read interleaved
    written interleaved) or handed on when it is not set."""
    pytest.importorskip("numba")
    x = np.random.default_rng(10).standard_normal((3, 8))
    spec = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    positions = np.arange(3) + 2
    got = rr.apply_rope(x, spec, positions, backend="numba")
    order = _half_from_interleaved(4)  # interleaved feature order[h] is written at h
    want = _rotate_half(x[:, order], positions)  # the interleaved rotation, laid out as half
    np.testing.assert_allclose(got, want, atol=1e-13)
    plain = rr.apply_rope(x, rr.RopeSpec(8), positions, backend="numba")
    np.testing.assert_allclose(plain, _rotate_half(x, positions), atol=1e-13)


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


def test_only_cupy_and_auto_knock_at_the_cuda_short_road(monkeypatch):
    """Catches: every backend name (the reference's too) tried on the CUDA short road, which
    would rotate a CUDA array by the kernel when the reference was asked for."""
    knocked = []

    class Road:
        @staticmethod
        def apply(*args):
            knocked.append("apply")

        @staticmethod
        def apply_qk(*args):
            knocked.append("apply_qk")

    monkeypatch.setattr(api, "_cuda_call", lambda: Road)
    x = np.random.default_rng(14).standard_normal((3, 8))
    for backend in ("reference", "exact"):
        rr.apply_rope(x, backend=backend)
        rr.apply_rope_qk(x, x, backend=backend)
    assert knocked == []
    rr.apply_rope(x, None, np.arange(3.0), backend="auto")  # float positions: past the short roads
    assert knocked == ["apply"]


def test_auto_leaves_cuda_arrays_that_record_gradients_to_the_reference(monkeypatch):
    """Catches: "auto" resolving a CUDA tensor that records gradients to the kernel (such
    calls reach the kernel through its autograd operator, before; the rest are the
    reference's), and CUDA arrays without gradients not resolved to the kernel."""
    xp = pytest.importorskip("array_api_strict")
    grads = {"on": True}
    monkeypatch.setattr(api, "unusable_reason", lambda name: None)  # as if CuPy were there
    monkeypatch.setattr(api, "is_cuda_array", lambda x: True)  # a stand-in device array
    monkeypatch.setattr(api, "records_grad", lambda x: grads["on"])
    x = xp.ones((3, 8), dtype=xp.float32)
    assert api._resolve_backend("auto", x) == "reference"
    grads["on"] = False
    assert api._resolve_backend("auto", x) == "cupy"


def test_rope_angles_takes_its_arguments_by_name_and_backend_only_by_name():
    """Catches: the keyword-only marker of `rope_angles` turned into a positional-only one,
    which refuses `spec=`, `positions=` and `seq_len=` by name and takes `backend` by place."""
    spec = rr.RopeSpec(4)
    angles = rr.rope_angles(spec=spec, positions=[0, 1, 2], seq_len=3)
    np.testing.assert_array_equal(angles, np.arange(3)[:, None] * np.array([1.0, 0.01]))
    with pytest.raises(TypeError):
        rr.rope_angles(spec, [0, 1], None, "reference")  # type: ignore[call-arg]
