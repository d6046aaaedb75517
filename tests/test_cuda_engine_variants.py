"""vLLM's and ggml's frequency variants through the CUDA kernel's tables (host emulation).

``backend="cupy"`` with NumPy stand-ins: the tables of `rope_ref.backends.cuda.tables` are
built from the reference and read by the kernel's thread body compiled for the CPU. Each
result is compared with the engine's own formula, written in float64 in
`tests.test_scaling_engine_variants`, to float32 accuracy. Needs nvcc, no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests.cuda_host import emulation
from tests.test_scaling_engine_variants import SPECS, _expected

pytestmark = pytest.mark.cuda_host

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
tables_module = emulation.backend_module("cuda.tables")


@pytest.fixture
def host(harness):
    call_module.clear()
    tables_module.device_tables.clear()
    with arrays_module.stand_in(arrays_module.HostStandIn(launch=harness.launch)):
        yield
    call_module.clear()
    tables_module.device_tables.clear()


@pytest.mark.parametrize("name", sorted(SPECS))
def test_cuda_tables_take_the_variants(host, name):
    spec = SPECS[name]
    assert not tables_module.length_dependent(spec)  # one cache of rows, whatever seq_len
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 24, spec.head_dim)).astype(np.float32)
    for p in (np.arange(100, 124), np.arange(3_000_000, 3_000_024)):  # rows, then past them
        got = rr.apply_rope(x, spec, p, backend="cupy")
        np.testing.assert_allclose(np.asarray(got), _expected(name, x, p), atol=3e-5, rtol=0)
    assert len(tables_module.device_tables) == 1
