"""The GPU side of `rope-ref bench`: presets, what is timed on a GPU, and the host-side cost.

GPU cases time q and k of ``(batch, seq, heads, head_dim)`` (keys with fewer heads: GQA)
rotated along ``seq_axis=-3`` with CUDA events, against a same-run device-to-device copy of
q and k and an empty kernel launch. rope_ref is timed on CuPy arrays, on PyTorch tensors,
and replayed from a CUDA graph; peers (PyTorch eager and torch.compile of HF's
``rotate_half`` form, Liger-Kernel's Triton kernel, FlashInfer's cos/sin-cache kernel) get
their cos/sin tables precomputed, as a model keeps them. Decode cases give positions as a
device array.

The ``gpu-host`` preset needs no GPU: it times the public call path of a repeated decode
call with NumPy arrays standing in for device arrays and a launcher that only records the
plan, which is the host work a GPU user pays per call.
"""

from __future__ import annotations

import collections
import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from rope_ref._core.frequencies import rope_cos_sin
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope, apply_rope_qk
from rope_ref.cli.bench.rows import Case, Impl, Unavailable

__all__ = ["GPU_PRESETS", "gpu_description", "gpu_implementations", "host_implementations"]

Prepared = Callable[[], object]

_PREFILL, _DECODE = (4, 4096, 32, 128), (32, 1, 32, 128)
#: Named GPU cases; keys have 8 heads (GQA), decode positions live on the device.
GPU_PRESETS: dict[str, Case] = {
    "gpu-qk": Case(_PREFILL, "bfloat16", "gpu", qk=True, k_heads=8),
    "gpu-qk-fp16": Case(_PREFILL, "float16", "gpu", qk=True, k_heads=8),
    "gpu-decode": Case(_DECODE, "bfloat16", "gpu", qk=True, k_heads=8, device_positions=True),
    "gpu-decode-fp16": Case(_DECODE, "float16", "gpu", qk=True, k_heads=8, device_positions=True),
    "gpu-host": Case(_DECODE, "bfloat16", "host", qk=True, k_heads=8, device_positions=True),
}
#: The largest position of a decode case (the sequences' current lengths lie below it).
DECODE_CONTEXT = 4096


def keys_like(x: np.ndarray, case: Case) -> list[np.ndarray]:
    """The keys of a q+k case (`x`'s shape with the case's key heads); none otherwise."""
    if not case.qk:
        return []
    shape = (*x.shape[:2], case.k_heads or x.shape[2], x.shape[3])
    return [np.random.default_rng(1).standard_normal(shape).astype(x.dtype)]


def positions_of(case: Case) -> np.ndarray:
    """Decode positions (one per sequence, shape (batch, 1, 1)), else None."""
    batch = case.shape[0]
    return np.random.default_rng(2).integers(1, DECODE_CONTEXT, size=(batch, 1, 1))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# -- the host-side cost (no GPU) -----------------------------------------------------------


def host_implementations(case: Case) -> list[Impl]:
    """The GPU path's host work with NumPy stand-ins and a launcher that records plans."""
    return [
        Impl("apply_rope_qk, positions on the device", "backend",
             functools.partial(_host_call, case=case, positions=True), "recorded launch"),
        Impl("apply_rope_qk, offset (default positions)", "backend",
             functools.partial(_host_call, case=case, positions=False), "recorded launch"),
        Impl("stand-in floor: 2 outputs' addresses, read when made", "floor", _stand_in_floor,
             "part of each row above"),
    ]  # fmt: skip


def _host_call(x: np.ndarray, *, case: Case, positions: bool) -> Prepared:
    arrays = importlib.import_module("rope_ref.backends.cuda.arrays")
    recorded: collections.deque[Any] = collections.deque(maxlen=1)
    arrays.serve(arrays.DeviceStandIn, arrays.HostStandIn(launch=recorded.append))
    (k_host,) = keys_like(x, case)
    q, k = x.view(arrays.DeviceStandIn), k_host.view(arrays.DeviceStandIn)
    p = positions_of(case).astype(np.int32).view(arrays.DeviceStandIn)
    spec = RopeSpec(x.shape[-1], base=500000.0)

    def run() -> tuple[Any, Any]:
        if positions:
            return apply_rope_qk(q, k, spec, p, seq_axis=-3, backend="cupy")
        return apply_rope_qk(q, k, spec, seq_axis=-3, offset=1000, backend="cupy")

    outputs = run()
    if not recorded or any(type(o) is not arrays.DeviceStandIn for o in outputs):
        msg = "the stand-in recorded no launch: the call left the GPU path"
        raise RuntimeError(msg)
    return run


