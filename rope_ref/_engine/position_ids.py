"""The short road for small position arrays: decoding as inference code calls it.

HF transformers passes ``position_ids``, vLLM ``positions``: a decode step rotates one
token at the position an array holds (``[1000]``, ``[[1000]]``), speculative decoding a
few, a batch of sequences at different lengths one or a few each. The general path would
validate the array, lay it out, hash its bytes for the table cache and build tables per
call: many times the rotation. Here, for NumPy integer positions of at most `MAX_IDS`
elements (and a spec the offset road takes, `rope_ref._engine.fast_path`):

- What depends only on the call's geometry (the spec, x's shape, strides and dtype,
  `seq_axis`, `inverse`, `seq_len` and the positions' shape) is checked and planned once
  and kept in a `_IdsCall`, found again by a dictionary look-up on those values.
- The positions are read as Python integers (no hashing of their bytes); each one's table
  row comes from the cached blocks of `BLOCK` positions the offset road shares
  (`rope_ref._engine.table_cache.offset_cache`): one position is read in place, several
  are gathered into a table of their own.

The general path's tables depend on each position's float64 value only
(`rope_ref._core.frequencies.tables`), and the blocks are built by that construction for
the same integer positions, so the results are bit-identical to it. Anything else,
including every invalid input and positions beyond the blocks' range, goes back to the
general path, which raises the documented errors.
"""

from __future__ import annotations

import functools
import math
import sys
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._core.positions import lay_out
from rope_ref._engine.fast_path import (
    BLOCK,
    BLOCK_BITS,
    MAX_CALLS,
    OffsetTables,
    offset_tables_for,
)

__all__ = ["MAX_IDS", "numpy_ids_call"]

#: Position arrays of at most this many elements take this road.
MAX_IDS = 64


def numpy_ids_call(
    kernel: ModuleType,
    x: Any,
    spec: object,
    positions: Any,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
    out: Any,
    bits_of: np.dtype[Any] | None = None,
) -> Any | None:
    """`kernel` rotates `x` at `positions` (+ `offset`); None: take the general path.

    `bits_of`: as for `rope_ref._engine.fast_path.numpy_kernel_call`.
    """
    if type(positions) is np.ndarray:  # the common case: its size and dtype are checked
        shape: tuple[int, ...] | None = positions.shape  # once, when its call is planned
        ids_dtype: object = positions.dtype
    else:
        shape, ids_dtype = _small_ids_shape(positions), None
    if (
        shape is None
        or type(offset) is not int
        or type(x) is not np.ndarray
        or type(seq_axis) is not int
        or type(inverse) is not bool
        or not (seq_len is None or type(seq_len) is int or type(seq_len) is float)
    ):
        return None
    dtype = x.dtype if bits_of is None else bits_of
    key = (id(spec), x.shape, x.strides, dtype, seq_axis, inverse, seq_len, shape, ids_dtype)
    call = _calls.get(key)
    if call is None or call.spec is not spec:
        if ids_dtype is not None and _small_ids_shape(positions) is None:
            return None
        planned = x if bits_of is None else x.view(bits_of)
        call = _prepare(kernel, planned, spec, shape, seq_axis, inverse, seq_len)
        if call is None:
            return None
        if len(_calls) >= MAX_CALLS:
            _calls.clear()
        _calls[key] = call
    if call.one:  # decoding, inline (a call frame is 5 % of it): as `_IdsCall.__call__`
        at = positions.item() + offset
        start, stop, cos, sin = call.tables.last_block
        if start <= at < stop:
            decode = call.launch.decode  # a block's tables are C-contiguous
            if out is None and decode is not None:
                return decode(x, cos, sin, at - start)
            return call.launch(x, out, cos, sin, at - start)
    return call(x, positions, offset, out)


