"""Device tables of a length-dependent scaling in a decode loop, with NumPy stand-ins.

Each new seq_len copies its inverse frequencies once, in the caller's stream order (no
host synchronisation), and the cache keeps a bounded number of them: those it lets go are
freed, but the ones a CUDA graph captured. Counted by a stand-in that records every copy
to the device. Needs nvcc (the launches run on the host emulation).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host import emulation
from tests.cuda_host.cases import DTYPES, assert_error_model, random_x

pytestmark = pytest.mark.cuda_host

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
tables_module = emulation.backend_module("cuda.tables")
SPEC = rr.RopeSpec(head_dim=32, scaling=rr.scaling.DynamicNTK(4.0, max_position=64))
STEPS = 300


class CountingHost(arrays_module.HostStandIn):  # type: ignore[misc, name-defined]
    """Records each copy to the device: synchronous ones, and those in a stream's order."""

    def __init__(self, launch):
        super().__init__(launch=launch)
        self.synchronous, self.ordered = [], []
        self.current = SimpleNamespace(ptr=1)

    def upload(self, host, like):
        self.synchronous.append(host.shape)
        return np.array(host)

    def upload_ordered(self, host, like, stream):
        self.ordered.append((host.shape, stream.ptr))
        return np.array(host)

    def stream(self, a):
        return self.current


@pytest.fixture
def host(harness):
    call_module.clear()
    tables_module.device_tables.clear()
    with arrays_module.stand_in(CountingHost(harness.launch)) as counting:
        yield counting
    call_module.clear()
    tables_module.device_tables.clear()


def step(x, position, seq_len):
    positions = np.full((x.shape[0], 1, 1), position)
    return positions, rr.apply_rope(x, SPEC, positions, seq_axis=-3, seq_len=seq_len,
                                    backend="cupy")  # fmt: skip


def test_a_decode_loop_copies_once_per_seq_len_and_stays_bounded(host, np_rng):
    x = random_x(np_rng, (2, 1, 3, 32), DTYPES["float32"])
    cache = tables_module.device_tables
    for i in range(STEPS):
        positions, y = step(x, 100 + i, 101 + i)
        if i % 97 == 0:
            assert_error_model(y, x, SPEC, positions, seq_len=101 + i)
        positions, y = step(x, 100 + i, 101 + i)  # the same seq_len again: no copy
    assert host.synchronous == []
    assert host.ordered == [((SPEC.n_pairs,), 1)] * STEPS  # the inverse frequencies, once each
    assert cache.held() == tables_module.MAX_LENGTH_ENTRIES


def test_what_a_graph_captured_outlives_the_bound(host, harness, np_rng):
    x = random_x(np_rng, (2, 1, 3, 32), DTYPES["float32"])
    cache = tables_module.device_tables
    step(x, 7, 500)
    host.capture = True
    with pytest.raises(RuntimeError, match="call once with this seq_len before capturing"):
        step(x, 7, 501)  # a copy cannot be captured
    positions, y = step(x, 7, 500)
    captured = harness.launches[-1]
    host.capture = False
    for i in range(2 * tables_module.MAX_LENGTH_ENTRIES):
        step(x, 7, 1000 + i)
    assert cache.held() == tables_module.MAX_LENGTH_ENTRIES + 1  # the captured one too
    harness.launch(captured)  # a replay reads the captured inverse frequencies
    assert_error_model(y, x, SPEC, positions, seq_len=500)


def test_each_stream_reads_its_own_copy(host, harness, np_rng):
    x = random_x(np_rng, (2, 1, 3, 32), DTYPES["float32"])
    step(x, 3, 40)
    host.current = SimpleNamespace(ptr=2)
    positions, y = step(x, 3, 40)
    assert [ptr for _, ptr in host.ordered] == [1, 2]
    assert_error_model(y, x, SPEC, positions, seq_len=40)
    fields = harness.launches[-1].fields
    inv = [t.inv_freq for k, t in tables_module.device_tables._by_length.items() if k[-1] == 2]
    assert fields["inv_freq"] == inv[0].__array_interface__["data"][0]


def test_a_capture_on_another_stream_reads_the_warm_up_copy(host, harness, np_rng):
    """As ``torch.cuda.graph`` captures on a stream of its own, after synchronising."""
    x = random_x(np_rng, (2, 1, 3, 32), DTYPES["float32"])
    step(x, 9, 700)  # warm-up on stream 1
    host.current, host.capture = SimpleNamespace(ptr=3), True
    positions, y = step(x, 9, 700)
    host.capture = False
    assert host.ordered == [((SPEC.n_pairs,), 1)]  # nothing copied during the capture
    assert_error_model(y, x, SPEC, positions, seq_len=700)
    for i in range(2 * tables_module.MAX_LENGTH_ENTRIES):
        step(x, 9, 2000 + i)
    assert tables_module.device_tables.held() == tables_module.MAX_LENGTH_ENTRIES + 1
