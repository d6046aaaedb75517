"""Calls of the Numba kernel without numba's dispatcher, once the first call found the code.

numba's dispatcher types every argument on every call to pick the compiled
specialisation (about 0.4 µs for the kernel's ten arguments, an eighth of a decoding
call). A plan of the kernel (`rope_ref.backends.numba.cpu.Launch`) fixes the types of its
calls, so its first call on the calling thread goes through the dispatcher
(`first_call`), which also finds the specialisation's entry point, and the next calls
take that entry point directly (`decoder` builds the function a new output's calls
use).

What fixes the types: the plan was found by `x`'s shape, strides and dtype, so the
arrays' dtype, dimensions and layout (C or any) are the plan's; the tables are of the
launch's compute dtype and C-contiguous (checked on every call of a launch, and once
when a block of tables is built for the roads that read blocks); whether an array is
writeable or aligned selects no different code. A float16 or bfloat16 array may be
given to the entry point as it is, without the integer view of its bits the loops were
compiled for: the entry point reads the array's memory with the view's item size (it
checks the item size, nothing else of the dtype).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

__all__ = ["decoder", "first_call"]


def first_call(
    kernel: Any,
    arrays: tuple[np.ndarray, ...],
    bits: np.dtype[Any] | None,
    cos: np.ndarray,
    sin: np.ndarray,
    first_row: int,
    kernel_args: tuple[Any, ...],
) -> Callable[..., None] | None:
    """Run `kernel` through numba's dispatcher; return its entry point for these types.

    `arrays`: ``(x,)`` in place or ``(x, out)``, 4-D as the plan views them, 16-bit
    arrays as they are (`bits`: the integer view the loops read, or None). None when the
    tables are not C-contiguous or no specialisation matches the types (the dispatcher
    then stays in use).
    """
    if bits is not None and arrays[0].dtype is not bits:
        arrays = tuple(a.view(bits) for a in arrays)
    args = (*arrays, cos, sin, first_row, *kernel_args)
    kernel(*args)
    if not (cos.flags.c_contiguous and sin.flags.c_contiguous):
        return None
    found: Any = kernel.overloads.get(tuple(numba.typeof(a) for a in args))
    entry: Callable[..., None] | None = None if found is None else found.entry_point
    return entry


def decoder(
    entry: Callable[..., None],
    kernel_args: tuple[Any, ...],
    view: tuple[int, ...] | None,
    shape: tuple[int, ...],
    c_order: bool,
) -> Callable[[np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]:
    """``decode(x, cos, sin, first_row)``: a new output rotated through `entry`.

    The least a call can do: allocate the output, view both arrays as the plan does
    (`view`: the plan's 4-D shape, or None when `x` is already viewed so), call the
    compiled kernel. `x` must have the plan's geometry (`shape`; `c_order`: its strides
    are those of a C-contiguous array) and the tables must be C-contiguous of the
    compute dtype: `decode` checks neither, its callers know both.
    """
    if view is None and c_order:  # then np.empty(shape) is np.empty_like(x), quicker

        def decode(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, first_row: int) -> np.ndarray:
            out = np.empty(shape, x.dtype)
            entry(x, out, cos, sin, first_row, *kernel_args)
            return out

    else:

        def decode(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, first_row: int) -> np.ndarray:
            out = np.empty_like(x)
            if view is None:
                entry(x, out, cos, sin, first_row, *kernel_args)
            else:
                entry(x.reshape(view), out.reshape(view), cos, sin, first_row, *kernel_args)
            return out

    return decode
