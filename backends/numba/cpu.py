"""The Numba CPU kernel: RoPE on NumPy arrays at memory bandwidth.

Reached through ``rope_ref.apply_rope(x, spec, backend="numba")`` (or ``"auto"``), which
builds the float64 cos/sin tables, casts them to the compute dtype (float32 for float16 and
float32 input, float64 for float64) and calls `rotate`, or, for offset calls, the `Launch`
that `prepare` planned once for the call's geometry (``rope_ref._engine.fast_path``).

Design
------
- The leading axes of `x` are merged where the strides of `x`, `out` and the tables allow,
  and padded to three, so one kernel serves every rank: rows ``(a, b, c)`` of ``head_dim``
  features, whose table row is ``t0 + a*ta + b*tb + c*tc`` (a stride of 0 on an axis the
  tables broadcast over: heads sharing positions read one table row, never a per-head
  copy). That plan depends on shapes and strides only, so `prepare` makes it once per
  geometry and a call is then a kernel launch.
- Threads (``numba.set_num_threads`` is respected) take runs of consecutive rows,
  `CHUNKS_PER_THREAD` per thread, one at a time as they come free (dynamic scheduling).
  Calls of fewer than `SERIAL_ROWS` rows run on the calling thread, since waking threads
  costs more than rotating a few rows.
- Every kernel releases the GIL, and on numba's ``workqueue`` threading layer, which is
  not thread-safe, parallel launches take turns behind a lock: calls are safe from any
  number of threads on every layer.
- Each row rotates with a loop over pairs indexed by unsigned integers (no negative-index
  wrap-around, no view per row), which LLVM vectorises when the feature axis is contiguous
  (C-contiguous input is the fast path; any strides work); rows of 64 or 32 pairs run
  copies of it compiled for that length. The threaded loops prefetch, for writing, the
  output row `CLAIM_AHEAD_BYTES` ahead (`ahead_rows`), so that the reads a store to an
  uncached line makes overlap the work.
- A plan's first call on the calling thread goes through numba's dispatcher and finds
  the compiled entry point for its argument types; the next calls take it directly
  (`Launch.decode` for new outputs), skipping the dispatcher's typing of ten arguments.
- float16 and bfloat16 (ml_dtypes) run the same loops on views of their bits: each
  element is widened to float32 as it is read and rounded once, to nearest even, as it
  is written (`rope_ref.backends.numba.convert`: F16C's ``vcvtph2ps``/``vcvtps2ph`` for
  float16, a shift and an integer rounding for bfloat16), in registers, so there is no
  temporary and the loop vectorises as the float32 one does. With AVX512-BF16,
  half-layout bfloat16 rows round 16 results per instruction, bit-identically
  (`rope_ref.backends.numba.bf16_rows`).
- Nothing is compiled at import: the first call compiles (and caches to disk) the
  specialisation for its dtypes and memory layout.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import numba
import numpy as np
from numba import njit, prange

from rope_ref._core.aliases import Array

from .entry import decoder, first_call
from .rows import _claim_row, _first_row, _next_row, _row

__all__ = ["rotate"]

#: Below this many rows the kernel runs on the calling thread.
SERIAL_ROWS = 256
#: Runs of rows per thread, taken one at a time: enough to balance uneven progress (a
#: thread the system holds back), few enough to keep rows together.
CHUNKS_PER_THREAD = 4


def _bfloat16_dtype() -> np.dtype[Any] | None:
    """ml_dtypes' bfloat16 (the NumPy dtype of JAX and of torch bfloat16 views), if any."""
    try:
        import ml_dtypes
    except ModuleNotFoundError:  # pragma: no cover - ml_dtypes comes with the test set-up
        return None
    dtype: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dtype


_BFLOAT16 = _bfloat16_dtype()
#: The views the 16-bit dtypes are rotated through: `convert` tells them apart by
#: type (float16 bits unsigned, bfloat16 bits signed).
_BITS: dict[np.dtype[Any], np.dtype[Any]] = {np.dtype(np.float16): np.dtype(np.uint16)}
if _BFLOAT16 is not None:
    _BITS[_BFLOAT16] = np.dtype(np.int16)


