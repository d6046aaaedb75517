"""Errors in ulps of rope_ref's own paths against the correctly rounded RoPE.

Prints, for the reference path, the Numba kernel and the CUDA kernel (its thread body run on
the CPU by the host emulation of tests/cuda_host, built with nvcc) in float32, bfloat16 and
float16, the
worst and median distance from ``backend="exact"`` in ulps of the correctly rounded value,
at positions up to 8k, 128k and 1M (a geometric sweep from 0; LLaMA-3's spec, head_dim 128).
Re-run from the repository root: ``python docs/figures/precision_ulps.py`` (about a minute;
needs mpmath, numba, torch, ml_dtypes, and nvcc on PATH for the CUDA rows).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import torch

import rope_ref as rr
from rope_ref.testing import rope_report
from rope_ref.testing._ulps import ulp_errors

SPEC = rr.RopeSpec(head_dim=128, base=500000.0)
MAX_POSITIONS = (8192, 131072, 1048576)
DTYPES = ("float32", "bfloat16", "float16")


def errors(backend: str, dtype: str, max_position: int) -> np.ndarray:
    """Ulp errors of `backend` on (1, 64, 4, 128) random x at 64 positions up to `max_position`."""
    positions = np.unique(np.geomspace(1, max_position, 63).round().astype(np.int64))
    positions = np.concatenate([[0], positions])
    values = np.random.default_rng(0).uniform(-1, 1, (1, len(positions), 4, 128))
    if backend == "cuda-host":
        x, result = _cuda_host(values, dtype, positions)
    else:
        x = torch.from_numpy(values).to(getattr(torch, dtype))
        result = rr.apply_rope(x, SPEC, positions, seq_axis=-3, backend=backend)
    report = rope_report(result, x, SPEC, positions, seq_axis=-3)
    assert report.comparison is not None
    return ulp_errors(report.comparison)


def _cuda_host(values: np.ndarray, dtype: str, positions: np.ndarray) -> tuple[object, object]:
    """x in `dtype` and the CUDA kernel's result on it, through the host emulation."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's tests/
    from tests.cuda_host import emulation
    from tests.cuda_host.cases import DTYPES, tables

    x = values.astype(DTYPES[dtype])
    cos, sin = tables(SPEC, positions.reshape(1, -1, 1), x.dtype)
    (out,) = emulation.shared_harness().rotate([(x, cos, sin, None)], layout=SPEC.layout)
    return x, out


def main() -> None:
    """Print one row per (backend, dtype, largest position)."""
    print(f"{'path':10} {'dtype':9} {'positions to':>12} {'worst':>10} {'median':>7}")
    paths = ("reference", "numba", "cuda-host") if shutil.which("nvcc") else ("reference", "numba")
    for backend in paths:
        for dtype in DTYPES:
            for max_position in MAX_POSITIONS:
                e = errors(backend, dtype, max_position)
                print(
                    f"{backend:10} {dtype:9} {max_position:>12} "
                    f"{float(e.max()):>10.4g} {float(np.median(e)):>7.3g}"
                )


if __name__ == "__main__":
    main()
