"""Backend registry: kernels are loaded lazily, by module name, only when asked for."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType

from rope_ref._core.aliases import BackendName

__all__ = [
    "BACKENDS",
    "KERNEL_DTYPES",
    "QK_KERNELS",
    "available_backends",
    "load_backend",
    "unusable_reason",
]

# name -> (module that provides rotate(), the optional dependency it needs)
_REGISTRY: dict[str, tuple[str, str | None]] = {
    "reference": ("rope_ref._core.reference", None),
    "numba": ("rope_ref.backends.numba.cpu", "numba"),
    "cupy": ("rope_ref.backends.cuda.cupy_kernel", "cupy"),
    "exact": ("rope_ref.backends.exact.api", "mpmath"),
}
BACKENDS: tuple[BackendName, ...] = ("reference", "numba", "cupy", "auto", "exact")
#: The dtypes each kernel rotates, by name: the one table that the general path's check,
#: "auto", the tensor and JAX adapters and the torch custom operators read ("auto" gives
#: the reference anything else).
KERNEL_DTYPES: dict[str, tuple[str, ...]] = {
    "numba": ("float16", "bfloat16", "float32", "float64"),
    "cupy": ("float16", "bfloat16", "float32", "float64"),
}
#: The kernels whose module has ``rotate_qk``: queries and keys in one launch.
QK_KERNELS: frozenset[str] = frozenset({"cupy"})
# How to install a backend's dependency (CuPy from PyPI is a source build: take a wheel).
INSTALL_HINTS = {
    "numba": "pip install 'rope-ref[numba]'",
    "cupy": 'pip install "cupy-cuda12x>=14" ml_dtypes (the CuPy wheel for your CUDA)',
    "exact": "pip install 'rope-ref[exact]'",
}

# numba's threading layers, by the names NUMBA_THREADING_LAYER takes
_NUMBA_LAYERS = ("default", "safe", "threadsafe", "forksafe", "tbb", "omp", "workqueue")
# backends whose threads could not start in this process: name -> why
_START_FAILURES: dict[str, str] = {}


def _numba_environment_reason() -> str | None:
    """Why numba's settings in the environment stop it from running, read without numba."""
    threads = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if threads:
        try:
            count = int(threads)
        except ValueError:
            count = 0
        if count < 1:
            return f"NUMBA_NUM_THREADS must be a positive integer; got {threads!r}"
    layer = os.environ.get("NUMBA_THREADING_LAYER", "").strip().lower()
    if layer and layer not in _NUMBA_LAYERS:
        return f"NUMBA_THREADING_LAYER must be one of {', '.join(_NUMBA_LAYERS)}; got {layer!r}"
    return None


def _start_numba_threads() -> None:
    """Start numba's threading layer now, so that a layer that cannot load is said here."""
    import numba

    try:
        numba.get_num_threads()
    except (ValueError, RuntimeError, ImportError, OSError) as err:
        layer = os.environ.get("NUMBA_THREADING_LAYER", "default")
        lines = str(err).strip().splitlines() or [type(err).__name__]
        _START_FAILURES["numba"] = (
            f"numba's threading layer cannot start (NUMBA_THREADING_LAYER={layer!r}: {lines[0]})"
        )


def _missing_reason(name: str) -> str | None:
    """Why backend `name` is not installed here, or None."""
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


def _settings_reason(name: str) -> str | None:
    """Why backend `name`, installed, cannot run with this process's settings, or None."""
    if name == "numba" and (reason := _numba_environment_reason()) is not None:
        return reason
    return _START_FAILURES.get(name)


def available_backends() -> dict[str, str | None]:
    """Every backend with ``None`` if it can run here, else the reason it cannot.

    Nothing is imported or compiled: dependencies are looked up with `importlib`, and
    numba's settings (``NUMBA_NUM_THREADS``, ``NUMBA_THREADING_LAYER``) are read from the
    environment. A threading layer that is named correctly but cannot load (TBB or OpenMP
    not installed) is found when numba is first loaded (`unusable_reason`), and reported
    from then on.

    Returns
    -------
    dict of str to (str or None)

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.available_backends()["reference"] is None
    True
    """
    return {name: _missing_reason(name) or _settings_reason(name) for name in _REGISTRY}


def unusable_reason(name: str) -> str | None:
    """Why backend `name` cannot run here (None if it can), loading it to find out.

    Unlike `available_backends`, this imports the backend, and for numba starts its
    threading layer: what ``backend="auto"`` asks before it picks a kernel.
    """
    reason = _missing_reason(name) or _settings_reason(name)
    if reason is not None:
        return reason
    try:
        load_backend(name)
    except (ImportError, RuntimeError) as err:
        return str(err)
    return None


@functools.cache
def load_backend(name: str) -> ModuleType:
    """Import the module of backend `name` (not "auto"), or raise naming what is missing.

    ModuleNotFoundError when a dependency is not installed; RuntimeError when it is
    installed but cannot run here (numba with threads that cannot start).
    """
    if name not in _REGISTRY:
        msg = f"`backend` must be one of {', '.join(map(repr, BACKENDS))}; got {name!r}."
        raise ValueError(msg)
    module_name, dependency = _REGISTRY[name]
    reason = _missing_reason(name)
    if reason is not None:
        msg = f"backend={name!r} is not available: {reason}."
        raise ModuleNotFoundError(msg, name=dependency or module_name)
    if name == "numba" and _settings_reason(name) is None:
        _start_numba_threads()
    reason = _settings_reason(name)
    if reason is not None:
        msg = f"backend={name!r} cannot run here: {reason}."
        raise RuntimeError(msg)
    return importlib.import_module(module_name)
