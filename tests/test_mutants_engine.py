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
