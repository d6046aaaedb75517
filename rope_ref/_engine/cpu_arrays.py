"""PyTorch CPU tensors and JAX CPU arrays through the Numba kernel, without a copy.

`rope_ref.apply_rope` and `apply_rope_qk` with ``backend="numba"`` or ``"auto"`` hand a
tensor or a JAX array here first (NumPy arrays take the kernel's own short road before).
The call runs on NumPy views of the same memory, so it is the NumPy call, bit for bit:

- PyTorch: ``x.numpy()`` views the tensor (bfloat16 through its uint16 bit patterns,
  viewed as ml_dtypes' bfloat16), with whatever strides it has, so a slice of a fused
  qkv projection is read in place; the result is wrapped with ``torch.from_numpy``, and
  ``out=`` (which may be `x`) is written through its own view. A tensor that records
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

from rope_ref._engine import jax_arrays
from rope_ref._engine.dispatch import load_backend
from rope_ref._engine.fast_path import numpy_kernel_call
from rope_ref._engine.position_ids import numpy_ids_call

__all__ = ["apply", "apply_qk", "array_kind", "numpy_view", "operators_needed"]


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
#: torch dtype -> (the dtype to view it as for ``.numpy()``, the NumPy dtype it is).
_torch_views: dict[Any, tuple[Any, np.dtype[Any]]] = {}


def compiling() -> bool:
    """Whether ``torch.compile`` is tracing the call (False where torch is not imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.compiler.is_compiling())


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
    """`_torch_views` (and `_short_roads`), filled on first use.

    Each is built whole, then put in by one ``update``, so that threads making their
    first calls at once never read a table half filled.
    """
    if not _torch_views:
        import torch

        dtypes = (torch.float16, torch.float32, torch.float64)
        views: dict[Any, tuple[Any, np.dtype[Any]]] = {}
        for t, n in zip(dtypes, (np.float16, np.float32, np.float64), strict=True):
            views[t] = (t, np.dtype(n))
        bfloat16 = _bfloat16()
        if bfloat16 is not None:  # viewed through its bit patterns
            views[torch.bfloat16] = (torch.uint16, bfloat16)
        _torch_views.update(views)
        kernel = _numba()
        if kernel is not None:
            import torch.autograd.forward_ad

            road = _ShortRoad(torch.compiler.is_compiling, kernel, torch.from_numpy,
                              torch.autograd.forward_ad)  # fmt: skip
            roads = dict.fromkeys(dtypes, road)
            if bfloat16 is not None:  # its int16 bit patterns, viewed as ml_dtypes' bfloat16
                roads[torch.bfloat16] = road._replace(bits=(torch.int16, bfloat16))
            _short_roads.update(roads)
    return _torch_views


def _bfloat16() -> np.dtype[Any] | None:
    """ml_dtypes' bfloat16, the NumPy dtype of bfloat16 tensors' views, if installed."""
    try:
        import ml_dtypes
    except ModuleNotFoundError:  # pragma: no cover - ml_dtypes comes with the test set-up
        return None
    dtype: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dtype


@functools.cache
def _numba() -> ModuleType | None:
    """The Numba kernel, or None where it is not installed or cannot start its threads."""
    try:
        return load_backend("numba")
    except (ModuleNotFoundError, RuntimeError):
        return None


def _kernel() -> ModuleType:
    """The Numba kernel, once `_numba` found it (every caller checked that first)."""
    kernel = _numba()
    assert kernel is not None
    return kernel


