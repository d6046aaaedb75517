"""New outputs of the Numba kernel: large ones reuse the memory of outputs let go.

Results are checked against the float64 rotation of `tests._independent`, for every dtype,
on fresh buffers and on reused ones; a buffer is never handed out while an array, a view
or a tensor of it is alive, and the kept buffers stay within their bounds.
"""

from __future__ import annotations

import copy
import importlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine.dispatch import load_backend
from tests._independent import rope_half
from tests.test_kernel_accuracy import DTYPES, SPECS, assert_within_bound, draw, dtype_of, ulp

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)


@pytest.fixture
def outputs() -> Iterator[Any]:
    """The module, emptied before and after the test."""
    module = importlib.import_module("rope_ref.backends.numba.outputs")
    module.release()
    yield module
    module.release()


@pytest.fixture
def every_output_kept(outputs: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Outputs of every size from the kept buffers (the kernel's plans made afresh)."""
    kernel = load_backend("numba")
    monkeypatch.setattr(outputs, "MIN_BYTES", 1)
    kernel.prepare.cache_clear()
    yield outputs
    kernel.prepare.cache_clear()


def large(dtype: np.dtype, seed: int = 0) -> np.ndarray:
    """An array of at least the kept buffers' smallest size."""
    x = draw((1, 1024, 16, 128), dtype, seed=seed)
    assert x.nbytes >= 4 << 20
    return x


def assert_rotated(got: np.ndarray, x: np.ndarray, offset: int = 0) -> None:
    """`got` is `x` (half layout, all features) at ``offset + arange(seq)`` on axis 1,
    within the kernel's documented bound of the float64 rotation rounded once."""
    positions = (offset + np.arange(x.shape[1]))[None, :, None]
    want = rope_half(x.astype(np.float64), positions, rr.inv_freq(rr.RopeSpec(x.shape[-1])))
    n = x.shape[-1] // 2
    x64 = x.astype(np.float64)
    pair = np.hypot(x64[..., :n], x64[..., n:])
    table = 2.0**-24 if x.dtype.itemsize <= 4 else 2.0**-52
    bound = ulp(want, x.dtype) + 4 * table * np.concatenate([pair, pair], axis=-1)
    assert got.dtype == x.dtype
    assert got.shape == x.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_large_output_let_go_is_reused_with_right_values(outputs, dtype):
    x = large(dtype_of(dtype))
    kept = x.copy()
    spec = rr.RopeSpec(128)
    first = rr.apply_rope(x, spec, seq_axis=1, backend="numba")
    assert address(first) % outputs.ALIGNMENT == 0
    assert first.flags.c_contiguous
    assert first.flags.writeable
    assert_rotated(first, x)
    where = address(first)
    del first
    second = rr.apply_rope(x, spec, offset=7, seq_axis=1, backend="numba")
    assert address(second) == where  # the same memory, no new pages
    assert_rotated(second, x, 7)
    assert x.tobytes() == kept.tobytes()


def test_outputs_in_use_are_never_handed_out(outputs):
    x = large(np.dtype(np.float32))
    spec = rr.RopeSpec(128)
    held: list[Any] = []
    first = rr.apply_rope(x, spec, seq_axis=1, backend="numba")
    held.append(first[0, 3:])  # a view keeps the memory in use
    torch = pytest.importorskip("torch")
    second = rr.apply_rope(x, spec, offset=1, seq_axis=1, backend="numba")
    held.append(torch.from_numpy(second))  # so does a tensor
    del first, second
    before = [h.clone() if hasattr(h, "clone") else h.copy() for h in held]
    third = rr.apply_rope(x, spec, offset=2, seq_axis=1, backend="numba")
    fourth = rr.apply_rope(x, spec, offset=3, seq_axis=1, backend="numba")
    addresses = {address(third), address(fourth), held[1].data_ptr()}
    assert len(addresses) == 3
    assert not np.shares_memory(third, held[0])
    assert not np.shares_memory(fourth, held[0])
    assert held[0].tobytes() == before[0].tobytes()
    assert torch.equal(held[1], before[1])
    assert_rotated(fourth, x, 3)


def test_kept_buffers_stay_within_their_bounds(outputs):
    x = large(np.dtype(np.float32))
    spec = rr.RopeSpec(128)
    alive = [rr.apply_rope(x, spec, seq_axis=1, backend="numba") for _ in range(6)]
    assert len(outputs._buffers) == outputs.MAX_BUFFERS
    assert sum(size for _, _, size in outputs._buffers) <= outputs.MAX_BYTES
    assert len({address(a) for a in alive}) == 6
    outputs.release()
    assert outputs._buffers == []
    assert_rotated(alive[0], x)


def test_small_and_strided_outputs_are_plain_arrays(outputs):
    spec = rr.RopeSpec(128)
    small = rr.apply_rope(draw((1, 4, 2, 128), np.float32), spec, seq_axis=1, backend="numba")
    assert small.flags.owndata
    fused = draw((1, 1024, 48, 128), np.float32)
    strided = rr.apply_rope(fused[:, :, 16:32], spec, seq_axis=1, backend="numba")
    assert strided.flags.owndata
    assert outputs._buffers == []
    assert_rotated(strided, fused[:, :, 16:32])


def test_threads_get_buffers_of_their_own(outputs):
    spec = rr.RopeSpec(128)
    inputs = [large(np.dtype(np.float32), seed=k) for k in range(3)]
    failures: list[str] = []

    def work(x: np.ndarray) -> None:
        for offset in range(4):
            got = rr.apply_rope(x, spec, offset=offset, seq_axis=1, backend="numba")
            other = rr.apply_rope(x, spec, offset=offset, seq_axis=1, backend="numba")
            if np.shares_memory(got, other) or got.tobytes() != other.tobytes():
                failures.append("two live outputs shared memory or differed")
            try:
                assert_rotated(got, x, offset)
            except AssertionError as err:
                failures.append(str(err))

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.parametrize("how", ["new", "in_place", "inverse"])
@pytest.mark.parametrize("seq", [3, 300])  # the serial loop and the threaded one
def test_every_call_within_the_bound_on_kept_buffers(every_output_kept, dtype, spec, how, seq):
    """The accuracy test's calls with every new output from the kept buffers, twice."""
    dt = dtype_of(dtype)
    spec = copy.copy(spec)  # a spec of its own: the call is planned afresh
    x = draw((2, seq, 2, spec.head_dim), dt, seed=seq)
    kept = x.copy()
    positions = np.broadcast_to((4000 + np.arange(seq))[None, :, None], x.shape[:-1])
    kwargs = {"offset": 4000, "seq_axis": 1, "backend": "numba", "inverse": how == "inverse"}
    for _ in range(2):  # a fresh buffer, then the same one again
        if how == "in_place":  # layouts that move pairs rotate into a new output first
            got = x.copy()
            assert rr.apply_rope(got, spec, out=got, **kwargs) is got
        else:
            got = rr.apply_rope(x, spec, **kwargs)
        assert_within_bound(got, kept, spec, positions, inverse=how == "inverse")
        del got
    assert x.tobytes() == kept.tobytes()
    moves_pairs = (spec.output_layout or spec.layout) != spec.layout
    if how != "in_place" or moves_pairs:
        assert every_output_kept._buffers
