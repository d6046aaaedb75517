"""Small helpers shared by the tests (not fixtures)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

import rope_ref as rr
from rope_ref._core.compat import to_numpy
from tests._independent import rotate_pairs


def host(a) -> np.ndarray:
    """Any array (torch, jax, dask, cupy, array-api-strict) as a NumPy array."""
    return to_numpy(a)


def max_abs(a, b) -> float:
    a, b = host(a), host(b)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


#: (fraction bits, smallest normal exponent, largest exponent)
FORMATS = {"float16": (10, -14, 15), "bfloat16": (7, -126, 127)}


def exact_round(value: float, name: str) -> float:
    """`value` rounded to nearest even in format `name`, by rational arithmetic."""
    if value == 0 or not math.isfinite(value):
        return value
    bits, min_exponent, max_exponent = FORMATS[name]
    a = abs(Fraction(value))
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    spacing = Fraction(2) ** (max(e, min_exponent) - bits)
    rounded = round(a / spacing) * spacing  # Fraction rounds half to even
    largest = (2 - Fraction(2) ** -bits) * Fraction(2) ** max_exponent
    result = math.inf if rounded > largest else float(rounded)
    return math.copysign(result, value)


#: The repository root: `rope-ref check` imports `tests.check_targets` from there.
REPO = Path(__file__).resolve().parent.parent


def run_check(capsys, *argv: str) -> tuple[int, str]:
    """`rope-ref check ARGV` on a few plain-convention examples: exit status and stdout."""
    from rope_ref.cli import main

    status = main(["check", *argv, "--convention", "plain", "--examples", "10"])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out


def run_on_two_cpu_devices(code: str) -> subprocess.CompletedProcess[str]:
    """Run Python `code` in a child process whose JAX sees two CPU devices.

    XLA_FLAGS must be set before JAX starts, hence the child.
    """
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        env={**os.environ, "XLA_FLAGS": flags},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def uniform(shape: int | tuple[int, ...], seed: int) -> np.ndarray:
    """Values drawn uniformly from [-1, 1) by a NumPy generator seeded with `seed`."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def inv_freq64(d: int, base: float = 10000.0) -> np.ndarray:
    """RoPE's inverse frequencies ``base ** (-2j / d)`` in float64, by their formula."""
    return np.asarray(base ** (-np.arange(0, d, 2, dtype=np.float64) / d), dtype=np.float64)


def rope_rotate_half(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """RoPE by its formula in float64: pair j of features (j, j + d/2) turned by p base^(-2j/d)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1] // 2
    angle = np.asarray(positions, dtype=np.float64)[:, None] * base ** (
        -2.0 * np.arange(n) / (2 * n)
    )
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                           b * np.cos(angle) + a * np.sin(angle)], axis=-1)  # fmt: skip


def warning_of_from_hf(config: dict[str, Any], **kwargs: Any) -> warnings.WarningMessage:
    """The one warning `RopeSpec.from_hf(config, **kwargs)` gives (asserted to be exactly one)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rr.RopeSpec.from_hf(config, **kwargs)
    assert len(caught) == 1
    return caught[0]


# Positions from 0 to 4000, dense at the start (diagnoses read shifts and bases off them).
SPARSE_POSITIONS = np.array([0, 1, 2, 3, 5, 8, 13, 100, 1000, 4000])

# Six three-axis M-RoPE positions (temporal, height, width), no two rows alike.
GRID_3_AXES = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [12, 8, 11], [3, 3, 6]])


def chunked_mrope(
    x: np.ndarray, grid: np.ndarray, sections: tuple[int, ...], base: float = 10000.0
) -> np.ndarray:
    """Chunked M-RoPE written out: pair j turns with the axis whose section holds it."""
    d = x.shape[-1]
    axis = np.repeat(np.arange(len(sections)), sections)
    return rotate_pairs(x, grid[:, axis] * inv_freq64(d, base))
