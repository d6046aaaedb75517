"""The CUDA RoPE kernel ``rope.cu``: the kernel contract, launched through CuPy.

Reached through rope_ref's backend registry as ``backend="cupy"`` (and ``"auto"`` for CUDA
arrays). `rotate` and `rotate_qk` take CuPy arrays, PyTorch CUDA tensors or JAX GPU arrays
(all of one kind, on one device), read them without a copy, allocate outputs of the same
kind and launch on the caller's current stream. The kernel rotates with float32 arithmetic
for float16, bfloat16 and float32 inputs and float64 arithmetic for float64, reading the
cos/sin tables it is given (built by rope_ref in float64 and rounded once).

Module map (this package): `plan` plans a launch from array descriptors (no CuPy), `arrays`
adapts each kind of array and launches, `tables` keeps tables on the device, `call` is the
short road from ``apply_rope`` that uses them, and `capture` says why a call cannot run
inside a CUDA graph capture. Importing any of them imports no CuPy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._core.compat import records_grad

from .arrays import Arrays, arrays_for, kernel_source, on_device
from .plan import (
    ELEMENT_TYPES,
    KERNEL_NAMES,
    PARAM_FIELDS,
    Desc,
    Launch,
    NeedsCopy,
    describe_numpy,
    plan,
)

__all__ = [
    "ELEMENT_TYPES",
    "KERNEL_NAMES",
    "PARAM_FIELDS",
    "Launch",
    "kernel_source",
    "plan_launch",
    "rotate",
    "rotate_many",
    "rotate_qk",
]

Job = tuple[Any, Any, Any, Any]  # (x, cos, sin, out or None)


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
    output_layout: str | None = None,
) -> Any:
    """Rotate the pairs of `x` by the angles whose cos/sin are given; the kernel contract.

    Parameters
    ----------
    x : CUDA array
        A CuPy array, PyTorch CUDA tensor or JAX GPU array; float16, bfloat16, float32 or
        float64, shape ``(..., head_dim)``, any strides.
    cos, sin : CUDA array
        Of `x`'s kind and device; tables in the compute dtype (float32, or float64 for
        float64 `x`) that broadcast to ``x.shape[:-1] + (n_pairs,)``; broadcast axes are
        read with stride 0, never expanded.
    layout : {"half", "interleaved"}
        Pairs ``(j, j + n_pairs)`` or ``(2j, 2j + 1)``, offset by `rotary_start`.
    rotary_start : int
        First rotated feature; the others are copied unchanged.
    inverse : bool
        Rotate by the negated angles.
    out : CUDA array, optional
        Output of `x`'s kind, shape and dtype; may be `x` itself (in-place). Not for JAX,
        whose arrays are immutable.
    output_layout : {"half", "interleaved"}, optional
        The layout the rotated pairs are written in, when not `layout`.

    Returns
    -------
    CUDA array
        `out`, or a new C-contiguous array of `x`'s kind on its device.

    Raises
    ------
    TypeError
        If an argument is not a CUDA array of `x`'s kind, a dtype is not supported, or `x`
        is a PyTorch tensor that records gradients.
    ValueError
        If the shapes do not fit, an argument is on another device, `out` partially
        overlaps `x`, or `out` overlaps itself (a broadcast view).

    Examples
    --------
    >>> import cupy as cp  # doctest: +SKIP
    >>> x = cp.asarray([[1.0, 0.0]], dtype=cp.float32)  # doctest: +SKIP
    >>> c, s = cp.zeros((1, 1), cp.float32), cp.ones((1, 1), cp.float32)  # doctest: +SKIP
    >>> rotate(x, c, s, layout="half", rotary_start=0, inverse=False)  # doctest: +SKIP
    array([[0., 1.]], dtype=float32)
    """
    arrays = _arrays(x=x, cos=cos, sin=sin, out=out)
    if out is not None and arrays.kind == "jax":
        msg = "`out` must be None for JAX arrays (they are immutable); got a JAX array."
        raise TypeError(msg)
    (result,) = _run(arrays, [(x, cos, sin, out)], _read_written(layout, output_layout),
                     rotary_start, inverse)  # fmt: skip
    return result


def _read_written(layout: str, output_layout: str | None) -> str:
    """The planner's layout: `layout`, or ``"read>written"`` (``"interleaved>half"``)."""
    return layout if output_layout in (None, layout) else f"{layout}>{output_layout}"


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
    output_layout: str | None = None,
) -> tuple[Any, Any]:
    """Rotate queries and keys in one kernel launch (two when their dtypes differ).

    Parameters
    ----------
    q, k : CUDA array
        Queries and keys of one kind and device, shape ``(..., head_dim)``; head counts and
        lengths may differ.
    cos_q, sin_q, cos_k, sin_k : CUDA array
        Tables of each, as for `rotate`.
    layout, rotary_start, inverse, output_layout
        As for `rotate`.

    Returns
    -------
    q_rot, k_rot : CUDA array
        New C-contiguous arrays of the inputs' kind.

    Examples
    --------
    >>> import cupy as cp  # doctest: +SKIP
    >>> q = cp.asarray([[1.0, 0.0]], dtype=cp.float32)  # doctest: +SKIP
    >>> c, s = cp.zeros((1, 1), cp.float32), cp.ones((1, 1), cp.float32)  # doctest: +SKIP
    >>> rotate_qk(q, q, c, s, c, -s, layout="half", rotary_start=0, inverse=False)  # doctest: +SKIP
    (array([[0., 1.]], dtype=float32), array([[ 0., -1.]], dtype=float32))
    """
    arrays = _arrays(q=q, k=k, cos_q=cos_q, sin_q=sin_q, cos_k=cos_k, sin_k=sin_k)
    jobs = [(q, cos_q, sin_q, None), (k, cos_k, sin_k, None)]
    q_out, k_out = _run(arrays, jobs, _read_written(layout, output_layout), rotary_start, inverse)
    return q_out, k_out


