"""A small, thread-safe LRU cache of read-only cos/sin tables for NumPy calls.

Building float64 tables (``position * inv_freq``, then cos and sin) costs more than
rotating a prefill-sized batch with a kernel, and the same positions recur across layers,
heads and calls. Tables are cached by value: the spec, the exact bytes of the positions,
everything else that shapes the tables, and the dtype they were cast to. The float64
construction is unchanged; a hit returns the very arrays a miss would have built, marked
read-only so that no caller can alter them for the next.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

__all__ = ["TableCache", "offset_cache", "positions_key", "table_cache"]

#: Positions arrays larger than this (elements) are not hashed and not cached.
MAX_KEYED_POSITIONS = 1 << 20
#: Bytes counted per entry on top of its arrays (headers and bookkeeping).
ENTRY_OVERHEAD = 512
#: Bytes of tables kept for calls with an `offset` (see `offset_cache`).
OFFSET_CACHE_BYTES = 64 << 20


def positions_key(positions: object) -> Hashable | None:
    """A key for `positions` by value: None, a NumPy array (hashed) or None if unkeyable."""
    if positions is None:
        return ("default",)
    if (
        type(positions) is not np.ndarray
        or positions.dtype.kind not in "biuf"  # others are refused by validation, not keyed
        or positions.size > MAX_KEYED_POSITIONS
    ):
        return None
    data = np.ascontiguousarray(positions)
    digest = hashlib.blake2b(data.view(np.uint8).data, digest_size=16).hexdigest()
    return ("array", data.dtype.str, data.shape, digest)


class TableCache:
    """Least-recently-used tables, bounded by total bytes (and optionally entry count).

    Parameters
    ----------
    max_entries : int or None
        Most (cos, sin) pairs kept; None for no bound but `max_bytes`.
    max_bytes : int
        Most bytes kept over all entries, counting `ENTRY_OVERHEAD` per entry; a pair
        larger than this is never kept.

    Examples
    --------
    >>> import numpy as np
    >>> cache = TableCache(max_entries=2, max_bytes=1 << 20)
    >>> build = lambda: (np.ones(3), np.zeros(3))
    >>> cos, sin = cache.get_or_build("k", build)
    >>> cache.get_or_build("k", build)[0] is cos, cos.flags.writeable
    (True, False)
    """

    def __init__(self, *, max_entries: int | None = 32, max_bytes: int = 256 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[np.ndarray, np.ndarray] | None:
        """The tables stored under `key` (now the most recently used), or None.

        A hit takes no lock: the look-up and the move to the end are each one atomic
        dictionary operation, and an entry evicted between the two is still returned.
        """
        hit = self._entries.get(key)
        if hit is not None:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress on this hot path
                self._entries.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
        return hit

    def add(self, key: Hashable, cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store `cos` and `sin` read-only under `key`; return the stored pair.

        When another thread stored `key` first, its pair is returned (and kept).
        """
        for table in (cos, sin):
            table.flags.writeable = False
        size = _size(cos, sin)
        if size > self.max_bytes:
            return cos, sin
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (cos, sin)
                self._bytes += size
                while self._bytes > self.max_bytes or (
                    self.max_entries is not None and len(self._entries) > self.max_entries
                ):
                    _, old = self._entries.popitem(last=False)
                    self._bytes -= _size(*old)
            return self._entries[key]

    def get_or_build(
        self, key: Hashable, build: Callable[[], tuple[np.ndarray, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The tables stored under `key`, or `build()`'s, stored read-only."""
        hit = self.get(key)
        # Built outside the lock: other threads keep going meanwhile.
        return hit if hit is not None else self.add(key, *build())

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held, as counted against `max_bytes`."""
        return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _size(cos: np.ndarray, sin: np.ndarray) -> int:
    return cos.nbytes + sin.nbytes + ENTRY_OVERHEAD


#: The cache used by `rope_ref.apply_rope` for NumPy arrays and explicit positions.
table_cache = TableCache()

#: Tables of calls that give an `offset` (decoding), by block of positions: bounded in bytes
#: only, so that any number of sequences decoding at once share it without thrashing.
offset_cache = TableCache(max_entries=None, max_bytes=OFFSET_CACHE_BYTES)