def _stand_in_floor(x: np.ndarray) -> Prepared:
    """What `DeviceStandIn` does for each of a call's two outputs when they are made."""
    arrays = importlib.import_module("rope_ref.backends.cuda.arrays")
    outputs = [x.view(arrays.DeviceStandIn), x.view(arrays.DeviceStandIn)]
    finalize = arrays.DeviceStandIn.__array_finalize__
    return lambda: [finalize(o, None) for o in outputs]


# -- on a GPU --------------------------------------------------------------------------------


def gpu_implementations(case: Case) -> list[Impl]:
    """What is timed on a GPU for `case`, copy baseline first."""
    if not _installed("cupy"):
        msg = (
            "GPU benchmarks need CuPy: pip install 'cupy-cuda12x>=14' ml_dtypes "
            "(the wheel for your CUDA)"
        )
        raise Unavailable(msg)

    def impl(name: str, kind: str, function: Callable[..., Prepared], note: str = "",
             **options: object) -> Impl:  # fmt: skip
        return Impl(name, kind, functools.partial(function, case=case, **options), note)

    impls = [
        impl("copy (device to device)", "baseline", _copy),
        Impl("empty kernel", "floor", _empty_kernel, "launch overhead"),
        impl("rope_ref (CuPy arrays)", "backend", _rope_ref, framework="cupy"),
        impl("rope_ref (CUDA graph replay)", "backend", _graph, "cupy.cuda.Graph"),
    ]
    if _installed("torch"):
        impls += [
            impl("rope_ref (torch tensors)", "backend", _rope_ref, framework="torch"),
            impl("torch eager (HF-style)", "peer", _torch_hf, compiled=False),
            impl("torch.compile (HF-style)", "peer", _torch_hf, compiled=True),
        ]
    if _installed("liger_kernel"):
        impls.append(impl("liger-kernel (Triton)", "peer", _liger, "(B, H, S, D) layout"))
    if _installed("flashinfer"):
        impls.append(impl("flashinfer (cos/sin cache)", "peer", _flashinfer, "(tokens, H*D)"))
    return impls


def _on_device(a: np.ndarray, framework: str) -> Any:
    if framework == "cupy":
        cupy = importlib.import_module("cupy")
        if a.dtype.name == "bfloat16":
            return cupy.asarray(a.view(np.uint16)).view(a.dtype)
        return cupy.asarray(a)
    torch = importlib.import_module("torch")
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def _copy(x: np.ndarray, *, case: Case) -> Prepared:
    cupy = importlib.import_module("cupy")
    arrays = [_on_device(a, "cupy") for a in (x, *keys_like(x, case))]
    outs = [cupy.empty_like(a) for a in arrays]
    return lambda: [cupy.copyto(o, a) for o, a in zip(outs, arrays, strict=True)]


def _empty_kernel(x: np.ndarray) -> Prepared:
    cupy = importlib.import_module("cupy")
    kernel = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
    return lambda: kernel((1,), (1,), ())


def _call(case: Case, framework: str, x: np.ndarray) -> Prepared:
    """rope_ref on device copies of the case's q (and k, and positions)."""
    q, *k = (_on_device(a, framework) for a in (x, *keys_like(x, case)))
    spec = RopeSpec(x.shape[-1], base=500000.0)
    p = None
    if case.device_positions:
        p = _on_device(positions_of(case).astype(np.int32), framework)
    if k:
        return lambda: apply_rope_qk(q, k[0], spec, p, seq_axis=-3, backend="cupy")
    return lambda: apply_rope(q, spec, p, seq_axis=-3, backend="cupy")


def _rope_ref(x: np.ndarray, *, case: Case, framework: str) -> Prepared:
    if framework == "torch" and not importlib.import_module("torch").cuda.is_available():
        msg = "this PyTorch has no CUDA"
        raise Unavailable(msg)
    return _call(case, framework, x)