def _arrays(**named: Any) -> Arrays:
    """The adapter of the first array; TypeError unless all are CUDA arrays of its kind."""
    first_name, first = next(iter(named.items()))
    arrays = arrays_for(first)
    if arrays is None or not arrays.usable(first):
        msg = (
            f"`{first_name}` must be a CUDA array (CuPy, PyTorch CUDA or JAX GPU) for "
            f"backend='cupy'; got {type(first).__name__}."
        )
        raise TypeError(msg)
    if records_grad(first):
        msg = (
            f"`{first_name}` must not require grad for backend='cupy' (the kernel records no "
            "gradients): use backend='reference', or torch.no_grad(); got a tensor that does."
        )
        raise TypeError(msg)
    device = arrays.device(first)
    for name, a in named.items():
        if a is None:
            continue
        if type(a) is not type(first) or not arrays.usable(a):
            msg = (
                f"`{name}` must be a {type(first).__name__} on the device of `{first_name}` "
                f"(device {device}); got a {type(a).__name__}."
            )
            raise TypeError(msg)
        if arrays.device(a) != device:
            msg = (
                f"`{name}` must be on the device of `{first_name}` (device {device}); "
                f"got an array on device {arrays.device(a)}."
            )
            raise ValueError(msg)
    return arrays


def _run(
    arrays: Arrays, jobs: list[Job], layout: str, rotary_start: int, inverse: bool
) -> list[Any]:
    """Jobs of `arrays`' kind through `rotate_many` on their stream; outputs of that kind."""
    with on_device(arrays, arrays.device(jobs[0][0])):
        stream = arrays.stream(jobs[0][0])
        with stream if stream is not None else contextlib.nullcontext():
            outs = [arrays.empty(x, x.shape) if out is None else out for x, _, _, out in jobs]
            views = [
                (*(arrays.launchable(a) for a in (x, cos, sin)), arrays.launchable(out))
                for (x, cos, sin, _), out in zip(jobs, outs, strict=True)
            ]
            rotate_many(
                views, layout=layout, rotary_start=rotary_start, inverse=inverse,
                xp=arrays.xp, launch=lambda launch: arrays.launch(launch, stream),
            )  # fmt: skip
            arrays.keep_alive(views, stream)  # JAX buffers: until the kernel is done
    return [o if given is not None else arrays.result(o)
            for o, (*_, given) in zip(outs, jobs, strict=True)]  # fmt: skip


