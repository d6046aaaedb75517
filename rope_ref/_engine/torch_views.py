"""PyTorch CPU tensors as NumPy views, and the engine's runner on those views.

The PyTorch CPU adapter (`rope_ref._engine.cpu_arrays`) and the custom operators' CPU
implementation (``rope_ref.backends.torch_ops.operators``) both rotate a tensor by taking the
runner's host road (`short_road`, else `general`) on NumPy views of its memory
(`torch_direct`): the NumPy call, bit for bit, without a copy. ``x.numpy()`` views the tensor
(bfloat16 through its uint16 bit patterns, viewed as ml_dtypes' bfloat16), with whatever
strides it has; the result is wrapped with ``torch.from_numpy``, and ``out=`` (which may be
`x`) is written through its own view.

Also here, for every road that meets tensors: `compiling` (is ``torch.compile`` tracing?)
and `operators_needed` (must the call go through the custom operators?).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from rope_ref._core.aliases import Form, Role
from rope_ref._core.spec import RopeSpec
from rope_ref._engine import jax_arrays
from rope_ref._engine.call import Call
from rope_ref._engine.runner import general, rotate_qk, short_road

__all__ = [
    "TORCH_VIEWS",
    "as_tensor",
    "compiling",
    "fill_views",
    "host_positions",
    "numpy_view",
    "operators_needed",
    "torch_direct",
    "torch_direct_qk",
]

#: torch dtype -> (the dtype to view it as for ``.numpy()``, the NumPy dtype it is).
TORCH_VIEWS: dict[Any, tuple[Any, np.dtype[Any]]] = {}


def compiling() -> bool:
    """Whether ``torch.compile`` is tracing the call (False where torch is not imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.compiler.is_compiling())


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


def fill_views() -> dict[Any, tuple[Any, np.dtype[Any]]]:
    """`TORCH_VIEWS`, filled on first use (whole, by one ``update``: thread-safe to read)."""
    if not TORCH_VIEWS:
        import torch

        views: dict[Any, tuple[Any, np.dtype[Any]]] = {}
        for t, n in zip(
            (torch.float16, torch.float32, torch.float64),
            (np.float16, np.float32, np.float64),
            strict=True,
        ):
            views[t] = (t, np.dtype(n))
        bfloat16 = bfloat16_dtype()
        if bfloat16 is not None:  # viewed through its bit patterns
            views[torch.bfloat16] = (torch.uint16, bfloat16)
        TORCH_VIEWS.update(views)
    return TORCH_VIEWS


def bfloat16_dtype() -> np.dtype[Any] | None:
    """ml_dtypes' bfloat16, the NumPy dtype of bfloat16 tensors' views, if installed."""
    try:
        import ml_dtypes
    except ModuleNotFoundError:  # pragma: no cover - ml_dtypes comes with the test set-up
        return None
    dtype: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dtype


def numpy_view(t: Any) -> np.ndarray:
    """A NumPy view of CPU tensor `t` (no copy; bfloat16 as ml_dtypes' bfloat16)."""
    if t.requires_grad:
        t = t.detach()
    view, dtype = (TORCH_VIEWS or fill_views())[t.dtype]
    if view is t.dtype:
        return t.numpy()  # type: ignore[no-any-return]
    return t.view(view).numpy().view(dtype)  # type: ignore[no-any-return]


def as_tensor(result: np.ndarray, like: Any) -> Any:
    """The kernel's NumPy result as a tensor of like's dtype (no copy)."""
    import torch

    if result.dtype.kind == "f":
        return torch.from_numpy(result)
    return torch.from_numpy(result.view(np.uint16)).view(like.dtype)


def host_positions(a: Any) -> Any:
    """A CPU tensor or JAX CPU array of positions as NumPy (a view where it can be); else `a`."""
    if a is None:
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        if a.device.type != "cpu":
            return a
        if a.is_neg() or a.is_conj():  # a lazy view: read its values (a copy)
            a = a.resolve_neg().resolve_conj()
        return numpy_view(a) if a.dtype in fill_views() else a.detach().numpy()
    if jax_arrays.is_concrete(a) and jax_arrays.on_one_cpu(a):
        return np.asarray(a)
    return a


def torch_direct(
    x: Any,
    out: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    role: Role | None,
) -> Any:
    """The runner on NumPy views of CPU tensor `x` (and `out`) with backend="numba", as torch.

    The arguments stay plain keyword parameters down to the short road:
    a tensor's decoding call is about 5 µs, and a `Call` built for it measured 0.5 to 0.9 µs
    more; the general path builds its `Call` once the short road declined.
    """
    xn = numpy_view(x)
    on = None if out is None else xn if out is x else numpy_view(out)
    p = host_positions(positions)
    result = short_road(xn, spec=spec, positions=p, offset=offset, seq_axis=seq_axis,
                        inverse=inverse, seq_len=seq_len, form=form, backend="numba", out=on,
                        role=role)  # fmt: skip
    if result is None:
        result = general(xn, spec=spec, positions=p, offset=offset, seq_axis=seq_axis,
                         inverse=inverse, seq_len=seq_len, form=form, backend="numba", out=on,
                         role=role)  # fmt: skip
    return out if out is not None else as_tensor(result, x)


def torch_direct_qk(q: Any, k: Any, call: Call) -> tuple[Any, Any]:
    """The runner's queries and keys on NumPy views of CPU tensors `q` and `k`, as torch.

    `call` is for the host, as for `torch_direct` (key positions too).
    """
    q_rot, k_rot = rotate_qk(numpy_view(q), numpy_view(k), call)
    return as_tensor(q_rot, q), as_tensor(k_rot, k)