def apply(
    fn: Callable[..., Any],
    x: Any,
    spec: Any,
    positions: Any,
    offset: Any,
    seq_axis: Any,
    inverse: Any,
    seq_len: Any,
    form: Any,
    backend: str,
    out: Any,
    role: Any,
) -> Any | None:
    """`fn` (``apply_rope``) of a tensor or JAX array by the kernel; None: not for here."""
    kind = array_kind(x)
    if kind is None or not (type(form) is str and form == "rotate_half"):
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
    args = (spec, positions, offset, seq_axis, inverse, seq_len, form, role)
    if kind == "torch" and compiling():  # traced for torch.compile: the custom operator
        return _traced(x, out, args)
    if kind == "torch":
        if not _torch_usable(x, "x", backend):
            return None
        if out is not None:
            _check_torch_out(x, out)
        if operators_needed(x, positions):
            if out is not None:
                msg = (
                    "`out` must be None when `x` records gradients or is under a "
                    "torch.func transform; got a tensor."
                )
                raise ValueError(msg)
            return _torch_ops().apply(*args, x=x)
        return torch_direct(fn, x, out, *args)
    if _numba() is None or not jax_arrays.usable(x):
        return None
    if out is not None:
        msg = "`out` must be None for JAX arrays (they are immutable); got an array."
        raise TypeError(msg)
    return jax_arrays.rotate(fn, _kernel(), x, spec, _host(positions), offset, seq_axis,
                             inverse, seq_len, form, role)  # fmt: skip


def apply_qk(
    fn: Callable[..., Any],
    q: Any,
    k: Any,
    spec: Any,
    positions: Any,
    k_positions: Any,
    offset: Any,
    seq_axis: Any,
    inverse: Any,
    seq_len: Any,
    form: Any,
    backend: str,
    one: Callable[..., Any],
) -> tuple[Any, Any] | None:
    """`fn` (``apply_rope_qk``) of two tensors or JAX arrays by the kernel, or None.

    `one` is ``apply_rope``, which JAX queries and keys that reduce to two single calls take.
    """
    kind = array_kind(q)
    if kind is None or array_kind(k) != kind or not (type(form) is str and form == "rotate_half"):
        return None
    args = (spec, positions, k_positions, offset, seq_axis, inverse, seq_len, form)
    if kind == "torch" and compiling():  # traced for torch.compile: the custom operator
        if not all(_traceable(a) for a in (q, k)):
            return None
        return _torch_ops().apply_qk(q, k, *args)  # type: ignore[no-any-return]
    if kind == "torch":
        if not (_torch_usable(q, "q", backend) and _torch_usable(k, "k", backend)):
            return None
        if operators_needed(q, positions) or operators_needed(k, k_positions):
            return _torch_ops().apply_qk(q, k, *args)  # type: ignore[no-any-return]
        return torch_direct_qk(fn, q, k, *args)
    if _numba() is None or not (jax_arrays.usable(q) and jax_arrays.usable(k)):
        return None
    return jax_arrays.rotate_qk(fn, one, _kernel(), q, k, spec, _host(positions),
                                _host(k_positions), offset, seq_axis, inverse, seq_len,
                                form)  # fmt: skip


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
    if x.dtype not in _torch_views:
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


def operators_needed(x: Any, positions: Any) -> bool:
    """Whether the call must go through the custom operators: autograd, ``torch.func``.

    Under a ``torch.func`` transform (``vmap``, ``grad``, ``jacrev``...) `x` or the
    positions are wrappers without storage of their own, which the operators unwrap; inside
    ``torch.autograd.forward_ad.dual_level`` they may carry tangents.
    """
    import torch
    import torch.autograd.forward_ad

    given = isinstance(positions, torch.Tensor)
    if torch.is_grad_enabled() and (x.requires_grad or (given and positions.requires_grad)):
        return True
    if torch.autograd.forward_ad._current_level >= 0:
        return True
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    return bool(wrapped(x) or (given and wrapped(positions)))


def _torch_ops() -> ModuleType:
    """`rope_ref.backends.torch_ops.operators` (imports torch, so loaded on first use)."""
    from rope_ref.backends.torch_ops import operators as numba_torch  # type: ignore[import-not-found,unused-ignore]

    module: ModuleType = numba_torch
    return module


