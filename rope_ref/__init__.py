"""rope_ref: the reference engine for rotary position embedding (RoPE).

A framework-agnostic oracle written against the Python array API: NumPy, PyTorch, JAX,
CuPy, Dask and array-api-strict arrays in, the same kind out. Angles and cos/sin are built
in float64; the reference backend rotates in float64 and rounds once.

The submodules `scaling`, `analysis`, `attention` and `testing` are imported on first
use (``rr.scaling.YaRN``), so ``import rope_ref`` stays light.
"""

import importlib as _importlib
import types as _types

from rope_ref._core.frequencies import attention_factor, inv_freq, pair_axes
from rope_ref._core.matrix import rotation_matrix
from rope_ref._core.multiaxis import axial_freqs, mrope_positions, patch_positions
from rope_ref._core.sinusoidal import sinusoidal_embedding
from rope_ref._core.spec import RopeSpec, ScalingRule, XPosRule
from rope_ref._core.spec import install_hf_converters as _install_hf_converters
from rope_ref._core.xpos import XPos
from rope_ref._engine.api import apply_rope, apply_rope_qk
from rope_ref._engine.dispatch import available_backends
from rope_ref._engine.layout import convert_layout, feature_order, permute_weights
from rope_ref._engine.mixed import apply_rope_mixed
from rope_ref._engine.rerotate import rerotate
from rope_ref._engine.tables import rope_angles, rope_cos_sin

__version__ = "0.1.0.dev0"

__all__ = [
    "RopeSpec",
    "ScalingRule",
    "XPos",
    "XPosRule",
    "__version__",
    "apply_rope",
    "apply_rope_mixed",
    "apply_rope_qk",
    "attention_factor",
    "available_backends",
    "axial_freqs",
    "convert_layout",
    "feature_order",
    "inv_freq",
    "mrope_positions",
    "pair_axes",
    "patch_positions",
    "permute_weights",
    "rerotate",
    "rope_angles",
    "rope_cos_sin",
    "rotation_matrix",
    "sinusoidal_embedding",
]

#: Submodules imported on first attribute access.
_LAZY_SUBMODULES = ("analysis", "attention", "scaling", "testing")


def _hf_converters() -> _types.ModuleType:
    """`rope_ref._config.hf`, imported on first use of `RopeSpec.from_hf` / ``to_hf``."""
    return _importlib.import_module("rope_ref._config.hf")


_install_hf_converters(_hf_converters)


def __getattr__(name: str) -> _types.ModuleType:
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"rope_ref.{name}")
    msg = f"module 'rope_ref' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    """The public names: `__all__` and the submodules imported on first use."""
    return sorted([*__all__, *_LAZY_SUBMODULES])
