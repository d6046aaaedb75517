"""One row of the Numba CPU kernel, shared by the loops of every dtype.

`_row` rotates the pairs of one row by one table row (`rope_ref.backends.numba.cpu` calls
it); it reads each element through `widen` and writes each result through `narrow`
(`rope_ref.backends.numba.convert`), which are the identity for float32 and float64 and
the 16-bit conversions for the bit patterns of float16 and bfloat16, so the same loop,
vectorised, serves them all. `_first_row` and `_next_row` walk the rows of a 4-D view
without a division per row; `_claim_row` prefetches an output row for writing.
bfloat16 rows of the half layout go to `rope_ref.backends.numba.bf16_rows` first, which
takes them where the processor has AVX512-BF16.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .bf16_rows import vector_half_row
from .convert import narrow, widen

__all__: list[str] = []

#: Bytes in a cache line (x86 and most AArch64 cores), the step of `_claim_row`.
LINE_BYTES = 64


@njit(inline="always", cache=True)
def _row(x, out, a, b, c, cos, sin, t, start, interleaved, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Rotate the pairs of row ``x[a, b, c]`` into ``out[a, b, c]`` by table row `t`.

    Feature and table indices are unsigned, so numba emits no negative-index wrap-around
    for them: the pair loop is then plain strided loads and stores, which LLVM vectorises
    when the feature axis is contiguous, and no view is made per row. (Features outside
    the rotary slice are copied by `_copy_rest`, in a loop of its own: inside this one it
    kept LLVM from vectorising.)
    """
    n = np.uint64(cos.shape[1])
    tu = np.uint64(t)
    first = np.uint64(start)
    if interleaved >= 2:  # pairs written in the other layout (`cpu._MODES`)
        _row_crossed(x, out, a, b, c, cos, sin, tu, first, n, interleaved == 2, sign)
    # The commonest pair counts (head_dim 128 and 64) get loops of a length known when
    # compiled: no remainder loop and no trip-count arithmetic, 3 to 9 % less time
    # (`docs/kernels/numba.md`).
    elif interleaved:
        if n == 64:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(64), sign)
        elif n == 32:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(32), sign)
        else:
            _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign)
    elif not vector_half_row(x, out, a, b, c, cos, sin, tu, first, n, sign):  # (bf16_rows)
        if n == 64:
            _half_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(64), sign)
        elif n == 32:
            _half_pairs(x, out, a, b, c, cos, sin, tu, first, np.uint64(32), sign)
        else:
            _half_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign)


@njit(inline="always", cache=True)
def _half_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row`'s pairs ``(first + j, first + j + n)``, `n` of them."""
    for j in range(n):
        cj = cos[tu, j]
        sj = sign * sin[tu, j]
        i = first + j
        u = widen(x[a, b, c, i])
        v = widen(x[a, b, c, i + n])
        out[a, b, c, i] = narrow(u * cj - v * sj, out)
        out[a, b, c, i + n] = narrow(v * cj + u * sj, out)


@njit(inline="always", cache=True)
def _interleaved_pairs(x, out, a, b, c, cos, sin, tu, first, n, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row`'s pairs ``(first + 2j, first + 2j + 1)``, `n` of them."""
    one, two = np.uint64(1), np.uint64(2)
    for j in range(n):
        cj = cos[tu, j]
        sj = sign * sin[tu, j]
        i = first + two * j
        u = widen(x[a, b, c, i])
        v = widen(x[a, b, c, i + one])
        out[a, b, c, i] = narrow(u * cj - v * sj, out)
        out[a, b, c, i + one] = narrow(v * cj + u * sj, out)


@njit(inline="always", cache=True)
def _row_crossed(x, out, a, b, c, cos, sin, tu, first, n, from_interleaved, sign):  # type: ignore[no-untyped-def]  # pragma: no cover
    """`_row` for pairs read in one layout and written in the other (`out` is not `x`)."""
    one, two = np.uint64(1), np.uint64(2)
    if from_interleaved:
        for j in range(n):
            cj = cos[tu, j]
            sj = sign * sin[tu, j]
            u = widen(x[a, b, c, first + two * j])
            v = widen(x[a, b, c, first + two * j + one])
            out[a, b, c, first + j] = narrow(u * cj - v * sj, out)
            out[a, b, c, first + j + n] = narrow(v * cj + u * sj, out)
    else:
        for j in range(n):
            cj = cos[tu, j]
            sj = sign * sin[tu, j]
            u = widen(x[a, b, c, first + j])
            v = widen(x[a, b, c, first + j + n])
            out[a, b, c, first + two * j] = narrow(u * cj - v * sj, out)
            out[a, b, c, first + two * j + one] = narrow(v * cj + u * sj, out)


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


def _prefetch_for_write_typing(  # pragma: no cover - numba
    typingctx: Any, array: Any, a: Any, b: Any, c: Any, i: Any
) -> Any:
    """Ask for the cache line of ``array[a, b, c, i]`` in a writeable state (no load).

    LLVM's ``llvm.prefetch`` with rw=1, locality 3, data: ``prefetchw`` on x86 (where
    the processor has it, else ``prefetcht0``), ``prfm pstl1keep`` on AArch64. A hint:
    it never faults and changes no value.
    """

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        array_value = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, array_value, list(args[1:]), wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8",
        )
        address = builder.bitcast(pointer, byte_pointer)
        write, keep, data = (ir.Constant(i32, v) for v in (1, 3, 1))
        builder.call(function, [address, write, keep, data])
        return context.get_dummy_value()

    return types.void(array, types.intp, types.intp, types.intp, types.intp), codegen


_prefetch_for_write: Any = intrinsic(_prefetch_for_write_typing)


@njit(inline="always", cache=True)
def _claim_row(out, a, b, c):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Prefetch for writing the cache lines of row ``out[a, b, c]``.

    A store to a line not in the cache first reads it (the write-allocate); asked for a
    few rows ahead, that read overlaps the rows in between instead of stalling the
    stores (`rope_ref.backends.numba.cpu._rows_range`).
    """
    step = max(1, LINE_BYTES // out.itemsize)
    for i in range(0, out.shape[3], step):
        _prefetch_for_write(out, a, b, c, i)
