"""Build and drive the host emulation of the CUDA kernel (harness.cu + backends/cuda/rope.cuh).

The launcher's own planning code (`rotate_many`, `plan_launch`) runs on NumPy arrays; the
planned grid is then executed block by block, thread by thread, by the kernel's thread body
compiled for the CPU.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HARNESS = Path(__file__).with_name("harness.cu")


def launcher() -> ModuleType:
    """The CuPy launcher module (importing it does not import CuPy)."""
    return backend_module("cuda.cupy_kernel")


def backend_module(name: str) -> ModuleType:
    """``rope_ref.backends.<name>`` (none of them imports CuPy)."""
    return importlib.import_module(f"rope_ref.backends.{name}")


def nvcc() -> str | None:
    return shutil.which("nvcc")


def build(outdir: Path) -> Path:
    """Compile harness.cu with nvcc into a shared library; warnings are errors."""
    compiler = nvcc()
    if compiler is None:
        msg = "nvcc is not on PATH"
        raise FileNotFoundError(msg)
    include = Path(launcher().__file__).parent
    library = outdir / "librope_host.so"
    command = [
        compiler, "-shared", "-O2", "-Xcompiler", "-fPIC,-Wall,-Wextra",
        "-Werror", "all-warnings", "-I", str(include), str(HARNESS), "-o", str(library),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or "warning" in done.stderr.lower():
        msg = f"nvcc failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        raise RuntimeError(msg)
    return library


@functools.cache
def shared_harness() -> Harness:
    """One build of the harness per test process (tests of several modules share it)."""
    return Harness(build(Path(tempfile.mkdtemp(prefix="rope_cuda_host_"))))


class Harness:
    """ctypes front end of the compiled harness."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        ll, vp = ctypes.c_longlong, ctypes.c_void_p
        ci = ctypes.c_int
        lib.rope_host_launch.argtypes = [ci, ci, ci, ci, vp, ll, ll]
        lib.rope_host_locate.argtypes = [vp, ll, ll, ll, vp]
        lib.rope_host_params_size.restype = ll
        lib.rope_host_offsets.argtypes = [vp, ll]
        lib.rope_host_offsets.restype = ll
        for name in ("f16", "bf16"):
            getattr(lib, f"rope_host_{name}_to_float").argtypes = [vp, vp, ll]
            getattr(lib, f"rope_host_{name}_from_float").argtypes = [vp, vp, ll]
        self.lib = lib
        self.launches: list[Any] = []

    def launch(self, plan: Any) -> None:
        """Run every block and thread of `plan`'s grid on the CPU (either kernel)."""
        self.launches.append(plan)
        element = list(launcher().ELEMENT_TYPES.values()).index(plan.element)
        params = np.ascontiguousarray(plan.params)
        rc = self.lib.rope_host_launch(
            int(plan.kernel == "rope_gather_kernel"), element, int(plan.interleaved),
            int(plan.vector), params.ctypes.data, plan.grid, plan.block,
        )  # fmt: skip
        assert rc == 0

    def locate(self, params: np.ndarray, block: int, thread: int, block_dim: int) -> tuple | None:
        """(tensor, chunk, head0, x_row, out_row, table_row) of one thread, or None."""
        params = np.ascontiguousarray(params, dtype=np.int64)
        result = np.zeros(6, dtype=np.int64)
        found = self.lib.rope_host_locate(
            params.ctypes.data, block, thread, block_dim, result.ctypes.data
        )
        return tuple(int(v) for v in result) if found else None

    def params_size(self) -> int:
        return int(self.lib.rope_host_params_size())

    def offsets(self) -> list[int]:
        result = np.zeros(256, dtype=np.int64)
        count = self.lib.rope_host_offsets(result.ctypes.data, result.size)
        return [int(v) for v in result[:count]]

    def convert(self, name: str, values: np.ndarray, *, to_float: bool) -> np.ndarray:
        """Element conversions of rope.cuh: bits (uint16) <-> float32."""
        src = np.ascontiguousarray(values, dtype=np.uint16 if to_float else np.float32)
        dst = np.empty(src.shape, dtype=np.float32 if to_float else np.uint16)
        function = getattr(self.lib, f"rope_host_{name}_{'to' if to_float else 'from'}_float")
        function(src.ctypes.data, dst.ctypes.data, src.size)
        return dst

    def rotate(
        self,
        jobs: list[tuple[Any, Any, Any, Any]],
        *,
        layout: str,
        rotary_start: int = 0,
        inverse: bool = False,
    ) -> list[Any]:
        """`rotate_many` on NumPy arrays, launched on the CPU."""
        return launcher().rotate_many(
            jobs, layout=layout, rotary_start=rotary_start, inverse=inverse, xp=np,
            launch=self.launch,
        )  # fmt: skip


def guarded_host(launch: Any) -> Any:
    """A NumPy stand-in whose device tables sit between rows of NaN.

    A kernel that read one row (or one inverse frequency) outside a table would turn its
    output into NaN, which every comparison with the reference catches.
    """
    base = backend_module("cuda.arrays").HostStandIn

    class GuardedHost(base):  # type: ignore[misc, valid-type]
        def upload(self, host: np.ndarray, like: Any) -> np.ndarray:
            pad = [(4, 4)] + [(0, 0)] * (host.ndim - 1)
            guarded = np.pad(host, pad, constant_values=np.nan)
            return guarded[4 : 4 + host.shape[0]]

    return GuardedHost(launch=launch)
