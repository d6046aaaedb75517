"""The arrays the CUDA kernel takes, read without a copy, and the launch on their stream.

One small adapter per kind of array says what the planner needs (a `Desc`: address, shape,
byte strides, dtype), which device it lives on, how to allocate like it and on which stream
its work runs. A repeated call of the short road (`rope_ref.backends.cuda.call`) reads
only an array's `Arrays.geometry` (its part of the call's signature) and its
`Arrays.address`:

========  ==========================================  ===============================
kind      read through                                 stream and allocations
========  ==========================================  ===============================
CuPy      ``data.ptr``, ``strides``                    CuPy's current stream and pool
PyTorch   ``data_ptr()``, ``stride()`` (CUDA tensors)  ``torch.cuda.current_stream``,
                                                       torch's caching allocator
JAX       DLPack, as a CuPy view (GPU arrays)          CuPy's current stream; results
                                                       handed back through DLPack
NumPy     ``__array_interface__``; a `DeviceStandIn`    stand-ins for the host
          carries its address, read once when made     emulation (`stand_in`)
========  ==========================================  ===============================

Importing this module imports neither CuPy nor PyTorch; an adapter is made the first time
its kind of array is seen (and only when CuPy can be imported).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.resources
import importlib.util
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from types import ModuleType
from typing import Any

import numpy as np

from .plan import KERNEL_NAMES, KERNELS, PARAM_FIELDS, Desc, Launch, describe_numpy, dtype_name

__all__ = [
    "Arrays",
    "DeviceStandIn",
    "Held",
    "HostStandIn",
    "arrays_for",
    "check_bfloat16",
    "kernel_source",
    "on_device",
    "serve",
    "stand_in",
]

_PARAMS_STRUCT = np.dtype([("fields", np.int64, (len(PARAM_FIELDS),))])


class Arrays:
    """What the launcher needs of one kind of array (the base: CuPy arrays).

    Attributes
    ----------
    kind : str
        ``"cupy"``, ``"torch"``, ``"jax"`` or ``"host"``.
    xp : module
        The module whose arrays `launchable` returns (CuPy, or NumPy for the stand-ins).
    """

    kind = "cupy"

    def __init__(self) -> None:
        self.xp = importlib.import_module("cupy")

    def describe(self, a: Any) -> Desc | None:
        """The `Desc` of `a`, or None if `a` is not on a CUDA device."""
        return Desc(a.data.ptr, a.shape, a.strides, dtype_name(a.dtype), a.itemsize)

    def geometry(self, a: Any) -> Hashable | None:
        """What a call's signature holds of `a`: shape, strides, dtype and device.

        None when `a` is not an array in CUDA memory this adapter serves (as for
        `describe`). Equal geometries give equal descriptors but for the address.
        """
        return (a.shape, a.strides, a.dtype, a.data.device_id)

    def address(self, a: Any) -> int:
        """The device address of `a`'s first element (`Desc.ptr`)."""
        return a.data.ptr  # type: ignore[no-any-return]

    def device(self, a: Any) -> int:
        """CUDA device ordinal of `a`."""
        return int(a.data.device_id)

    def is_current(self, device: int) -> bool:
        """Whether `device` is CuPy's current device."""
        return bool(self.xp.cuda.runtime.getDevice() == device)

    def empty(self, like: Any, shape: tuple[int, ...]) -> Any:
        """A new C-contiguous array of `like`'s kind, dtype and device (current device)."""
        return self.xp.empty(shape, dtype=like.dtype)

    def upload(self, host: np.ndarray[Any, Any], like: Any) -> Any:
        """A copy of `host` on `like`'s device, of `like`'s kind (for the table cache).

        The copy is complete on return, so that any stream may read it.
        """
        copy = self.xp.asarray(host)
        self.xp.cuda.get_current_stream().synchronize()
        return copy

    def upload_ordered(self, host: np.ndarray[Any, Any], like: Any, stream: Any) -> Any:
        """A copy of `host` on `like`'s device, made in `stream`'s order (no host wait).

        The copy may still be under way on return: work queued on `stream` after this
        call reads it, and its memory returns to the pool in `stream`'s order.
        """
        with stream:
            copy = self.xp.empty(host.shape, dtype=host.dtype)
            copy.set(host, stream=stream)
        return copy

    def usable(self, a: Any) -> bool:
        """Whether `a` is an array in CUDA memory that this adapter can serve."""
        return True

    def stream(self, a: Any) -> Any:
        """The CuPy stream the work on `a` belongs to."""
        return self.xp.cuda.get_current_stream()

    def capturing(self, stream: Any) -> bool:
        """Whether `stream` is capturing a CUDA graph."""
        return bool(stream.is_capturing())

    def launchable(self, a: Any) -> Any:
        """`a` as an array of `xp` sharing its memory."""
        return a

    def keep_alive(self, held: object, stream: Any) -> None:
        """Hold `held` until the work queued on `stream` so far is done.

        Nothing to do here: CuPy's memory pool and torch's caching allocator reuse memory
        in the order of the stream that freed it, which is the launch's stream.
        """

    def result(self, a: Any) -> Any:
        """An output allocated by `empty`, as the caller's kind of array."""
        return a

    def launch(self, plan: Launch, stream: Any) -> None:
        """Run `plan` on `stream` (current device).

        CuPy hands the driver the address of the words (a NumPy array of one struct), and
        the driver copies kernel arguments when the launch is made (into the graph, when
        one is being captured): nothing reads `plan.params` after this returns.
        """
        function = _function(self.xp, plan)
        function((plan.grid,), (plan.block,), (plan.params.view(_PARAMS_STRUCT),), stream=stream)


