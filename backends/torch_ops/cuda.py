"""The CUDA kernels of the PyTorch custom operators ``rope_ref::apply_rope`` and ``_qk``.

`rope_ref.backends.torch_ops.operators` defines both operators (schema, fake implementations,
autograd formula) and registers `rotate` and `rotate_qk` as their CUDA implementations.
Each runs the engine's runner as a CUDA tensor's call without the operators does, with
``backend="cupy"`` (`rope_ref.backends.cuda.call.run`): the short road when it takes the
call, else the engine's general path (host-built tables, the same kernel). The input is read
detached, in place; the output is laid out as the fake implementation promises,
``torch.empty_like`` of the input, so that a compiled graph's strides are the eager
call's. The backward, the same operator with ``inverse`` flipped, is therefore the inverse
rotation by the same kernel on the same device.
"""

from __future__ import annotations

import torch

from rope_ref._core.aliases import Role
from rope_ref._core.spec import RopeSpec

from ..cuda.call import run, run_qk

__all__ = ["rotate", "rotate_qk"]


def rotate(
    x: torch.Tensor,
    *,
    spec: RopeSpec | None,
    positions: torch.Tensor | None,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    role: Role | None,
) -> torch.Tensor:
    """``apply_rope`` of CUDA tensor `x` by the CUDA kernel, into ``torch.empty_like(x)``."""
    out = torch.empty_like(x)
    run(x.detach().resolve_neg(), spec=spec, positions=positions, offset=offset,
        seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form="rotate_half", backend="cupy",
        out=out, role=role)  # fmt: skip
    return out


def rotate_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    spec: RopeSpec | None,
    positions: torch.Tensor | None,
    k_positions: torch.Tensor | None,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rope_qk`` of CUDA tensors `q` and `k` (one launch), laid out like them."""
    rotated = run_qk(q.detach().resolve_neg(), k.detach().resolve_neg(), spec=spec,
                     positions=positions, k_positions=k_positions, offset=offset,
                     seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form="rotate_half",
                     backend="cupy")  # fmt: skip
    outs = []
    for result, like in zip(rotated, (q, k), strict=True):
        out = torch.empty_like(like)
        outs.append(result if result.stride() == out.stride() else out.copy_(result))
    return outs[0], outs[1]
