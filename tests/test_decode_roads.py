"""Decoding calls after the first: the compiled entry point, `Launch.decode` and the block
of the last call.

The first call of a geometry goes through numba's dispatcher and finds the compiled
kernel's entry point; the next ones call it directly (`Launch.decode` for a new output),
and read their tables from the block the last call read (`_OffsetTables.last_block`).
Every result here is checked against an independent float64 rotation within the
documented bound (`tests.test_kernel_accuracy.assert_within_bound`), on every call, with
new values each time, so that the second and later calls are the ones checked.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine.dispatch import load_backend
from rope_ref._engine.table_cache import offset_cache
from tests.test_kernel_accuracy import assert_within_bound, draw, dtype_of

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

SPEC = rr.RopeSpec(64)


def decode_input(dtype: np.dtype, kind: str, seed: int) -> tuple[np.ndarray, int]:
    """One token's queries as callers hold them, and the axis of its tokens."""
    if kind == "4-D":  # (batch, seq, heads, head_dim): C-contiguous
        return draw((1, 1, 4, 64), dtype, seed), 1
    if kind == "3-D":  # vLLM's (tokens, heads, head_dim): planned as a 4-D view
        return draw((1, 4, 64), dtype, seed), 0
    fused = draw((1, 1, 12, 64), dtype, seed)  # q of a fused qkv: a strided view
    return fused[:, :, 4:8], 1


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("kind", ["4-D", "3-D", "strided"])
@pytest.mark.parametrize("road", ["offset", "positions"])
def test_every_call_of_a_decoding_loop_is_within_the_bound(dtype, kind, road):
    """70 tokens from position 990: the first calls find the entry point, the others use
    it, and the loop crosses from one block of cached tables to the next (at 1024)."""
    dt = dtype_of(dtype)
    for step in range(70):
        x, axis = decode_input(dt, kind, seed=step)
        kept = x.copy()
        at = 990 + step
        if road == "offset":
            got = rr.apply_rope(x, SPEC, offset=at, seq_axis=axis, backend="numba")
        else:
            ids = np.array([[at]]) if axis == 1 else np.array([at])
            got = rr.apply_rope(x, SPEC, ids, seq_axis=axis, backend="auto")
        assert type(got) is np.ndarray
        assert got.dtype == x.dtype
        assert got.shape == x.shape
        assert got.flags.c_contiguous or kind == "strided"
        assert_within_bound(got, kept, SPEC, np.full(x.shape[:-1], at))
        assert x.tobytes() == kept.tobytes()


def launch_for(x: np.ndarray):
    kernel = load_backend("numba")
    return kernel.prepare(
        x.shape, x.strides, x.dtype, (x.shape[0], 1, 1, SPEC.n_pairs), "half", 0, False
    )