class _TorchArrays(Arrays):
    """PyTorch CUDA tensors: read in place, allocated by torch, on torch's current stream."""

    kind = "torch"

    def __init__(self) -> None:
        super().__init__()
        self.torch = importlib.import_module("torch")
        self._streams: dict[int, Any] = {}
        self._dtypes: dict[Any, str] = {}
        # torch.cuda.current_stream(device).cuda_stream builds a Stream object per call;
        # the raw handle (what Triton's launcher reads too) costs a fraction of that.
        self._current_stream: Callable[[int], int] = getattr(
            self.torch._C, "_cuda_getCurrentRawStream",
            lambda device: self.torch.cuda.current_stream(device).cuda_stream,
        )  # fmt: skip

    def describe(self, a: Any) -> Desc | None:
        if not a.is_cuda or (a.requires_grad and self.torch.is_grad_enabled()):
            return None  # a CPU tensor, or one whose gradient the kernel would not record
        item = a.element_size()
        dtype = self._dtypes.get(a.dtype)
        if dtype is None:
            dtype = self._dtypes.setdefault(a.dtype, str(a.dtype).removeprefix("torch."))
        return Desc(a.data_ptr(), tuple(a.shape), tuple(s * item for s in a.stride()), dtype, item)

    def geometry(self, a: Any) -> Hashable | None:
        if not a.is_cuda or (a.requires_grad and self.torch.is_grad_enabled()):
            return None
        return (a.shape, a.stride(), a.dtype, a.get_device())  # strides in elements

    def address(self, a: Any) -> int:
        return a.data_ptr()  # type: ignore[no-any-return]

    def device(self, a: Any) -> int:
        return int(a.get_device())

    def empty(self, like: Any, shape: tuple[int, ...]) -> Any:
        return self.torch.empty(shape, dtype=like.dtype, device=like.device)

    def upload(self, host: np.ndarray[Any, Any], like: Any) -> Any:
        return self.torch.from_numpy(host).to(device=like.device)  # synchronous from pageable

    def upload_ordered(self, host: np.ndarray[Any, Any], like: Any, stream: Any) -> Any:
        # on torch's current stream, which `stream` wraps; pageable memory is staged
        return self.torch.from_numpy(host).to(device=like.device, non_blocking=True)

    def usable(self, a: Any) -> bool:
        return bool(a.is_cuda)

    def stream(self, a: Any) -> Any:
        ptr = self._current_stream(a.get_device())
        found = self._streams.get(ptr)
        if found is None:
            if len(self._streams) > 64:  # streams come and go; the wrappers own nothing
                self._streams.clear()
            found = self._streams[ptr] = _external_stream(self.xp, ptr)
        return found

    def launchable(self, a: Any) -> Any:
        # Zero-copy, on a's stream (the caller made it CuPy's current stream); detach():
        # DLPack refuses tensors that require grad (the caller checked none records any).
        if a.dtype == self.torch.bfloat16:
            check_bfloat16(self.xp)
        return self.xp.from_dlpack(a.detach())


