"""The only importer of array_api_compat: namespace, device and dtype helpers."""

from __future__ import annotations

import contextlib

import array_api_compat
import numpy as np

from rope_ref._typing import Array, ArrayNamespace

__all__ = [
    "all_finite",
    "array_namespace",
    "compute_dtype",
    "device",
    "has_float64",
    "host_namespace",
    "is_array",
    "to_numpy",
]

device = array_api_compat.device


def is_array(obj: object) -> bool:
    """Whether `obj` is an array of a namespace array-api-compat knows."""
    return bool(array_api_compat.is_array_api_obj(obj))


def array_namespace(*arrays: Array, name: str = "x") -> ArrayNamespace:
    """Return the array-API namespace of `arrays`, or raise TypeError naming `name`."""
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError:
        kinds = ", ".join(sorted({type(a).__name__ for a in arrays}))
        msg = f"`{name}` must be arrays of one array-API namespace; got {kinds}."
        raise TypeError(msg) from None


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