def _small_ids_shape(positions: Any) -> tuple[int, ...] | None:
    """The shape of `positions` if this road reads them, else None.

    NumPy integer arrays, and PyTorch integer tensors on the CPU (read by ``item`` and
    ``tolist``, which need no NumPy view), of at most `MAX_IDS` elements.
    """
    if type(positions) is np.ndarray:
        if positions.size > MAX_IDS or positions.dtype.kind not in "iu":
            return None
        shape: tuple[int, ...] = positions.shape
        return shape
    torch = sys.modules.get("torch")
    if torch is None or type(positions) is not torch.Tensor:
        return None
    if positions.dtype not in _torch_ints() or not positions.is_cpu:
        return None
    return None if positions.numel() > MAX_IDS else tuple(positions.shape)


@functools.cache
def _torch_ints() -> frozenset[Any]:
    """PyTorch's integer dtypes (torch is imported: a tensor was passed)."""
    import torch

    names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    return frozenset(getattr(torch, n) for n in names if hasattr(torch, n))


class _IdsCall:
    """Calls of one geometry and one shape of positions: the launch and the table source."""

    __slots__ = ("first", "last", "launch", "one", "spec", "tables")

    def __init__(self, spec: object, launch: Any, tables: OffsetTables, size: int) -> None:
        self.spec, self.launch, self.tables = spec, launch, tables
        self.one = size == 1  # decoding: one position
        # Positions in [first, last] read their rows from blocks.
        self.first, self.last = tables.block_offsets(1)

    def __call__(self, x: np.ndarray, positions: Any, offset: int, out: Any) -> Any:
        if self.one:  # decoding: one row, read in place
            at = positions.item() + offset  # a Python int: integer arrays and tensors
            start, stop, cos, sin = self.tables.last_block
            if start <= at < stop:  # the common case: the block of the last call
                return self.launch(x, out, cos, sin, at - start)
            if not self.first <= at <= self.last:
                return None
            hit = self.tables.block(at >> BLOCK_BITS)
            if hit is None:
                return None
            return self.launch(x, out, hit[0], hit[1], at & (BLOCK - 1))
        rows = self._gathered([int(p) + offset for p in positions.reshape(-1).tolist()])
        return None if rows is None else self.launch(x, out, *rows)

    def _gathered(self, at: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """The table rows of positions `at`, in their order; None outside the blocks."""
        if not at:
            empty = np.empty((0, self.tables.spec.n_pairs), dtype=self.tables.dtype)
            return empty, empty
        if min(at) < self.first or max(at) > self.last:
            return None
        blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for b in {p >> BLOCK_BITS for p in at}:
            hit = self.tables.block(b)
            if hit is None:
                return None
            blocks[b] = hit
        if len(blocks) == 1:
            ((cos, sin),) = blocks.values()
            rows = [p & (BLOCK - 1) for p in at]
            return cos[rows], sin[rows]
        picked = [(blocks[p >> BLOCK_BITS], p & (BLOCK - 1)) for p in at]
        return (
            np.stack([hit[0][row] for hit, row in picked]),
            np.stack([hit[1][row] for hit, row in picked]),
        )


_calls: dict[tuple[Any, ...], _IdsCall] = {}


def _prepare(
    kernel: ModuleType,
    x: np.ndarray,
    spec: object,
    ids_shape: tuple[int, ...],
    seq_axis: int,
    inverse: bool,
    seq_len: Any,
) -> _IdsCall | None:
    """Check everything that does not change from call to call; None if unusual."""
    source = offset_tables_for(x, spec, seq_axis, seq_len)
    if source is None or not source.blocks:
        return None
    axis = seq_axis % x.ndim
    try:  # where the general path lays the positions out against x (shapes only)
        grid = lay_out(np.empty(ids_shape, np.int8), x.shape[:-1], axis, n_axes=None, xp=np)
        launch = kernel.prepare(
            x.shape,
            x.strides,
            x.dtype,
            (*grid.shape, source.spec.n_pairs),
            source.spec.layout,
            source.spec.rotary_start,
            inverse,
        )
    except ValueError:  # positions that do not fit x: the general path says why
        return None
    return _IdsCall(spec, launch, source, math.prod(ids_shape))
