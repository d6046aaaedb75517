"""CuPy launcher of the CUDA RoPE kernel ``rope.cu``, compiled with NVRTC on first use.

Reached through rope_ref's backend registry as ``backend="cupy"`` (and ``"auto"`` for CuPy
arrays). The kernel rotates with float32 arithmetic for float16, bfloat16 and float32 inputs and
float64 arithmetic for float64, reading the cos/sin tables it is given (built by rope_ref in
float64 and rounded once). Importing this module does not import CuPy: the launch plan (which
kernel variant, grid, block and the packed parameter struct) is computed from shapes, strides
and addresses alone, so that the host emulation of the kernel runs the very grid the GPU would.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Launch", "kernel_source", "plan_launch", "rotate", "rotate_many", "rotate_qk"]

MAX_DIMS = 4  # ROPE_MAX_DIMS in rope.cuh
MAX_HEADS_PER_THREAD = 4  # ROPE_MAX_HEADS_PER_THREAD
BLOCK = 256  # ROPE_BLOCK
VECTOR_BYTES = 16
#: A thread rotates 4 (or 2) heads only when the grid still has this many work items.
FILL_ITEMS = 1 << 17

# Field order of RopeTensor / RopeParams in rope.cuh; every field is 8 bytes.
TENSOR_FIELDS: tuple[str, ...] = (
    "x", "out", "cos", "sin", "n_items", "first_block", "heads", "heads_per_thread",
    "head_groups", "copy_chunks", "x_head_stride", "out_head_stride", "x_feat_stride",
    "out_feat_stride", "ndim",
    *(f"{name}{d}" for name in ("shape", "x_stride", "out_stride", "table_stride")
      for d in range(MAX_DIMS)),
)  # fmt: skip
PARAM_FIELDS: tuple[str, ...] = (
    *(f"t{i}.{name}" for i in range(2) for name in TENSOR_FIELDS),
    "n_tensors", "head_dim", "n_pairs", "rotary_start", "rot_chunks", "inverse",
)  # fmt: skip
_PARAMS_STRUCT = np.dtype([("fields", np.int64, (len(PARAM_FIELDS),))])

#: C++ element type of each supported dtype, in the order of the host harness' codes.
ELEMENT_TYPES: dict[str, str] = {
    "float16": "rope_f16",
    "bfloat16": "rope_bf16",
    "float32": "float",
    "float64": "double",
}
KERNEL_NAMES: tuple[str, ...] = tuple(
    f"rope_kernel<{element}, {interleaved}, {vector}>"
    for element in ELEMENT_TYPES.values()
    for interleaved in ("false", "true")
    for vector in ("false", "true")
)

Job = tuple[Any, Any, Any, Any]  # (x, cos, sin, out or None)


class Launch(NamedTuple):
    """One kernel launch: variant, grid and the packed ``RopeParams`` (int64 words)."""

    element: str
    interleaved: bool
    vector: bool
    grid: int
    block: int
    params: np.ndarray[Any, np.dtype[np.int64]]
    keep: tuple[Any, ...]  # arrays whose addresses are in params
    copy_back: tuple[tuple[Any, Any], ...]  # (destination, source) after the launch

    def __repr__(self) -> str:
        return f"Launch({self.name}, grid={self.grid}, block={self.block})"

    @property
    def name(self) -> str:
        """Name expression of the kernel variant, e.g. ``rope_kernel<float, false, true>``."""
        flags = ", ".join("true" if flag else "false" for flag in (self.interleaved, self.vector))
        return f"rope_kernel<{self.element}, {flags}>"


# ---- Public kernel contract ---------------------------------------------------------------


def rotate(
    x: Any,
    cos: Any,
    sin: Any,
    /,
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    out: Any = None,
) -> Any:
    """Rotate the pairs of `x` by the angles whose cos/sin are given; the kernel contract.

    Parameters
    ----------
    x : cupy.ndarray
        float16, bfloat16, float32 or float64, shape ``(..., head_dim)``, any strides.
    cos, sin : cupy.ndarray
        Tables in the compute dtype (float32, or float64 for float64 `x`) that broadcast to
        ``x.shape[:-1] + (n_pairs,)``; broadcast axes are read with stride 0, never expanded.
    layout : {"half", "interleaved"}
        Pairs ``(j, j + n_pairs)`` or ``(2j, 2j + 1)``, offset by `rotary_start`.
    rotary_start : int
        First rotated feature; the others are copied unchanged.
    inverse : bool
        Rotate by the negated angles.
    out : cupy.ndarray, optional
        Output of `x`'s shape and dtype; may be `x` itself (in-place).

    Returns
    -------
    cupy.ndarray
        `out`, or a new C-contiguous array.

    Raises
    ------
    TypeError
        If an argument is not a CuPy array, or a dtype is not supported.
    ValueError
        If the shapes do not fit, or `out` partially overlaps `x`.

    Examples
    --------
    >>> import cupy as cp  # doctest: +SKIP
    >>> x = cp.asarray([[1.0, 0.0]], dtype=cp.float32)  # doctest: +SKIP
    >>> c, s = cp.zeros((1, 1), cp.float32), cp.ones((1, 1), cp.float32)  # doctest: +SKIP
    >>> rotate(x, c, s, layout="half", rotary_start=0, inverse=False)  # doctest: +SKIP
    array([[0., 1.]], dtype=float32)
    """
    cp = _cupy()
    _check_cupy(cp, x=x, cos=cos, sin=sin, out=out)
    with x.device:
        (result,) = rotate_many(
            [(x, cos, sin, out)],
            layout=layout,
            rotary_start=rotary_start,
            inverse=inverse,
            xp=cp,
            launch=_launch_on_gpu,
        )
    return result


def rotate_qk(
    q: Any,
    k: Any,
    cos_q: Any,
    sin_q: Any,
    cos_k: Any,
    sin_k: Any,
    /,
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
) -> tuple[Any, Any]:
    """Rotate queries and keys in one kernel launch (two when their dtypes differ).

    Parameters
    ----------
    q, k : cupy.ndarray
        Queries and keys, shape ``(..., head_dim)``; head counts and lengths may differ.
    cos_q, sin_q, cos_k, sin_k : cupy.ndarray
        Tables of each, as for `rotate`.
    layout, rotary_start, inverse
        As for `rotate`.

    Returns
    -------
    q_rot, k_rot : cupy.ndarray
        New C-contiguous arrays.

    Examples
    --------
    >>> import cupy as cp  # doctest: +SKIP
    >>> q = cp.asarray([[1.0, 0.0]], dtype=cp.float32)  # doctest: +SKIP
    >>> c, s = cp.zeros((1, 1), cp.float32), cp.ones((1, 1), cp.float32)  # doctest: +SKIP
    >>> rotate_qk(q, q, c, s, c, -s, layout="half", rotary_start=0, inverse=False)  # doctest: +SKIP
    (array([[0., 1.]], dtype=float32), array([[ 0., -1.]], dtype=float32))
    """
    cp = _cupy()
    _check_cupy(cp, q=q, k=k, cos_q=cos_q, sin_q=sin_q, cos_k=cos_k, sin_k=sin_k)
    with q.device:
        q_out, k_out = rotate_many(
            [(q, cos_q, sin_q, None), (k, cos_k, sin_k, None)],
            layout=layout,
            rotary_start=rotary_start,
            inverse=inverse,
            xp=cp,
            launch=_launch_on_gpu,
        )
    return q_out, k_out


def rotate_many(
    jobs: Sequence[Job],
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    xp: ModuleType,
    launch: Callable[[Launch], None],
) -> list[Any]:
    """Rotate up to two ``(x, cos, sin, out)`` jobs, in one launch when their dtypes agree.

    Parameters
    ----------
    jobs : sequence of (x, cos, sin, out or None)
        As for `plan_launch`; a None `out` is allocated (C-contiguous).
    layout, rotary_start, inverse
        As for `rotate`.
    xp : module
        The arrays' module: ``cupy``, or ``numpy`` for the host emulation.
    launch : callable
        Runs one `Launch` (the GPU, or the host harness).

    Returns
    -------
    list of arrays
        The outputs, ``out`` itself where one was given.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((2, 8), dtype=np.float32)
    >>> cos = np.ones((2, 4), dtype=np.float32)
    >>> plans = []
    >>> _ = rotate_many([(x, cos, cos, x)], layout="half", rotary_start=0, inverse=False,
    ...                 xp=np, launch=plans.append)
    >>> plans
    [Launch(rope_kernel<float, false, true>, grid=1, block=32)]
    """
    outs = [xp.empty(x.shape, dtype=x.dtype) if out is None else out for x, _, _, out in jobs]
    full = [(x, cos, sin, out) for (x, cos, sin, _), out in zip(jobs, outs, strict=True)]
    groups = [full] if len({x.dtype for x, *_ in full}) == 1 else [[job] for job in full]
    for group in groups:
        plan = plan_launch(group, layout=layout, rotary_start=rotary_start, inverse=inverse, xp=xp)
        if plan.grid > 0:
            launch(plan)
        for destination, source in plan.copy_back:
            destination[...] = source
    return outs


# ---- Planning (no CuPy needed) --------------------------------------------------------------


def plan_launch(
    jobs: Sequence[tuple[Any, Any, Any, Any]],
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    xp: ModuleType,
) -> Launch:
    """Kernel variant, grid and packed parameters for one or two ``(x, cos, sin, out)`` jobs.

    Only shapes, strides, dtypes and addresses are read, so NumPy arrays plan exactly as CuPy
    arrays do (the host emulation relies on it).

    Parameters
    ----------
    jobs : sequence of (x, cos, sin, out)
        One tensor, or queries and keys; same dtype and head_dim. `out` may be `x`.
    layout, rotary_start, inverse
        As for `rotate`.
    xp : module
        ``numpy`` or ``cupy``: used for the few views and copies the plan needs.

    Returns
    -------
    Launch

    Raises
    ------
    TypeError, ValueError
        Naming the argument, when a job does not fit the kernel contract.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.zeros((4, 4096, 32, 128), dtype=np.float16)
    >>> cos = np.zeros((1, 4096, 1, 64), dtype=np.float32)
    >>> plan_launch([(x, cos, cos, x)], layout="half", rotary_start=0, inverse=False, xp=np)
    Launch(rope_kernel<rope_f16, false, true>, grid=4096, block=256)
    """
    if not 1 <= len(jobs) <= 2:
        msg = f"`jobs` must hold one or two tensors; got {len(jobs)}."
        raise ValueError(msg)
    if layout not in ("half", "interleaved"):
        msg = f"`layout` must be 'half' or 'interleaved'; got {layout!r}."
        raise ValueError(msg)
    x0 = jobs[0][0]
    element = _element_type(x0)
    if any(job[0].shape[-1] != x0.shape[-1] or job[0].dtype != x0.dtype for job in jobs):
        msg = "`jobs` launched together must share head_dim and dtype; got different ones."
        raise ValueError(msg)
    pairs_per_chunk = VECTOR_BYTES // x0.dtype.itemsize
    n_pairs = int(jobs[0][1].shape[-1])
    head_dim = int(x0.shape[-1])
    if rotary_start < 0 or rotary_start + 2 * n_pairs > head_dim:
        msg = (
            f"`rotary_start` + 2 * n_pairs must fit in head_dim = {head_dim}; got "
            f"rotary_start={rotary_start}, n_pairs={n_pairs}."
        )
        raise ValueError(msg)
    rot_chunks = -(-n_pairs // pairs_per_chunk)
    tensors = [
        _plan_tensor(*job, n_pairs=n_pairs, pairs_per_chunk=pairs_per_chunk,
                     rot_chunks=rot_chunks, xp=xp)
        for job in jobs
    ]  # fmt: skip
    vector = (
        all(t.vector_ok for t in tensors)
        and n_pairs % pairs_per_chunk == 0
        and rotary_start % pairs_per_chunk == 0
    )
    most = max(t.fields["n_items"] for t in tensors)
    block = min(BLOCK, max(32, -(-most // 32) * 32))
    words: list[int] = []
    first_block = 0
    for t in tensors:
        t.fields["first_block"] = first_block
        first_block += -(-t.fields["n_items"] // block)
        words += [t.fields[name] for name in TENSOR_FIELDS]
    words += [0] * (len(TENSOR_FIELDS) * (2 - len(tensors)))
    words += [len(tensors), head_dim, n_pairs, rotary_start, rot_chunks, int(inverse)]
    return Launch(
        element=element,
        interleaved=layout == "interleaved",
        vector=vector,
        grid=first_block,
        block=block,
        params=np.asarray(words, dtype=np.int64),
        keep=tuple(a for t in tensors for a in t.keep),
        copy_back=tuple(pair for t in tensors for pair in t.copy_back),
    )


class _TensorPlan(NamedTuple):
    fields: dict[str, int]
    vector_ok: bool
    keep: tuple[Any, ...]
    copy_back: tuple[tuple[Any, Any], ...]


class _Axis(NamedTuple):
    size: int
    x: int  # strides in elements
    out: int
    table: int


def _plan_tensor(
    x: Any,
    cos: Any,
    sin: Any,
    out: Any,
    *,
    n_pairs: int,
    pairs_per_chunk: int,
    rot_chunks: int,
    xp: ModuleType,
) -> _TensorPlan:
    _check_job(x, cos, sin, out, n_pairs=n_pairs)
    cos, sin = _tables(cos, sin, (*x.shape[:-1], n_pairs), xp=xp)
    axes = _leading_axes(x, out, cos)
    head = _head_axis(axes)
    rows = _merge([a for i, a in enumerate(axes) if i != head])
    if len(rows) > MAX_DIMS or _strides_in_elements(x) is None or _strides_in_elements(out) is None:
        return _plan_contiguous(
            x, cos, sin, out, n_pairs=n_pairs, pairs_per_chunk=pairs_per_chunk,
            rot_chunks=rot_chunks, xp=xp,
        )  # fmt: skip
    x_at, out_at, cos_at, sin_at = (_address(a) for a in (x, out, cos, sin))
    in_place = x_at == out_at and x.strides == out.strides
    if not in_place and _overlap(x, out):
        msg = "`out` must be `x` itself (in-place) or not overlap it; got a partial overlap."
        raise ValueError(msg)
    head_axis = axes[head] if head is not None else _Axis(1, 0, 0, 0)
    n_copy = x.shape[-1] - 2 * n_pairs
    copy_chunks = 0 if in_place else -(-n_copy // (2 * pairs_per_chunk))
    chunks = rot_chunks + copy_chunks
    n_rows = int(np.prod([a.size for a in rows], dtype=np.int64)) if rows else 1
    per_thread = _heads_per_thread(head_axis.size, n_rows * chunks)
    groups = -(-head_axis.size // per_thread)
    item = x.dtype.itemsize
    table_item = cos.dtype.itemsize
    inner_first = rows[::-1] + [_Axis(1, 0, 0, 0)] * (MAX_DIMS - len(rows))
    x_feat, out_feat = x.strides[-1] // item, out.strides[-1] // item
    fields = {
        "x": x_at, "out": out_at, "cos": cos_at, "sin": sin_at,
        "n_items": 0 if x.size == 0 else n_rows * groups * chunks, "first_block": 0,
        "heads": head_axis.size, "heads_per_thread": per_thread, "head_groups": groups,
        "copy_chunks": copy_chunks, "x_head_stride": head_axis.x,
        "out_head_stride": head_axis.out, "x_feat_stride": x_feat, "out_feat_stride": out_feat,
        "ndim": len(rows),
        **{f"shape{d}": a.size for d, a in enumerate(inner_first)},
        **{f"x_stride{d}": a.x for d, a in enumerate(inner_first)},
        **{f"out_stride{d}": a.out for d, a in enumerate(inner_first)},
        **{f"table_stride{d}": a.table for d, a in enumerate(inner_first)},
    }  # fmt: skip
    vector_ok = (
        x_feat == 1
        and out_feat == 1
        and all(at % VECTOR_BYTES == 0 for at in (x_at, out_at, cos_at, sin_at))
        and all((a.x * item) % VECTOR_BYTES == 0 for a in [*rows, head_axis])
        and all((a.out * item) % VECTOR_BYTES == 0 for a in [*rows, head_axis])
        and all((a.table * table_item) % VECTOR_BYTES == 0 for a in rows)
    )
    return _TensorPlan(fields, vector_ok, (x, out, cos, sin), ())


def _plan_contiguous(
    x: Any,
    cos: Any,
    sin: Any,
    out: Any,
    *,
    n_pairs: int,
    pairs_per_chunk: int,
    rot_chunks: int,
    xp: ModuleType,
) -> _TensorPlan:
    """Fallback for layouts with more than MAX_DIMS independent axes: contiguous copies."""
    full = (*x.shape[:-1], n_pairs)
    x_c = xp.ascontiguousarray(x)
    out_c = xp.empty(x.shape, dtype=x.dtype)
    cos_c = xp.ascontiguousarray(xp.broadcast_to(cos, full))
    sin_c = xp.ascontiguousarray(xp.broadcast_to(sin, full))
    plan = _plan_tensor(
        x_c, cos_c, sin_c, out_c, n_pairs=n_pairs, pairs_per_chunk=pairs_per_chunk,
        rot_chunks=rot_chunks, xp=xp,
    )  # fmt: skip
    return plan._replace(keep=(*plan.keep, x_c), copy_back=((out, out_c),))


def _check_job(x: Any, cos: Any, sin: Any, out: Any, *, n_pairs: int) -> None:
    table_dtype = "float64" if x.dtype.name == "float64" else "float32"
    for name, table in (("cos", cos), ("sin", sin)):
        if table.dtype.name != table_dtype:
            msg = f"`{name}` must be {table_dtype} for {x.dtype.name} `x`; got {table.dtype.name}."
            raise TypeError(msg)
        if table.ndim == 0 or table.shape[-1] != n_pairs:
            msg = f"`{name}` must have n_pairs = {n_pairs} on its last axis; got {table.shape}."
            raise ValueError(msg)
    if out.shape != x.shape or out.dtype != x.dtype:
        msg = (
            f"`out` must have the shape and dtype of `x`, {x.shape} {x.dtype.name}; "
            f"got {out.shape} {out.dtype.name}."
        )
        raise ValueError(msg)
    _element_type(x)


def _element_type(x: Any) -> str:
    try:
        return ELEMENT_TYPES[x.dtype.name]
    except KeyError:
        msg = (
            f"`x` must be float16, bfloat16, float32 or float64 for backend='cupy'; "
            f"got {x.dtype.name}."
        )
        raise TypeError(msg) from None


def _tables(cos: Any, sin: Any, full: tuple[int, ...], *, xp: ModuleType) -> tuple[Any, Any]:
    """Cos and sin broadcast to `full` (stride 0 on shared axes), with equal strides."""
    try:
        cos, sin = xp.broadcast_arrays(cos, sin)
        if (
            cos.strides != sin.strides
            or (cos.shape[-1] > 1 and cos.strides[-1] != cos.itemsize)
            or _strides_in_elements(cos) is None
        ):
            cos, sin = xp.ascontiguousarray(cos), xp.ascontiguousarray(sin)
        return xp.broadcast_to(cos, full), xp.broadcast_to(sin, full)
    except ValueError:
        msg = f"`cos` and `sin` must broadcast to {full}; got {cos.shape} and {sin.shape}."
        raise ValueError(msg) from None


def _strides_in_elements(a: Any) -> tuple[int, ...] | None:
    item = a.dtype.itemsize
    if any(s % item for s in a.strides):
        return None
    return tuple(s // item for s in a.strides)


def _leading_axes(x: Any, out: Any, table: Any) -> list[_Axis]:
    xs = _strides_in_elements(x) or (0,) * x.ndim
    os = _strides_in_elements(out) or (0,) * x.ndim
    ts = _strides_in_elements(table) or (0,) * x.ndim
    return [
        _Axis(int(size), xs[i], os[i], ts[i]) for i, size in enumerate(x.shape[:-1]) if size != 1
    ]


def _head_axis(axes: list[_Axis]) -> int | None:
    """The axis whose heads share the tables (table stride 0), or None.

    Preferred: long enough to fill a thread's group of heads, then the smallest stride in x.
    """
    shared = [
        (a.size >= MAX_HEADS_PER_THREAD, -abs(a.x), -i)
        for i, a in enumerate(axes)
        if a.table == 0 and a.size > 1
    ]
    return -max(shared)[2] if shared else None


def _merge(axes: list[_Axis]) -> list[_Axis]:
    """Fuse neighbouring axes that one stride walks for x, out and the tables alike."""
    merged: list[_Axis] = []
    for axis in axes:
        if merged:
            outer = merged[-1]
            if all(
                getattr(outer, k) == getattr(axis, k) * axis.size for k in ("x", "out", "table")
            ):
                merged[-1] = _Axis(outer.size * axis.size, axis.x, axis.out, axis.table)
                continue
        merged.append(axis)
    return merged


def _heads_per_thread(heads: int, items_per_group: int) -> int:
    """Most heads per thread (tables reused, more bytes in flight) that still fill the GPU."""
    for per_thread in (MAX_HEADS_PER_THREAD, 2):
        if per_thread <= heads and items_per_group * -(-heads // per_thread) >= FILL_ITEMS:
            return per_thread
    return 1


def _address(a: Any) -> int:
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)


def _span(a: Any) -> tuple[int, int]:
    start = _address(a)
    low = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s > 0)
    return start + low, start + high + a.dtype.itemsize


def _overlap(a: Any, b: Any) -> bool:
    if a.size == 0 or b.size == 0:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


# ---- CuPy side ------------------------------------------------------------------------------


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
    files = importlib.resources.files("rope_ref.backends")
    header = files.joinpath("rope.cuh").read_text(encoding="utf-8")
    source = files.joinpath("rope.cu").read_text(encoding="utf-8")
    return source.replace('#include "rope.cuh"', header, 1)


def _cupy() -> ModuleType:
    return importlib.import_module("cupy")


def _check_cupy(cp: ModuleType, **arrays: Any) -> None:
    for name, a in arrays.items():
        if a is not None and not isinstance(a, cp.ndarray):
            msg = f"`{name}` must be a CuPy array for backend='cupy'; got {type(a).__name__}."
            raise TypeError(msg)


@functools.cache
def _module() -> Any:
    cp = _cupy()
    # One NVRTC compile for all variants; CuPy caches the binary per device and on disk.
    return cp.RawModule(code=kernel_source(), name_expressions=KERNEL_NAMES)


def _launch_on_gpu(plan: Launch) -> None:
    kernel = _module().get_function(plan.name)
    kernel((plan.grid,), (plan.block,), (plan.params.view(_PARAMS_STRUCT),))
