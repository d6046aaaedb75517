"""`rope-ref verify`'s CUDA checks, driven through NumPy stand-ins for device arrays.

A stand-in framework runs every step of the checks but the launch itself as on a GPU, and
the launches run on the host emulation: the checks pass, and each fails when its mistake is
planted (a launch on another stream, a kernel that does not rotate, a replay that reads
nothing new). Without CuPy or a device the checks are skipped and verify says why.
"""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from rope_ref.cli import verify, verify_cuda
from tests.cuda_host import emulation, stub_cupy

arrays_module = emulation.backend_module("cuda.arrays")
call_module = emulation.backend_module("cuda.call")
tables_module = emulation.backend_module("cuda.tables")


def test_without_cupy_verify_says_the_cuda_checks_were_skipped(monkeypatch, capsys):
    monkeypatch.setattr(verify, "NAMESPACES", ("numpy",))
    backends = {"reference": None, "numba": None, "cupy": "needs 'cupy'"}
    monkeypatch.setattr(verify, "available_backends", lambda: backends)
    results, skipped = verify.run_checks()
    verify.print_table(results, skipped)
    out = capsys.readouterr().out
    assert f"skipped: backend cupy: needs 'cupy'; {verify_cuda.CHECKED} skipped" in out
    assert "float16, bfloat16 and float32 on the caller's stream" in out
    assert "a CUDA graph capture and replay" in out


def test_without_a_device_the_cuda_checks_say_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", stub_cupy.module())
    rows, skipped = verify_cuda.cuda_checks(None)
    assert rows == []
    assert skipped == [f"backend cupy: {verify_cuda.CHECKED} skipped: no usable CUDA device ("
                       "cudaErrorNoDevice: "
                       "no CUDA-capable device is detected (stub CuPy))"]  # fmt: skip


class StreamHost(arrays_module.HostStandIn):  # type: ignore[misc, name-defined]
    """Stand-ins whose work runs on the stream the framework made current (or not)."""

    def __init__(self, launch, *, wrong_stream=False):
        super().__init__(launch=launch)
        self.current, self.wrong_stream = 0, wrong_stream

    def stream(self, a):
        return SimpleNamespace(ptr=self.current + self.wrong_stream)


def host_framework(harness, host, *, replay_launches=True):
    class HostFramework(verify_cuda.Framework):
        label = "host stand-ins"

        def __init__(self):
            pass

        def put(self, a):
            return np.array(a)

        def get(self, a):
            return np.asarray(a)

        @contextlib.contextmanager
        def on_stream(self):
            host.current = 7
            yield 7
            host.current = 0

        def capture(self, call):
            call()
            host.capture = True
            result = call()
            captured = harness.launches[-1]
            host.capture = False
            return result, (lambda: harness.launch(captured)) if replay_launches else (lambda: None)

    return HostFramework


def run(monkeypatch, harness, host, **options):
    cupy = stub_cupy.module()
    cupy.cuda.runtime.getDeviceCount = lambda: 1
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(verify_cuda, "FRAMEWORKS",
                        {"host": host_framework(harness, host, **options)})  # fmt: skip
    call_module.clear()
    tables_module.device_tables.clear()
    try:
        with arrays_module.stand_in(host):
            rows, skipped = verify_cuda.cuda_checks(None)
    finally:
        call_module.clear()
        tables_module.device_tables.clear()
    assert skipped == []
    return {(r[2], r[3]): verify.Check(*r).passed for r in rows}


@pytest.mark.cuda_host
def test_the_cuda_checks_pass_on_the_kernel(monkeypatch, harness):
    verdicts = run(monkeypatch, harness, StreamHost(harness.launch))
    checks = ["kernel = reference (q)", "kernel = reference (k)", "kernel = reference (offset)",
              "on the caller's stream"]  # fmt: skip
    expected = {(d, c) for d in ("float16", "bfloat16", "float32") for c in checks}
    assert set(verdicts) == expected | {("bfloat16", "graph replays new positions")}
    assert all(verdicts.values()), verdicts


@pytest.mark.cuda_host
def test_a_launch_on_another_stream_fails(monkeypatch, harness):
    verdicts = run(monkeypatch, harness, StreamHost(harness.launch, wrong_stream=True))
    assert not any(v for (_, check), v in verdicts.items() if check == "on the caller's stream")
    assert all(v for (_, check), v in verdicts.items() if check != "on the caller's stream")


@pytest.mark.cuda_host
def test_a_kernel_that_rotates_backwards_fails(monkeypatch, harness):
    inverse = emulation.backend_module("cuda.plan").PARAM_FIELDS.index("inverse")

    def backwards(plan):
        params = plan.params.copy()
        params[inverse] ^= 1
        harness.launch(plan._replace(params=params))

    verdicts = run(monkeypatch, harness, StreamHost(backwards))
    assert not any(v for (_, check), v in verdicts.items() if check.startswith("kernel"))


@pytest.mark.cuda_host
def test_a_replay_that_reads_nothing_new_fails(monkeypatch, harness):
    verdicts = run(monkeypatch, harness, StreamHost(harness.launch), replay_launches=False)
    assert verdicts[("bfloat16", "graph replays new positions")] is False
