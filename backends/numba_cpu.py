"""The Numba CPU kernel: RoPE on NumPy arrays at memory bandwidth.

Reached through ``rope_ref.apply_rope(x, spec, backend="numba")`` (or ``"auto"``), which
builds the float64 cos/sin tables, casts them to the compute dtype (float32 for float16 and
float32 input, float64 for float64) and calls `rotate`.

Design
------
- The leading axes of `x` are merged where the strides of `x`, `out` and the tables allow,
  and padded to three, so one kernel serves every rank: rows ``(a, b, c)`` of ``head_dim``
  features, whose table row is ``a*ta + b*tb + c*tc`` (a stride of 0 on an axis the tables
  broadcast over: heads sharing positions read one table row, never a per-head copy).
- Threads (``numba.set_num_threads`` is respected) split the outer rows ``(a, b)`` and
  walk whole runs along ``c``, taking the views, and the table row when heads share it,
  once per run; when there are fewer outer rows than chunks, they split single rows.
  Small calls run on the calling thread, since waking threads costs more than rotating
  a few rows.
- Each row rotates with a simple loop over pairs that LLVM vectorises when the feature axis
  is contiguous (C-contiguous input is the fast path; any strides work).
- float16 is read through an exact lookup table to float32 and written back with
  round-to-nearest-even, so there is no temporary the size of `x`.
- Nothing is compiled at import: the first call compiles (and caches to disk) the
  specialisation for its dtypes and memory layout.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, NamedTuple

import numba
import numpy as np
from numba import njit, prange

from rope_ref._typing import Array

__all__ = ["rotate"]

#: Below this many rows the kernel runs on the calling thread.
SERIAL_ROWS = 256
#: Chunks per thread: enough to balance uneven progress, few enough to keep rows together.
CHUNKS_PER_THREAD = 4

_F16_SIGN = np.uint32(0x8000)


# ----------------------------------------------------------------------------------------
# float16 <-> float32
# ----------------------------------------------------------------------------------------


@functools.cache
def _f16_to_f32_table() -> np.ndarray:
    """All 65536 float16 values as float32 (exact), indexed by their bit pattern."""
    table = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    table.flags.writeable = False
    return table


@njit(inline="always", cache=True)
def _f32_to_f16_bits(value: float, bits: int) -> np.uint16:  # pragma: no cover - numba
    """float32 `value` (with bit pattern `bits`) to float16 bits, round to nearest even."""
    sign = (bits >> 16) & 0x8000
    magnitude = bits & 0x7FFFFFFF
    if magnitude >= 0x7F800000:  # inf or nan (nan stays quiet)
        return np.uint16(sign | 0x7C00 | (0x200 if magnitude > 0x7F800000 else 0))
    if magnitude >= 0x477FF000:  # at or above 65520: rounds to infinity
        return np.uint16(sign | 0x7C00)
    if magnitude < 0x38800000:  # below 2**-14: subnormal half, units of 2**-24
        return np.uint16(sign | int(np.rint(abs(value) * np.float32(16777216.0))))
    # Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
    odd = (magnitude >> 13) & 1
    return np.uint16(sign | ((magnitude - 0x38000000 + 0xFFF + odd) >> 13))


# ----------------------------------------------------------------------------------------
# One row
# ----------------------------------------------------------------------------------------


@njit(inline="always", cache=True)
def _pairs(x1, x2, o1, o2, cr, sr, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    for j in range(cr.shape[0]):
        c = cr[j]
        s = sign * sr[j]
        a = x1[j]
        b = x2[j]
        o1[j] = a * c - b * s
        o2[j] = b * c + a * s


@njit(inline="always", cache=True)
def _row(xr, orow, cr, sr, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]  # pragma: no cover
    # The halves are slices, not offsets into the row: every index is then provably in
    # range, and a contiguous half (layout "half") lets LLVM vectorise the loop.
    n = cr.shape[0]
    stop = start + 2 * n
    if interleaved:
        x1, x2 = xr[start:stop:2], xr[start + 1 : stop : 2]
        _pairs(x1, x2, orow[start:stop:2], orow[start + 1 : stop : 2], cr, sr, sign)
    else:
        x1, x2 = xr[start : start + n], xr[start + n : stop]
        _pairs(x1, x2, orow[start : start + n], orow[start + n : stop], cr, sr, sign)
    if copy_rest:
        for i in range(start):
            orow[i] = xr[i]
        for i in range(stop, xr.shape[0]):
            orow[i] = xr[i]


@njit(inline="always", cache=True)
def _row_f16(xr, orow, cr, sr, start, interleaved, sign, copy_rest, lut, buf):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row` for float16 bits (uint16): decode by `lut`, rotate in float32, encode RNE."""
    d = xr.shape[0]
    for i in range(d):
        buf[i] = lut[xr[i]]
    _row(buf, buf, cr, sr, start, interleaved, sign, False)
    bits = buf.view(np.uint32)
    lo = 0 if copy_rest else start
    hi = d if copy_rest else start + 2 * cr.shape[0]
    for i in range(lo, hi):
        orow[i] = _f32_to_f16_bits(buf[i], bits[i])


