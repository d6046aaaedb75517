"""PyTorch custom operators for the kernels: autograd and ``torch.compile``.

``rope_ref::apply_rope`` and ``rope_ref::apply_rope_qk`` run the engine's runner: the Numba
kernel on NumPy views of CPU tensors (`rope_ref._engine.torch_views`), the CUDA kernel on
CUDA tensors (`rope_ref.backends.torch_ops.cuda`). Each has a fake implementation (an
output like its input, for tracing) and an autograd formula: RoPE is orthogonal in `x`, so
the gradient of ``y = R x`` is ``R^T g``, the inverse rotation of the incoming gradient at the same
positions, by the same operator on the gradient's device (with an attention factor or
xPos scale ``a``, ``(aR)^T = aR^T`` is what ``inverse=True`` applies). `torch.compile`
therefore sees one opaque operator per call and no graph break, and compiled calls run the
eager kernel, bit for bit.

A spec is not a tensor nor a number, so the operators take a key that
`rope_ref.backends.torch_ops.specs` maps back to the spec (the specs used most recently, and
those a compiled graph holds); `torch.compile` looks the key up when it traces (a
constant of the graph; the spec is guarded on as any other object the traced function
reads).

Eager calls that record gradients, and calls under ``torch.func`` transforms (``grad``,
``vmap``, ``jacrev``, ``jacfwd``), go through two autograd functions over the same
operators (`rope_ref.backends.torch_ops.autograd`): their ``setup_context``, backward (and
forward tangent) are the inverse (the same) rotation by the operator, positions that
record gradients get theirs from the reference, and their vmap rules are generated from
the operators' own (`rope_ref.backends.torch_ops.vmap`), so that the transforms compose
(``jacrev`` is ``vmap`` of the backward). Under ``torch.compile`` the operators are
called directly (their registered autograd formula is x's only: a traced call whose
positions record gradients is left to the general path).
"""

from __future__ import annotations

from typing import Any

import torch

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.call import Call
from rope_ref._engine.dispatch import KERNEL_DTYPES, available_backends
from rope_ref._engine.torch_views import (
    compiling,
    host_positions,
    torch_direct,
    torch_direct_qk,
)

from . import autograd as torch_autograd
from . import cuda as cuda_torch
from . import specs as torch_specs
from . import vmap as torch_vmap

__all__ = ["apply", "apply_cuda", "apply_qk", "apply_qk_cuda", "traced_cuda", "traced_qk_cuda"]


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator,unused-ignore]
def _spec_key(spec: Any) -> int | None:
    """The operators' key for `spec`; None when it is not a hashable RopeSpec or None.

    A key handed out while ``torch.compile`` traces stays for the life of the process.
    """
    if not (spec is None or type(spec) is RopeSpec):
        return None
    try:
        hash(spec)
    except TypeError:  # a scaling rule that cannot be hashed
        return None
    return torch_specs.key_of(spec, pin=compiling())


def _scalars(offset: Any, seq_axis: Any, inverse: Any, seq_len: Any) -> tuple[Any, ...] | None:
    """``(offset, float_offset, seq_axis, inverse, seq_len)`` as the schema takes them."""
    if type(seq_axis) is not int or type(inverse) is not bool:
        return None
    if not (seq_len is None or type(seq_len) in (int, float)):
        return None
    seq_len = None if seq_len is None else float(seq_len)
    if type(offset) is int and -(2**63) <= offset < 2**63:
        return offset, None, seq_axis, inverse, seq_len
    if type(offset) is float:
        return 0, offset, seq_axis, inverse, seq_len
    return None


def _positions(positions: Any, x: torch.Tensor) -> tuple[bool, torch.Tensor | None]:
    """``(usable, positions)``: None, or a tensor on x's device (else unusable)."""
    if positions is None:
        return True, None
    if isinstance(positions, torch.Tensor) and positions.device == x.device:
        return True, positions
    return False, None


def apply(x: torch.Tensor, call: Call) -> torch.Tensor | None:
    """``rope_ref::apply_rope`` of tensor `x`; None when an argument is not for the op.

    The call's ``form``, ``backend`` and ``out`` are not read (``"rotate_half"``, the
    kernel, no `out`: the caller sends only such calls).
    """
    key = _spec_key(call.spec)
    scalars = _scalars(call.offset, call.seq_axis, call.inverse, call.seq_len)
    usable, p = _positions(call.positions, x)
    role = call.role
    if key is None or scalars is None or not usable or role not in (None, "query", "key"):
        return None
    if compiling():  # the operator, with its own autograd formula (x only)
        if p is not None and p.requires_grad:
            return None  # the general path differentiates the positions
        result: torch.Tensor = torch.ops.rope_ref.apply_rope(x, p, key, *scalars, role)
        return result
    return torch_autograd.Rotation.apply(x, p, key, *scalars, role)  # type: ignore[no-any-return]


