"""Backend registry: kernels are loaded lazily, by module name, only when asked for."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from types import ModuleType

from rope_ref._core.aliases import BackendName

__all__ = ["BACKENDS", "available_backends", "load_backend"]

# name -> (module that provides rotate(), the optional dependency it needs)
_REGISTRY: dict[str, tuple[str, str | None]] = {
    "reference": ("rope_ref._core.reference", None),
    "numba": ("rope_ref.backends.numba_cpu", "numba"),
    "cupy": ("rope_ref.backends.cupy_cuda", "cupy"),
    "exact": ("rope_ref.backends.exact", "mpmath"),
}
BACKENDS: tuple[BackendName, ...] = ("reference", "numba", "cupy", "auto", "exact")
# How to install a backend's dependency (CuPy from PyPI is a source build: take a wheel).
INSTALL_HINTS = {
    "numba": "pip install 'rope-ref[numba]'",
    "cupy": "pip install cupy-cuda12x (the CuPy wheel for your CUDA)",
    "exact": "pip install 'rope-ref[exact]'",
}


def _missing_reason(name: str) -> str | None:
    module_name, dependency = _REGISTRY[name]
    if dependency is not None and importlib.util.find_spec(dependency) is None:
        return f"needs {dependency!r}: {INSTALL_HINTS[name]}"
    try:
        found = importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return f"the kernel module {module_name} is not part of this installation"
    return None


def available_backends() -> dict[str, str | None]:
    """Every backend with ``None`` if it can run here, else the reason it cannot.

    Nothing is imported or compiled: dependencies are looked up with `importlib`.

    Returns
    -------
    dict of str to (str or None)

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.available_backends()["reference"] is None
    True
    """
    return {name: _missing_reason(name) for name in _REGISTRY}


@functools.cache
def load_backend(name: str) -> ModuleType:
    """Import the module of backend `name` (not "auto"), or raise naming what is missing."""
    if name not in _REGISTRY:
        msg = f"`backend` must be one of {', '.join(map(repr, BACKENDS))}; got {name!r}."
        raise ValueError(msg)
    reason = _missing_reason(name)
    module_name, dependency = _REGISTRY[name]
    if reason is not None:
        msg = f"backend={name!r} is not available: {reason}."
        raise ModuleNotFoundError(msg, name=dependency or module_name)
    return importlib.import_module(module_name)
