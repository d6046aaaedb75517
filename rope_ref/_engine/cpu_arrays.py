"""PyTorch CPU tensors and JAX CPU arrays through the Numba kernel, without a copy.

`rope_ref.apply_rope` and `apply_rope_qk` with ``backend="numba"`` or ``"auto"`` hand a
tensor or a JAX array here first (NumPy arrays take the runner's host road before).
The call takes the engine runner's host road (`short_road`, else `general`) on NumPy
views of the same memory, so it is the NumPy call, bit for bit:

- PyTorch (`rope_ref._engine.torch_views`): ``x.numpy()`` views the tensor, with whatever
  strides it has, so a slice of a fused qkv projection is read in place. A tensor that records
  gradients, and every call under ``torch.compile``, goes through the custom operators
  of `rope_ref.backends.torch_ops.operators` instead (autograd: the inverse rotation by the kernel).
- JAX (arrays on the CPU, not tracers): `rope_ref._engine.jax_arrays` (``numpy.asarray``
  views the buffer; the result is one aligned NumPy array, which JAX adopts).

Anything else returns None (the caller's other paths decide), except what
``backend="numba"`` cannot take, which is an error naming the parameter: a tensor on
another device, a tensor whose negative or conjugate bit is set, or a bad `out`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from rope_ref._core.aliases import BackendName, Form, Role
from rope_ref._core.spec import RopeSpec
from rope_ref._engine import jax_arrays
from rope_ref._engine.call import Call
from rope_ref._engine.dispatch import KERNEL_DTYPES, load_backend
from rope_ref._engine.fast_path import numpy_kernel_call
from rope_ref._engine.position_ids import numpy_ids_call
from rope_ref._engine.runner import rotate
from rope_ref._engine.torch_views import (
    bfloat16_dtype,
    compiling,
    fill_views,
    host_positions,
    numpy_view,
    operators_needed,
    torch_direct,
    torch_direct_qk,
)

__all__ = ["apply", "apply_qk", "array_kind", "compiling", "numpy_view", "operators_needed"]


def array_kind(x: object) -> str | None:
    """``"torch"`` for a PyTorch tensor, ``"jax"`` for a concrete JAX array, else None."""
    kind = type(x)
    found = _kinds.get(kind)
    if found is None:
        found = _classify(kind)
        if not compiling():  # torch.compile traces without side effects on the caches
            _remember(kind, found)
    return found or None


class _ShortRoad(NamedTuple):
    """What the short road of a tensor call looks up, bound once."""

    compiling: Callable[[], bool]  # torch.compiler.is_compiling
    kernel: ModuleType  # the Numba kernel
    from_numpy: Callable[[np.ndarray], Any]  # torch.from_numpy
    forward_ad: ModuleType  # torch.autograd.forward_ad: its level is >= 0 inside dual_level
    #: bfloat16: the torch dtype of its bit patterns and ml_dtypes' bfloat16; else None.
    bits: tuple[Any, np.dtype[Any]] | None = None


_kinds: dict[type, str] = {}
#: torch dtype -> its `_ShortRoad` (when numba is here).
_short_roads: dict[Any, _ShortRoad] = {}


def _classify(kind: type) -> str:
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(kind, torch.Tensor):
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and issubclass(kind, jax.Array) and kind.__name__ == "ArrayImpl":
        return "jax"
    return ""


def _remember(kind: type, found: str) -> None:
    """Keep `found` for arrays of type `kind`, and for tensors, their NumPy views.

    The views first: another thread that finds `kind` known reads them at once.
    """
    if found == "torch":
        _fill_torch_views()
    _kinds[kind] = found


def _fill_torch_views() -> dict[Any, tuple[Any, np.dtype[Any]]]:
    """`_short_roads` and the tensors' NumPy views (`torch_views.fill_views`), on first use.

    Each is built whole, then put in by one ``update``, so that threads making their
    first calls at once never read a table half filled.
    """
    if not _short_roads:
        import torch

        fill_views()
        dtypes = (torch.float16, torch.float32, torch.float64)
        bfloat16 = bfloat16_dtype()
        kernel = _numba()
        if kernel is not None:
            import torch.autograd.forward_ad

            road = _ShortRoad(torch.compiler.is_compiling, kernel, torch.from_numpy,
                              torch.autograd.forward_ad)  # fmt: skip
            roads = dict.fromkeys(dtypes, road)
            if bfloat16 is not None:  # its int16 bit patterns, viewed as ml_dtypes' bfloat16
                roads[torch.bfloat16] = road._replace(bits=(torch.int16, bfloat16))
            _short_roads.update(roads)
    return fill_views()


@functools.cache
def _numba() -> ModuleType | None:
    """The Numba kernel, or None where it is not installed or cannot start its threads."""
    try:
        return load_backend("numba")
    except (ModuleNotFoundError, RuntimeError):
        return None


def apply(
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
) -> Any | None:
    """``apply_rope`` of a tensor or JAX array by the kernel; None: not for here."""
    kind = array_kind(x)
    if kind is None or not (isinstance(form, str) and form == "rotate_half"):
        return None  # the reference's forms: the general path
    if kind == "torch" and out is None and role is None:
        # The decoding call, with as few steps as possible (the checks of `_torch_usable`).
        road = _short_roads.get(x.dtype)
        if (
            road
            and not road.compiling()
            and x.is_cpu
            and not (x.requires_grad or x.is_neg())
            and road.forward_ad._current_level < 0
        ):
            # bfloat16: the kernel reads and writes the int16 views of the bits themselves
            bits, of = road.bits or (None, None)
            try:
                view = x.numpy() if bits is None else x.view(bits).numpy()
            except RuntimeError:  # no storage of its own (inside torch.func.vmap)
                view = None
            if view is None:
                result = None
            elif positions is None:
                result = numpy_kernel_call(
                    road.kernel, view, spec, offset, seq_axis, inverse, seq_len, None, of
                )
            else:  # position ids: small integer ones take a short road
                result = numpy_ids_call(road.kernel, view, spec, positions, offset, seq_axis,
                                        inverse, seq_len, None, of)  # fmt: skip
            if result is not None:
                return (
                    road.from_numpy(result)
                    if bits is None
                    else road.from_numpy(result).view(x.dtype)
                )
    if kind == "torch" and compiling():  # traced for torch.compile: the custom operator
        if out is not None or not _traceable(x):
            return None
        return _torch_ops().apply(x, Call(spec=spec, positions=positions, offset=offset,
                                          seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                                          role=role))  # fmt: skip
    if kind == "torch":
        if not _torch_usable(x, "x", backend):
            return None
        needed = operators_needed(x, positions)
        if out is not None:
            try:
                _check_tensor_out(x, out, needed)
            except (TypeError, ValueError):  # the other arguments' mistakes are reported first
                if needed:  # (through the operators: under vmap `x` has no storage to view)
                    _torch_ops().apply(x, Call(spec=spec, positions=positions, offset=offset,
                                               seq_axis=seq_axis, inverse=inverse,
                                               seq_len=seq_len, role=role))  # fmt: skip
                else:
                    torch_direct(x, None, spec=spec, positions=positions, offset=offset,
                                 seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                                 form="rotate_half", role=role)  # fmt: skip
                raise
        if needed:
            return _torch_ops().apply(x, Call(spec=spec, positions=positions, offset=offset,
                                              seq_axis=seq_axis, inverse=inverse,
                                              seq_len=seq_len, role=role))  # fmt: skip
        return torch_direct(x, out, spec=spec, positions=positions, offset=offset,
                            seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form="rotate_half",
                            role=role)  # fmt: skip
    if _numba() is None or not jax_arrays.usable(x):
        return None
    if out is not None:  # refused by the general path, after the arguments checked before
        return rotate(x, Call(spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                              inverse=inverse, seq_len=seq_len, backend=backend, out=out,
                              role=role))  # fmt: skip
    return jax_arrays.rotate(x, spec=spec, positions=host_positions(positions), offset=offset,
                             seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                             form="rotate_half", role=role)  # fmt: skip


def apply_qk(
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
) -> tuple[Any, Any] | None:
    """``apply_rope_qk`` of two tensors or JAX arrays by the kernel, or None."""
    kind = array_kind(q)
    if (
        kind is None
        or array_kind(k) != kind
        or not (isinstance(form, str) and form == "rotate_half")
    ):
        return None
    if kind == "torch":
        if compiling():  # traced for torch.compile: the custom operator
            if not all(_traceable(a) for a in (q, k)):
                return None
            needed = True
        elif not (_torch_usable(q, "q", backend) and _torch_usable(k, "k", backend)):
            return None
        else:  # autograd, torch.func: the custom operator
            needed = operators_needed(q, positions) or operators_needed(k, k_positions)
        if needed:
            call = Call(spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                        inverse=inverse, seq_len=seq_len, k_positions=k_positions)  # fmt: skip
            return _torch_ops().apply_qk(q, k, call)  # type: ignore[no-any-return]
    elif _numba() is None or not (jax_arrays.usable(q) and jax_arrays.usable(k)):
        return None
    # for the host: positions read as NumPy (views where they can be), the Numba kernel; the
    # fields in order (typed: a NamedTuple built so costs half its build by keyword)
    host_call = Call(spec, host_positions(positions), offset, seq_axis, inverse, seq_len,
                     "rotate_half", "numba", k_positions=host_positions(k_positions))  # fmt: skip
    if kind == "torch":
        return torch_direct_qk(q, k, host_call)
    return jax_arrays.rotate_qk(q, k, host_call)


# ----------------------------------------------------------------------------------------
# PyTorch
# ----------------------------------------------------------------------------------------


def _torch_usable(x: Any, name: str, backend: str) -> bool:
    """Whether the kernel takes tensor `x`; with backend="numba", raise where it cannot."""
    if _numba() is None:
        return False
    if not x.is_cpu:
        if backend == "numba":
            msg = (
                f"`{name}` must be a CPU tensor for backend='numba'; got a tensor on "
                f"{x.device}: use backend='cupy' or 'auto' for CUDA tensors."
            )
            raise TypeError(msg)
        return False
    if x.dtype not in fill_views():
        return False  # the general path names the dtypes it takes
    if x.is_neg() or x.is_conj():
        if backend == "numba":
            msg = (
                f"`{name}` must not have its negative or conjugate bit set for "
                f"backend='numba' (a lazy view); got one: pass {name}.resolve_neg()."
            )
            raise ValueError(msg)
        return False
    return True


def _torch_ops() -> ModuleType:
    """`rope_ref.backends.torch_ops.operators` (imports torch, so loaded on first use)."""
    from rope_ref.backends.torch_ops import operators  # type: ignore[import-not-found,unused-ignore]

    module: ModuleType = operators
    return module


def _traceable(x: Any) -> bool:
    """Whether the custom operators take tensor `x` (checked without the caches)."""
    import torch

    dtypes = [getattr(torch, name) for name in KERNEL_DTYPES["numba"]]
    return bool(x.is_cpu) and x.dtype in dtypes


def _check_tensor_out(x: Any, out: Any, needed: bool) -> None:
    """Raise if `out` is not for tensor `x`; `needed`: the call needs the custom operators.

    The caller runs the call without `out` first when this raises, so that the other
    arguments' mistakes are reported first, as for a NumPy `x`.
    """
    if array_kind(out) != "torch":
        msg = f"`out` must be a torch tensor for a torch tensor `x`; got {type(out).__name__}."
        raise TypeError(msg)
    if out.requires_grad:
        msg = "`out` must not require grad (the kernel writes it outside autograd); got one."
        raise ValueError(msg)
    if out.device.type != "cpu" or out.is_neg() or out.is_conj():
        msg = f"`out` must be a plain CPU tensor like `x`; got one on {out.device}."
        raise ValueError(msg)
    if needed:
        msg = (
            "`out` must be None when `x` records gradients or is under a "
            "torch.func transform; got a tensor."
        )
        raise ValueError(msg)
