"""Cos/sin tables resident on the device, one cache per (spec, seq_len, dtype, device).

Row ``r`` of a cache holds the tables of integer position ``r``, built on the host by the
same float64 construction as every other table (`rope_ref._core.frequencies.tables`), rounded
once to the kernel's compute dtype and copied to the device once. A call whose positions
are ``offset + arange(S)`` reads rows ``offset .. offset + S - 1`` in place (no launch, no
copy); the gather kernel reads the row of each position it is given, and computes in float64
the tables of any position that is not an integer row of the cache.

The capacity grows geometrically when a position known on the host needs more rows;
positions on the device never grow it (that would need their values on the host). The
arrays a cache replaces stay alive, so that a CUDA graph captured earlier never reads freed
memory: the memory held by a spec's caches is at most twice the largest capacity, for the
`MAX_ENTRIES` specs most recently used (and those before, retired, until `TableCache.clear`).

A length-dependent scaling (DynamicNTK, LongRoPE, a user rule) with an explicit seq_len has
no rows: its cache is the inverse frequencies of that seq_len (``n_pairs`` float64), copied
once per (seq_len, stream) in the stream's order, without a host synchronisation, and the
gather kernel computes every row from them. The `MAX_LENGTH_ENTRIES` most recent are kept;
older ones are freed (in the stream's order, by the allocator), but those a CUDA graph
captured, which stay alive until `TableCache.clear`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, NamedTuple

import numpy as np

from rope_ref._core.compat import host_namespace
from rope_ref._core.frequencies import attention_factor, inv_freq, tables
from rope_ref._core.spec import RopeSpec
from rope_ref.scaling._facts import is_length_dependent

from .arrays import Arrays
from .plan import factor_bits

__all__ = ["DeviceTables", "TableCache", "device_tables", "length_dependent"]

#: Rows of a new cache, at least.
FIRST_ROWS = 4096
#: Bytes of cos plus sin of one cache, at most (longer contexts take the computed path).
MAX_BYTES = 64 << 20
#: Caches kept at hand; older ones are retired (kept alive, never looked up again).
MAX_ENTRIES = 64
#: Inverse frequencies of a length-dependent scaling kept at hand (per seq_len and stream);
#: older ones are freed unless a CUDA graph captured them.
MAX_LENGTH_ENTRIES = 64


def length_dependent(spec: RopeSpec) -> bool:
    """Whether `spec`'s tables change with seq_len: its rule's own ``length_dependent``."""
    return is_length_dependent(spec.scaling)


class DeviceTables(NamedTuple):
    """One cache: ``cos`` and ``sin`` of shape (capacity, n_pairs) on the device."""

    cos: Any
    sin: Any
    inv_freq: Any  # (n_pairs,) float64, for positions outside the rows
    cos_ptr: int
    sin_ptr: int
    inv_freq_ptr: int
    capacity: int
    factor: int  # the attention factor's float64 bits


class TableCache:
    """Device tables by (spec, seq_len, compute dtype, adapter kind, device).

    seq_len (and the stream) is part of the key only for a length-dependent spec, whose
    caches have no rows (capacity 0: every position is computed, from that seq_len's
    inverse frequencies), so that a decode loop passing a growing seq_len copies
    ``n_pairs`` float64 per step, and keeps at most `MAX_LENGTH_ENTRIES` of them.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.backends.cuda.arrays import HostStandIn
    >>> host = HostStandIn(launch=print)
    >>> cache = TableCache()
    >>> spec = rr.RopeSpec(head_dim=8)
    >>> t = cache.get(spec, None, "float32", host, np.zeros(1), rows=10)
    >>> t.capacity, t.cos.shape, t.cos.dtype.name
    (4096, (4096, 4), 'float32')
    >>> cache.get(spec, None, "float32", host, np.zeros(1), rows=5000).capacity
    8192
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[Hashable, DeviceTables] = OrderedDict()
        self._by_length: OrderedDict[tuple[Any, ...], DeviceTables] = OrderedDict()
        self._captured: dict[int, DeviceTables] = {}  # length-dependent, read by a graph
        self._retired: list[DeviceTables] = []
        self._lock = threading.Lock()
        self._last: tuple[Any, ...] = (None,)
        #: Changes whenever a cache is built, replaced, retired or forgotten: a caller that
        #: keeps a `DeviceTables` may use it again while this is unchanged.
        self.generation = 0

    def get(
        self,
        spec: RopeSpec,
        seq_len: float | None,
        dtype: str,
        arrays: Arrays,
        like: Any,
        *,
        rows: int,
        stream: Any = None,
    ) -> DeviceTables:
        """The cache for `spec` on `like`'s device, with at least `rows` rows if it can.

        `rows` beyond what `MAX_BYTES` allows give the largest cache allowed; the caller
        checks `DeviceTables.capacity`. Building or growing a cache copies to the device, so
        it raises RuntimeError while `stream` is capturing a CUDA graph. A length-dependent
        spec's cache belongs to `stream` (copied in its order, read in its order).
        """
        device = arrays.device(like)
        per_length = length_dependent(spec)
        if not per_length:
            seq_len = None
        lane = getattr(stream, "ptr", 0) if per_length else None
        last = self._last
        if (
            last[0] is spec
            and last[1:6] == (seq_len, dtype, arrays.kind, device, lane)
            and last[6].capacity >= rows
        ):
            return last[6]  # type: ignore[no-any-return]
        key = (spec, seq_len, dtype, arrays.kind, device, lane)
        if per_length:
            return self._per_length(key, spec, seq_len, dtype, arrays, like, stream)
        with self._lock:
            found = self._entries.get(key)
            if found is None or found.capacity < min(rows, _max_rows(spec, dtype)):
                if arrays.capturing(stream):
                    msg = (
                        f"the cos/sin tables of {spec!r} are not on the device yet (or need "
                        f"{rows} rows): call once before capturing a CUDA graph, with the "
                        "largest positions the graph will see"
                    )
                    raise RuntimeError(msg)
                capacity = _capacity(rows, found, _max_rows(spec, dtype))
                if found is not None:
                    self._retired.append(found)  # a captured graph may still read it
                found = self._entries[key] = _build(spec, dtype, arrays, like, capacity)
                while len(self._entries) > MAX_ENTRIES:
                    self._retired.append(self._entries.popitem(last=False)[1])
                self.generation += 1
            self._entries.move_to_end(key)
            self._last = (*key, found)
            return found

    def _per_length(
        self,
        key: tuple[Any, ...],
        spec: RopeSpec,
        seq_len: float | None,
        dtype: str,
        arrays: Arrays,
        like: Any,
        stream: Any,
    ) -> DeviceTables:
        """The inverse frequencies of a length-dependent `spec` at `seq_len`, on `stream`."""
        with self._lock:
            found = self._by_length.get(key)
            if found is None and arrays.capturing(stream):
                found = self._other_lane(key)  # not kept under this stream: a capture ends
                if found is None:
                    msg = (
                        f"the inverse frequencies of {spec!r} at seq_len={seq_len} are not on "
                        "the device yet: call once with this seq_len before capturing a CUDA "
                        "graph"
                    )
                    raise RuntimeError(msg)
                return found
            if found is None:
                theta = np.ascontiguousarray(inv_freq(spec, seq_len), dtype=np.float64)
                inv = arrays.upload_ordered(theta, like, stream)
                ptr = arrays.address(inv)
                factor = factor_bits(attention_factor(spec, seq_len))
                found = self._by_length[key] = DeviceTables(inv, inv, inv, ptr, ptr, ptr, 0, factor)
                while len(self._by_length) > MAX_LENGTH_ENTRIES:
                    self._by_length.popitem(last=False)  # freed, unless a graph holds it
                self.generation += 1
            self._by_length.move_to_end(key)
            self._last = (*key, found)
            return found

    def _other_lane(self, key: tuple[Any, ...]) -> DeviceTables | None:
        """The same inverse frequencies copied on another stream, for a graph capture.

        A capture cannot copy; ``torch.cuda.graph`` captures on a stream of its own after
        synchronising the device, so a copy made on the warm-up's stream is complete.
        """
        for other, found in self._by_length.items():
            if other[:-1] == key[:-1]:
                return found
        return None

    def captured(self, tables: DeviceTables) -> None:
        """Keep `tables` alive until `clear`: a CUDA graph being captured reads them."""
        with self._lock:
            self._captured[id(tables.inv_freq)] = tables

    def clear(self) -> None:
        """Forget every cache (CUDA graphs that read one must not be replayed after this)."""
        with self._lock:
            self._entries.clear()
            self._by_length.clear()
            self._captured.clear()
            self._retired.clear()
            self._last = (None,)
            self.generation += 1

    def held(self) -> int:
        """How many caches are alive: at hand, retired, or kept for a captured graph."""
        with self._lock:
            at_hand = list(self._entries.values()) + list(self._by_length.values())
            ids = {id(t.inv_freq) for t in (*at_hand, *self._retired, *self._captured.values())}
            return len(ids)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries) + len(self._by_length)