class _JaxArrays(Arrays):
    """JAX arrays on one GPU: DLPack views in, DLPack views of CuPy results out."""

    kind = "jax"

    def __init__(self) -> None:
        super().__init__()
        self.jax_dlpack = importlib.import_module("jax.dlpack")
        self._held = Held(self.xp)

    def describe(self, a: Any) -> Desc | None:
        return None  # read through `launchable` (a CuPy view) instead

    def geometry(self, a: Any) -> Hashable | None:
        return None

    def device(self, a: Any) -> int:
        (device,) = a.devices()
        return int(device.local_hardware_id)  # `id` is global across processes

    def usable(self, a: Any) -> bool:
        try:
            devices = a.devices()
        except Exception:  # a tracer: no buffer to share
            return False
        return len(devices) == 1 and next(iter(devices)).platform == "gpu"

    def launchable(self, a: Any) -> Any:
        if a.dtype.name == "bfloat16":
            check_bfloat16(self.xp)
        return self.xp.from_dlpack(a)

    def keep_alive(self, held: object, stream: Any) -> None:
        """Hold the CuPy views of JAX buffers (so the buffers) until `stream` is past them.

        JAX's allocator reuses freed memory in the order of JAX's own stream, not this one.
        """
        self._held.hold(held, stream)

    def result(self, a: Any) -> Any:
        return self.jax_dlpack.from_dlpack(a)


class Held:
    """Objects held until an event recorded on a stream is done (PyTorch's ``record_stream``).

    Each `hold` first lets go of what earlier events have finished with, so that what is
    held is what the GPU may still read. Nothing is held while the stream is capturing a
    CUDA graph: a graph's inputs are its caller's to keep alive until it is replayed.

    Parameters
    ----------
    cp : module
        CuPy (its ``cuda.Event``).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> class Event:
    ...     done = True
    ...     def record(self, stream): pass
    >>> held = Held(SimpleNamespace(cuda=SimpleNamespace(Event=lambda **kw: Event())))
    >>> stream = SimpleNamespace(is_capturing=lambda: False)
    >>> held.hold(["a view"], stream)
    >>> len(held), held.hold(["another"], stream), len(held)
    (1, None, 1)
    """

    def __init__(self, cp: ModuleType) -> None:
        self._cp = cp
        self._pending: deque[tuple[Any, object]] = deque()
        self._lock = threading.Lock()

    def hold(self, held: object, stream: Any) -> None:
        """Keep `held` alive until the work queued on `stream` so far is done."""
        if stream.is_capturing():
            return
        event = self._cp.cuda.Event(disable_timing=True)
        event.record(stream)
        with self._lock:
            pending = self._pending
            while pending and pending[0][0].done:
                pending.popleft()
            pending.append((event, held))

    def __len__(self) -> int:
        return len(self._pending)


def check_bfloat16(cp: ModuleType) -> None:
    """TypeError unless `cp` can take bfloat16 arrays through DLPack (CuPy 14, ml_dtypes).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_bfloat16(SimpleNamespace(__version__="13.6.0"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: bfloat16 arrays reach the kernel through DLPack, which needs CuPy >= 14 ...
    """
    version = getattr(cp, "__version__", "0")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    missing = importlib.util.find_spec("ml_dtypes") is None
    if major < 14 or missing:
        got = f"CuPy {version}" + (" without ml_dtypes" if missing else "")
        msg = (
            "bfloat16 arrays reach the kernel through DLPack, which needs CuPy >= 14 and "
            f'ml_dtypes (pip install "rope-ref[cupy]"); got {got}.'
        )
        raise TypeError(msg)


