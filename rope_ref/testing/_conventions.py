"""Calling conventions of `rope-ref check`: build a callable's inputs, call it, read results.

=========  ===================================  ======================================
name       call                                 arrays
=========  ===================================  ======================================
plain      ``fn(x, positions)``                 NumPy x ``(batch, heads, seq, d)``,
                                                int64 positions ``(seq,)``
hf         ``fn(q, k, cos, sin)`` -> (q, k)     torch ``(batch, heads, seq, d)``, cos/sin
                                                ``(batch, seq, rotary_dim)`` as
                                                transformers builds them
cos_sin    ``fn(x, cos, sin)``                  torch x ``(batch, seq, heads, d)``,
                                                cos/sin ``(seq, rotary_dim / 2)``
                                                (flash-attn)
complex    ``fn(x, freqs_cis)`` or              torch x ``(batch, seq, heads, d)``,
           ``fn(xq, xk, freqs_cis)``            complex ``(seq, rotary_dim / 2)``
                                                (Meta LLaMA)
=========  ===================================  ======================================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref._frequencies import rope_cos_sin
from rope_ref._spec import RopeSpec
from rope_ref.testing._compare import Setup, setup

__all__ = [
    "CONVENTIONS",
    "TORCH_CONVENTIONS",
    "Case",
    "OutputError",
    "TargetError",
    "run_case",
]

CONVENTIONS = ("plain", "hf", "cos_sin", "complex")
TORCH_CONVENTIONS = ("hf", "cos_sin", "complex")
#: Conventions whose positions differ per batch row.
PER_ROW = ("hf",)


@dataclass(frozen=True)
class Case:
    """Sizes, positions (``(batch, seq)`` or ``(seq,)``) and the seed of the values of x."""

    batch: int
    heads: int
    seq: int
    positions: np.ndarray
    seed: int

    def describe(self) -> str:
        """One line: the sizes, the positions and the seed."""
        return (
            f"batch {self.batch}, heads {self.heads}, seq {self.seq}, "
            f"positions {self.positions.tolist()}, x drawn with seed {self.seed}"
        )


class TargetError(Exception):
    """The checked callable raised; `error` is its exception."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class OutputError(Exception):
    """The checked callable returned something that is not the expected array(s)."""


@dataclass(frozen=True)
class Output:
    """One compared result: which argument it rotates, its oracle setup, the result."""

    label: str
    setup: Setup
    actual: Any


def _values(case: Case, shape: tuple[int, ...], salt: int) -> np.ndarray:
    rng = np.random.default_rng([case.seed, salt])
    return rng.uniform(-1.0, 1.0, shape)


def _torch_array(values: np.ndarray, dtype: str, device: str) -> Any:
    import torch

    return torch.from_numpy(values).to(device=device, dtype=getattr(torch, dtype))


def _numpy_array(values: np.ndarray, dtype: str) -> np.ndarray:
    return values.astype(dtype)


def _tables(spec: RopeSpec, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cos, sin = rope_cos_sin(spec, positions)
    return np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64)


def _full_width(table: np.ndarray, layout: str) -> np.ndarray:
    """HF's full-width table: ``cat(c, c)`` for "half", ``repeat(c, 2)`` for "interleaved"."""
    if layout == "half":
        return np.concatenate([table, table], axis=-1)
    return np.repeat(table, 2, axis=-1)


def _n_positional(fn: Callable[..., Any]) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as err:  # any bug in the checked code is reported, not raised
        raise TargetError(err) from err


def _array_like(value: Any, label: str) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return value
    msg = f"the result for {label} must be an array; got {type(value).__name__}."
    raise OutputError(msg)


def _pair(result: Any, labels: tuple[str, str]) -> tuple[Any, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        names = ", ".join(labels)
        msg = f"the callable must return two arrays ({names}); got {type(result).__name__}."
        raise OutputError(msg)
    return _array_like(result[0], labels[0]), _array_like(result[1], labels[1])


def run_case(
    fn: Callable[..., Any],
    convention: str,
    case: Case,
    spec: RopeSpec,
    *,
    dtype: str,
    device: str = "cpu",
) -> list[Output]:
    """Call `fn` on `case` through `convention`; return each result with its oracle setup.

    Raises `TargetError` when `fn` raises and `OutputError` for a malformed result.
    """
    b, h, s, d = case.batch, case.heads, case.seq, spec.head_dim
    if convention == "plain":
        x = _numpy_array(_values(case, (b, h, s, d), 0), dtype)
        p = case.positions
        y = _array_like(_call(fn, x.copy(), p.copy()), "x")
        return [Output("x", setup(x, spec, p, seq_axis=-2), y)]
    if convention == "hf":
        hk = (h + 1) // 2
        q = _torch_array(_values(case, (b, h, s, d), 0), dtype, device)
        k = _torch_array(_values(case, (b, hk, s, d), 1), dtype, device)
        cos, sin = _tables(spec, case.positions)
        cos_t = _torch_array(_full_width(cos, spec.layout), dtype, device)
        sin_t = _torch_array(_full_width(sin, spec.layout), dtype, device)
        q_out, k_out = _pair(_call(fn, q, k, cos_t, sin_t), ("q", "k"))
        grid = case.positions[:, None, :]
        return [
            Output("q", setup(q, spec, grid, seq_axis=-2), q_out),
            Output("k", setup(k, spec, grid, seq_axis=-2), k_out),
        ]
    x = _torch_array(_values(case, (b, s, h, d), 0), dtype, device)
    cos, sin = _tables(spec, case.positions)
    if convention == "cos_sin":
        cos_t, sin_t = (_torch_array(t, dtype, device) for t in (cos, sin))
        y = _array_like(_call(fn, x, cos_t, sin_t), "x")
        return [Output("x", setup(x, spec, case.positions, seq_axis=-3), y)]
    import torch

    complex_dtype = torch.complex128 if dtype == "float64" else torch.complex64
    freqs_cis = torch.from_numpy(cos + 1j * sin).to(device=device, dtype=complex_dtype)
    if _n_positional(fn) == 3:
        k = _torch_array(_values(case, (b, s, (h + 1) // 2, d), 1), dtype, device)
        q_out, k_out = _pair(_call(fn, x, k, freqs_cis), ("xq", "xk"))
        return [
            Output("xq", setup(x, spec, case.positions, seq_axis=-3), q_out),
            Output("xk", setup(k, spec, case.positions, seq_axis=-3), k_out),
        ]
    y = _array_like(_call(fn, x, freqs_cis), "x")
    return [Output("x", setup(x, spec, case.positions, seq_axis=-3), y)]
