"""``torch.func.vmap`` rules of the custom operators ``rope_ref::apply_rope`` and ``_qk``.

Under ``vmap`` a tensor has no storage of its own, so the kernel cannot read it; these
rules hand the operator the tensors with the mapped axis made explicit. Mapping a call
over a leading axis is the call on each slice, and where that is the call on the whole
batch (the positions are not mapped and are laid along `seq_axis` whatever x's leading
axes: None, a scalar or one axis, for a spec without position sections), the batch is
rotated in one call with the mapped axis in front; otherwise each slice is rotated by
its own call and the results are stacked. ``torch.func.grad``, ``jacrev`` and
``jacfwd`` reach these rules through the operators' autograd functions
(`rope_ref.backends.torch_ops.operators`), whose vmap rules are generated from the forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import specs as torch_specs

__all__ = ["rope_qk_rule", "rope_rule"]


def _foldable(positions: torch.Tensor | None, key: int, seq_axis: int, ndim: int) -> bool:
    """Whether a leading batch axis leaves the call's positions and seq_axis as they are."""
    if not -ndim <= seq_axis <= ndim - 2:
        return False  # the per-slice call refuses it, naming it
    if positions is None:
        return True
    spec = torch_specs.spec_of(key)
    return positions.dim() <= 1 and (spec is None or spec.sections is None)


def _shifted(seq_axis: int) -> int:
    return seq_axis + 1 if seq_axis >= 0 else seq_axis


def _slice(t: torch.Tensor | None, dim: int | None, i: int) -> torch.Tensor | None:
    return t if t is None or dim is None else t.select(dim, i)


def _batched(t: torch.Tensor, dim: int | None, size: int) -> torch.Tensor:
    """`t` with its mapped axis first (broadcast to `size` where it is not mapped)."""
    if dim is None:
        return t.unsqueeze(0).expand(size, *t.shape)
    return t.movedim(dim, 0)


def rope_rule(op: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    """The vmap rule of `op` (``rope_ref::apply_rope``)."""

    def rule(
        info: Any,
        in_dims: tuple[int | None, ...],
        x: torch.Tensor,
        positions: torch.Tensor | None,
        key: int,
        *scalars: Any,
    ) -> tuple[torch.Tensor, int]:
        offset, float_offset, seq_axis, inverse, seq_len, role = scalars
        x_dim, p_dim = in_dims[0], in_dims[1]
        ndim = x.dim() - (x_dim is not None)
        if p_dim is None and _foldable(positions, key, seq_axis, ndim):
            batch = _batched(x, x_dim, info.batch_size)
            return op(batch, positions, key, offset, float_offset, _shifted(seq_axis), inverse,
                      seq_len, role), 0  # fmt: skip
        if info.batch_size == 0:  # no example: nothing to rotate
            return torch.empty_like(_batched(x, x_dim, 0)), 0
        rotated = [
            op(_slice(x, x_dim, i), _slice(positions, p_dim, i), key, *scalars)
            for i in range(info.batch_size)
        ]
        return torch.stack(rotated), 0

    return rule


def rope_qk_rule(op: Callable[..., tuple[torch.Tensor, torch.Tensor]]) -> Callable[..., Any]:
    """The vmap rule of `op` (``rope_ref::apply_rope_qk``)."""

    def rule(
        info: Any,
        in_dims: tuple[int | None, ...],
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | None,
        k_positions: torch.Tensor | None,
        key: int,
        *scalars: Any,
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[int, int]]:
        offset, float_offset, seq_axis, inverse, seq_len = scalars
        q_dim, k_dim, p_dim, kp_dim = in_dims[:4]
        q_ndim, k_ndim = q.dim() - (q_dim is not None), k.dim() - (k_dim is not None)
        if (
            p_dim is None
            and kp_dim is None
            and _foldable(positions, key, seq_axis, q_ndim)
            and _foldable(k_positions, key, seq_axis, k_ndim)
        ):
            size = info.batch_size
            q_rot, k_rot = op(_batched(q, q_dim, size), _batched(k, k_dim, size), positions,
                              k_positions, key, offset, float_offset, _shifted(seq_axis),
                              inverse, seq_len)  # fmt: skip
            return (q_rot, k_rot), (0, 0)
        if info.batch_size == 0:  # no example: nothing to rotate
            empty = (
                torch.empty_like(_batched(q, q_dim, 0)),
                torch.empty_like(_batched(k, k_dim, 0)),
            )
            return empty, (0, 0)
        pairs = []
        for i in range(info.batch_size):
            pairs.append(op(_slice(q, q_dim, i), _slice(k, k_dim, i), _slice(positions, p_dim, i),
                            _slice(k_positions, kp_dim, i), key, *scalars))  # fmt: skip
        return (torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])), (0, 0)

    return rule