class DeviceStandIn(np.ndarray):
    """A NumPy array standing in for a device array: it carries its address.

    `ptr` is read once, when the array is made (``__array_finalize__``), as a CuPy array
    carries ``data.ptr``, so that a call's stand-in costs what a device array's costs
    rather than a read of ``__array_interface__`` per use. Views and the outputs that
    `HostStandIn` allocates like it are stand-ins too.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.zeros((2, 8), dtype=np.float32).view(DeviceStandIn)
    >>> a.ptr == a.__array_interface__["data"][0], a[1].ptr - a.ptr
    (True, 32)
    """

    __slots__ = ("ptr",)
    ptr: int

    def __array_finalize__(self, obj: object) -> None:
        self.ptr = self.__array_interface__["data"][0]

    def resize(self, *shape: Any, refcheck: bool = True) -> None:
        """`numpy.ndarray.resize`, which may move the memory: `ptr` follows it."""
        super().resize(*shape, refcheck=refcheck)
        self.ptr = self.__array_interface__["data"][0]


class HostStandIn(Arrays):
    """NumPy arrays standing in for device arrays; `launch` runs a given callable.

    The host emulation of the kernel (tests) and ``rope-ref bench --preset gpu-host`` use it
    to run every step of a GPU call but the launch itself on the CPU. It serves plain
    NumPy arrays (read through ``__array_interface__``) and `DeviceStandIn` arrays (which
    carry their address, as CuPy arrays do).

    Parameters
    ----------
    launch : callable
        Called with each `Launch`.
    """

    kind = "host"

    def __init__(self, launch: Callable[[Launch], object]) -> None:
        self.xp = np
        self._launch = launch
        #: Pretend a CUDA graph is being captured (to test what a capture may not do).
        self.capture = False

    def describe(self, a: Any) -> Desc:
        """`describe_numpy`, with the address a `DeviceStandIn` carries."""
        if type(a) is not DeviceStandIn:
            return describe_numpy(a)
        return Desc(a.ptr, a.shape, a.strides, dtype_name(a.dtype), a.itemsize)

    def geometry(self, a: Any) -> Hashable:
        """Shape, byte strides, dtype and device 0."""
        return (a.shape, a.strides, a.dtype, 0)

    def address(self, a: Any) -> int:
        """`DeviceStandIn.ptr`, or the address in ``__array_interface__``."""
        if type(a) is DeviceStandIn:
            return a.ptr
        return a.__array_interface__["data"][0]  # type: ignore[no-any-return]

    def device(self, a: Any) -> int:
        """Always 0: the host."""
        return 0

    def is_current(self, device: int) -> bool:
        """Always True: there is one device."""
        return True

    def empty(self, like: Any, shape: tuple[int, ...]) -> Any:
        """An uninitialised array of `like`'s dtype; a `DeviceStandIn` for one."""
        if type(like) is DeviceStandIn:
            return DeviceStandIn(shape, like.dtype)
        return np.empty(shape, dtype=like.dtype)

    def upload(self, host: np.ndarray[Any, Any], like: Any) -> Any:
        """A copy of `host`."""
        return np.array(host)

    def upload_ordered(self, host: np.ndarray[Any, Any], like: Any, stream: Any) -> Any:
        """`upload` (there is no stream to order it by)."""
        return self.upload(host, like)

    def stream(self, a: Any) -> Any:
        """None: there are no streams."""
        return None

    def capturing(self, stream: Any) -> bool:
        """The `capture` flag."""
        return self.capture

    def launch(self, plan: Launch, stream: Any) -> None:
        """Hand `plan` to the callable given at construction."""
        self._launch(plan)


# ---- which adapter serves an array --------------------------------------------------------

_ADAPTERS: dict[str, type[Arrays]] = {"cupy": Arrays, "torch": _TorchArrays, "jax": _JaxArrays}
_BY_TYPE: dict[type, Arrays | None] = {}
_LOCK = threading.Lock()


