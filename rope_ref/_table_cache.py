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

__all__ = ["TableCache", "positions_key", "table_cache"]

#: Positions arrays larger than this (elements) are not hashed and not cached.
MAX_KEYED_POSITIONS = 1 << 20


def positions_key(positions: object) -> Hashable | None:
    """A key for `positions` by value: None, a NumPy array (hashed) or None if unkeyable."""
    if positions is None:
        return ("default",)
    if type(positions) is not np.ndarray or positions.size > MAX_KEYED_POSITIONS:
        return None
    data = np.ascontiguousarray(positions)
    digest = hashlib.blake2b(data.view(np.uint8).data, digest_size=16).hexdigest()
    return ("array", data.dtype.str, data.shape, digest)


class TableCache:
    """Least-recently-used tables, bounded by entry count and total bytes.

    Parameters
    ----------
    max_entries : int
        Most (cos, sin) pairs kept.
    max_bytes : int
        Most bytes kept over all entries; a pair larger than this is never kept.

    Examples
    --------
    >>> import numpy as np
    >>> cache = TableCache(max_entries=2, max_bytes=1 << 20)
    >>> build = lambda: (np.ones(3), np.zeros(3))
    >>> cos, sin = cache.get_or_build("k", build)
    >>> cache.get_or_build("k", build)[0] is cos, cos.flags.writeable
    (True, False)
    """

    def __init__(self, *, max_entries: int = 32, max_bytes: int = 256 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get_or_build(
        self, key: Hashable, build: Callable[[], tuple[np.ndarray, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The tables stored under `key`, or `build()`'s, stored read-only."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        cos, sin = build()  # outside the lock: other threads keep going meanwhile
        for table in (cos, sin):
            table.flags.writeable = False
        size = cos.nbytes + sin.nbytes
        if size > self.max_bytes:
            return cos, sin
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (cos, sin)
                self._bytes += size
                while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                    _, (old_cos, old_sin) = self._entries.popitem(last=False)
                    self._bytes -= old_cos.nbytes + old_sin.nbytes
            return self._entries[key]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


#: The cache used by `rope_ref.apply_rope` for NumPy arrays.
table_cache = TableCache()
