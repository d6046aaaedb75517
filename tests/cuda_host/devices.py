"""Test inputs as CuPy, PyTorch or JAX device arrays, and back (for ``pytest -m gpu``)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

FRAMEWORKS = ("cupy", "torch", "jax")


def framework(name: str) -> Any:
    """The framework's module, or skip when it (or a CUDA device for it) is missing."""
    module = pytest.importorskip("jax" if name == "jax" else name)
    if name == "cupy":
        try:
            usable = module.cuda.runtime.getDeviceCount() > 0
        except Exception:  # no driver
            usable = False
    elif name == "torch":
        usable = module.cuda.is_available()
    else:
        try:
            usable = bool(module.devices("gpu"))
        except RuntimeError:  # a JAX without CUDA
            usable = False
    if not usable:
        pytest.skip(f"{name} has no CUDA device here")
    return module


def to_device(a: np.ndarray, name: str) -> Any:
    """`a` on the first CUDA device as an array of framework `name` (bfloat16 included)."""
    a = np.ascontiguousarray(a)
    module = framework(name)
    bf16 = a.dtype.name == "bfloat16"
    if name == "cupy":
        if bf16:
            return module.asarray(a.view(np.uint16)).view(a.dtype)
        return module.asarray(a)
    if name == "torch":
        if bf16:
            return module.from_numpy(a.view(np.int16)).view(module.bfloat16).cuda()
        return module.from_numpy(a).cuda()
    return module.device_put(a, module.devices("gpu")[0])


def to_host(a: Any) -> np.ndarray:
    """A device array of any of the frameworks as a NumPy array (bfloat16 via ml_dtypes)."""
    kind = type(a).__module__.split(".")[0]
    if kind == "cupy":
        if a.dtype.name == "bfloat16":
            return a.view(np.uint16).get().view(a.dtype)
        return a.get()
    if kind == "torch":
        a = a.detach().cpu()
        if str(a.dtype) == "torch.bfloat16":
            import ml_dtypes

            return a.view(importlib.import_module("torch").int16).numpy().view(ml_dtypes.bfloat16)
        return a.numpy()
    return np.asarray(a)


def same_kind_and_device(result: Any, like: Any) -> bool:
    """Whether `result` is an array of `like`'s framework on `like`'s device."""
    if type(result) is not type(like):
        return False
    kind = type(like).__module__.split(".")[0]
    if kind == "cupy":
        return bool(result.device.id == like.device.id)
    if kind == "torch":
        return bool(result.device == like.device)
    return bool(result.devices() == like.devices())