# ----------------------------------------------------------------------------------------
# All rows
# ----------------------------------------------------------------------------------------
# Every loop takes `x` and `out` as 4-D views (a, b, c, feature) and 2-D tables whose row
# for (a, b, c) is ``t0 + a*ta + b*tb + c*tc``, with ``(ta, tb, tc) = steps``.


@njit(inline="always", cache=True)
def _copy_rest(x, out, lo, hi, start, stop):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Copy the features outside ``[start, stop)`` of rows lo..hi-1."""
    _, b_size, c_size, d = x.shape
    a, b, c = _first_row(lo, b_size, c_size)
    for _ in range(lo, hi):
        for i in range(start):
            out[a, b, c, i] = x[a, b, c, i]
        for i in range(stop, d):
            out[a, b, c, i] = x[a, b, c, i]
        a, b, c = _next_row(a, b, c, b_size, c_size)


@njit(inline="always", cache=True)
def _rows_range(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, lo, hi, ahead):  # type: ignore[no-untyped-def]  # pragma: no cover
    # Rows lo..hi-1 in order. With `ahead` > 0, the output row `ahead` rows on is
    # prefetched for writing before each row (`_claim_row`; `ahead_rows`).
    _, b_size, c_size, _ = x.shape
    ta, tb, tc = steps
    a, b, c = _first_row(lo, b_size, c_size)
    if ahead > 0:
        pa, pb, pc = _first_row(min(lo + ahead, hi), b_size, c_size)
    else:
        pa, pb, pc = a, b, c
    for r in range(lo, hi):
        if ahead > 0 and r + ahead < hi:
            _claim_row(out, pa, pb, pc)
            pa, pb, pc = _next_row(pa, pb, pc, b_size, c_size)
        _row(x, out, a, b, c, cos, sin, t0 + a * ta + b * tb + c * tc, start, interleaved, sign)
        a, b, c = _next_row(a, b, c, b_size, c_size)
    if copy_rest:
        _copy_rest(x, out, lo, hi, start, start + 2 * cos.shape[1])


@njit(cache=True, nogil=True)
def _rows_serial(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]  # pragma: no cover
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    _rows_range(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, 0, rows, 0)


@njit(cache=True, nogil=True)
def _in_place_serial(x, cos, sin, t0, steps, start, interleaved, sign, copy_rest):  # type: ignore[no-untyped-def]  # pragma: no cover
    # One array for input and output: LLVM sees that the pairs of a row do not overlap
    # and vectorises, where two arrays that might alias keep it on the scalar loop.
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    _rows_range(x, x, cos, sin, t0, steps, start, interleaved, sign, False, 0, rows, 0)


@njit(cache=True, nogil=True, parallel=True)
def _rows_parallel(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, chunks, ahead):  # type: ignore[no-untyped-def]  # pragma: no cover
    # Runs of consecutive rows, which `_launch` has the threads take one at a time.
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    for k in prange(chunks):
        lo, hi = rows * k // chunks, rows * (k + 1) // chunks
        _rows_range(x, out, cos, sin, t0, steps, start, interleaved, sign, copy_rest, lo, hi, ahead)


@njit(cache=True, nogil=True, parallel=True)
def _in_place_parallel(x, cos, sin, t0, steps, start, interleaved, sign, copy_rest, chunks, ahead):  # type: ignore[no-untyped-def]  # pragma: no cover
    rows = x.shape[0] * x.shape[1] * x.shape[2]
    for k in prange(chunks):
        lo, hi = rows * k // chunks, rows * (k + 1) // chunks
        _rows_range(x, x, cos, sin, t0, steps, start, interleaved, sign, False, lo, hi, ahead)


# ----------------------------------------------------------------------------------------
# Launching: the calling thread for small calls, numba's threads for large ones
# ----------------------------------------------------------------------------------------

#: How far ahead of the row being rotated the threaded loops prefetch output rows for
#: writing (`rope_ref.backends.numba.rows._claim_row`), in bytes of output.
CLAIM_AHEAD_BYTES = 2048


def ahead_rows(out: np.ndarray) -> int:
    """Rows of `out` (4-D) in `CLAIM_AHEAD_BYTES`: how far ahead the threads prefetch.

    Measured on 1x4096x32x128 float32 into a preallocated output (docs/kernels/numba.md):
    2 KiB ahead took 20 % off the time on one thread and on two; 8 KiB ahead, nothing.
    (Output rows of at least 2 KiB are claimed one row ahead.)

    Examples
    --------
    >>> import numpy as np
    >>> ahead_rows(np.empty((1, 8, 4, 128), dtype=np.float32))  # 512-byte rows
    4
    >>> ahead_rows(np.empty((1, 8, 4, 128), dtype=np.uint16)), ahead_rows(np.empty((1, 1, 1, 1024)))
    (8, 1)
    """
    row_bytes = max(1, int(out.shape[3]) * out.itemsize)
    return max(1, CLAIM_AHEAD_BYTES // row_bytes)


#: Held around parallel launches when numba runs on its `workqueue` threading layer, which
#: aborts the process when two threads launch parallel work at the same time.
_WORKQUEUE_LOCK = threading.Lock()


@functools.cache
def _workqueue_layer() -> bool:
    """Whether numba runs on its `workqueue` threading layer, which is not thread-safe.

    ``numba.get_num_threads()`` starts the layer numba picks (``NUMBA_THREADING_LAYER``:
    TBB, OpenMP or workqueue), so that it can be named before the first parallel launch.
    """
    numba.get_num_threads()
    return bool(numba.threading_layer() == "workqueue")  # type: ignore[attr-defined]


def _launch(x4, o4, cos, sin, t0, steps, rows, args, in_place):  # type: ignore[no-untyped-def]
    """Rotate the 4-D views `x4` into `o4` (`rows` rows); `args` are the row options.

    `in_place`: `o4` views the memory of `x4` as `x4` does.
    """
    if rows == 0:
        return
    kernel: Any
    arrays: tuple[Any, ...] = (x4,) if in_place else (x4, o4)
    extra: tuple[Any, ...] = ()
    parallel = rows >= SERIAL_ROWS
    if parallel:
        extra = (min(rows, CHUNKS_PER_THREAD * numba.get_num_threads()), ahead_rows(o4))
    bits = _BITS.get(x4.dtype)
    if bits is not None:  # the loops of every dtype, on the bits (`convert`)
        arrays = (x4.view(bits),) if in_place else (x4.view(bits), o4.view(bits))
    if in_place:
        kernel = _in_place_parallel if parallel else _in_place_serial
    else:
        kernel = _rows_parallel if parallel else _rows_serial
    if not parallel:
        kernel(*arrays, cos, sin, t0, steps, *args)
        return
    # The threads take the runs of rows one at a time as they come free (numba's chunk
    # size 1: dynamic scheduling; the setting is the calling thread's own), so that a
    # thread the system holds back leaves its runs to the others.
    before = numba.set_parallel_chunksize(1)
    try:
        if _workqueue_layer():
            with _WORKQUEUE_LOCK:
                kernel(*arrays, cos, sin, t0, steps, *args, *extra)
        else:
            kernel(*arrays, cos, sin, t0, steps, *args, *extra)
    finally:
        numba.set_parallel_chunksize(before)


# ----------------------------------------------------------------------------------------
# The entry points
# ----------------------------------------------------------------------------------------

_COMPUTE_DTYPE: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float16): np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}
if _BFLOAT16 is not None:
    _COMPUTE_DTYPE[_BFLOAT16] = np.dtype(np.float32)


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
    output_layout: Literal["half", "interleaved"] | None = None,
) -> Array:
    """Rotate the pairs of `x` by the angles whose cos/sin are given; the kernel contract.

    Safe to call from any number of threads at once, on every numba threading layer.

    Parameters
    ----------
    x : numpy.ndarray
        float16, bfloat16 (ml_dtypes), float32 or float64, shape ``(..., head_dim)``, any
        strides.
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
        Writeable output of `x`'s shape and dtype, no two of whose elements share memory
        (not a broadcast view); `x` itself (in place), or an array that does not overlap
        `x`.
    output_layout : {"half", "interleaved"}, optional
        The layout the rotated pairs are written in, when not `layout` (the inverse reads
        in it and writes in `layout`).

    Returns
    -------
    numpy.ndarray
        `out`, or a new array.

    Raises
    ------
    TypeError
        If an array is not a NumPy array or has an unsupported dtype.
    ValueError
        If the tables do not broadcast against `x`, or `out` does not fit (see above).

    Notes
    -----
    Calls with fewer than `SERIAL_ROWS` rows run on the calling thread without the GIL.
    Larger calls run on numba's threads; on numba's ``workqueue`` threading layer, which
    aborts the process when two threads launch parallel work at once, they take turns
    behind a lock (the ``omp`` and ``tbb`` layers run them concurrently).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0]])
    >>> rotate(x, np.array([[0.0]]), np.array([[1.0]]), layout="half", rotary_start=0,
    ...        inverse=False)
    array([[0., 1.]])
    """
    _check_arrays(x, cos, sin)
    n_pairs = cos.shape[-1]
    compute = _COMPUTE_DTYPE[x.dtype]
    cos = np.ascontiguousarray(cos, dtype=compute)
    sin = np.ascontiguousarray(sin, dtype=compute)
    launch = prepare(
        x.shape, x.strides, x.dtype, cos.shape, layout, rotary_start, inverse, output_layout
    )
    return launch(x, out, cos.reshape(-1, n_pairs), sin.reshape(-1, n_pairs))


@functools.lru_cache(maxsize=256)
def prepare(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype[Any],
    table_shape: tuple[int, ...],
    layout: Literal["half", "interleaved"],
    rotary_start: int,
    inverse: bool,
    output_layout: Literal["half", "interleaved"] | None = None,
) -> Launch:
    """The `Launch` for `x` of this shape, strides and dtype and tables of `table_shape`.

    Raises ValueError if the tables do not broadcast to ``shape[:-1] + (n_pairs,)``.
    """
    return Launch(shape, strides, dtype, table_shape, layout, rotary_start, inverse, output_layout)


#: The kernels' layout argument: (layout read, layout written) -> mode.
_MODES = {
    ("half", "half"): 0,
    ("interleaved", "interleaved"): 1,
    ("interleaved", "half"): 2,
    ("half", "interleaved"): 3,
}


class Launch:
    """Rotations of arrays of one geometry, planned once; a call is then a kernel launch.

    ``launch(x, out, cos, sin, first_row)`` rotates `x`, of the planned shape, strides and
    dtype, into `out` (None: a new array like `x`; otherwise checked as `rotate` checks
    it) by 2-D C-contiguous tables of the compute dtype whose row ``first_row`` belongs
    to the first row of `x` (the planned table shape gives the steps from there).

    A float16 or bfloat16 `x` may also be given as the `uint16` or `int16` view of its
    bits (the view the loops read): `out` and the result are then such views too.
    """

    __slots__ = (
        "_args",
        "_bits_dtype",
        "_c_order",
        "_geometry",
        "_new",
        "_overlaps",
        "_plans",
        "decode",
    )

    def __init__(
        self,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: np.dtype[Any],
        table_shape: tuple[int, ...],
        layout: str,
        rotary_start: int,
        inverse: bool,
        output_layout: str | None = None,
    ) -> None:
        self._geometry = (shape, strides, table_shape)
        read, written = layout, output_layout or layout
        if inverse:
            read, written = written, read
        self._args = (
            rotary_start,
            _MODES[read, written],
            _COMPUTE_DTYPE[dtype].type(-1.0 if inverse else 1.0),
            2 * table_shape[-1] < shape[-1],
        )
        # float16 and bfloat16 are rotated through views of their bits (`convert`)
        self._bits_dtype = _BITS.get(dtype)
        self._overlaps = _overlaps_itself(shape, strides, dtype.itemsize)
        self._c_order = strides == np.empty(shape, dtype=f"V{dtype.itemsize}").strides
        self._plans: dict[tuple[int, ...], _Plan] = {}
        self._new: _Plan | None = None  # the plan for a new output (np.empty_like(x))
        #: ``decode(x, cos, sin, first_row)``: a new output on the calling thread, the
        #: tables known C-contiguous (`entry.decoder`); None until a first such call found
        #: the kernel's entry point, and for calls too large for the calling thread.
        self.decode: Callable[..., np.ndarray] | None = None
        _plan(shape, strides, strides, table_shape)  # raises if the tables do not broadcast

    def __call__(
        self,
        x: np.ndarray,
        out: np.ndarray | None,
        cos: np.ndarray,
        sin: np.ndarray,
        first_row: int = 0,
    ) -> np.ndarray:
        decode = self.decode
        if out is None and decode is not None and cos.flags.c_contiguous and sin.flags.c_contiguous:
            return decode(x, cos, sin, first_row)
        if out is x and self._args[1] >= 2:  # pairs move: rotate into a copy, then back
            x[...] = self(x, None, cos, sin, first_row)
            return x
        if out is None:
            out = np.empty_like(x)
            plan = self._new or self._plan(out, new=True)
        else:
            # An `out` of strides planned before was checked then for elements sharing
            # memory (they depend on its shape, x's, and strides only): the rest, inline.
            planned = self._plans.get(out.strides) if type(out) is np.ndarray else None
            if (
                planned is None
                or out.shape != x.shape
                or out.dtype != x.dtype
                or not out.flags.writeable
                or (self._overlaps if out is x else np.may_share_memory(out, x))
            ):
                if out is not x or self._overlaps or not x.flags.writeable:
                    _check_out(x, out)
                planned = planned or self._plan(out)
            plan = planned
        xm = x if plan.shape is None else x.reshape(plan.shape)
        om = out if plan.shape is None else out.reshape(plan.shape)
        in_place = out is x
        if plan.serial:  # the common small call, straight to the compiled kernel
            arrays = (xm,) if in_place else (xm, om)
            entry = plan.entries[in_place]
            if entry is not None and cos.flags.c_contiguous and sin.flags.c_contiguous:
                entry(*arrays, cos, sin, first_row, *plan.kernel_args)
            else:
                kernel = _in_place_serial if in_place else _rows_serial
                bits = self._bits_dtype
                entry = first_call(kernel, arrays, bits, cos, sin, first_row, plan.kernel_args)
                plan.entries[in_place] = entry
                if plan is self._new and entry is not None:
                    view, shape = plan.shape, self._geometry[0]
                    self.decode = decoder(entry, plan.kernel_args, view, shape, self._c_order)
        elif not plan.extra:
            steps = plan.table_strides
            _launch(xm, om, cos, sin, first_row, steps, plan.rows, self._args, in_place)
        else:
            t_outer, t_inner = plan.table_strides[: plan.extra], plan.table_strides[plan.extra :]
            for index in np.ndindex(*xm.shape[: plan.extra]):
                t0 = first_row + sum(i * t for i, t in zip(index, t_outer, strict=True))
                args = (cos, sin, t0, t_inner, plan.rows, self._args, in_place)
                _launch(xm[index], om[index], *args)
        return out

    def _plan(self, out: np.ndarray, *, new: bool = False) -> _Plan:
        """The plan for outputs of `out`'s strides, kept for the next calls."""
        shape, strides, table_shape = self._geometry
        plan = _plan(shape, strides, out.strides, table_shape)
        # Views of the merged axes never copy; checked once for these strides.
        if (
            plan.shape is not None
            and out.size
            and not np.may_share_memory(out.reshape(plan.shape), out)
        ):  # pragma: no cover - the plan merges only axes that view without a copy
            msg = "internal error: `out` could not be viewed without a copy"
            raise AssertionError(msg)
        plan = plan._replace(kernel_args=(plan.table_strides, *self._args), entries=[None, None])
        if new:
            self._new = plan
        else:
            if len(self._plans) >= 8:  # outputs of unusual strides: keep a few plans
                self._plans.clear()
            self._plans[out.strides] = plan
        return plan


