"""What `rope-ref bench` times: a copy baseline, rope_ref's backends and installed peers.

Each implementation's ``prepare(x)`` takes the host array of a case, sets up its inputs
(tables, device copies, compiled functions) outside the timing, and returns the call to
time. Peers get their cos/sin tables precomputed, as a model shares them across layers;
rope_ref's calls include building tables (served from the cache after the first call).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from rope_ref._core.aliases import BackendName
from rope_ref._core.frequencies import rope_cos_sin
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope, apply_rope_qk
from rope_ref._engine.dispatch import available_backends, load_backend
from rope_ref._engine.fast_path import BLOCK
from rope_ref.cli.bench.anchors import anchor_rows
from rope_ref.cli.bench.rows import Case, Impl, Prepared, Unavailable

__all__ = ["Impl", "Unavailable", "hf_style", "implementations"]


def implementations(case: Case) -> list[Impl]:
    """The CPU rows to time for `case`, baseline first."""
    impls = [Impl(MEMORY_COPY, "baseline", functools.partial(_memory_copy, qk=case.qk))]
    backends = available_backends()
    if not case.sequences:
        impls.append(Impl(NEW_COPY, "floor", functools.partial(_new_copy, qk=case.qk)))
    if backends["numba"] is None and not case.sequences:
        impls.append(_allocating_copy(case))
    if case.sequences:
        return impls + _decoding(
            case.sequences, "numba" if backends["numba"] is None else "reference"
        )
    impls.append(Impl("reference", "backend", _backend("reference", case.qk)))
    if backends["numba"] is None:
        impls.append(Impl("numba", "backend", _backend("numba", case.qk)))
        if not case.qk:
            impls.append(Impl("numba out=", "backend", _numba_out, "into a preallocated array"))
            impls.append(Impl("numba out=x", "backend", _numba_in_place, "in-place"))
        if not case.qk and case.shape[1] == 1:
            impls.append(Impl("numba offset+1", "backend", _next_token, NEXT_TOKEN_NOTE))
            impls += _position_id_rows()
        impls += _framework_rows(case)
    if _installed("torch") and not case.qk:
        impls.append(Impl(TORCH_COPY, "floor", _torch_copy, "int16/int32 view, copy_"))
    if _installed("torch"):
        impls.append(Impl("torch eager (HF-style)", "peer", _torch_hf(case, compiled=False)))
        note = ONE_THREAD_NOTE if _one_thread(case) else ""
        impls.append(Impl("torch.compile (HF-style)", "peer", _torch_hf(case, compiled=True), note))
    if _installed("rotary_embedding_torch") and not case.qk:
        impls.append(
            Impl("rotary-embedding-torch", "peer", _rotary_embedding_torch, "(B, H, S, D) layout")
        )
    return impls + anchor_rows(case)


def not_timed(case: Case) -> list[str]:
    """The CPU implementations that `implementations(case)` leaves out here, and why."""
    if case.device != "cpu" or case.sequences:
        return []
    missing = []
    reason = available_backends()["numba"]
    if reason is not None:
        missing.append(f"numba ({reason})")
    if not _installed("torch"):
        missing.append("PyTorch eager and torch.compile (torch is not installed)")
    if not _installed("rotary_embedding_torch") and not case.qk:
        missing.append("rotary-embedding-torch (not installed)")
    return missing


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _second(x: np.ndarray) -> np.ndarray:
    """The keys of a q+k case: another array like `x`."""
    return np.random.default_rng(1).standard_normal(x.shape).astype(x.dtype)


# -- CPU ---------------------------------------------------------------------------------


#: The baseline: the same bytes copied by memory copy into preallocated arrays.
MEMORY_COPY = "copy (memory)"
#: The same bytes copied by PyTorch (``copy_`` of integer views of the same width).
TORCH_COPY = "copy (torch)"
#: The same bytes copied into a new array (``x.copy()``): the floor of allocating calls.
NEW_COPY = "copy (new array)"


def _bits(a: np.ndarray) -> np.ndarray:
    """`a` viewed as unsigned integers of its width: a copy of them moves bytes, no floats."""
    return a.view(np.dtype(f"u{a.itemsize}"))


def _memory_copy(x: np.ndarray, *, qk: bool) -> Prepared:
    """``np.copyto`` of the bits of `x` (and of the keys) into preallocated arrays.

    A rotation reads `x` once and writes its output once: a copy of the same bytes is its
    floor. Copying unsigned integer views of the element's width makes it a memory copy
    whatever the float type (an element-wise copy of 16-bit floats is several times slower
    per byte), and preallocated outputs leave page faults out of it.
    """
    arrays = [x, _second(x)] if qk else [x]
    pairs = [(_bits(a), _bits(np.empty_like(a))) for a in arrays]

    def run() -> None:
        for src, dst in pairs:
            np.copyto(dst, src)

    return run


def _new_copy(x: np.ndarray, *, qk: bool) -> Prepared:
    """``copy()`` of the bits of `x` (and of the keys): a new array, on the calling thread.

    What a user's own copy costs, page faults of the fresh memory included: the honest
    floor of the calls that return a new array, as `_memory_copy` is of ``out=`` calls.
    """
    arrays = [_bits(a) for a in ([x, _second(x)] if qk else [x])]
    return lambda: [a.copy() for a in arrays]


def _torch_copy(x: np.ndarray) -> Prepared:
    """``Tensor.copy_`` of an integer view of `x`'s tensor (int16 for 16-bit floats)."""
    import torch

    src = torch.from_numpy(x.view(np.dtype(f"i{x.itemsize}")))
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _allocating_copy(case: Case) -> Impl:
    """A copy into a new array, by numba's threads: the floor of the allocating calls."""
    return Impl("copy (parallel)", "floor", functools.partial(_parallel_copy, qk=case.qk))


