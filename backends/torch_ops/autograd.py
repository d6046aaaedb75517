"""Autograd functions over the custom operators: eager gradients and ``torch.func``.

`Rotation` and `RotationQK` call ``rope_ref::apply_rope`` and ``rope_ref::apply_rope_qk``
(`rope_ref.backends.torch_ops.operators`) with ``setup_context``, so that ``torch.func.grad``,
``vjp`` and ``jacrev`` take them, and with vmap rules generated from the operators' own
(`rope_ref.backends.torch_ops.vmap`), so that the transforms compose:

- **x.** RoPE is linear and orthogonal in `x`: the backward is the inverse rotation of
  the incoming gradient (``R^T g``; with an attention factor or xPos scale ``a``,
  ``(aR)^T = aR^T``), the forward tangent the same rotation of x's tangent, both by the
  operator itself.
- **Positions** that record gradients (float positions, a learned offset): their
  gradient is torch's autograd of the reference rotation at the same positions, in the
  backward only (``y`` depends on them through the angles, xPos scales and every
  length-dependent scaling, which the reference differentiates as written). It is a
  first derivative: a second one through positions is refused by torch (the gradient
  records no graph). Forward-mode tangents of positions (``torch.func.jvp``, ``jacfwd``)
  are the reference's too; eager forward-mode AD (``torch.autograd.forward_ad``) with
  dual positions is refused, naming them.

The classes are named after the operators (``rope_ref_apply_rope``), so that a result's
``grad_fn`` reads as the operator's node, as it does under ``torch.compile``.
"""

from __future__ import annotations

from typing import Any

import torch

from . import specs as torch_specs

__all__ = ["Rotation", "RotationQK"]


def _records(t: torch.Tensor | None) -> bool:
    return t is not None and t.requires_grad


def _keeps_inputs(*positions: torch.Tensor | None) -> bool:
    """Whether the reference may need the rotated tensors later.

    So it may for positions that record gradients, and inside a ``torch.func`` transform
    or a forward-mode ``dual_level`` (which may ask a tangent).
    """
    if all(p is None for p in positions):
        return False
    if any(_records(p) for p in positions):
        return True
    return bool(torch._C._functorch.maybe_current_level() is not None or _in_dual_level())


def _in_dual_level() -> bool:
    """Whether ``torch.autograd.forward_ad.dual_level`` is open (tangents may be asked)."""
    import torch.autograd.forward_ad

    return torch.autograd.forward_ad._current_level >= 0


def _offset(offset: int, float_offset: float | None) -> int | float:
    return offset if float_offset is None else float_offset