def _traceable(x: Any) -> bool:
    """Whether the custom operators take tensor `x` (checked without the caches)."""
    import torch

    dtypes = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    return bool(x.is_cpu) and x.dtype in dtypes


def _traced(x: Any, out: Any, args: tuple[Any, ...]) -> Any:
    """The custom operator's call as ``torch.compile`` traces it; None: not for it."""
    if out is not None or not _traceable(x):
        return None
    return _torch_ops().apply(*args, x=x)


def _check_torch_out(x: Any, out: Any) -> None:
    if array_kind(out) != "torch":
        msg = f"`out` must be a torch tensor for a tensor `x`; got {type(out).__name__}."
        raise TypeError(msg)
    if out.requires_grad:
        msg = "`out` must not require grad (the kernel writes it outside autograd); got one."
        raise ValueError(msg)
    if out.device.type != "cpu" or out.is_neg() or out.is_conj():
        msg = f"`out` must be a plain CPU tensor like `x`; got one on {out.device}."
        raise ValueError(msg)


def numpy_view(t: Any) -> np.ndarray:
    """A NumPy view of CPU tensor `t` (no copy; bfloat16 as ml_dtypes' bfloat16)."""
    if t.requires_grad:
        t = t.detach()
    view, dtype = (_torch_views or _fill_torch_views())[t.dtype]
    if view is t.dtype:
        return t.numpy()  # type: ignore[no-any-return]
    return t.view(view).numpy().view(dtype)  # type: ignore[no-any-return]


def _as_tensor(result: np.ndarray, like: Any) -> Any:
    import torch

    if result.dtype.kind == "f":
        return torch.from_numpy(result)
    return torch.from_numpy(result.view(np.uint16)).view(like.dtype)


def _host(a: Any) -> Any:
    """A tensor or JAX array of positions as NumPy (a view where it can be); else `a`."""
    kind = array_kind(a)
    if kind == "torch" and a.device.type == "cpu":
        if a.is_neg() or a.is_conj():  # a lazy view: read its values (a copy)
            a = a.resolve_neg().resolve_conj()
        return numpy_view(a) if a.dtype in _torch_views else a.detach().numpy()
    if kind == "jax" and jax_arrays.on_one_cpu(a):
        return np.asarray(a)
    return a


def torch_direct(
    fn: Callable[..., Any],
    x: Any,
    out: Any,
    spec: Any,
    positions: Any,
    offset: Any,
    seq_axis: Any,
    inverse: Any,
    seq_len: Any,
    form: Any,
    role: Any,
) -> Any:
    """`fn` on NumPy views of CPU tensor `x` (and `out`) with backend="numba", as torch."""
    xn = numpy_view(x)
    on = None if out is None else xn if out is x else numpy_view(out)
    result = None
    if positions is None and role is None and form == "rotate_half":
        result = numpy_kernel_call(_kernel(), xn, spec, offset, seq_axis, inverse, seq_len, on)
    if result is None:
        result = fn(xn, spec, _host(positions), offset=offset, seq_axis=seq_axis,
                    inverse=inverse, seq_len=seq_len, form=form, backend="numba", out=on,
                    role=role)  # fmt: skip
    return out if out is not None else _as_tensor(result, x)


def torch_direct_qk(
    fn: Callable[..., Any],
    q: Any,
    k: Any,
    spec: Any,
    positions: Any,
    k_positions: Any,
    offset: Any,
    seq_axis: Any,
    inverse: Any,
    seq_len: Any,
    form: Any,
) -> tuple[Any, Any]:
    """`fn` (``apply_rope_qk``) on NumPy views of CPU tensors `q` and `k`, as torch."""
    q_rot, k_rot = fn(numpy_view(q), numpy_view(k), spec, _host(positions),
                      k_positions=_host(k_positions), offset=offset, seq_axis=seq_axis,
                      inverse=inverse, seq_len=seq_len, form=form, backend="numba")  # fmt: skip
    return _as_tensor(q_rot, q), _as_tensor(k_rot, k)