def rotate_many(
    jobs: Sequence[Job],
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    xp: ModuleType,
    launch: Callable[[Launch], object],
) -> list[Any]:
    """Rotate up to two ``(x, cos, sin, out)`` jobs, in one launch when their dtypes agree.

    Parameters
    ----------
    jobs : sequence of (x, cos, sin, out or None)
        Arrays of `xp`; a None `out` is allocated (C-contiguous).
    layout, rotary_start, inverse, output_layout
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
        launched, copies = _prepare(group, layout=layout, rotary_start=rotary_start,
                                    inverse=inverse, xp=xp)  # fmt: skip
        if launched.grid > 0:
            launch(launched)
        for destination, source, _ in copies:  # the temporaries lived until now
            destination[...] = source
    return outs


def plan_launch(
    jobs: Sequence[Job],
    *,
    layout: str,
    rotary_start: int,
    inverse: bool,
    xp: ModuleType,
) -> Launch:
    """The launch of one or two ``(x, cos, sin, out)`` jobs of arrays of `xp`, for inspection.

    A layout the kernel cannot walk in place is planned on contiguous copies, which this
    function does not keep: run jobs with `rotate_many`, which does.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.zeros((4, 4096, 32, 128), dtype=np.float16)
    >>> cos = np.zeros((1, 4096, 1, 64), dtype=np.float32)
    >>> plan_launch([(x, cos, cos, x)], layout="half", rotary_start=0, inverse=False, xp=np)
    Launch(rope_kernel<rope_f16, false, true>, grid=4096, block=256)
    """
    return _prepare(jobs, layout=layout, rotary_start=rotary_start, inverse=inverse, xp=xp)[0]


def _prepare(
    jobs: Sequence[Job], *, layout: str, rotary_start: int, inverse: bool, xp: ModuleType
) -> tuple[Launch, list[tuple[Any, Any, Job]]]:
    """The launch, and ``(out, copy, temporaries)`` to write back (and keep) after it.

    Layouts the kernel cannot walk in place (more than four independent leading axes,
    strides that are not whole elements) are planned on contiguous copies of x and of the
    tables expanded to x's shape.
    """
    options = {"layout": layout, "rotary_start": rotary_start, "inverse": inverse}
    jobs = [(x, *_same_layout(cos, sin, xp=xp), out) for x, cos, sin, out in jobs]
    try:
        return plan([_descs(*job) for job in jobs], **options), []  # type: ignore[arg-type]
    except NeedsCopy:
        pass
    copies: list[tuple[Any, Any, Job]] = []
    planned = []
    for job in jobs:
        try:
            plan([_descs(*job)], **options)  # type: ignore[arg-type]
            planned.append(job)
        except NeedsCopy:
            copy = _contiguous(*job, xp=xp)
            planned.append(copy)
            copies.append((job[3], copy[3], copy))
    return plan([_descs(*job) for job in planned], **options), copies  # type: ignore[arg-type]


def _descs(x: Any, cos: Any, sin: Any, out: Any) -> tuple[Desc, tuple[Desc, Desc], Desc]:
    return _describe(x), (_describe(cos), _describe(sin)), _describe(out)


def _describe(a: Any) -> Desc:
    if isinstance(a, np.ndarray):
        return describe_numpy(a)
    return Desc(int(a.data.ptr), a.shape, a.strides, a.dtype.name, a.dtype.itemsize)


def _same_layout(cos: Any, sin: Any, *, xp: ModuleType) -> tuple[Any, Any]:
    """Cos and sin broadcast against each other.

    Contiguous copies (of these small tables, not expanded to x's shape) when the two are
    laid out differently or not in whole elements.
    """
    try:
        cos, sin = xp.broadcast_arrays(cos, sin)
    except ValueError:
        return cos, sin  # the planner names the shapes
    item = cos.itemsize
    if (
        cos.strides == sin.strides
        and (cos.ndim == 0 or cos.shape[-1] == 1 or cos.strides[-1] == item)
        and all(s % item == 0 for s in cos.strides)
    ):
        return cos, sin
    return xp.ascontiguousarray(cos), xp.ascontiguousarray(sin)


def _contiguous(x: Any, cos: Any, sin: Any, out: Any, *, xp: ModuleType) -> Job:
    """Contiguous copies of x and of the tables expanded to x's shape, and a fresh output."""
    full = (*x.shape[:-1], cos.shape[-1])
    try:
        cos_c, sin_c = (xp.ascontiguousarray(xp.broadcast_to(t, full)) for t in (cos, sin))
    except ValueError:
        msg = f"`cos` and `sin` must broadcast to {full}; got {cos.shape} and {sin.shape}."
        raise ValueError(msg) from None
    return xp.ascontiguousarray(x), cos_c, sin_c, xp.empty(x.shape, dtype=x.dtype)
