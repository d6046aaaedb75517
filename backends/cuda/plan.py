"""Launch plans for the CUDA kernels (rope.cu), from array descriptors alone.

A plan is the kernel variant, the grid and the packed ``RopeParams`` struct. It is computed
from addresses, shapes, byte strides and dtype names (a `Desc`), which CuPy arrays, PyTorch
CUDA tensors, JAX GPU arrays and NumPy stand-ins all provide without a copy; nothing here
imports CuPy, so the host emulation of the kernel runs the very grid the GPU would.

Everything in a plan but the addresses and a few per-call values (the position offset,
the capacity of the table cache, the attention factor) follows from the geometry: shapes,
strides, dtypes and the addresses' alignment, so a caller that keeps plans by geometry
(`rope_ref.backends.cuda.call`) copies the words of a kept plan and writes only those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "KERNEL_NAMES",
    "PARAM_FIELDS",
    "Desc",
    "Gather",
    "Launch",
    "NeedsCopy",
    "describe_numpy",
    "dtype_name",
    "factor_bits",
    "overlap",
    "overlaps_itself",
    "plan",
]

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
GATHER_FIELDS: tuple[str, ...] = (
    "positions0", "positions1", "position_type0", "position_type1", "position_offset",
    "capacity", "inv_freq", "factor",
)  # fmt: skip
PARAM_FIELDS: tuple[str, ...] = (
    *(f"t{i}.{name}" for i in range(2) for name in TENSOR_FIELDS),
    "n_tensors", "head_dim", "n_pairs", "rotary_start", "rot_chunks", "inverse",
    *GATHER_FIELDS,
)  # fmt: skip

#: C++ element type of each supported dtype, in the order of the host harness' codes.
ELEMENT_TYPES: dict[str, str] = {
    "float16": "rope_f16",
    "bfloat16": "rope_bf16",
    "float32": "float",
    "float64": "double",
}
#: ROPE_POSITION_* codes of rope.cuh.
POSITION_TYPES: dict[str, int] = {"int32": 0, "int64": 1, "float32": 2, "float64": 3}
KERNELS = ("rope_kernel", "rope_gather_kernel")
KERNEL_NAMES: dict[str, tuple[str, ...]] = {
    kernel: tuple(
        f"{kernel}<{element}, {interleaved}, {vector}>"
        for element in ELEMENT_TYPES.values()
        for interleaved in ("false", "true")
        for vector in ("false", "true")
    )
    for kernel in KERNELS
}


class Desc(NamedTuple):
    """What the planner reads of an array: address, shape, byte strides, dtype."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: str
    itemsize: int


_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``dtype.name``, cached (NumPy computes it in Python on every access)."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        return _DTYPE_NAMES.setdefault(dtype, dtype.name)


def describe_numpy(a: np.ndarray[Any, Any]) -> Desc:
    """The `Desc` of a NumPy array (ml_dtypes' bfloat16 included)."""
    dtype = a.dtype
    name = _DTYPE_NAMES.get(dtype) or dtype_name(dtype)
    return _new_desc(Desc, (a.__array_interface__["data"][0], a.shape, a.strides, name,
                            dtype.itemsize))  # fmt: skip


_new_desc = tuple.__new__  # what Desc(...) does, without its Python-level __new__


class Gather(NamedTuple):
    """Where the gather kernel finds its tables: a cache of rows, one per integer position."""

    cos: int  # address of the (capacity, n_pairs) cos cache
    sin: int
    n_pairs: int
    capacity: int
    inv_freq: int  # address of n_pairs float64 inverse frequencies
    factor: int  # the attention factor's float64 bits (`factor_bits`)
    offset: int  # added to every position
    table_dtype: str  # float32, or float64 for float64 x


#: One tensor: x, its tables ((cos, sin) descriptors, or its positions for the gather
#: kernel) and out (may be x itself).
Job = tuple[Desc, "tuple[Desc, Desc] | Desc", Desc]


class Launch(NamedTuple):
    """One kernel launch: kernel, variant, grid and the packed ``RopeParams`` (int64 words)."""

    kernel: str
    element: str
    interleaved: bool
    vector: bool
    grid: int
    block: int
    params: np.ndarray[Any, np.dtype[np.int64]]

    def __repr__(self) -> str:
        return f"Launch({self.name}, grid={self.grid}, block={self.block})"

    @property
    def name(self) -> str:
        """Name expression of the variant, e.g. ``rope_kernel<float, false, true>``."""
        flags = ", ".join("true" if flag else "false" for flag in (self.interleaved, self.vector))
        return f"{self.kernel}<{self.element}, {flags}>"

    @property
    def fields(self) -> dict[str, int]:
        """The parameter words by field name (for tests and debugging)."""
        return dict(zip(PARAM_FIELDS, self.params.tolist(), strict=True))