def tables(positions: np.ndarray, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    angles = positions.astype(np.float64)[:, None] * rr.inv_freq(SPEC)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def test_a_launch_takes_other_tables_after_finding_its_entry_point():
    """Tables that are not C-contiguous, or writeable where the first were read-only,
    after the entry point was found for read-only C-contiguous ones."""
    x = draw((3, 1, 2, 64), np.dtype(np.float32), seed=1)
    launch = launch_for(x)
    positions = np.array([5, 6, 7])
    cos, sin = tables(positions)
    for table in (cos, sin):
        table.flags.writeable = False
    for _ in range(2):  # the second call runs through `Launch.decode`
        got = launch(x, None, cos, sin, 0)
        assert_within_bound(got, x, SPEC, np.broadcast_to(positions[:, None, None], (3, 1, 2)))
    assert launch.decode is not None
    wide_cos, wide_sin = tables(np.repeat(positions, 2))  # every second row: strided tables
    strided = (wide_cos[::2], wide_sin[::2])
    writeable = tables(positions)
    fortran = tuple(np.asfortranarray(t) for t in tables(positions))
    for cos2, sin2 in (strided, writeable, fortran):
        got = launch(x, None, cos2, sin2, 0)
        assert_within_bound(got, x, SPEC, np.broadcast_to(positions[:, None, None], (3, 1, 2)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_sixteen_bit_launch_takes_the_arrays_and_their_bit_views_alike(dtype):
    """The NumPy road passes float16/bfloat16 arrays, the tensors' road the integer views
    of their bits: one launch, one entry point, the same bits either way."""
    dt = dtype_of(dtype)
    bits = np.dtype(np.uint16 if dtype == "float16" else np.int16)
    x = draw((2, 1, 3, 64), dt, seed=2)
    launch = launch_for(x)
    cos, sin = tables(np.array([11, 12]))
    first = launch(x, None, cos, sin, 0)
    for _ in range(2):
        as_array = launch(x, None, cos, sin, 0)
        as_bits = launch(x.view(bits), None, cos, sin, 0)
        assert as_array.dtype == dt
        assert as_bits.dtype == bits
        assert as_array.tobytes() == first.tobytes() == as_bits.tobytes()
        out = np.empty_like(x.view(bits))
        assert launch(x.view(bits), out, cos, sin, 0) is out
        assert out.tobytes() == first.tobytes()


def test_read_only_and_in_place_calls_after_the_entry_point():
    x = draw((1, 1, 4, 64), np.dtype(np.float32), seed=3)
    kept = x.copy()
    for _ in range(2):
        rr.apply_rope(x, SPEC, offset=70, seq_axis=1, backend="numba")
    frozen = x.copy()
    frozen.flags.writeable = False
    got = rr.apply_rope(frozen, SPEC, offset=70, seq_axis=1, backend="numba")
    assert_within_bound(got, kept, SPEC, np.full((1, 1, 4), 70))
    for _ in range(2):
        y = kept.copy()
        assert rr.apply_rope(y, SPEC, offset=70, seq_axis=1, backend="numba", out=y) is y
        assert_within_bound(y, kept, SPEC, np.full((1, 1, 4), 70))


def test_the_last_block_serves_after_the_shared_cache_lets_it_go():
    x = draw((1, 1, 4, 64), np.dtype(np.float32), seed=4)
    rr.apply_rope(x, SPEC, offset=2000, seq_axis=1, backend="numba")
    offset_cache.clear()
    for at in (2001, 2047, 2048, 1999):  # the same block, then the next, then the one before
        got = rr.apply_rope(x, SPEC, offset=at, seq_axis=1, backend="numba")
        assert_within_bound(got, x, SPEC, np.full((1, 1, 4), at))


def test_threads_decoding_in_different_blocks_read_their_own_rows():
    """Threads share one table source, whose last block each replaces whole: no call may
    read another block's rows."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def decode(first: int) -> None:
        try:
            barrier.wait()
            for step in range(150):
                at = first + step
                x = draw((1, 1, 2, 64), np.dtype(np.float32), seed=at)
                ids = np.array([[at]])
                got = rr.apply_rope(x, SPEC, ids, seq_axis=1, backend="auto")
                assert_within_bound(got, x, SPEC, np.full((1, 1, 2), at))
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=decode, args=(4096 * k + 30,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]


def test_an_out_of_planned_strides_is_checked_on_every_call():
    """`out=` arrays of strides planned before skip only the check those strides decide
    (no two elements share memory); everything else is checked on every call."""
    base = np.zeros(4 * 64 + 32, dtype=np.float32)
    x = base[:256].reshape(1, 1, 4, 64)
    x[...] = draw((1, 1, 4, 64), np.dtype(np.float32), seed=5)
    kept = x.copy()
    good = np.empty_like(x)
    kwargs = {"offset": 9, "seq_axis": 1, "backend": "numba"}
    for _ in range(2):  # plans the strides, then takes them as planned
        assert rr.apply_rope(x, SPEC, out=good, **kwargs) is good
        assert_within_bound(good, kept, SPEC, np.full((1, 1, 4), 9))
    read_only = np.empty_like(x)
    read_only.flags.writeable = False
    shifted = base[32:].reshape(1, 1, 4, 64)  # x's strides, half a row further on
    other_dtype = np.empty(x.shape, dtype=np.int32)  # the same strides too
    for out, message in (
        (read_only, "writeable"),
        (shifted, "overlap"),
        (other_dtype, "dtype"),
    ):
        assert out.strides == good.strides
        with pytest.raises(ValueError, match=message):
            rr.apply_rope(x, SPEC, out=out, **kwargs)
    assert x.tobytes() == kept.tobytes()