class _RotationFunction(torch.autograd.Function):
    """``rope_ref::apply_rope``: ``y = R x``, ``dx = R^T g``; positions by the reference."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, positions: torch.Tensor | None, key: int, *rest: Any) -> Any:
        return torch.ops.rope_ref.apply_rope(x, positions, key, *rest)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        x, positions = inputs[:2]
        saved = (positions, x if _keeps_inputs(positions) else None)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)  # the same, for `jvp`
        ctx.spec, ctx.rest = torch_specs.spec_of(inputs[2]), list(inputs[3:])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        grad_x = Rotation.turn(ctx, grad, inverted=True) if ctx.needs_input_grad[0] else None
        grad_p = None
        if ctx.needs_input_grad[1]:
            grad_p = _by_the_reference(ctx, (grad,), vjp=True)[0]
        return (grad_x, grad_p, *([None] * 7))

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor | None, tangent_p: Any, *others: Any) -> Any:
        out = None if tangent is None else Rotation.turn(ctx, tangent, inverted=False)
        if tangent_p is not None:
            (extra,) = _by_the_reference(ctx, (tangent_p,), vjp=False)
            out = extra if out is None else out if extra is None else out + extra
        return out

    @staticmethod
    def turn(ctx: Any, t: torch.Tensor, *, inverted: bool) -> Any:
        """`t` rotated as the forward rotated x (`inverted`: by the inverse rotation)."""
        positions = ctx.saved_tensors[0]
        offset, float_offset, seq_axis, inverse, seq_len, role = ctx.rest
        key = torch_specs.key_of(ctx.spec, pin=False)
        return Rotation.apply(t, positions, key, offset, float_offset, seq_axis,
                              inverse != inverted, seq_len, role)  # fmt: skip


class _RotationQKFunction(torch.autograd.Function):
    """``rope_ref::apply_rope_qk``, as `Rotation` for both."""

    generate_vmap_rule = True

    @staticmethod
    def forward(q: torch.Tensor, k: torch.Tensor, *rest: Any) -> Any:
        return torch.ops.rope_ref.apply_rope_qk(q, k, *rest)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        q, k, positions, k_positions = inputs[:4]
        kept = (q, k) if _keeps_inputs(positions, k_positions) else (None, None)
        ctx.save_for_backward(positions, k_positions, *kept)
        ctx.save_for_forward(positions, k_positions, *kept)  # the same, for `jvp`
        ctx.spec, ctx.rest = torch_specs.spec_of(inputs[4]), list(inputs[5:])
        ctx.like = q.shape, k.shape, {"dtype": q.dtype, "device": q.device}

    @staticmethod
    def backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> tuple[Any, ...]:
        grads: list[Any] = [None, None, None, None]
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            grads[:2] = RotationQK.turn(ctx, grad_q, grad_k, inverted=True)
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            grads[2:] = _by_the_reference(ctx, (grad_q, grad_k), vjp=True)
        return (*grads, *([None] * 6))

    @staticmethod
    def jvp(ctx: Any, tangent_q: torch.Tensor | None, tangent_k: torch.Tensor | None,
            tangent_p: Any, tangent_kp: Any, *others: Any) -> Any:  # fmt: skip
        out: Any = (None, None)
        if tangent_q is not None or tangent_k is not None:
            out = RotationQK.turn(ctx, tangent_q, tangent_k, inverted=False)
        if tangent_p is not None or tangent_kp is not None:
            extra = _by_the_reference(ctx, (tangent_p, tangent_kp), vjp=False)
            out = tuple(
                e if o is None else o if e is None else o + e
                for o, e in zip(out, extra, strict=True)
            )
        return out

    @staticmethod
    def turn(ctx: Any, tq: torch.Tensor | None, tk: torch.Tensor | None, *,
             inverted: bool) -> Any:  # fmt: skip
        positions, k_positions = ctx.saved_tensors[:2]
        offset, float_offset, seq_axis, inverse, seq_len = ctx.rest
        q_shape, k_shape, options = ctx.like
        tq = torch.zeros(q_shape, **options) if tq is None else tq
        tk = torch.zeros(k_shape, **options) if tk is None else tk
        key = torch_specs.key_of(ctx.spec, pin=False)
        return RotationQK.apply(tq, tk, positions, k_positions, key, offset, float_offset,
                                seq_axis, inverse != inverted, seq_len)  # fmt: skip


def _by_the_reference(ctx: Any, given: tuple[Any, ...], *, vjp: bool) -> list[Any]:
    """Derivatives through the positions, by ``torch.func`` of the reference rotation.

    `vjp`: `given` are the outputs' gradients, and the result the positions' (None for
    positions given as None). Else `given` are the positions' tangents (None: none), and
    the result the outputs' tangents.
    """
    from rope_ref._engine.runner import general, general_qk

    saved = ctx.saved_tensors
    one = len(saved) == 2
    positions, rotated = (saved[:1], saved[1:]) if one else (saved[:2], saved[2:])
    chosen = [i for i, p in enumerate(positions) if p is not None]
    if not vjp:
        chosen = [i for i in chosen if given[i] is not None and _may_move(given[i])]
        if not chosen:
            return [None] * len(positions)

    def rotate(*at: torch.Tensor) -> tuple[torch.Tensor, ...]:
        p = list(positions)
        for i, value in zip(chosen, at, strict=True):
            p[i] = value
        if one:
            offset, float_offset, seq_axis, inverse, seq_len, role = ctx.rest
            return (general(rotated[0], spec=ctx.spec, positions=p[0],
                            offset=_offset(offset, float_offset), seq_axis=seq_axis,
                            inverse=inverse, seq_len=seq_len, form="rotate_half",
                            backend="reference", out=None, role=role),)  # fmt: skip
        offset, float_offset, seq_axis, inverse, seq_len = ctx.rest
        return tuple(general_qk(rotated[0], rotated[1], spec=ctx.spec, positions=p[0],
                                k_positions=p[1], offset=_offset(offset, float_offset),
                                seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                                form="rotate_half", backend="reference"))  # fmt: skip

    primals = tuple(positions[i] for i in chosen)
    if not vjp:
        if torch._C._functorch.maybe_current_level() is None:  # torch.autograd.forward_ad
            msg = (
                "forward-mode derivatives with respect to `positions` are computed by "
                "torch.func.jvp (or jacfwd) for the kernels' operators, not inside "
                "torch.autograd.forward_ad.dual_level; got dual positions."
            )
            raise RuntimeError(msg)
        tangents = tuple(given[i] for i in chosen)
        return list(torch.func.jvp(rotate, primals, tangents)[1])
    pullback = torch.func.vjp(rotate, *primals)[1]
    found = iter(pullback(tuple(given)))
    return [next(found) if i in chosen else None for i in range(len(positions))]


def _may_move(tangent: torch.Tensor) -> bool:
    """Whether a positions' tangent may be nonzero (under torch.func it cannot be read)."""
    if torch._C._functorch.maybe_current_level() is not None:
        return True
    return bool(tangent.count_nonzero() > 0)


# Named after the operators, so that a result's ``grad_fn`` reads as the operator's node
# (``rope_ref_apply_ropeBackward``), as it does under ``torch.compile``.
Rotation: type[_RotationFunction] = type("rope_ref_apply_rope", (_RotationFunction,), {})
RotationQK: type[_RotationQKFunction] = type("rope_ref_apply_rope_qk", (_RotationQKFunction,), {})