def _parallel_copy(x: np.ndarray, *, qk: bool) -> Prepared:
    """A fresh array filled by all of numba's threads: what a kernel's output costs.

    Arrays of fewer rows than the kernel's `SERIAL_ROWS` are copied on the calling thread,
    as the kernel rotates them: waking threads would cost more than the work.
    """
    copy = _numba_copy_kernel()
    serial_rows = load_backend("numba").SERIAL_ROWS
    arrays = [x, _second(x)] if qk else [x]

    def run() -> list[np.ndarray]:
        outs = []
        for a in arrays:
            if a.size < serial_rows * a.shape[-1]:
                outs.append(a.copy())
                continue
            out = np.empty_like(a)
            as_bits = np.dtype(f"u{a.itemsize}")  # Numba copies bits, whatever the float type
            copy(a.reshape(-1).view(as_bits), out.reshape(-1).view(as_bits))
            outs.append(out)
        return outs

    return run


@functools.cache
def _numba_copy_kernel() -> Callable[[np.ndarray, np.ndarray], None]:
    import numba
    from numba import njit, prange

    @njit(parallel=True, nogil=True)
    def copy(src: np.ndarray, dst: np.ndarray) -> None:  # pragma: no cover - numba
        n = src.shape[0]
        chunks = 4 * numba.get_num_threads()
        for k in prange(chunks):
            lo, hi = n * k // chunks, n * (k + 1) // chunks
            dst[lo:hi] = src[lo:hi]

    return copy


def _backend(name: BackendName, qk: bool) -> Callable[[np.ndarray], Prepared]:
    def prepare(x: np.ndarray) -> Prepared:
        spec = RopeSpec(x.shape[-1])
        if qk:
            k = _second(x)
            return lambda: apply_rope_qk(x, k, spec, seq_axis=-3, backend=name)
        return lambda: apply_rope(x, spec, seq_axis=-3, backend=name)

    return prepare


def _framework_rows(case: Case) -> list[Impl]:
    """The kernel on the arrays of PyTorch and JAX users: ``backend="auto"``, no copy."""
    rows = []
    if _installed("torch"):
        rows.append(Impl("numba (torch tensor)", "backend", _framework(case, "torch")))
        if not case.qk:
            rows.append(Impl("numba (torch tensor) out=", "backend", _framework(case, "out")))
    if _installed("jax") and not case.qk and case.dtype != "float64":  # JAX: float32 default
        rows.append(Impl("numba (JAX array)", "backend", _framework(case, "jax")))
    return rows