def arrays_for(a: object) -> Arrays | None:
    """The adapter for `a`'s kind of array, or None (NumPy, or CuPy not installed).

    Examples
    --------
    >>> import numpy as np
    >>> arrays_for(np.zeros(3)) is None
    True
    """
    try:
        return _BY_TYPE[type(a)]
    except KeyError:
        pass
    package = type(a).__module__.split(".")[0]
    kind = {"cupy": "cupy", "torch": "torch", "jax": "jax", "jaxlib": "jax"}.get(package)
    adapter = _adapter(kind) if kind is not None and _cupy_installed() else None
    with _LOCK:
        return _BY_TYPE.setdefault(type(a), adapter)


@functools.cache
def _adapter(kind: str) -> Arrays:
    return _ADAPTERS[kind]()


@functools.cache
def _cupy_installed() -> bool:
    return importlib.util.find_spec("cupy") is not None


def serve(array_type: type, adapter: Arrays | None) -> None:
    """Serve arrays of exactly `array_type` by `adapter` (None: by what serves them usually)."""
    with _LOCK:
        if adapter is None:
            _BY_TYPE.pop(array_type, None)
        else:
            _BY_TYPE[array_type] = adapter


@contextlib.contextmanager
def stand_in(adapter: HostStandIn, array_type: type = np.ndarray) -> Iterator[HostStandIn]:
    """Let NumPy arrays of `array_type` stand in for device arrays, served by `adapter`.

    Inside the block only; what served them before serves them again after it.

    Examples
    --------
    >>> import numpy as np
    >>> with stand_in(HostStandIn(launch=print)) as host:
    ...     arrays_for(np.zeros(3)) is host
    True
    >>> arrays_for(np.zeros(3)) is None
    True
    """
    with _LOCK:
        before = _BY_TYPE.get(array_type)
    serve(array_type, adapter)
    try:
        yield adapter
    finally:
        serve(array_type, before)


def on_device(adapter: Arrays, device: int) -> contextlib.AbstractContextManager[Any]:
    """A block that runs with `device` current for CuPy (nothing to do when it is)."""
    if adapter.is_current(device):
        return _NOTHING
    return adapter.xp.cuda.Device(device)  # type: ignore[no-any-return]


_NOTHING = contextlib.nullcontext()


# ---- the CuPy side ------------------------------------------------------------------------


def kernel_source() -> str:
    """The CUDA source handed to NVRTC: rope.cu with rope.cuh pasted in place of its include.

    Returns
    -------
    str

    Examples
    --------
    >>> "#include" in kernel_source()
    False
    """
    files = importlib.resources.files("rope_ref.backends.cuda")
    header = files.joinpath("rope.cuh").read_text(encoding="utf-8")
    source = files.joinpath("rope.cu").read_text(encoding="utf-8")
    return source.replace('#include "rope.cuh"', header, 1)


@functools.cache
def _module(cp: ModuleType, kernel: str) -> Any:
    # One NVRTC compile per kernel (its 16 variants), on first use; CuPy caches the binary
    # per device and on disk.
    return cp.RawModule(code=kernel_source(), name_expressions=KERNEL_NAMES[kernel])


_FUNCTIONS: dict[tuple[object, ...], Any] = {}


def _function(cp: ModuleType, plan: Launch) -> Any:
    """The loaded variant of `plan` on the current device (cached: no lookup per launch).

    Keyed by the device and the fields that name the variant (kernel, element type,
    layout, vector), so that a launch does not build the variant's name.
    """
    key = (cp.cuda.runtime.getDevice(), *plan[:4])
    found = _FUNCTIONS.get(key)
    if found is None:
        assert plan.kernel in KERNELS
        found = _FUNCTIONS[key] = _module(cp, plan.kernel).get_function(plan.name).kernel
    return found


def _external_stream(cp: ModuleType, ptr: int) -> Any:
    """A CuPy stream for a foreign stream handle (``Stream.from_external`` from CuPy 14)."""
    if hasattr(cp.cuda.Stream, "from_external"):
        return cp.cuda.Stream.from_external(_StreamHandle(ptr))
    return cp.cuda.ExternalStream(ptr)


class _StreamHandle:
    """The CUDA stream protocol for a raw handle."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)
