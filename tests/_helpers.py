"""Small helpers shared by the tests (not fixtures)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from rope_ref._core.compat import to_numpy


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