# ----------------------------------------------------------------------------------------
# Checks and index plumbing
# ----------------------------------------------------------------------------------------


def _check_arrays(x: Any, cos: Any, sin: Any) -> None:
    if type(x) is not np.ndarray or type(cos) is not np.ndarray or type(sin) is not np.ndarray:
        name, a = next(
            (n, a) for n, a in (("x", x), ("cos", cos), ("sin", sin)) if type(a) is not np.ndarray
        )
        msg = (
            f"backend='numba' needs plain NumPy arrays (np.ndarray, not a subclass); got "
            f"`{name}` of type {type(a).__name__}: pass np.asarray({name}), or "
            "backend='auto' or 'reference'."
        )
        raise TypeError(msg)
    compute = _COMPUTE_DTYPE.get(x.dtype)
    if compute is None:
        msg = (
            "backend='numba' supports float16, bfloat16, float32 and float64 `x` in native byte "
            f"order; got {x.dtype.str if x.dtype.kind == 'f' else x.dtype}."
        )
        raise TypeError(msg)
    if cos.dtype != compute or sin.dtype != compute:
        msg = f"`cos` and `sin` must be {compute} for {x.dtype} `x`; got {cos.dtype}, {sin.dtype}."
        raise TypeError(msg)
    if cos.shape != sin.shape:
        msg = f"`cos` and `sin` must have one shape; got {cos.shape} and {sin.shape}."
        raise ValueError(msg)


