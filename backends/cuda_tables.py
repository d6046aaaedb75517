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
memory: the memory held is at most twice the largest capacity.
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
from rope_ref.scaling import Linear, Llama3, NTKAware, Proportional, YaRN

from .cuda_arrays import Arrays
from .cuda_plan import factor_bits

__all__ = ["LENGTH_FREE", "DeviceTables", "TableCache", "device_tables", "length_dependent"]

#: Rules whose frequencies and attention factor do not depend on seq_len.
LENGTH_FREE = (Linear, Llama3, NTKAware, Proportional, YaRN)
#: Rows of a new cache, at least.
FIRST_ROWS = 4096
#: Bytes of cos plus sin of one cache, at most (longer contexts take the computed path).
MAX_BYTES = 64 << 20
#: Caches kept at hand; older ones are retired (kept alive, never looked up again).
MAX_ENTRIES = 64


def length_dependent(spec: RopeSpec) -> bool:
    """Whether `spec`'s tables change with seq_len (DynamicNTK, LongRoPE, user rules)."""
    return spec.scaling is not None and not isinstance(spec.scaling, LENGTH_FREE)


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

    seq_len is part of the key only for a length-dependent spec, whose caches have no rows
    (capacity 0: every position is computed, from that seq_len's inverse frequencies), so
    that a decode loop passing a growing seq_len keeps only a few hundred bytes per value.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> from rope_ref.backends.cuda_arrays import HostStandIn
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
        it raises RuntimeError while `stream` is capturing a CUDA graph.
        """
        device = arrays.device(like)
        if not length_dependent(spec):
            seq_len = None
        last = self._last
        if (
            last[0] is spec
            and last[1:5] == (seq_len, dtype, arrays.kind, device)
            and last[5].capacity >= rows
        ):
            return last[5]  # type: ignore[no-any-return]
        key = (spec, seq_len, dtype, arrays.kind, device)
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
                found = self._entries[key] = _build(spec, seq_len, dtype, arrays, like, capacity)
                while len(self._entries) > MAX_ENTRIES:
                    self._retired.append(self._entries.popitem(last=False)[1])
                self.generation += 1
            self._entries.move_to_end(key)
            self._last = (spec, seq_len, dtype, arrays.kind, device, found)
            return found

    def clear(self) -> None:
        """Forget every cache (CUDA graphs that read one must not be replayed after this)."""
        with self._lock:
            self._entries.clear()
            self._retired.clear()
            self._last = (None,)
            self.generation += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _max_rows(spec: RopeSpec, dtype: str) -> int:
    if length_dependent(spec):
        return 0
    return max(1, MAX_BYTES // (2 * spec.n_pairs * np.dtype(dtype).itemsize))


def _capacity(rows: int, found: DeviceTables | None, most: int) -> int:
    """Next power of two that holds `rows`, at least double the old capacity, at most `most`."""
    want = max(rows, FIRST_ROWS, 2 * found.capacity if found is not None else 0)
    return min(1 << (want - 1).bit_length(), most)


def _build(
    spec: RopeSpec, seq_len: float | None, dtype: str, arrays: Arrays, like: Any, capacity: int
) -> DeviceTables:
    """Rows 0 .. capacity - 1, built in float64 on the host, rounded once, moved once."""
    cos, sin = tables(
        spec, np.arange(capacity, dtype=np.int64), xp=host_namespace(), seq_len=seq_len,
        role=None,
    )  # fmt: skip
    # A length-free scaling ignores the seq_len that tables() made up (max + 1).
    theta = np.ascontiguousarray(inv_freq(spec, seq_len), dtype=np.float64)
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
        factor=factor_bits(attention_factor(spec, seq_len)),
    )


#: The process-wide cache used by ``backend="cupy"``.
device_tables = TableCache()
