"""The short road for the commonest kernel call: NumPy `x`, positions from an offset.

A decoding model calls `apply_rope` once per token per layer on a few kilobytes, so the
general path's validation and position plumbing would cost several times the rotation.
This path serves ``positions=None`` with a plain spec (no xPos, no sections) for the
kernel backends, in two steps:

- What depends only on the call's geometry (the spec, x's shape, strides and dtype,
  `seq_axis`, `inverse`, `seq_len`) is checked and planned once and kept in a `_Call`,
  found again by a dictionary look-up on those values (the spec by identity).
- The tables come from `_OffsetTables`: rows of cached blocks of `BLOCK` positions, shared
  by every call and every sequence with the same spec, dtype and `seq_len`, and bounded
  in bytes (`rope_ref._engine.table_cache.offset_cache`), so the cost per call does not grow
  with the number of sequences decoding at once.

Anything this path does not recognise, including every invalid input, goes back to the
general path, which raises the documented errors. The tables are the general path's
float64 construction (`rope_ref._core.positions.default_positions`, then
`rope_ref._core.frequencies.tables`), rounded once to the kernel's dtype: every row of a block
is the same computation for the same position, so the results are bit-identical.
"""

from __future__ import annotations

import functools
import itertools
import math
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._core.defaults import cached_default_spec
from rope_ref._core.frequencies import tables
from rope_ref._core.positions import default_positions
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.table_cache import offset_cache

__all__ = ["OffsetTables", "numpy_kernel_call", "offset_tables_for"]

#: Positions per cached block of tables (a power of two).
BLOCK_BITS = 6
BLOCK = 1 << BLOCK_BITS
#: Calls longer than this many blocks build their tables in one piece.
MAX_BLOCKS_PER_CALL = 4
#: Integer offsets of at least this size are not exact in int64 arithmetic everywhere;
#: the general path computes them in float64, and so does this one (`_at`).
EXACT_INT = 2**62
#: Most call geometries remembered (then all are forgotten at once).
MAX_CALLS = 256

_KERNEL_DTYPES: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float16): np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


def numpy_kernel_call(
    kernel: ModuleType,
    x: Any,
    spec: object,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
    out: Any,
    bits_of: np.dtype[Any] | None = None,
) -> Any | None:
    """`kernel` rotates `x` at ``offset + arange(S)``; None: take the general path.

    `bits_of`: `x` is the ``int16`` view of the bits of this dtype (bfloat16 tensors' road,
    `rope_ref._engine.cpu_arrays`), and so is the result; None: `x` is what it holds.
    """
    if (
        type(x) is not np.ndarray
        or type(seq_axis) is not int
        or type(inverse) is not bool
        or not (seq_len is None or type(seq_len) is int or type(seq_len) is float)
    ):
        return None
    dtype = x.dtype if bits_of is None else bits_of
    key = (id(spec), x.shape, x.strides, dtype, seq_axis, inverse, seq_len)
    call = _calls.get(key)
    if call is None or call.spec is not spec:
        call = _prepare(kernel, x if bits_of is None else x.view(bits_of), spec, seq_axis,
                        inverse, seq_len)  # fmt: skip
        if call is None:
            return None
        if len(_calls) >= MAX_CALLS:
            _calls.clear()
        _calls[key] = call
    if type(offset) is int:  # decoding, inline (a call frame is 5 % of it): as `_Call`
        start, stop, cos, sin = call.tables.last_block
        if start <= offset and offset + call.length <= stop:
            decode = call.launch.decode  # a block's tables are C-contiguous
            if out is None and decode is not None:
                return decode(x, cos, sin, offset - start)
            return call.launch(x, out, cos, sin, offset - start)
    return call(x, offset, out)


