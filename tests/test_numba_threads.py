"""backend="numba" from many Python threads at once, on each of numba's threading layers.

numba's fallback `workqueue` layer aborts the process when two threads launch parallel
work at the same time, so every layer is tested in a subprocess of its own, with calls
large enough to run on numba's threads and small ones that run on the calling thread.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import rope_ref as rr

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

CONCURRENT_CALLS = """
import sys, threading
import numpy as np
import numba
import rope_ref as rr
from rope_ref._engine.dispatch import load_backend

try:
    numba.get_num_threads()  # loads the threading layer named by NUMBA_THREADING_LAYER
except ValueError:
    print("unavailable")
    sys.exit()
spec = rr.RopeSpec(64)
rng = np.random.default_rng(0)
cases = [  # (x, seq_axis): parallel float32 and float16, and small calls on the caller
    (rng.standard_normal((4096, 8, 64)).astype(np.float32), 0),
    (rng.standard_normal((512, 8, 64)).astype(np.float16), 0),
    (rng.standard_normal((1, 8, 64)).astype(np.float32), 0),
]
want = [rr.apply_rope(x, spec, seq_axis=axis, offset=7) for x, axis in cases]
errors = []

def work(seed):
    try:
        for i in range(12):
            k = (seed + i) % len(cases)
            x, axis = cases[k]
            got = rr.apply_rope(x, spec, seq_axis=axis, offset=7, backend="numba")
            tol = 2e-3 if x.dtype == np.float16 else 1e-5
            if not np.allclose(got.astype(np.float64), want[k], rtol=0, atol=tol):
                errors.append(f"thread {seed}, case {k}: wrong values")
    except Exception as err:
        errors.append(repr(err))

threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(numba.threading_layer(), load_backend("numba")._workqueue_layer(), errors or "ok")
"""


@pytest.mark.parametrize("layer", ["workqueue", "omp", "tbb"])
def test_concurrent_calls_on_every_threading_layer(layer):
    env = {**os.environ, "NUMBA_THREADING_LAYER": layer, "NUMBA_NUM_THREADS": "2"}
    result = subprocess.run(
        [sys.executable, "-c", CONCURRENT_CALLS],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if result.stdout.strip() == "unavailable":
        pytest.skip(f"numba's {layer!r} threading layer cannot be loaded here")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [layer, str(layer == "workqueue"), "ok"], result.stdout


def test_threads_take_runs_of_rows_as_they_come_free(monkeypatch):
    """Parallel launches hand out their runs of rows one at a time (numba's chunk size 1,
    dynamic scheduling), then give the caller back the chunk size it had set."""
    import numba
    import numpy as np

    from rope_ref._engine.dispatch import load_backend

    kernel = load_backend("numba")
    seen: list[int] = []
    real = kernel._rows_parallel

    def spy(*args):
        seen.append(numba.get_parallel_chunksize())
        return real(*args)

    monkeypatch.setattr(kernel, "_rows_parallel", spy)
    x = np.random.default_rng(0).standard_normal((1, 512, 2, 64)).astype(np.float32)
    spec = rr.RopeSpec(64)
    before = numba.set_parallel_chunksize(3)
    try:
        got = rr.apply_rope(x, spec, seq_axis=1, backend="numba")
        assert numba.get_parallel_chunksize() == 3
    finally:
        numba.set_parallel_chunksize(before)
    assert seen == [1]
    want = rr.apply_rope(x, spec, seq_axis=1, backend="reference")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
