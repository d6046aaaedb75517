"""Every test module collects with CuPy importable: the GPU modules included.

``pytest -m gpu`` on a GPU machine must not stop at collection. On CPU-only CI the GPU
modules skip at ``importorskip("cupy")`` before their tests are collected, so a broken
parametrization or a missing fixture there would go unseen: here ``pytest -m gpu`` collects
every test path (every module is collected before the marker selects) in a subprocess with
a stand-in ``cupy`` on ``PYTHONPATH`` (`tests.cuda_host.stub_cupy`), and any collection
error fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cuda_host import stub_cupy

TESTS = Path(__file__).parent
GPU_MODULES = ("test_cuda_gpu.py", "test_cuda_gpu_interop.py")


def collect(paths: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    folder = stub_cupy.install(tmp_path / "stub")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(TESTS.parent)])}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-m", "gpu", *paths]  # fmt: skip
    return subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip


def test_every_test_module_collects_under_a_stub_cupy(tmp_path: Path) -> None:
    done = collect([], tmp_path)  # what `pytest -m gpu` collects: every test path
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert "error" not in report.lower().split("collected")[-1], report[-4000:]
    for name in GPU_MODULES:  # the GPU modules were collected, not skipped at import
        assert f"tests/{name}::" in done.stdout, report[-4000:]