class _Call:
    """A call of one geometry: the kernel's launch, the table source, the block bounds.

    Calling it rotates `x` at ``offset + arange(length)`` (None: take the general path).
    """

    __slots__ = ("first", "last", "launch", "length", "spec", "tables")

    def __init__(self, spec: object, launch: Any, tables: _OffsetTables, length: int) -> None:
        self.spec, self.launch, self.tables, self.length = spec, launch, tables, length
        # Integer offsets in [first, last] read their rows from one block or several.
        self.first, self.last = tables.block_offsets(length)

    def __call__(self, x: np.ndarray, offset: object, out: Any) -> Any | None:
        if type(offset) is int:
            start, stop, cos, sin = self.tables.last_block  # the common case: the block
            if start <= offset and offset + self.length <= stop:  # of the last call
                return self.launch(x, out, cos, sin, offset - start)
            if self.first <= offset <= self.last:
                row = offset & (BLOCK - 1)
                if row + self.length <= BLOCK:  # rows of one block
                    hit = self.tables.block(offset >> BLOCK_BITS)
                    if hit is not None:
                        return self.launch(x, out, hit[0], hit[1], row)
        rows = self.tables.rows(offset, self.length)
        return None if rows is None else self.launch(x, out, *rows)


_calls: dict[tuple[Any, ...], _Call] = {}


def _prepare(
    kernel: ModuleType, x: np.ndarray, spec: object, seq_axis: int, inverse: bool, seq_len: Any
) -> _Call | None:
    """Check everything that does not change from call to call; None if unusual."""
    source = offset_tables_for(x, spec, seq_axis, seq_len)
    if source is None:
        return None
    s = source.spec
    axis = seq_axis % x.ndim
    table_shape = [1] * x.ndim
    table_shape[axis] = x.shape[axis]
    table_shape[-1] = s.n_pairs
    launch = kernel.prepare(
        x.shape, x.strides, x.dtype, tuple(table_shape), s.layout, s.rotary_start, inverse
    )
    return _Call(spec, launch, source, x.shape[axis])


def offset_tables_for(
    x: np.ndarray, spec: object, seq_axis: int, seq_len: Any
) -> _OffsetTables | None:
    """The table source for kernel calls on `x` with `spec` (None: the default spec).

    None when the call is not for the short roads: a spec with xPos, sections or an
    output layout, an unusual dtype, `seq_axis` or `seq_len`, or anything invalid.
    """
    dtype = _KERNEL_DTYPES.get(x.dtype)
    if x.dtype.name == "bfloat16":  # ml_dtypes' (not imported here): float32 tables
        dtype = np.dtype(np.float32)
    if dtype is None or x.ndim < 2:
        return None
    s = cached_default_spec(x.shape[-1]) if spec is None else spec
    if (
        type(s) is not RopeSpec  # including None: no default spec for this head_dim
        or s.head_dim != x.shape[-1]
        or s.xpos is not None
        or s.sections is not None
        or s.output_layout is not None
        or not -x.ndim <= seq_axis < x.ndim
        or seq_axis % x.ndim == x.ndim - 1
        or not (seq_len is None or (_finite(seq_len) and seq_len > 0))
    ):
        return None
    return _offset_tables(s, dtype, seq_len)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond float range
        return False