class NeedsCopy(Exception):  # noqa: N818 - a condition, not an error the user sees
    """The layout cannot be walked in place.

    More than MAX_DIMS row axes after merging, strides that are not whole elements, or cos
    and sin laid out differently.
    """


# ---- planning ---------------------------------------------------------------------------


def plan(
    jobs: Sequence[Job],
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    gather: Gather | None = None,
) -> Launch:
    """Kernel, variant, grid and packed parameters for one or two jobs.

    Parameters
    ----------
    jobs : sequence of (x, tables, out)
        One tensor, or queries and keys (same dtype and head_dim). `tables` is a pair of
        `Desc` (cos, sin) broadcasting to ``x.shape[:-1] + (n_pairs,)`` for the table kernel,
        or, with `gather`, a `Desc` of positions broadcast to ``x.shape[:-1]`` (stride 0 on
        shared axes).
    layout, rotary_start, inverse
        As for ``rope_ref.backends.cuda.cupy_kernel.rotate``; `layout` may also name the layout
        pairs are read in and the one they are written in, ``"interleaved>half"``.
    gather : Gather, optional
        The table cache: plan the gather kernel.

    Returns
    -------
    Launch

    Raises
    ------
    TypeError, ValueError
        Naming the argument, when a job does not fit the kernel contract.
    NeedsCopy
        When a tensor's layout needs contiguous copies first.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.zeros((4, 4096, 32, 128), dtype=np.float16)
    >>> cos = np.zeros((1, 4096, 1, 64), dtype=np.float32)
    >>> d = describe_numpy
    >>> plan([(d(x), (d(cos), d(cos)), d(x))], layout="half", rotary_start=0, inverse=False)
    Launch(rope_kernel<rope_f16, false, true>, grid=4096, block=256)
    """
    if not 1 <= len(jobs) <= 2:
        msg = f"`jobs` must hold one or two tensors; got {len(jobs)}."
        raise ValueError(msg)
    read, _, written = layout.partition(">")
    written = written or read
    if not {read, written} <= {"half", "interleaved"}:
        msg = f"`layout` must be 'half' or 'interleaved'; got {layout!r}."
        raise ValueError(msg)
    if inverse:  # the inverse reads where the forward rotation wrote
        read, written = written, read
    crossed = read != written
    if crossed and any(x.ptr == out.ptr and x.strides == out.strides for x, _, out in jobs):
        raise NeedsCopy  # pairs move: a separate output, copied back
    x0 = jobs[0][0]
    element = element_type(x0.dtype)
    if any(job[0].shape[-1] != x0.shape[-1] or job[0].dtype != x0.dtype for job in jobs):
        msg = "`jobs` launched together must share head_dim and dtype; got different ones."
        raise ValueError(msg)
    pairs_per_chunk = VECTOR_BYTES // x0.itemsize
    n_pairs = _n_pairs(jobs[0][1], x0.shape[-1], rotary_start, gather)
    head_dim = int(x0.shape[-1])
    rot_chunks = -(-n_pairs // pairs_per_chunk)
    tensors = [
        _plan_tensor(*job, n_pairs=n_pairs, pairs_per_chunk=pairs_per_chunk,
                     rot_chunks=rot_chunks, gather=gather)
        for job in jobs
    ]  # fmt: skip
    vector = (
        not crossed
        and all(t.vector_ok for t in tensors)
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
    flags = int(inverse) | (2 if crossed else 0)  # ROPE_INVERSE | ROPE_CROSSED
    words += [len(tensors), head_dim, n_pairs, rotary_start, rot_chunks, flags]
    words += _gather_words(jobs, gather)
    return Launch(
        kernel=KERNELS[gather is not None],
        element=element,
        interleaved=read == "interleaved",
        vector=vector,
        grid=first_block,
        block=block,
        params=np.asarray(words, dtype=np.int64),
    )


def element_type(dtype: str) -> str:
    """The kernel's element type for `dtype`, or TypeError naming x."""
    try:
        return ELEMENT_TYPES[dtype]
    except KeyError:
        msg = f"`x` must be float16, bfloat16, float32 or float64 for backend='cupy'; got {dtype}."
        raise TypeError(msg) from None


def _n_pairs(
    tables: tuple[Desc, Desc] | Desc, head_dim: int, rotary_start: int, gather: Gather | None
) -> int:
    if gather is not None:
        n_pairs = gather.n_pairs
    elif not isinstance(tables, Desc) and tables[0].shape:
        n_pairs = int(tables[0].shape[-1])
    else:
        n_pairs = 0
    if rotary_start < 0 or rotary_start + 2 * n_pairs > head_dim:
        msg = (
            f"`rotary_start` + 2 * n_pairs must fit in head_dim = {head_dim}; got "
            f"rotary_start={rotary_start}, n_pairs={n_pairs}."
        )
        raise ValueError(msg)
    return n_pairs


def _gather_words(jobs: Sequence[Job], gather: Gather | None) -> list[int]:
    if gather is None:
        return [0] * len(GATHER_FIELDS)
    positions = [job[1] for job in jobs]
    ptrs = [p.ptr for p in positions if isinstance(p, Desc)] + [0]
    types = [POSITION_TYPES[p.dtype] for p in positions if isinstance(p, Desc)] + [0]
    return [ptrs[0], ptrs[1], types[0], types[1], gather.offset, gather.capacity,
            gather.inv_freq, gather.factor]  # fmt: skip


def factor_bits(factor: float) -> int:
    """The bits of a float64, as the int64 word that holds it in ``RopeParams``.

    Examples
    --------
    >>> hex(factor_bits(1.0))
    '0x3ff0000000000000'
    """
    return int(np.float64(factor).view(np.int64))


class _TensorPlan(NamedTuple):
    fields: dict[str, int]
    vector_ok: bool


class _Axis(NamedTuple):
    size: int
    x: int  # strides in elements
    out: int
    table: int


def _plan_tensor(
    x: Desc,
    tables: tuple[Desc, Desc] | Desc,
    out: Desc,
    *,
    n_pairs: int,
    pairs_per_chunk: int,
    rot_chunks: int,
    gather: Gather | None,
) -> _TensorPlan:
    _check_out(x, out)
    lead = tuple(x.shape[:-1])
    if gather is None:
        if isinstance(tables, Desc):
            msg = "`tables` must be (cos, sin) for the table kernel; got positions."
            raise TypeError(msg)
        cos_at, sin_at, table_strides = _table_strides(*tables, lead, n_pairs, x.dtype)
        table_item = tables[0].itemsize
    else:
        if not isinstance(tables, Desc):
            msg = "`tables` must be the positions for the gather kernel; got (cos, sin)."
            raise TypeError(msg)
        table_dtype = "float64" if x.dtype == "float64" else "float32"
        if gather.table_dtype != table_dtype:
            msg = f"the cache must be {table_dtype} for {x.dtype} `x`; got {gather.table_dtype}."
            raise TypeError(msg)
        cos_at, sin_at = gather.cos, gather.sin
        table_strides = _position_strides(tables, lead)
        table_item = 0  # the cache's rows are aligned; positions need no alignment
    xs, os = _elements(x), _elements(out)
    axes = [
        _Axis(int(size), xs[i], os[i], table_strides[i]) for i, size in enumerate(lead) if size != 1
    ]
    head = _head_axis(axes)
    rows = _merge([a for i, a in enumerate(axes) if i != head])
    if len(rows) > MAX_DIMS:
        raise NeedsCopy
    in_place = x.ptr == out.ptr and x.strides == out.strides
    if not in_place and overlap(x, out):
        msg = "`out` must be `x` itself (in-place) or not overlap it; got a partial overlap."
        raise ValueError(msg)
    head_axis = axes[head] if head is not None else _Axis(1, 0, 0, 0)
    n_copy = x.shape[-1] - 2 * n_pairs
    copy_chunks = 0 if in_place else -(-n_copy // (2 * pairs_per_chunk))
    chunks = rot_chunks + copy_chunks
    n_rows = int(np.prod([a.size for a in rows], dtype=np.int64)) if rows else 1
    per_thread = _heads_per_thread(head_axis.size, n_rows * chunks)
    groups = -(-head_axis.size // per_thread)
    inner_first = rows[::-1] + [_Axis(1, 0, 0, 0)] * (MAX_DIMS - len(rows))
    size = int(np.prod(x.shape, dtype=np.int64))
    fields = {
        "x": x.ptr, "out": out.ptr, "cos": cos_at, "sin": sin_at,
        "n_items": 0 if size == 0 else n_rows * groups * chunks, "first_block": 0,
        "heads": head_axis.size, "heads_per_thread": per_thread, "head_groups": groups,
        "copy_chunks": copy_chunks, "x_head_stride": head_axis.x,
        "out_head_stride": head_axis.out, "x_feat_stride": xs[-1], "out_feat_stride": os[-1],
        "ndim": len(rows),
        **{f"shape{d}": a.size for d, a in enumerate(inner_first)},
        **{f"x_stride{d}": a.x for d, a in enumerate(inner_first)},
        **{f"out_stride{d}": a.out for d, a in enumerate(inner_first)},
        **{f"table_stride{d}": a.table for d, a in enumerate(inner_first)},
    }  # fmt: skip
    item = x.itemsize
    vector_ok = (
        xs[-1] == 1
        and os[-1] == 1
        and all(at % VECTOR_BYTES == 0 for at in (x.ptr, out.ptr, cos_at, sin_at))
        and all((a.x * item) % VECTOR_BYTES == 0 for a in [*rows, head_axis])
        and all((a.out * item) % VECTOR_BYTES == 0 for a in [*rows, head_axis])
        and all((a.table * table_item) % VECTOR_BYTES == 0 for a in rows)
    )
    return _TensorPlan(fields, vector_ok)


def _check_out(x: Desc, out: Desc) -> None:
    if out.shape != x.shape or out.dtype != x.dtype:
        msg = (
            f"`out` must have the shape and dtype of `x`, {x.shape} {x.dtype}; "
            f"got {out.shape} {out.dtype}."
        )
        raise ValueError(msg)
    if overlaps_itself(out):
        msg = (
            "`out` must not overlap itself (a broadcast or expanded view, with stride 0); "
            f"got shape {out.shape} and byte strides {out.strides}."
        )
        raise ValueError(msg)
    element_type(x.dtype)


def _table_strides(
    cos: Desc, sin: Desc, lead: tuple[int, ...], n_pairs: int, x_dtype: str
) -> tuple[int, int, list[int]]:
    """Addresses of cos and sin, and their element strides over x's leading axes."""
    table_dtype = "float64" if x_dtype == "float64" else "float32"
    for name, table in (("cos", cos), ("sin", sin)):
        if table.dtype != table_dtype:
            msg = f"`{name}` must be {table_dtype} for {x_dtype} `x`; got {table.dtype}."
            raise TypeError(msg)
        if not table.shape or table.shape[-1] != n_pairs:
            msg = f"`{name}` must have n_pairs = {n_pairs} on its last axis; got {table.shape}."
            raise ValueError(msg)
    full = (*lead, n_pairs)
    strides = [_broadcast_strides(t, full) for t in (cos, sin)]
    if strides[0] is None or strides[1] is None:
        msg = f"`cos` and `sin` must broadcast to {full}; got {cos.shape} and {sin.shape}."
        raise ValueError(msg)
    item = cos.itemsize
    if (
        strides[0] != strides[1]
        or (n_pairs > 1 and strides[0][-1] != item)
        or any(s % item for s in strides[0])
    ):
        raise NeedsCopy
    return cos.ptr, sin.ptr, [s // item for s in strides[0][:-1]]


def _position_strides(positions: Desc, lead: tuple[int, ...]) -> list[int]:
    """Element strides of positions already laid out against x's leading axes."""
    if positions.dtype not in POSITION_TYPES:
        msg = (
            f"`positions` must be int32, int64, float32 or float64 for the gather kernel; "
            f"got {positions.dtype}."
        )
        raise TypeError(msg)
    strides = _broadcast_strides(positions, lead)
    if strides is None:
        msg = f"`positions` must broadcast to x.shape[:-1] = {lead}; got {positions.shape}."
        raise ValueError(msg)
    if any(s % positions.itemsize for s in strides):
        raise NeedsCopy
    return [s // positions.itemsize for s in strides]


def _broadcast_strides(a: Desc, shape: tuple[int, ...]) -> list[int] | None:
    """Byte strides of `a` broadcast to `shape` (right-aligned; 0 on broadcast axes)."""
    if len(a.shape) > len(shape):
        return None
    pad = len(shape) - len(a.shape)
    strides = [0] * pad
    for n, size, stride in zip(shape[pad:], a.shape, a.strides, strict=True):
        if size not in (1, n):
            return None
        strides.append(stride if size == n and n != 1 else 0)
    return strides


def _elements(a: Desc) -> list[int]:
    if any(s % a.itemsize for s in a.strides):
        raise NeedsCopy
    return [s // a.itemsize for s in a.strides]


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


def overlap(a: Desc, b: Desc) -> bool:
    """Whether the memory spans of `a` and `b` intersect (neither empty)."""
    if 0 in a.shape or 0 in b.shape:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def overlaps_itself(a: Desc) -> bool:
    """Whether two elements of `a` may share memory (stride 0, or axes that interleave).

    Axes are taken by increasing stride; each must step past all the elements the smaller
    ones reach. Layouts that interleave without touching are rare and also refused.

    Examples
    --------
    >>> import numpy as np
    >>> overlaps_itself(describe_numpy(np.zeros((2, 8))))
    False
    >>> overlaps_itself(describe_numpy(np.broadcast_to(np.zeros(8), (2, 8))))
    True
    """
    if 0 in a.shape:
        return False
    reach = a.itemsize
    for stride, size in sorted((abs(s), n) for s, n in zip(a.strides, a.shape, strict=True)
                               if n > 1):  # fmt: skip
        if stride < reach:
            return True
        reach += stride * (size - 1)
    return False


def _span(a: Desc) -> tuple[int, int]:
    low = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s > 0)
    return a.ptr + low, a.ptr + high + a.itemsize
