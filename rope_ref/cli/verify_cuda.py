"""`rope-ref verify` on a CUDA machine: the CUDA kernel against the float64 reference.

For CuPy arrays, PyTorch CUDA tensors and JAX GPU arrays in float16, bfloat16 and float32:
queries and keys with positions on the device, and one array with an offset, on a stream
of the caller's own (not the default one), checked against the float64 reference within the
error model, and checked to have launched on that stream; then, for CuPy and PyTorch, a
CUDA graph captured once and replayed with new positions written in place. Without a
device, the checks are skipped and `cuda_checks` says why.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rope_ref._core.error_model import tolerance
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope, apply_rope_qk

__all__ = ["CHECKED", "Framework", "cuda_checks"]

#: What the CUDA checks cover, as said when they are skipped.
CHECKED = (
    "CUDA checks (CuPy arrays, PyTorch CUDA tensors and JAX GPU arrays in float16, bfloat16 "
    "and float32 on the caller's stream; a CUDA graph capture and replay)"
)
DTYPES = ("float16", "bfloat16", "float32")
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23}
SPEC = RopeSpec(head_dim=128, base=500000.0)
Q_SHAPE, K_SHAPE = (4, 16, 8, 128), (4, 16, 2, 128)  # (batch, seq, heads, head_dim), GQA
OFFSET = 4096
#: (namespace, backend, dtype, check, error, tolerance)
Row = tuple[str, str, str, str, float, float]


class Framework:
    """How the checks reach one kind of CUDA array: the base serves CuPy arrays.

    Subclasses say how to put a NumPy array on the device and back, which stream is the
    caller's own, and how a CUDA graph is captured (None: not checked for this kind).
    """

    label = "cupy"

    def __init__(self) -> None:
        self.cp = importlib.import_module("cupy")

    def put(self, a: np.ndarray) -> Any:
        """`a` on the device (bfloat16 moved as its bits)."""
        if a.dtype.name == "bfloat16":
            return self.cp.asarray(a.view(np.uint16)).view(a.dtype)
        return self.cp.asarray(a)

    def get(self, a: Any) -> np.ndarray:
        """`a` on the host."""
        if a.dtype.name == "bfloat16":
            return np.asarray(a.view(self.cp.uint16).get()).view(a.dtype)
        return np.asarray(a.get())

    @contextlib.contextmanager
    def on_stream(self) -> Iterator[int]:
        """A non-default stream made current; yields its handle, synchronised after."""
        self.cp.cuda.Device().synchronize()  # inputs written on the legacy stream
        stream = self.cp.cuda.Stream(non_blocking=True)
        with stream:
            yield int(stream.ptr)
        stream.synchronize()

    def capture(self, call: Callable[[], Any]) -> tuple[Any, Callable[[], None]] | None:
        """`call` captured in a CUDA graph (after a warm-up): its result and the replay."""
        self.cp.cuda.Device().synchronize()
        stream = self.cp.cuda.Stream(non_blocking=True)
        with stream:
            call()  # warm-up: tables on the device, kernel compiled
            stream.begin_capture()
            result = call()
            graph = stream.end_capture()

        def replay() -> None:
            self.cp.cuda.Device().synchronize()  # new positions written on the legacy stream
            graph.launch(stream=stream)
            stream.synchronize()

        return result, replay


class _Torch(Framework):
    label = "torch (cuda)"

    def __init__(self) -> None:
        super().__init__()
        self.torch = importlib.import_module("torch")
        if not self.torch.cuda.is_available():
            msg = "PyTorch has no CUDA device"
            raise RuntimeError(msg)

    def put(self, a: np.ndarray) -> Any:
        torch = self.torch
        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(np.ascontiguousarray(a)).cuda()

    def get(self, a: Any) -> np.ndarray:
        a = a.detach().cpu()
        if a.dtype == self.torch.bfloat16:
            ml_dtypes = importlib.import_module("ml_dtypes")
            return np.asarray(a.view(self.torch.int16).numpy()).view(ml_dtypes.bfloat16)
        return np.asarray(a.numpy())

    @contextlib.contextmanager
    def on_stream(self) -> Iterator[int]:
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            yield int(side.cuda_stream)
        side.synchronize()

    def capture(self, call: Callable[[], Any]) -> tuple[Any, Callable[[], None]] | None:
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up, as torch.cuda.graph asks
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = call()

        def replay() -> None:
            graph.replay()
            torch.cuda.synchronize()

        return result, replay


class _Jax(Framework):
    label = "jax (gpu)"

    def __init__(self) -> None:
        super().__init__()
        self.jax = importlib.import_module("jax")
        self.gpu = self.jax.devices("gpu")[0]

    def put(self, a: np.ndarray) -> Any:
        return self.jax.device_put(a, self.gpu)

    def get(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def capture(self, call: Callable[[], Any]) -> None:
        return None  # JAX arrays are not captured by CuPy or PyTorch graphs


FRAMEWORKS: dict[str, Callable[[], Framework]] = {"cupy": Framework, "torch": _Torch, "jax": _Jax}


def cuda_checks(
    missing: str | None, progress: Callable[[str], None] | None = None
) -> tuple[list[Row], list[str]]:
    """The CUDA checks' rows, and why any were skipped (``"NAME: why"`` lines).

    Parameters
    ----------
    missing : str or None
        Why the ``cupy`` backend is not available (`available_backends`), or None.
    progress : callable, optional
        Told what is being checked.

    Returns
    -------
    rows : list of (namespace, backend, dtype, check, error, tolerance)
    skipped : list of str
        ``"backend cupy: ..."`` lines that say which checks were skipped, and why (the
        backend's own reason first, when it is not available).

    Examples
    --------
    >>> rows, skipped = cuda_checks("needs 'cupy'")
    >>> rows, skipped[0].startswith("backend cupy: needs 'cupy'; CUDA checks (CuPy arrays")
    ([], True)
    """
    if missing is not None:
        return [], [f"backend cupy: {missing}; {CHECKED} skipped"]
    try:
        count = int(importlib.import_module("cupy").cuda.runtime.getDeviceCount())
    except Exception as err:  # no driver
        return [], [f"backend cupy: {CHECKED} skipped: no usable CUDA device ({err})"]
    if count == 0:
        return [], [f"backend cupy: {CHECKED} skipped: no CUDA device"]
    rows: list[Row] = []
    skipped: list[str] = []
    for name, make in FRAMEWORKS.items():
        try:
            framework = make()
        except Exception as err:  # the framework, or its GPU support, is missing
            skipped.append(
                f"backend cupy: CUDA checks of {name} skipped: {type(err).__name__}: {err}"
            )
            continue
        for dtype_name in DTYPES:
            if progress is not None:
                progress(f"checking the CUDA kernel on {framework.label} {dtype_name}")
            rows += check_framework(framework, dtype_name)
        rows += check_graph(framework)
    return rows, skipped


def check_framework(framework: Framework, dtype_name: str) -> list[Row]:
    """Queries and keys with device positions, and one array with an offset, on a stream.

    The stream is the caller's own; each result is checked against the reference, and
    every launch against that stream.
    """
    dtype = _dtype(dtype_name)
    rng = np.random.default_rng(0)
    q = rng.standard_normal(Q_SHAPE).astype(dtype)
    k = rng.standard_normal(K_SHAPE).astype(dtype)
    positions = rng.integers(0, 10**5, size=(Q_SHAPE[0], 1, 1)).astype(np.int32)
    q_d, k_d, p_d = framework.put(q), framework.put(k), framework.put(positions)
    with framework.on_stream() as stream, _launches() as launched:
        q2, k2 = apply_rope_qk(q_d, k_d, SPEC, p_d, seq_axis=-3, backend="cupy")
        y = apply_rope(q_d, SPEC, seq_axis=-3, offset=OFFSET, backend="cupy")
    label = framework.label
    along = (OFFSET + np.arange(Q_SHAPE[1])).reshape(1, -1, 1)
    on_stream = bool(launched) and all(s == stream for s in launched)
    return [
        (label, "cupy", dtype_name, "kernel = reference (q)",
         *_error(framework.get(q2), q, positions)),
        (label, "cupy", dtype_name, "kernel = reference (k)",
         *_error(framework.get(k2), k, positions)),
        (label, "cupy", dtype_name, "kernel = reference (offset)",
         *_error(framework.get(y), q, along)),
        (label, "cupy", dtype_name, "on the caller's stream", 0.0 if on_stream else 1.0, 0.0),
    ]  # fmt: skip


def check_graph(framework: Framework) -> list[Row]:
    """A call with device positions captured once, replayed with new positions in place."""
    rng = np.random.default_rng(1)
    dtype = _dtype("bfloat16")
    q = rng.standard_normal(Q_SHAPE).astype(dtype)
    k = rng.standard_normal(K_SHAPE).astype(dtype)
    positions = rng.integers(0, 4000, size=(Q_SHAPE[0], 1, 1)).astype(np.int32)
    q_d, k_d, p_d = framework.put(q), framework.put(k), framework.put(positions)
    captured = framework.capture(
        lambda: apply_rope_qk(q_d, k_d, SPEC, p_d, seq_axis=-3, backend="cupy")
    )
    if captured is None:
        return []
    (q2, k2), replay = captured
    new = positions + 977
    p_d[...] = framework.put(new)  # in place, where the graph reads them
    replay()
    q_error, q_tol = _error(framework.get(q2), q, new)
    k_error, k_tol = _error(framework.get(k2), k, new)
    return [(framework.label, "cupy", "bfloat16", "graph replays new positions",
             max(q_error / q_tol, k_error / k_tol), 1.0)]  # fmt: skip


def _error(got: np.ndarray, x: np.ndarray, positions: np.ndarray) -> tuple[float, float]:
    """Largest difference from the float64 reference, and the tolerance it must meet."""
    exact = np.asarray(apply_rope(x.astype(np.float64), SPEC, positions, seq_axis=-3))
    diff = np.abs(got.astype(np.float64) - exact)
    size = float(np.max(np.abs(x.astype(np.float64))))
    top = float(np.max(positions)) + 1.0
    return float(np.max(diff)), tolerance(EPS[x.dtype.name], max_angle=top, magnitude=size)


def _dtype(name: str) -> np.dtype[Any]:
    if name == "bfloat16":
        bfloat16: type = importlib.import_module("ml_dtypes").bfloat16
        return np.dtype(bfloat16)
    return np.dtype(name)


@contextlib.contextmanager
def _launches() -> Iterator[list[int | None]]:
    """The stream handle of every launch of the CUDA kernel in the block (by any adapter)."""
    arrays = importlib.import_module("rope_ref.backends.cuda.arrays")
    seen: list[int | None] = []
    classes = {arrays.Arrays, *arrays.Arrays.__subclasses__()}
    originals = {c: c.__dict__["launch"] for c in classes if "launch" in c.__dict__}

    def watched(real: Callable[..., None]) -> Callable[..., None]:
        def launch(self: Any, plan: Any, stream: Any) -> None:
            seen.append(getattr(stream, "ptr", None))
            real(self, plan, stream)

        return launch

    for cls, real in originals.items():
        setattr(cls, "launch", watched(real))  # noqa: B010 (a method, put back below)
    try:
        yield seen
    finally:
        for cls, real in originals.items():
            setattr(cls, "launch", real)  # noqa: B010
