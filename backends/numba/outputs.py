"""New outputs of the Numba CPU kernel: large ones reuse the memory of outputs let go.

A new NumPy array of many megabytes is mapped fresh from the operating system, which
faults in and zeroes every page on its first write: for a prefill's output that costs
about as much as copying the same bytes, on top of the rotation (measured in
docs/benchmarks.md). Like the arenas of the C++ runtimes (ONNX Runtime's, ggml's graph
allocator), `new_output` keeps the buffers of the last few large outputs and hands one
out again once nothing refers to its memory any more (no array, view or tensor of it is
alive), so that a model's layers, each rotating an array of the same shape and dropping
the last one's, write into memory that is already mapped.

- Only C-contiguous outputs of at least `MIN_BYTES` come from here; smaller ones are
  ``np.empty``, which the C library recycles well.
- At most `MAX_BUFFERS` buffers and `MAX_BYTES` bytes are kept; the oldest is forgotten
  first (one still in use stays its user's, and is freed when they let it go). `release`
  forgets them all.
- A buffer's data starts on a 2 MiB boundary, so that the system can map it in huge
  pages where it does (NumPy asks for them on arrays of 4 MiB and more).
- Whether a buffer is free is read from its reference count, under a lock; in a Python
  without the GIL, where reference counts are not exact, every output is ``np.empty``.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np

__all__ = ["MAX_BUFFERS", "MAX_BYTES", "MIN_BYTES", "new_output", "release"]

#: Outputs of fewer bytes are plain ``np.empty``.
MIN_BYTES = 4 << 20
#: The most buffers kept.
MAX_BUFFERS = 4
#: The most bytes kept.
MAX_BYTES = 256 << 20
#: Where a buffer's data starts: a huge page's boundary.
ALIGNMENT = 2 << 20

_lock = threading.Lock()
#: The buffers kept, least recently handed out first: (raw uint8 array, start, size).
_buffers: list[tuple[np.ndarray, int, int]] = []


def _refs(entry: tuple[np.ndarray, int, int]) -> int:
    return sys.getrefcount(entry[0])


#: The reference count `_refs` reads for a buffer that only `_buffers` holds.
_FREE_REFS = _refs((np.empty(1, dtype=np.uint8), 0, 0))
#: Reference counts are exact only where the GIL is on.
_ENABLED = bool(getattr(sys, "_is_gil_enabled", lambda: True)())


def new_output(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An uninitialised C-contiguous array: a kept buffer when large and one is free.

    Examples
    --------
    >>> import numpy as np
    >>> release()
    >>> a = new_output((1024, 1024, 4), np.dtype(np.float32))
    >>> a.shape, a.flags.c_contiguous, a.ctypes.data % ALIGNMENT
    ((1024, 1024, 4), True, 0)
    >>> address = a.ctypes.data
    >>> del a  # nothing refers to the buffer any more: the next output of its size gets it
    >>> new_output((4, 1024, 1024), np.dtype(np.float32)).ctypes.data == address
    True
    """
    size = math.prod(shape) * dtype.itemsize
    if size < MIN_BYTES or size > MAX_BYTES or not _ENABLED:
        return np.empty(shape, dtype=dtype)
    with _lock:
        for i, entry in enumerate(_buffers):
            if entry[2] == size and _refs(entry) == _FREE_REFS:
                del _buffers[i]
                _buffers.append(entry)  # the most recently handed out last
                raw, start = entry[0], entry[1]
                break
        else:
            raw = np.empty(size + ALIGNMENT, dtype=np.uint8)
            start = -raw.ctypes.data % ALIGNMENT
            _buffers.append((raw, start, size))
            while len(_buffers) > MAX_BUFFERS or sum(e[2] for e in _buffers) > MAX_BYTES:
                del _buffers[0]
        return raw[start : start + size].view(dtype).reshape(shape)


def release() -> None:
    """Forget the kept buffers: those not in use are freed now, the others when let go.

    Examples
    --------
    >>> release()
    """
    with _lock:
        _buffers.clear()
