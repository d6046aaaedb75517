"""The only importer of array_api_compat: namespace, device and dtype helpers."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import array_api_compat
import numpy as np

from rope_ref._core.aliases import Array, ArrayNamespace

__all__ = [
    "all_finite",
    "array_namespace",
    "compute_dtype",
    "device",
    "dtype_name",
    "finite_or_raise",
    "has_float64",
    "host_namespace",
    "is_array",
    "is_cuda_array",
    "is_real_floating",
    "records_grad",
    "to_numpy",
]


def device(x: object) -> Any:
    """The device of `x`, where arrays built for it (tables, positions) are put.

    For a JAX array sharded over several devices that is the same devices with every
    array whole on each (replicated): the tables have other shapes than `x`, which `x`'s
    own partition would not divide.
    """
    dev = array_api_compat.device(x)
    if getattr(dev, "is_fully_replicated", True):  # not JAX's, one device, or whole on each
        return dev
    from jax.sharding import Mesh, NamedSharding, PartitionSpec  # x is a JAX array

    mesh = Mesh(np.array(sorted(dev.device_set, key=lambda d: d.id)), ("devices",))
    return NamedSharding(mesh, PartitionSpec())  # type: ignore[no-untyped-call]


def is_array(obj: object) -> bool:
    """Whether `obj` is an array of a namespace array-api-compat knows."""
    return bool(array_api_compat.is_array_api_obj(obj))


def is_cuda_array(obj: object) -> bool:
    """Whether `obj` is an array in CUDA device memory.

    CuPy arrays, PyTorch CUDA tensors and JAX arrays on one GPU are; a JAX tracer, or an
    array sharded over several devices, is not.
    """
    if array_api_compat.is_cupy_array(obj):
        return True
    if array_api_compat.is_torch_array(obj):
        return bool(obj.is_cuda)
    if array_api_compat.is_jax_array(obj):
        try:
            devices = obj.devices()
        except Exception:  # a tracer: no devices to ask
            return False
        return len(devices) == 1 and next(iter(devices)).platform == "gpu"
    return False


def records_grad(x: object) -> bool:
    """Whether autograd would record an operation on `x`.

    True for a PyTorch tensor that requires grad, outside ``torch.no_grad()``.
    """
    if not getattr(x, "requires_grad", False):
        return False
    torch = sys.modules.get("torch")
    return torch is None or bool(torch.is_grad_enabled())


def array_namespace(*arrays: Array, name: str = "x") -> ArrayNamespace:
    """Return the array-API namespace of `arrays`, or raise TypeError naming `name`."""
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError:
        kinds = ", ".join(sorted({type(a).__name__ for a in arrays}))
        msg = f"`{name}` must be arrays of one array-API namespace; got {kinds}."
        raise TypeError(msg) from None


def dtype_name(dtype: object) -> str:
    """The name of a dtype of any namespace: ``"bfloat16"`` for ml_dtypes, JAX and torch."""
    if isinstance(dtype, np.dtype):
        return dtype.name
    inner = getattr(dtype, "dtype", None)  # JAX's scalar types, e.g. jnp.bfloat16
    if isinstance(inner, np.dtype):
        return inner.name
    if isinstance(dtype, type) and issubclass(dtype, np.generic):  # ml_dtypes.bfloat16
        return np.dtype(dtype).name
    return str(dtype).rsplit(".", 1)[-1]  # torch.bfloat16, array_api_strict.float32


def is_real_floating(xp: ArrayNamespace, dtype: object) -> bool:
    """Whether `dtype` is real floating in `xp`, counting ml_dtypes' bfloat16 as one.

    NumPy and CuPy hold bfloat16 as an ml_dtypes extension type that their ``isdtype``
    does not know; PyTorch and JAX count their bfloat16 as real floating already.
    """
    try:
        if xp.isdtype(dtype, "real floating"):
            return True
    except TypeError:  # a dtype the namespace does not know
        pass
    # A name is not a dtype: "bfloat16" would reach a namespace's cast that has none.
    return not isinstance(dtype, str) and dtype_name(dtype) == "bfloat16"


_FLOAT64_SUPPORT: dict[tuple[int, object], bool] = {}


def has_float64(xp: ArrayNamespace, dev: object) -> bool:
    """Whether namespace `xp` supports float64 on device `dev` (cached per namespace/device)."""
    try:
        return _FLOAT64_SUPPORT[id(xp), dev]
    except (KeyError, TypeError):  # not seen yet, or an unhashable device
        pass
    try:
        info = xp.__array_namespace_info__()
    except (AttributeError, RuntimeError):  # no inspection API (older standard versions)
        return True
    try:
        kinds = info.dtypes(device=dev, kind="real floating")
    except TypeError:  # an info object whose dtypes() does not take device=
        kinds = info.dtypes(kind="real floating")
    supported = "float64" in kinds
    if not array_api_compat.is_jax_namespace(xp):  # JAX can switch x64 on and off at run time
        with contextlib.suppress(TypeError):  # an unhashable device is simply not cached
            _FLOAT64_SUPPORT[id(xp), dev] = supported
    return supported


def host_namespace() -> ArrayNamespace:
    """The NumPy namespace, where float64 tables are built when a device lacks float64."""
    return array_api_compat.array_namespace(np.empty(0))


def all_finite(a: Array, xp: ArrayNamespace) -> bool | None:
    """Whether every value of `a` is finite; None when values cannot be read now.

    Dask arrays stay lazy (None); JAX tracers and PyTorch meta tensors have no values.
    """
    if array_api_compat.is_dask_array(a):
        return None
    try:
        return bool(xp.all(xp.isfinite(a)))
    except Exception:  # a traced or meta array: nothing to read
        return None


def finite_or_raise(a: Array, xp: ArrayNamespace, message: str) -> Array:
    """`a`, or ValueError(`message`) if it holds NaN or infinity.

    A Dask array stays lazy: the check is added to its graph and raises when the result
    is computed. Arrays without values (JAX tracers, PyTorch meta tensors) pass.
    """
    if array_api_compat.is_dask_array(a):
        lazy: Any = a
        return lazy.map_blocks(_finite_block, message=message, dtype=lazy.dtype)
    if all_finite(a, xp) is False:
        raise ValueError(message)
    return a


def _finite_block(block: np.ndarray, message: str) -> np.ndarray:
    if not np.all(np.isfinite(block)):
        raise ValueError(message)
    return block


def compute_dtype(xp: ArrayNamespace, dev: object) -> object:
    """The widest real floating dtype of `xp` on `dev`: float64 where available."""
    return xp.float64 if has_float64(xp, dev) else xp.float32


def to_numpy(a: Array) -> np.ndarray:
    """Copy any array-API array to a NumPy array on the host (computes lazy arrays)."""
    if array_api_compat.is_numpy_array(a):
        return np.asarray(a)
    if array_api_compat.is_torch_array(a):
        return np.asarray(a.detach().cpu())
    if array_api_compat.is_cupy_array(a):
        return np.asarray(a.get())
    return np.asarray(a)  # NumPy, JAX, array-api-strict; Dask computes through __array__
