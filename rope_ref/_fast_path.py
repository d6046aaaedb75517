"""The short road for the commonest kernel call: NumPy `x`, positions from an offset.

Decoding calls `apply_rope` once per token per layer on a few kilobytes, so the general
path's validation and position plumbing would cost more than the rotation. This path
handles ``positions=None`` with a plain spec (no xPos, no sections) for the kernel
backends; it checks what it relies on and hands anything unusual, including every
invalid input, back to the general path, which raises the documented errors. The tables
come from the same float64 construction (`rope_ref._frequencies.tables`) and are cached
like the general path's.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._compat import host_namespace
from rope_ref._frequencies import tables
from rope_ref._spec import RopeSpec
from rope_ref._table_cache import table_cache

__all__ = ["numpy_kernel_call"]

#: Positions per cached block of decode tables.
BLOCK = 1024

_KERNEL_DTYPES: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float16): np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


def numpy_kernel_call(
    kernel: ModuleType,
    x: Any,
    spec: object,
    *,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
    out: Any,
) -> Any | None:
    """`kernel.rotate` of `x` at ``offset + arange(S)``, or None to take the general path."""
    if type(x) is not np.ndarray or x.ndim < 2 or x.dtype not in _KERNEL_DTYPES:
        return None
    if spec is None:
        spec = _default_spec(x.shape[-1])
    if (
        type(spec) is not RopeSpec
        or spec.head_dim != x.shape[-1]
        or spec.xpos is not None
        or spec.sections is not None
        or type(seq_axis) is not int
        or not -x.ndim <= seq_axis < x.ndim
        or seq_axis % x.ndim == x.ndim - 1
        or type(offset) not in (int, float)
        or not math.isfinite(offset)  # type: ignore[arg-type]
        or type(inverse) is not bool
        or not (seq_len is None or type(seq_len) in (int, float))
    ):
        return None
    axis = seq_axis % x.ndim
    length = x.shape[axis]
    cos, sin = _tables(spec, length, offset, seq_len, _KERNEL_DTYPES[x.dtype])
    shape = [1] * x.ndim
    shape[axis] = length
    shape[-1] = spec.n_pairs
    return kernel.rotate(
        x,
        cos.reshape(shape),
        sin.reshape(shape),
        layout=spec.layout,
        rotary_start=spec.rotary_start,
        inverse=inverse,
        out=out,
    )


@functools.lru_cache(maxsize=64)
def _default_spec(head_dim: int) -> RopeSpec:
    return RopeSpec(head_dim=head_dim)


def _tables(
    spec: RopeSpec, length: int, offset: Any, seq_len: Any, dtype: np.dtype[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Tables for ``offset + arange(length)``: a slice of a cached block when it fits.

    Decoding moves the offset by one token per call, so each call would miss a cache
    keyed by offset. Tables for whole blocks of `BLOCK` integer positions are cached
    instead; every row is the same float64 computation for the same position, so a
    slice equals a direct build. Length-dependent scalings with an implied `seq_len`
    (which would depend on the block) are built directly.
    """
    if type(offset) is int and (spec.scaling is None or seq_len is not None):
        block, start = divmod(offset, BLOCK)
        if block >= 0 and start + length <= BLOCK:
            first = block * BLOCK
            cos, sin = table_cache.get_or_build(
                ("block", spec, block, seq_len, dtype),
                lambda: _offset_tables(spec, BLOCK, first, seq_len, dtype),
            )
            return cos[start : start + length], sin[start : start + length]
    return table_cache.get_or_build(
        ("offset", spec, length, type(offset), offset, seq_len, dtype),
        lambda: _offset_tables(spec, length, offset, seq_len, dtype),
    )


def _offset_tables(
    spec: RopeSpec, length: int, offset: Any, seq_len: Any, dtype: np.dtype[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """The general path's tables for ``offset + arange(length)``, as ``(length, n_pairs)``."""
    if float(offset).is_integer() and abs(offset) < 2**62:
        p = np.arange(length, dtype=np.int64) + int(offset)
    else:
        p = np.arange(length, dtype=np.float64) + offset
    cos, sin = tables(spec, p, xp=host_namespace(), seq_len=seq_len, role=None)
    return np.asarray(cos, dtype=dtype), np.asarray(sin, dtype=dtype)
