"""A stand-in for the ``cupy`` module on machines without CuPy: enough to import and collect.

`install` writes it as a package named ``cupy`` into a folder for ``PYTHONPATH`` (the
collection test runs pytest over every test module with it), and `module` builds it in
memory for a test that puts it into ``sys.modules``. It has no device: a test that reaches
for one skips (``getDeviceCount`` raises as CuPy does without a driver). What the launcher
touches on the CPU side (streams, events, `from_dlpack`) is recorded, so that tests can
check what the launcher asked of CuPy.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, ClassVar

VERSION = "14.2.0"


class CUDARuntimeError(RuntimeError):
    """What CuPy raises when the CUDA driver is missing."""


class Stream:
    """A stream handle: ``ptr``, capture state, and a context manager that makes it current."""

    def __init__(self, ptr: int = 0, *, capturing: bool = False) -> None:
        self.ptr = ptr
        self.capturing = capturing

    def is_capturing(self) -> bool:
        return self.capturing

    def __enter__(self) -> Stream:
        _current.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _current.pop()


class ndarray:  # noqa: N801 (CuPy's name)
    """Never instantiated: libraries that register CuPy's array type find one."""


class Event:
    """An event that completes when the test says so (`complete`); records its stream."""

    made: ClassVar[list[Event]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stream: Stream | None = None
        self.finished = False
        Event.made.append(self)

    def record(self, stream: Stream | None = None) -> None:
        self.stream = stream

    @property
    def done(self) -> bool:
        return self.finished

    def complete(self) -> None:
        self.finished = True


_current: list[Stream] = [Stream()]


def _no_device(*args: object) -> int:
    msg = "cudaErrorNoDevice: no CUDA-capable device is detected (stub CuPy)"
    raise CUDARuntimeError(msg)


def module(version: str = VERSION) -> types.ModuleType:
    """A fresh ``cupy`` stand-in of `version`, with ``cuda.runtime``, streams and events."""
    cp = types.ModuleType("cupy")
    cp.__version__ = version  # type: ignore[attr-defined]
    cp.ndarray = ndarray  # type: ignore[attr-defined]
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceCount = _no_device  # type: ignore[attr-defined]
    runtime.getDevice = lambda: 0  # type: ignore[attr-defined]
    runtime.CUDARuntimeError = CUDARuntimeError  # type: ignore[attr-defined]
    cuda.runtime = runtime  # type: ignore[attr-defined]
    cuda.Stream = Stream  # type: ignore[attr-defined]
    cuda.Event = Event  # type: ignore[attr-defined]
    cuda.get_current_stream = lambda: _current[-1]  # type: ignore[attr-defined]
    cp.cuda = cuda  # type: ignore[attr-defined]
    return cp


def install(folder: Path) -> Path:
    """Write the stand-in as ``folder/cupy/__init__.py``; returns `folder` (for PYTHONPATH)."""
    package = folder / "cupy"
    package.mkdir(parents=True, exist_ok=True)
    source = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import stub_cupy as _stub\n"
        "sys.path.pop(0)\n"
        "globals().update({k: v for k, v in vars(_stub.module()).items()\n"
        "                  if not k.startswith('__') or k == '__version__'})\n"
    )
    (package / "__init__.py").write_text(source, encoding="utf-8")
    return folder
