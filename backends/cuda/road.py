"""The CUDA arrays' road through ``apply_rope`` and ``apply_rope_qk``.

The adapters of the array kinds (`rope_ref._engine.kinds`) hand CUDA arrays here with
``backend="cupy"`` or ``"auto"``. A PyTorch CUDA tensor whose call records gradients or runs
under a ``torch.func`` transform, and every call that ``torch.compile`` traces, goes to the
torch custom operators (`rope_ref.backends.torch_ops.operators`), whose CUDA implementation
runs `rope_ref.backends.cuda.call.run` on the detached tensor; every other call runs
`~rope_ref.backends.cuda.call.run` at once: the kernel's short road, else the engine's general
path. A call the operators do not take goes to the general path.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from rope_ref._core.aliases import BackendName, Form, Role
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.call import Call
from rope_ref._engine.runner import general, general_qk
from rope_ref._engine.torch_views import compiling, operators_needed

from . import call
from .arrays import arrays_for

__all__ = ["run", "run_qk"]


def run(
    x: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    backend: BackendName,
    out: Any,
    role: Role | None,
) -> Any:
    """``apply_rope`` of a CUDA array: the custom operators where needed, else `call.run`."""
    if role is None and _rotate_half(form) and (compiling() or _records(x, positions)):
        operators = _operators()
        take = operators.traced_cuda if compiling() else operators.apply_cuda
        op_call = Call(spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, out=out)  # fmt: skip
        result = take(x, op_call)  # torch.compile traces the call, or autograd, torch.func
        if result is not None:
            return result
        return general(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                       role=role)  # fmt: skip
    return call.run(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                    inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                    role=role)  # fmt: skip


def run_qk(
    q: Any,
    k: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    k_positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    backend: BackendName,
) -> tuple[Any, Any]:
    """``apply_rope_qk`` of CUDA arrays: the custom operators where needed, else `call.run_qk`."""
    if _rotate_half(form) and (compiling() or _records(q, positions, k, k_positions)):
        operators = _operators()
        take = operators.traced_qk_cuda if compiling() else operators.apply_qk_cuda
        op_call = Call(spec=spec, positions=positions, k_positions=k_positions, offset=offset,
                       seq_axis=seq_axis, inverse=inverse, seq_len=seq_len)  # fmt: skip
        result = take(q, k, op_call)  # torch.compile traces the call, or autograd, torch.func
        if result is not None:
            return result  # type: ignore[no-any-return]
        return general_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                          offset=offset, seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                          form=form, backend=backend)  # fmt: skip
    return call.run_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                       offset=offset, seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                       form=form, backend=backend)  # fmt: skip


def _rotate_half(form: object) -> bool:
    """Whether `form` is ``"rotate_half"`` (any other value, of any type: False)."""
    return isinstance(form, str) and form == "rotate_half"


def _records(x: Any, positions: Any, *more: Any) -> bool:
    """Whether `x` is a CUDA tensor whose call (or that of ``more``'s pair) needs the operators."""
    arrays = arrays_for(x)
    if arrays is None or arrays.kind != "torch":
        return False
    pairs = [(x, positions), *zip(more[::2], more[1::2], strict=True)]
    return any(operators_needed(a, p) for a, p in pairs)


def _operators() -> ModuleType:
    """`rope_ref.backends.torch_ops.operators` (imports torch: on first use)."""
    from ..torch_ops import operators

    return operators