def _max_rows(spec: RopeSpec, dtype: str) -> int:
    return max(1, MAX_BYTES // (2 * spec.n_pairs * np.dtype(dtype).itemsize))


def _capacity(rows: int, found: DeviceTables | None, most: int) -> int:
    """Next power of two that holds `rows`, at least double the old capacity, at most `most`."""
    want = max(rows, FIRST_ROWS, 2 * found.capacity if found is not None else 0)
    return min(1 << (want - 1).bit_length(), most)


def _build(spec: RopeSpec, dtype: str, arrays: Arrays, like: Any, capacity: int) -> DeviceTables:
    """Rows 0 .. capacity - 1, built in float64 on the host, rounded once, moved once.

    The copies are complete on return (`Arrays.upload`): any stream may read them.
    """
    cos, sin = tables(
        spec, np.arange(capacity, dtype=np.int64), xp=host_namespace(), seq_len=None, role=None
    )
    # A length-free scaling ignores the seq_len that tables() made up (max + 1).
    theta = np.ascontiguousarray(inv_freq(spec, None), dtype=np.float64)
    on_device = [
        arrays.upload(np.ascontiguousarray(np.asarray(t), dtype=dtype), like) for t in (cos, sin)
    ]
    inv = arrays.upload(theta, like)
    ptrs = [arrays.describe(a) for a in (*on_device, inv)]
    assert all(p is not None for p in ptrs)
    return DeviceTables(
        cos=on_device[0],
        sin=on_device[1],
        inv_freq=inv,
        cos_ptr=ptrs[0].ptr,  # type: ignore[union-attr]
        sin_ptr=ptrs[1].ptr,  # type: ignore[union-attr]
        inv_freq_ptr=ptrs[2].ptr,  # type: ignore[union-attr]
        capacity=capacity,
        factor=factor_bits(attention_factor(spec, None)),
    )


#: The process-wide cache used by ``backend="cupy"``.
device_tables = TableCache()
