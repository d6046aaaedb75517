"""The cache of cos/sin tables behind NumPy calls: by value, bounded, read-only, thread-safe."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine.table_cache import ENTRY_OVERHEAD, TableCache, positions_key, table_cache


def pair(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n), np.zeros(n)


def test_hits_return_the_stored_read_only_tables():
    cache = TableCache(max_entries=4, max_bytes=1 << 20)
    calls = []

    def build():
        calls.append(1)
        return pair(8)

    first = cache.get_or_build("k", build)
    second = cache.get_or_build("k", build)
    assert first[0] is second[0]
    assert len(calls) == 1
    assert not first[0].flags.writeable
    assert not first[1].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first[0][0] = 1.0


def test_least_recently_used_entries_go_first():
    cache = TableCache(max_entries=2, max_bytes=1 << 20)
    cache.get_or_build("a", lambda: pair(1))
    cache.get_or_build("b", lambda: pair(1))
    cache.get_or_build("a", lambda: pair(1))  # "a" is now the most recent
    cache.get_or_build("c", lambda: pair(1))
    rebuilt = []

    def build(key):
        rebuilt.append(key)
        return pair(1)

    cache.get_or_build("b", lambda: build("b"))
    cache.get_or_build("c", lambda: build("c"))
    assert rebuilt == ["b"]
    assert len(cache) == 2


def test_total_bytes_are_bounded():
    entry = 2 * 4 * 8 + ENTRY_OVERHEAD  # a pair of 4 float64, and the bookkeeping
    cache = TableCache(max_entries=100, max_bytes=10 * entry)
    for key in range(25):
        cache.get_or_build(key, lambda: pair(4))
    assert len(cache) == 10
    assert cache.nbytes == 10 * entry
    huge = cache.get_or_build("huge", lambda: pair(1000))  # larger than the bound: not kept
    assert huge[0].shape == (1000,)
    assert len(cache) == 10


def test_without_an_entry_bound_only_bytes_count():
    entry = 2 * 4 * 8 + ENTRY_OVERHEAD
    cache = TableCache(max_entries=None, max_bytes=1000 * entry)
    for key in range(1500):
        cache.get_or_build(key, lambda: pair(4))
    assert len(cache) == 1000
    assert cache.get(499) is None
    assert cache.get(500) is not None


def test_concurrent_builders_agree():
    cache = TableCache()
    results = []
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        results.append(cache.get_or_build("k", lambda: (np.arange(4.0), np.ones(4))))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = cache.get_or_build("k", lambda: pytest.fail("rebuilt"))
    assert all(np.array_equal(r[0], stored[0]) for r in results)


def test_positions_are_keyed_by_value():
    p = np.arange(5)
    assert positions_key(p) == positions_key(np.arange(5))
    assert positions_key(p) != positions_key(np.arange(5) + 1)
    assert positions_key(p) != positions_key(np.arange(5.0))  # dtype is part of the key
    assert positions_key([0, 1]) is None  # lists are not keyed (and not cached)
    assert positions_key(np.array([0, 1], dtype=object)) is None  # nor non-numbers


def test_object_positions_get_the_validation_error():
    x = np.ones((2, 8))
    positions = np.array([0, 1], dtype=object)
    with pytest.raises(TypeError, match="`positions` must have an integer or real floating"):
        rr.apply_rope(x, None, positions)


def test_changing_positions_in_place_changes_the_result():
    x = np.random.default_rng(0).standard_normal((4, 8))
    p = np.arange(4)
    first = rr.apply_rope(x, None, p)
    p[:] = [7, 8, 9, 10]
    np.testing.assert_array_equal(rr.apply_rope(x, None, p), rr.apply_rope(x, None, p.copy()))
    assert not np.array_equal(rr.apply_rope(x, None, p), first)


def test_cached_calls_equal_fresh_tables():
    """A call served from the cache equals one built from scratch, bit for bit."""
    spec = rr.RopeSpec(32, base=500000.0)
    x = np.random.default_rng(1).standard_normal((2, 16, 32))
    positions = np.arange(16) + 1000
    table_cache.clear()
    fresh = rr.apply_rope(x, spec, positions)
    cached = rr.apply_rope(x, spec, positions)
    cos, sin = rr.rope_cos_sin(spec, positions)
    c = np.concatenate([cos, cos], axis=-1)
    s = np.concatenate([sin, sin], axis=-1)
    rotated_half = np.concatenate([-x[..., 16:], x[..., :16]], axis=-1)
    np.testing.assert_array_equal(fresh, cached)
    np.testing.assert_allclose(fresh, x * c + rotated_half * s, rtol=0, atol=1e-15)