def apply_qk(
    q: torch.Tensor, k: torch.Tensor, call: Call
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``rope_ref::apply_rope_qk`` of tensors `q` and `k`; None when not for the op."""
    key = _spec_key(call.spec)
    scalars = _scalars(call.offset, call.seq_axis, call.inverse, call.seq_len)
    usable, p = _positions(call.positions, q)
    k_usable, kp = _positions(call.k_positions, k)
    if key is None or scalars is None or not (usable and k_usable):
        return None
    if compiling():
        if any(t is not None and t.requires_grad for t in (p, kp)):
            return None  # the general path differentiates the positions
        q_rot, k_rot = torch.ops.rope_ref.apply_rope_qk(q, k, p, kp, key, *scalars)
        return q_rot, k_rot
    return torch_autograd.RotationQK.apply(q, k, p, kp, key, *scalars)  # type: ignore[no-any-return]


def _offset(offset: int, float_offset: float | None) -> int | float:
    return offset if float_offset is None else float_offset


def _role(role: str | None) -> Role | None:
    """The operator's `role` string (checked by `apply`) as the engine's `Role`."""
    return "query" if role == "query" else "key" if role == "key" else None


def traced_cuda(x: Any, call: Call) -> torch.Tensor | None:
    """`apply_cuda` of a call that ``torch.compile`` traces, when the CUDA kernel takes `x`.

    Decided without the CUDA kernel's adapters (which tracing cannot run): a tensor on a
    device `_cuda_kernel_takes`. None: the general path.
    """
    if not (isinstance(x, torch.Tensor) and _cuda_kernel_takes(x.device.type)):
        return None
    return apply_cuda(x, call)


def traced_qk_cuda(q: Any, k: Any, call: Call) -> tuple[torch.Tensor, torch.Tensor] | None:
    """`apply_qk_cuda` of a traced call, as `traced_cuda` decides."""
    if not (isinstance(q, torch.Tensor) and _cuda_kernel_takes(q.device.type)):
        return None
    return apply_qk_cuda(q, k, call)


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator,unused-ignore]
def _cuda_kernel_takes(device_type: str) -> bool:
    """Whether the CUDA kernel serves tensors on `device_type`: CUDA, with CuPy installed."""
    return device_type == "cuda" and available_backends()["cupy"] is None


def apply_cuda(x: torch.Tensor, call: Call) -> torch.Tensor | None:
    """`apply` of a CUDA tensor for autograd, ``torch.func`` or ``torch.compile``.

    `rope_ref.backends.cuda.call` hands over those calls (x or the positions record
    gradients, a transform maps them, or a trace) and takes every other call to the
    kernel directly. None when the operator does not take the call (the general path
    then decides); ValueError for an `out` with a tensor that records gradients.
    """
    if not _kernel_dtype(x):
        return None
    if call.out is not None:
        if compiling():
            return None  # traced as before: out= is not an operator's argument
        msg = "`out` must be None when `x` records gradients; got a tensor."
        raise ValueError(msg)
    return apply(x, call.but(role=None))


def apply_qk_cuda(
    q: torch.Tensor, k: torch.Tensor, call: Call
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """`apply_qk` of CUDA tensors, for the calls of `apply_cuda`, or None."""
    if not (isinstance(k, torch.Tensor) and _kernel_dtype(q) and _kernel_dtype(k)):
        return None
    return apply_qk(q, k, call)


_KERNEL_DTYPES = tuple(getattr(torch, name) for name in KERNEL_DTYPES["cupy"])


def _kernel_dtype(x: torch.Tensor) -> bool:
    return x.dtype in _KERNEL_DTYPES


def _apply_rope_cpu(
    x: torch.Tensor,
    positions: torch.Tensor | None,
    spec_key: int,
    offset: int,
    float_offset: float | None,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    role: str | None,
) -> torch.Tensor:
    out = torch.empty_like(x)
    spec = torch_specs.spec_of(spec_key)
    torch_direct(x.resolve_neg(), out, spec=spec, positions=positions,
                 offset=_offset(offset, float_offset), seq_axis=seq_axis, inverse=inverse,
                 seq_len=seq_len, form="rotate_half", role=_role(role))  # fmt: skip
    return out


def _apply_rope_cuda(
    x: torch.Tensor,
    positions: torch.Tensor | None,
    spec_key: int,
    offset: int,
    float_offset: float | None,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    role: str | None,
) -> torch.Tensor:
    spec, at = torch_specs.spec_of(spec_key), _offset(offset, float_offset)
    return cuda_torch.rotate(x, spec=spec, positions=positions, offset=at, seq_axis=seq_axis,
                             inverse=inverse, seq_len=seq_len, role=_role(role))  # fmt: skip


_apply_rope = torch.library.custom_op(
    "rope_ref::apply_rope", _apply_rope_cpu, mutates_args=(), device_types="cpu"
)
_apply_rope.register_kernel("cuda", _apply_rope_cuda)


@_apply_rope.register_fake
def _apply_rope_fake(x: torch.Tensor, *args: Any) -> torch.Tensor:
    return torch.empty_like(x)


def _save_args(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep what the backward needs: everything but the rotated tensors' values."""
    ctx.args = inputs[1:]
    ctx.spec = torch_specs.spec_of(inputs[2])


def _current_key(ctx: Any, key: int) -> int:
    """`key` if the registry still holds it (a compiled graph's), else the spec's key now."""
    try:
        torch_specs.spec_of(key)
    except RuntimeError:
        return torch_specs.key_of(ctx.spec, pin=False)
    return key


def _apply_rope_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    positions, key, offset, float_offset, seq_axis, inverse, seq_len, role = ctx.args
    key = _current_key(ctx, key)
    back = _apply_rope(
        grad, positions, key, offset, float_offset, seq_axis, not inverse, seq_len, role
    )
    return (back, *([None] * 8))


_apply_rope.register_autograd(_apply_rope_backward, setup_context=_save_args)


def _apply_rope_qk_cpu(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None,
    k_positions: torch.Tensor | None,
    spec_key: int,
    offset: int,
    float_offset: float | None,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    call = Call(spec=torch_specs.spec_of(spec_key), positions=host_positions(positions),
                offset=_offset(offset, float_offset), seq_axis=seq_axis, inverse=inverse,
                seq_len=seq_len, backend="numba",
                k_positions=host_positions(k_positions))  # fmt: skip
    rotated = torch_direct_qk(q.resolve_neg(), k.resolve_neg(), call)
    outs = []
    for result, like in zip(rotated, (q, k), strict=True):
        out = torch.empty_like(like)
        outs.append(result if result.stride() == out.stride() else out.copy_(result))
    return outs[0], outs[1]


def _apply_rope_qk_cuda(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor | None,
    k_positions: torch.Tensor | None,
    spec_key: int,
    offset: int,
    float_offset: float | None,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    spec, at = torch_specs.spec_of(spec_key), _offset(offset, float_offset)
    return cuda_torch.rotate_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                                offset=at, seq_axis=seq_axis, inverse=inverse,
                                seq_len=seq_len)  # fmt: skip


_apply_rope_qk = torch.library.custom_op(
    "rope_ref::apply_rope_qk", _apply_rope_qk_cpu, mutates_args=(), device_types="cpu"
)
_apply_rope_qk.register_kernel("cuda", _apply_rope_qk_cuda)


@_apply_rope_qk.register_fake
def _apply_rope_qk_fake(
    q: torch.Tensor, k: torch.Tensor, *args: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k)


def _apply_rope_qk_backward(
    ctx: Any, grad_q: torch.Tensor | None, grad_k: torch.Tensor | None
) -> tuple[Any, ...]:
    _, positions, k_positions, key, offset, float_offset, seq_axis, inverse, seq_len = ctx.args
    (q_shape, k_shape), options = ctx.like
    key = _current_key(ctx, key)
    gq = torch.zeros(q_shape, **options) if grad_q is None else grad_q
    gk = torch.zeros(k_shape, **options) if grad_k is None else grad_k
    back_q, back_k = _apply_rope_qk(
        gq, gk, positions, k_positions, key, offset, float_offset, seq_axis, not inverse, seq_len
    )
    return (back_q, back_k, *([None] * 8))


def _save_qk_args(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """`_save_args`, and the shapes of q and k for a gradient that is not given."""
    q, k = inputs[:2]
    ctx.args = inputs[1:]
    ctx.spec = torch_specs.spec_of(inputs[4])
    ctx.like = (q.shape, k.shape), {"dtype": q.dtype, "device": q.device}


_apply_rope_qk.register_autograd(_apply_rope_qk_backward, setup_context=_save_qk_args)

_apply_rope.register_vmap(torch_vmap.rope_rule(_apply_rope))
_apply_rope_qk.register_vmap(torch_vmap.rope_qk_rule(_apply_rope_qk))