def _graph(x: np.ndarray, *, case: Case) -> Prepared:
    """The cupy call captured once in a CUDA graph, replayed on the default stream."""
    cupy = importlib.import_module("cupy")
    call = _call(case, "cupy", x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        call()  # tables on the device, plan cached
        stream.begin_capture()
        call()
        graph = stream.end_capture()
    stream.synchronize()
    null = cupy.cuda.Stream.null
    return lambda: graph.launch(stream=null)


def _hf_tables(torch: Any, x: np.ndarray, case: Case, dtype: Any) -> tuple[Any, Any]:
    """HF's cos/sin (both halves) in the activations' dtype.

    Shape (1, S, 1, D), or (B, 1, 1, D) for decode positions.
    """
    positions = positions_of(case)[:, 0, 0] if case.device_positions else np.arange(x.shape[1])
    cos, sin = rope_cos_sin(RopeSpec(x.shape[-1], base=500000.0), positions)
    shape = (-1, 1, 1, x.shape[-1]) if case.device_positions else (1, -1, 1, x.shape[-1])
    on_device = [
        torch.from_numpy(np.concatenate([t, t], axis=-1).reshape(shape)).to("cuda", dtype)
        for t in (cos, sin)
    ]
    return on_device[0], on_device[1]


def _torch_hf(x: np.ndarray, *, case: Case, compiled: bool) -> Prepared:
    from rope_ref.cli.bench.cpu import hf_style, hf_style_compiled

    torch = importlib.import_module("torch")
    tensors = [_on_device(a, "torch") for a in (x, *keys_like(x, case))]
    cos, sin = _hf_tables(torch, x, case, tensors[0].dtype)
    fn = hf_style_compiled(torch) if compiled else hf_style
    return lambda: [fn(t, cos, sin) for t in tensors]


def _liger(x: np.ndarray, *, case: Case) -> Prepared:
    torch = importlib.import_module("torch")
    rope = importlib.import_module("liger_kernel.ops.rope")
    q, *k = (_on_device(a, "torch").transpose(1, 2).contiguous()
             for a in (x, *keys_like(x, case)))  # fmt: skip
    cos, sin = (t[:, :, 0, :] for t in _hf_tables(torch, x, case, q.dtype))
    keys = k[0] if k else q
    return lambda: rope.LigerRopeFunction.apply(q, keys, cos, sin)


def _flashinfer(x: np.ndarray, *, case: Case) -> Prepared:
    torch = importlib.import_module("torch")
    rope = importlib.import_module("flashinfer.rope")
    b, s, h, d = x.shape
    q = _on_device(x, "torch").reshape(b * s, h * d)
    k_host = (keys_like(x, case) or [x])[0]
    k = _on_device(k_host, "torch").reshape(b * s, k_host.shape[2] * d)
    rows = DECODE_CONTEXT if case.device_positions else s
    cos, sin = rope_cos_sin(RopeSpec(d, base=500000.0), np.arange(rows), dtype=np.float32)
    cache = torch.from_numpy(np.concatenate([cos, sin], axis=-1)).cuda()
    host_positions = positions_of(case)[:, 0, 0] if case.device_positions else np.tile(
        np.arange(s), b)  # fmt: skip
    positions = torch.from_numpy(host_positions.astype(np.int64)).cuda()
    return lambda: rope.apply_rope_with_cos_sin_cache(positions, q, k, d, cache, is_neox=True)


def gpu_time(run: Prepared, repeat: int = 20) -> float:
    """Seconds per call of `run` on the GPU: CUDA events around `repeat` calls.

    A host-bound call leaves the GPU idle between launches, so this is then the wall time
    per call in a loop.
    """
    cupy = importlib.import_module("cupy")
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeat):
        run()
    end.record()
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3 / repeat


def gpu_description() -> dict[str, Any]:
    """The GPU's name and memory, and CuPy's and CUDA's versions (empty without a GPU)."""
    if not _installed("cupy"):
        return {}
    try:
        cupy = importlib.import_module("cupy")
        properties = cupy.cuda.runtime.getDeviceProperties(0)
        return {
            "gpu": properties["name"].decode(),
            "gpu_memory_gib": round(properties["totalGlobalMem"] / 2**30, 1),
            "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        }
    except Exception:  # no driver or no device
        return {}