# ----------------------------------------------------------------------------------------
# All rows
# ----------------------------------------------------------------------------------------


@njit(inline="always", cache=True)
def _next_row(a, b, c, b_size, c_size):  # type: ignore[no-untyped-def]  # pragma: no cover
    """The row after ``(a, b, c)``, counting without a division per row."""
    c += 1
    if c == c_size:
        c = 0
        b += 1
        if b == b_size:
            b = 0
            a += 1
    return a, b, c


@njit(inline="always", cache=True)
def _first_row(r, b_size, c_size):  # type: ignore[no-untyped-def]  # pragma: no cover
    ab = r // c_size
    return ab // b_size, ab % b_size, r % c_size


@njit(inline="always", cache=True)
def _rows_range(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, lo, hi):  # type: ignore[no-untyped-def]  # pragma: no cover
    # Rows lo..hi-1 in runs along the last row axis, with the views of x, out and (when
    # the run shares one table row, as heads do) cos and sin taken once per run.
    _, b_size, c_size, _ = x.shape
    ta, tb, tc = tstride
    a, b, c = _first_row(lo, b_size, c_size)
    r = lo
    while r < hi:
        stop = min(c_size, c + hi - r)
        xab, oab, t = x[a, b], out[a, b], a * ta + b * tb
        if tc == 0:
            cr, sr = cos[t], sin[t]
            for k in range(c, stop):
                _row(xab[k], oab[k], cr, sr, start, interleaved, sign, copy_rest)
        else:
            for k in range(c, stop):
                tk = t + k * tc
                _row(xab[k], oab[k], cos[tk], sin[tk], start, interleaved, sign, copy_rest)
        r += stop - c
        a, b, c = _next_row(a, b, c_size - 1, b_size, c_size)


@njit(cache=True, nogil=True)
def _rows_serial(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]  # pragma: no cover
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    _rows_range(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, 0, rows)


@njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, chunks):  # type: ignore[no-untyped-def]  # pragma: no cover
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    for k in prange(chunks):
        lo, hi = rows * k // chunks, rows * (k + 1) // chunks
        _rows_range(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def _outer_parallel(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, chunks):  # type: ignore[no-untyped-def]  # pragma: no cover
    # Threads split the outer rows (a, b); each walks whole runs along c, so the views and,
    # when heads share positions, the table row are taken once per run.
    a_size, b_size, c_size, _ = x.shape
    ta, tb, tc = tstride
    outer = a_size * b_size
    for k in prange(chunks):
        for ab in range(outer * k // chunks, outer * (k + 1) // chunks):
            a, b = ab // b_size, ab % b_size
            xab, oab, t = x[a, b], out[a, b], a * ta + b * tb
            if tc == 0:
                cr, sr = cos[t], sin[t]
                for c in range(c_size):
                    _row(xab[c], oab[c], cr, sr, start, interleaved, sign, copy_rest)
            else:
                for c in range(c_size):
                    tc_ = t + c * tc
                    _row(xab[c], oab[c], cos[tc_], sin[tc_], start, interleaved, sign, copy_rest)


@njit(cache=True, nogil=True, parallel=True)
def _rows_f16(x, out, cos, sin, tstride, start, interleaved, sign, copy_rest, lut, chunks):  # type: ignore[no-untyped-def]  # pragma: no cover
    _, b_size, c_size, d = x.shape
    ta, tb, tc = tstride
    rows = x.shape[0] * b_size * c_size
    for k in prange(chunks):
        buf = np.empty(d, dtype=np.float32)
        lo, hi = rows * k // chunks, rows * (k + 1) // chunks
        a, b, c = _first_row(lo, b_size, c_size)
        for _ in range(lo, hi):
            t = a * ta + b * tb + c * tc
            _row_f16(
                x[a, b, c], out[a, b, c], cos[t], sin[t], start, interleaved, sign, copy_rest,
                lut, buf,
            )  # fmt: skip
            a, b, c = _next_row(a, b, c, b_size, c_size)


# ----------------------------------------------------------------------------------------
# The entry point
# ----------------------------------------------------------------------------------------

_COMPUTE_DTYPE: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float16): np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


def rotate(
    x: Array,
    cos: Array,
    sin: Array,
    /,
    *,
    layout: Literal["half", "interleaved"],
    rotary_start: int,
    inverse: bool,
    out: Array | None = None,
) -> Array:
    """Rotate the pairs of `x` by the angles whose cos/sin are given; the kernel contract.

    Parameters
    ----------
    x : numpy.ndarray
        float16, float32 or float64, shape ``(..., head_dim)``, any strides.
    cos, sin : numpy.ndarray
        Tables in the compute dtype (float32, or float64 for float64 `x`) that broadcast to
        ``x.shape[:-1] + (n_pairs,)``.
    layout : {"half", "interleaved"}
        Pairs ``(j, j + n_pairs)`` or ``(2j, 2j + 1)``, offset by `rotary_start`.
    rotary_start : int
        First rotated feature; the others are copied unchanged.
    inverse : bool
        Rotate by the negated angles.
    out : numpy.ndarray, optional
        Output of `x`'s shape and dtype; may be `x` itself (in-place).

    Returns
    -------
    numpy.ndarray
        `out`, or a new array.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0]])
    >>> rotate(x, np.array([[0.0]]), np.array([[1.0]]), layout="half", rotary_start=0,
    ...        inverse=False)
    array([[0., 1.]])
    """
    _check_arrays(x, cos, sin, out)
    compute = _COMPUTE_DTYPE[x.dtype]
    if out is None:
        out = np.empty_like(x)
    n_pairs = cos.shape[-1]
    cos = np.ascontiguousarray(cos, dtype=compute)
    sin = np.ascontiguousarray(sin, dtype=compute)
    plan = _plan(x.shape, x.strides, out.strides, cos.shape)
    if plan.rows == 0:
        return out
    cos_rows, sin_rows = cos.reshape(-1, n_pairs), sin.reshape(-1, n_pairs)
    xm, om = x.reshape(plan.shape), out.reshape(plan.shape)
    if not np.may_share_memory(om, out):  # pragma: no cover - the plan merges only views
        msg = "internal error: `out` could not be viewed without a copy"
        raise AssertionError(msg)
    args = (
        rotary_start,
        layout == "interleaved",
        compute.type(-1.0 if inverse else 1.0),
        2 * n_pairs < x.shape[-1],
    )
    if plan.extra == 0:
        _launch(xm, om, cos_rows, sin_rows, plan.table_strides, plan.rows, *args)
        return out
    for index in np.ndindex(*plan.shape[: plan.extra]):
        first = sum(i * t for i, t in zip(index, plan.table_strides, strict=False))
        cos_part, sin_part = cos_rows[first:], sin_rows[first:]
        t3 = plan.table_strides[plan.extra :]
        rows = plan.rows // math.prod(plan.shape[: plan.extra])
        _launch(xm[index], om[index], cos_part, sin_part, t3, rows, *args)
    return out


def _launch(x4, o4, cos, sin, tstride, rows, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]
    if x4.dtype == np.float16:
        lut = _f16_to_f32_table()
        chunks = min(rows, CHUNKS_PER_THREAD * numba.get_num_threads())
        x4, o4 = x4.view(np.uint16), o4.view(np.uint16)
        _rows_f16(x4, o4, cos, sin, tstride, start, interleaved, sign, copy_rest, lut, chunks)
    elif rows < SERIAL_ROWS:
        _rows_serial(x4, o4, cos, sin, tstride, start, interleaved, sign, copy_rest)
    else:
        chunks = min(rows, CHUNKS_PER_THREAD * numba.get_num_threads())
        if x4.shape[0] * x4.shape[1] >= chunks:
            _outer_parallel(x4, o4, cos, sin, tstride, start, interleaved, sign, copy_rest, chunks)
        else:
            _rows_parallel(x4, o4, cos, sin, tstride, start, interleaved, sign, copy_rest, chunks)


# ----------------------------------------------------------------------------------------
# Checks and index plumbing
# ----------------------------------------------------------------------------------------


def _check_arrays(x: Any, cos: Any, sin: Any, out: Any) -> None:
    if type(x) is not np.ndarray or type(cos) is not np.ndarray or type(sin) is not np.ndarray:
        name, a = next(
            (n, a) for n, a in (("x", x), ("cos", cos), ("sin", sin)) if type(a) is not np.ndarray
        )
        msg = f"backend='numba' needs NumPy arrays; got `{name}` of type {type(a).__name__}."
        raise TypeError(msg)
    compute = _COMPUTE_DTYPE.get(x.dtype)
    if compute is None:
        msg = f"backend='numba' supports float16, float32 and float64 `x`; got {x.dtype}."
        raise TypeError(msg)
    if cos.dtype != compute or sin.dtype != compute:
        msg = f"`cos` and `sin` must be {compute} for {x.dtype} `x`; got {cos.dtype}, {sin.dtype}."
        raise TypeError(msg)
    if cos.shape != sin.shape:
        msg = f"`cos` and `sin` must have one shape; got {cos.shape} and {sin.shape}."
        raise ValueError(msg)
    if out is None or out is x:
        return
    if type(out) is not np.ndarray:
        msg = f"`out` must be a NumPy array for backend='numba'; got {type(out).__name__}."
        raise TypeError(msg)
    if out.shape != x.shape or out.dtype != x.dtype:
        msg = (
            f"`out` must have x's shape {x.shape} and dtype {x.dtype}; "
            f"got shape {out.shape} and dtype {out.dtype}."
        )
        raise ValueError(msg)
    if not out.flags.writeable:
        msg = "`out` must be writeable; got a read-only array."
        raise ValueError(msg)
    if np.may_share_memory(out, x) and not _same_view(out, x):
        msg = "`out` must be `x` itself or not overlap it; got a partly overlapping array."
        raise ValueError(msg)


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.strides == b.strides
    )