def _framework(case: Case, framework: str) -> Callable[[np.ndarray], Prepared]:
    def prepare(x: np.ndarray) -> Prepared:
        if framework in ("torch", "out"):
            import torch

            def convert(a: np.ndarray) -> Any:
                return torch.from_numpy(a.astype(np.float32)).to(getattr(torch, case.dtype))
        else:
            import jax

            convert = jax.numpy.asarray
        spec, t = RopeSpec(x.shape[-1]), convert(x)
        if case.qk:
            k = convert(_second(x))
            return lambda: apply_rope_qk(t, k, spec, seq_axis=-3, backend="auto")
        out = t.clone() if framework == "out" else None
        return lambda: apply_rope(t, spec, seq_axis=-3, backend="auto", out=out)

    return prepare


def _tensor(x: np.ndarray) -> Any:
    """A CPU tensor of `x`'s values and dtype (bfloat16 by way of float32, exactly)."""
    import torch

    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(x.copy())


def _numba_out(x: np.ndarray) -> Prepared:
    out = np.empty_like(x)
    spec = RopeSpec(x.shape[-1])
    return lambda: apply_rope(x, spec, seq_axis=-3, backend="numba", out=out)


def _numba_in_place(x: np.ndarray) -> Prepared:
    buf = x.copy()
    spec = RopeSpec(x.shape[-1])
    return lambda: apply_rope(buf, spec, seq_axis=-3, backend="numba", out=buf)


NEXT_TOKEN_NOTE = "offset one token on per call"
#: The position of the decode rows' token (by `offset=` and by position ids).
DECODE_AT = 1000


def _position_id_rows() -> list[Impl]:
    """Decoding as inference code calls it: the token's position as an array."""
    rows = [
        Impl("numba offset=1000", "backend", _decode_at(None)),
        Impl("numba positions=[1000]", "backend", _decode_at("numpy"), "HF-style position ids"),
    ]
    if _installed("torch"):
        rows.append(Impl("numba (torch) positions=", "backend", _decode_at("torch")))
    return rows


def _decode_at(ids: str | None) -> Callable[[np.ndarray], Prepared]:
    """A decode step at `DECODE_AT`: by `offset=`, or by position ids of shape (1, 1)."""

    def prepare(x: np.ndarray) -> Prepared:
        spec = RopeSpec(x.shape[-1])
        if ids is None:
            return lambda: apply_rope(x, spec, offset=DECODE_AT, seq_axis=-3, backend="numba")
        p: Any = np.full((x.shape[0], x.shape[1]), DECODE_AT)
        t: Any = x
        if ids == "torch":
            import torch

            p, t = torch.from_numpy(p), _tensor(x)
        return lambda: apply_rope(t, spec, p, seq_axis=-3, backend="auto")

    return prepare


#: Decoding sequences start this many positions apart (each in blocks of its own).
SEQUENCE_SPACING = 1024


def _next_token(x: np.ndarray) -> Prepared:
    """A decode loop's call: `offset` one token on from the last call's."""
    spec, tokens = RopeSpec(x.shape[-1]), itertools.count()
    return lambda: apply_rope(x, spec, offset=next(tokens), seq_axis=-3, backend="numba")


def _decoding(n: int, backend: BackendName) -> list[Impl]:
    """`n` sequences decoding in turn, by `offset` and by `positions`."""
    return [
        Impl(f"{backend} offset=", "backend", _in_turn(n, backend, 0, by_positions=False)),
        Impl(f"{backend} positions=", "backend", _in_turn(n, backend, 0, by_positions=True)),
        Impl(
            f"{backend} offset= past 2**62",
            "backend",
            _in_turn(n, backend, 2**62, by_positions=False),
            "beyond int64-exact offsets",
        ),
    ]


