"""Fixtures: `xp` over every installed array namespace, Hypothesis profiles."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import hypothesis
import pytest

# "ci" (the default when CI is set, as .ci/run does) extends Hypothesis' built-in profile:
# derandomized, so a CI verdict is reproducible; local runs draw fresh examples each time.
hypothesis.settings.register_profile(
    "ci", hypothesis.settings.get_profile("ci"), max_examples=60, deadline=None
)
hypothesis.settings.register_profile("dev", max_examples=30, deadline=None)
hypothesis.settings.register_profile("thorough", max_examples=5_000, deadline=None)
hypothesis.settings.register_profile("default", max_examples=60, deadline=None)
hypothesis.settings.load_profile(
    os.environ.get("ROPE_REF_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)

XP_NAMES = ("numpy", "array_api_strict", "torch", "jax.numpy", "dask.array", "cupy")
_selected = os.environ.get("ROPE_REF_XP")
SELECTED = tuple(_selected.split(",")) if _selected else XP_NAMES


def _import_namespace(name: str) -> ModuleType:
    module = pytest.importorskip(name)
    if name == "jax.numpy":
        import jax

        jax.config.update("jax_enable_x64", True)
    if name == "cupy":
        try:
            module.cuda.runtime.getDeviceCount()
        except Exception as err:  # no driver or no device
            pytest.skip(f"cupy is installed but no CUDA device is usable: {err}")
    from array_api_compat import array_namespace

    return array_namespace(module.asarray([0.0]))


@pytest.fixture(params=SELECTED)
def xp(request: pytest.FixtureRequest) -> ModuleType:
    """Every installed array namespace, wrapped by array-api-compat where needed."""
    name = request.param
    for marker in request.node.iter_markers("skip_xp_backend"):
        if marker.args[0] == name:
            reason = marker.kwargs.get("reason")
            if not reason:
                msg = "skip_xp_backend needs reason=..."
                raise ValueError(msg)
            pytest.skip(reason)
    return _import_namespace(name)


@pytest.fixture(scope="session")
def np_rng():
    numpy = importlib.import_module("numpy")
    return numpy.random.default_rng(20261121)


@pytest.fixture(scope="session")
def harness():
    """The CUDA kernel compiled for the host by nvcc (tests/cuda_host); skips without nvcc."""
    from tests.cuda_host import emulation

    if emulation.nvcc() is None:
        pytest.skip("nvcc is not on PATH: no host emulation of the CUDA kernel")
    return emulation.shared_harness()