def _check_out(x: np.ndarray, out: Any) -> None:
    """Raise unless the kernel may write `out` (`x` itself, or an array beside it)."""
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
        what = "`x` itself, " if out is x else ""
        msg = f"`out` must be writeable; got {what}a read-only array."
        raise ValueError(msg)
    if _overlaps_itself(out.shape, out.strides, out.itemsize):
        msg = (
            "`out` must not have elements that share memory (a broadcast or overlapping "
            f"strided view); got shape {out.shape} with strides {out.strides}."
        )
        raise ValueError(msg)
    if out is not x and np.may_share_memory(out, x) and not _same_view(out, x):
        msg = "`out` must be `x` itself or not overlap it; got a partly overlapping array."
        raise ValueError(msg)


@functools.lru_cache(maxsize=256)  # checked on every `out=` call: shapes repeat
def _overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether elements may share memory: a broadcast (stride 0) or overlapping strides.

    No two elements overlap when, taking the axes of more than one element by increasing
    stride, each stride is at least the bytes spanned by the axes before it. Layouts that
    this cannot prove free of overlap count as overlapping.
    """
    if 0 in shape:
        return False  # no elements (NumPy gives such arrays strides 0)
    span = itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(strides, shape, strict=True) if n > 1):
        if stride < span:
            return True
        span += stride * (n - 1)
    return False


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and a.strides == b.strides
    )


class _Plan(NamedTuple):
    """How to walk `x`.

    `shape` holds the merged leading axes (the first `extra` looped in Python, three left
    for the kernel) and the feature axis, or is None when that is `x`'s own shape;
    `table_strides` the step of each leading axis in table rows (0 where the tables
    broadcast); `rows` the number of feature rows per launch (per index of the `extra`
    axes); `serial` whether it is one launch on the calling thread.
    """

    shape: tuple[int, ...] | None
    extra: int
    table_strides: tuple[int, ...]
    rows: int
    serial: bool
    kernel_args: tuple[Any, ...] = ()  # the table strides and row options, for `serial`
    #: For `serial`: the compiled kernel's entry point for a new output (0) and in place (1),
    #: once `entry.first_call` has found it; None until then. (Each `Launch` plan has its
    #: own list.)
    entries: list[Any] = []  # noqa: RUF012 - replaced by `Launch._plan`, never mutated


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
    view = (*([1] * pad), *merged, shape[-1])
    rows = math.prod(view[extra:-1])
    return _Plan(
        shape=None if view == shape else view,
        extra=extra,
        table_strides=(*([0] * pad), *strides[2]),
        rows=rows,
        serial=extra == 0 and 0 < rows < SERIAL_ROWS,
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