def _in_turn(
    n: int, backend: BackendName, base: int, *, by_positions: bool
) -> Callable[[np.ndarray], Prepared]:
    """Each call rotates `x` as the next token of the next of `n` sequences.

    Sequence i starts at ``base + i * SEQUENCE_SPACING`` plus a shift that spreads the
    sequences' moves to a new block of cached positions evenly over the calls, as
    sequences of unrelated lengths do. One round of calls runs here, untimed, so that
    the timing sees the steady state rather than the first touch of each sequence.
    """

    def prepare(x: np.ndarray) -> Prepared:
        spec = RopeSpec(x.shape[-1])
        length = x.shape[1]
        starts = [base + i * SEQUENCE_SPACING + (i * BLOCK) // n for i in range(n)]
        calls = itertools.count()

        def run() -> object:
            k = next(calls)
            at = starts[k % n] + (k // n) * length
            if by_positions:
                p = np.arange(at, at + length)
                return apply_rope(x, spec, p, seq_axis=-3, backend=backend)
            return apply_rope(x, spec, offset=at, seq_axis=-3, backend=backend)

        for _ in range(n):
            run()
        return run

    return prepare


def _hf_tables(torch: Any, x: np.ndarray, dtype: Any, device: str) -> tuple[Any, Any]:
    """HF's cos/sin of shape (1, S, 1, D) (both halves), cast to the activations' dtype."""
    cos, sin = rope_cos_sin(RopeSpec(x.shape[-1]), np.arange(x.shape[1]))
    cos, sin = (np.concatenate([t, t], axis=-1)[None, :, None, :] for t in (cos, sin))
    return (torch.from_numpy(t).to(device=device, dtype=dtype) for t in (cos, sin))  # type: ignore[return-value]


def hf_style(q: Any, cos: Any, sin: Any) -> Any:
    """HF transformers' ``q * cos + rotate_half(q) * sin``, ``rotate_half = cat(-x2, x1)``."""
    import torch

    half = q.shape[-1] // 2
    return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


#: Elements per tensor up to which PyTorch eager runs an elementwise operation on one
#: thread (``at::internal::GRAIN_SIZE``).
TORCH_GRAIN = 32768
ONE_THREAD_NOTE = "inductor's kernel on one thread, as eager runs this size"


def _one_thread(case: Case) -> bool:
    """Whether `case` is small enough that torch eager runs it on one thread (CPU).

    Inductor's CPU kernel of the HF-style rotation is an OpenMP parallel region at any
    size: at a decode shape, on a machine whose cores are busy with other work, each call
    waits for a second thread to be scheduled (tens of milliseconds on 2 shared cores),
    which times the scheduler rather than the compiled code. Such cases compile it for
    one thread, as eager and the Numba kernel run them.
    """
    return case.device == "cpu" and int(np.prod(case.shape)) <= TORCH_GRAIN


def hf_style_compiled(torch: Any, *, one_thread: bool = False) -> Callable[[Any, Any, Any], Any]:
    """`hf_style` through ``torch.compile``; `Unavailable` if the toolchain cannot.

    `one_thread` compiles inductor's CPU kernel without a parallel region
    (``cpp.threads=1``).
    """
    options = {"cpp.threads": 1} if one_thread else None
    try:
        return torch.compile(hf_style, dynamic=False, options=options)  # type: ignore[no-any-return]
    except Exception as err:  # pragma: no cover - depends on the toolchain
        msg = f"torch.compile failed: {err}"
        raise Unavailable(msg) from err


def _torch_hf(case: Case, *, compiled: bool) -> Callable[[np.ndarray], Prepared]:
    def prepare(x: np.ndarray) -> Prepared:
        import torch

        device = "cuda" if case.device == "gpu" else "cpu"
        dtype = getattr(torch, case.dtype)
        arrays = [x, _second(x)] if case.qk else [x]
        tensors = [
            torch.from_numpy(a.astype(np.float32)).to(device=device, dtype=dtype) for a in arrays
        ]
        cos, sin = _hf_tables(torch, x, dtype, device)
        fn = hf_style_compiled(torch, one_thread=_one_thread(case)) if compiled else hf_style
        return lambda: [fn(t, cos, sin) for t in tensors]

    return prepare


def _rotary_embedding_torch(x: np.ndarray) -> Prepared:
    import torch
    from rotary_embedding_torch import RotaryEmbedding

    dtype = getattr(torch, x.dtype.name)  # bfloat16 (ml_dtypes) goes through float32
    t = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1, 3)).astype(np.float32))
    t = t.to(dtype)
    rotary = RotaryEmbedding(dim=x.shape[-1])
    return lambda: rotary.rotate_queries_or_keys(t)