class _OffsetTables:
    """cos/sin rows for ``offset + arange(length)``, for one spec, dtype and `seq_len`.

    Integer positions below `EXACT_INT` (offsets given as int, or as integral floats,
    which the general path treats alike) come from cached blocks of `BLOCK` positions:
    a call within one block reads its rows in place, a short call across blocks joins
    theirs. The others (fractional offsets, huge ones, long calls, and length-dependent
    scalings without `seq_len`, whose frequencies depend on the call's positions) are
    built for the call itself and cached under its offset and length.
    """

    def __init__(self, spec: RopeSpec, dtype: np.dtype[Any], seq_len: float | None) -> None:
        self.spec, self.dtype, self.seq_len = spec, dtype, seq_len
        self.blocks = spec.scaling is None or seq_len is not None
        self.id = next(_source_ids)  # a cheap key for the shared cache
        #: ``(first position, end, cos, sin)`` of the block read last (`block`), one tuple
        #: so that threads replace it whole: a decoding sequence reads one block `BLOCK`
        #: calls in a row without the shared cache's look-up. (That block stays alive
        #: while it is the last, also if the shared cache lets it go.)
        self.last_block: tuple[int, int, np.ndarray | None, np.ndarray | None] = (0, 0, None, None)

    def rows(self, offset: object, length: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """``(cos, sin, first_row)``: tables whose row `first_row` is at `offset`.

        None when `offset` is not a finite real number (the general path says why).
        """
        if type(offset) is float:
            if not math.isfinite(offset):
                return None
            if offset.is_integer() and abs(offset) < EXACT_INT:
                offset = int(offset)  # as the general path: integer positions
        elif type(offset) is not int:
            return None
        first, last = self.block_offsets(length)
        if type(offset) is int and first <= offset <= last:
            block, row = divmod(offset, BLOCK)
            blocks = range(block, (offset + length - 1) // BLOCK + 1)
            parts = [self.block(b) for b in blocks]
            if len(parts) == 1 and parts[0] is not None:
                return (*parts[0], row)
            if parts and all(part is not None for part in parts):  # none: an empty call
                stop = row + length
                cos, sin = (np.concatenate([p[i] for p in parts])[row:stop] for i in (0, 1))  # type: ignore[index]
                cos.flags.writeable = sin.flags.writeable = False  # as cached tables
                return cos, sin, 0
        return self._at(offset, length)

    def block_offsets(self, length: int) -> tuple[float, float]:
        """The integer offsets whose `length` rows come from blocks: ``[first, last]``.

        Every position of every block touched must be below `EXACT_INT` in magnitude, so
        that the block is built as exactly as the general path builds the call's positions.
        """
        if not self.blocks or length > MAX_BLOCKS_PER_CALL * BLOCK:
            return math.inf, -math.inf
        return -EXACT_INT + BLOCK, EXACT_INT - length

    def block(self, block: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Rows ``block * BLOCK`` to ``(block + 1) * BLOCK - 1``, cached.

        None when an angle of the block overflows: whether the call's own positions do is
        then `_at`'s (and the general path's) question.
        """
        key = (self.id, block)
        hit = offset_cache.get(key)
        if hit is None:
            try:
                built = self._build(BLOCK, block * BLOCK)
            except ValueError:
                return None
            if not (built[0].flags.c_contiguous and built[1].flags.c_contiguous):
                msg = "internal error: a block of tables is not C-contiguous"  # pragma: no cover
                raise AssertionError(msg)  # pragma: no cover - `Launch.decode` relies on it
            hit = offset_cache.add(key, *built)
        self.last_block = (block * BLOCK, (block + 1) * BLOCK, *hit)
        return hit

    def _at(self, offset: Any, length: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The call's own rows; None where the general path must decide (and say why)."""
        try:
            float(offset)
        except OverflowError:  # an int beyond float range
            return None
        key = (self.id, type(offset), offset, length)
        hit = offset_cache.get(key)
        if hit is None:
            try:
                hit = offset_cache.add(key, *self._build(length, offset))
            except ValueError:  # an overflow: the general path raises the documented error
                return None
        return hit[0], hit[1], 0

    def _build(self, length: int, offset: Any) -> tuple[np.ndarray, np.ndarray]:
        """The general path's tables for ``offset + arange(length)``, ``(length, n_pairs)``."""
        p = default_positions(length, offset, xp=np, dev=None)
        cos, sin = tables(self.spec, p, xp=np, seq_len=self.seq_len, role=None)
        return np.asarray(cos, dtype=self.dtype), np.asarray(sin, dtype=self.dtype)


_source_ids = itertools.count()
#: The table source of the short roads (`offset_tables_for`).
OffsetTables = _OffsetTables


@functools.lru_cache(maxsize=64)
def _offset_tables(spec: RopeSpec, dtype: np.dtype[Any], seq_len: float | None) -> _OffsetTables:
    return _OffsetTables(spec, dtype, seq_len)
