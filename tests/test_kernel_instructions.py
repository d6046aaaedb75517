"""The 16-bit loads and stores of the Numba kernel vectorise (x86 with F16C and AVX2).

The row loop is compiled afresh here (no disk cache, so that its machine code can be read)
for the bit views that float16 (uint16) and bfloat16 (int16) arrays are rotated through;
its machine code must convert and shift whole vectors, not one element at a time.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rope_ref as rr

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)


def machine_code(bits: type) -> str:
    from numba import njit

    from rope_ref._engine.dispatch import load_backend

    kernel = load_backend("numba")
    fresh = njit(nogil=True)(kernel._rows_serial.py_func)
    x: np.ndarray = np.zeros((1, 4, 2, 64), dtype=bits)
    cos = np.ones((4, 32), dtype=np.float32)
    fresh(x, np.empty_like(x), cos, cos, 0, (0, 1, 0), 0, 0, np.float32(1.0), False)
    return str(fresh.inspect_asm(fresh.signatures[0]))


def x86_with(*flags: str) -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            words = set(f.read().split())
    except OSError:
        return False
    return all(flag in words for flag in flags)


@pytest.mark.skipif(not x86_with("f16c", "avx2"), reason="needs an x86 processor with F16C")
def test_float16_converts_whole_vectors():
    asm = machine_code(np.uint16)
    assert re.search(r"vcvtph2psx?\s[^\n]*%[yz]mm", asm), "float16 loads are not vectorised"
    assert re.search(r"vcvtps2phx?\s[^\n]*%[yz]mm", asm), "float16 stores are not vectorised"


@pytest.mark.skipif(not x86_with("avx2"), reason="needs an x86 processor with AVX2")
def test_bfloat16_shifts_whole_vectors():
    asm = machine_code(np.int16)
    assert re.search(r"vpslld\s[^\n]*%[yz]mm", asm), "bfloat16 loads are not vectorised"
    assert re.search(r"vpsrld\s[^\n]*%[yz]mm", asm), "bfloat16 stores are not vectorised"
    # NaN found by one unordered comparison of the floats, not an and and a compare
    assert re.search(r"vcmpunordps\s[^\n]*%[yz]mm", asm), "bfloat16 NaN test is not vectorised"


@pytest.mark.skipif(not x86_with("3dnowprefetch"), reason="needs an x86 processor with PREFETCHW")
def test_the_threaded_loop_prefetches_output_rows_for_writing():
    """The threaded loop asks for each output row's lines `ahead_rows` rows early, in a
    writeable state (`prefetchw`); the calling thread's loop (decoding sizes) does not."""
    from numba import njit

    from rope_ref._engine.dispatch import load_backend

    kernel = load_backend("numba")
    x = np.zeros((1, 512, 2, 64), dtype=np.float32)
    out = np.empty_like(x)
    cos = np.ones((512, 32), dtype=np.float32)
    args = (x, out, cos, cos, 0, (0, 1, 0), 0, 0, np.float32(1.0), False)
    threaded = njit(nogil=True, parallel=True)(kernel._rows_parallel.py_func)
    threaded(*args, 8, kernel.ahead_rows(out))
    serial = njit(nogil=True)(kernel._rows_serial.py_func)
    serial(*args)
    assert kernel.ahead_rows(out) == 2048 // (64 * 4)
    asm = "".join(threaded.inspect_asm(s) for s in threaded.signatures)
    assert re.search(r"\bprefetchw\s", asm), "output rows are not prefetched for writing"
    assert not re.search(r"\bprefetch", str(serial.inspect_asm(serial.signatures[0])))
