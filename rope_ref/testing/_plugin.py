"""The pytest plugin that installing rope-ref registers (entry point ``pytest11``).

It gives every project two fixtures:

- ``rope_oracle``: a `rope_ref.testing.RopeOracle` (apply, cos_sin, assert_close, ...);
- ``xp``: each installed array namespace in turn (numpy, array_api_strict, torch,
  jax.numpy, dask.array, cupy), wrapped by array-api-compat. ``ROPE_REF_XP=numpy,torch``
  narrows the set. A project's own ``xp`` fixture (in a conftest) overrides this one.

Loading the plugin imports only pytest and the standard library: no rope_ref, NumPy,
Hypothesis, torch or JAX until a fixture is used.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

__all__ = ["namespace_names", "rope_oracle", "xp"]

#: Namespaces the ``xp`` fixture tries, in order.
NAMESPACES = ("numpy", "array_api_strict", "torch", "jax.numpy", "dask.array", "cupy")


def namespace_names(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Namespaces for ``xp``: ``ROPE_REF_XP`` (comma-separated) or the installed ones.

    Only the top-level package is looked up (``importlib.util.find_spec``), which imports
    nothing.
    """
    env = os.environ if environ is None else environ
    selected = env.get("ROPE_REF_XP", "").strip()
    if selected:
        return tuple(name.strip() for name in selected.split(",") if name.strip())
    return tuple(n for n in NAMESPACES if importlib.util.find_spec(n.split(".")[0]) is not None)


def _load_namespace(name: str) -> ModuleType:
    module = pytest.importorskip(name)
    if name == "cupy":
        try:
            module.cuda.runtime.getDeviceCount()
        except Exception as err:  # no driver or no device
            pytest.skip(f"cupy is installed but no CUDA device is usable: {err}")
    import array_api_compat

    return array_api_compat.array_namespace(module.asarray([0.0]))


@contextlib.contextmanager
def _jax_float64() -> Iterator[None]:
    """JAX with float64 arrays (the oracle's tables need them), as it was again after."""
    import jax

    before = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]
    jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)  # type: ignore[no-untyped-call]


@pytest.fixture(params=namespace_names())
def xp(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """Each installed array namespace (array-api-compat wrapped); ``ROPE_REF_XP`` narrows.

    For JAX, float64 is switched on (``jax_enable_x64``) for the test and switched back
    to what it was after it: no later test sees the setting change.
    """
    name = str(request.param)
    if name != "jax.numpy":
        yield _load_namespace(name)
        return
    namespace = _load_namespace(name)
    with _jax_float64():
        yield namespace


@pytest.fixture
def rope_oracle() -> Any:
    """rope_ref's oracle: a `rope_ref.testing.RopeOracle`."""
    from rope_ref.testing import RopeOracle

    return RopeOracle()