class _Plan(NamedTuple):
    """How to walk `x`.

    `shape` holds the merged leading axes (the first `extra` looped in Python, three left
    for the kernel) and the feature axis; `table_strides` the step of each leading axis
    in table rows (0 where the tables broadcast); `rows` the number of feature rows.
    """

    shape: tuple[int, ...]
    extra: int
    table_strides: tuple[int, ...]
    rows: int


@functools.lru_cache(maxsize=256)
def _plan(
    shape: tuple[int, ...],
    x_strides: tuple[int, ...],
    out_strides: tuple[int, ...],
    table_shape: tuple[int, ...],
) -> _Plan:
    lead = shape[:-1]
    n_pairs = table_shape[-1]
    try:
        table = np.broadcast_to(np.empty(table_shape, dtype=np.uint8), (*lead, n_pairs))
    except ValueError:
        msg = (
            f"`cos` and `sin` must broadcast to x.shape[:-1] + ({n_pairs},) = "
            f"{(*lead, n_pairs)}; got {table_shape}."
        )
        raise ValueError(msg) from None
    t_strides = tuple(s // n_pairs if n_pairs else 0 for s in table.strides[:-1])
    merged, strides = _merge_axes(lead, [x_strides[:-1], out_strides[:-1], t_strides])
    extra = max(len(merged) - 3, 0)
    pad = max(3 - len(merged), 0)
    return _Plan(
        shape=(*([1] * pad), *merged, shape[-1]),
        extra=extra,
        table_strides=(*([0] * pad), *strides[2]),
        rows=int(np.prod(lead)),
    )


def _merge_axes(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[list[int], list[list[int]]]:
    """Drop length-1 axes and merge neighbours that every array steps through evenly.

    Merged axes of `x` and `out` can then be reshaped without a copy.
    """
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(
            merged[-1] == s[i] * n for merged, s in zip(out_strides, strides, strict=True)
        ):
            out_shape[-1] *= n
            for merged, s in zip(out_strides, strides, strict=True):
                merged[-1] = s[i]
        else:
            out_shape.append(n)
            for merged, s in zip(out_strides, strides, strict=True):
                merged.append(s[i])
    return out_shape, out_strides
