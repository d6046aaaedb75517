"""Figure of the testing page: the error model against measured float32 errors.

``testing_error_model.png``: the tolerance per unit pair norm of `rope_ref.testing.error_model`
for float64, float32 and bfloat16 results against position, beside the measured error of
HF's float32 recipe (float32 inverse frequencies, float32 angles, float32 rotation) and of
an off-by-one position, both per unit norm, for d = 128 and base 500000.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

import rope_ref as rr
from rope_ref.testing import error_model

D, BASE = 128, 500000.0
F32 = np.float32


def _hf_float32(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    e = (np.arange(0, D, 2).astype(F32) / F32(D)).astype(F32)
    inv = (F32(1.0) / np.power(F32(BASE), e, dtype=F32)).astype(F32)
    angles = (p.astype(F32)[:, None] * inv).astype(F32)
    cos, sin = np.cos(angles).astype(F32), np.sin(angles).astype(F32)
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def make(outdir: Path) -> list[Path]:
    """Write ``testing_error_model.png`` to `outdir` and return its path."""
    spec = rr.RopeSpec(head_dim=D, base=BASE)
    p = np.unique(np.geomspace(1, 2**24, 60).round().astype(np.int64))
    x = np.random.default_rng(0).uniform(-1, 1, (len(p), D)).astype(F32)
    exact = np.asarray(rr.apply_rope(x.astype(np.float64), spec, p))
    norm = np.sqrt(x[:, : D // 2].astype(np.float64) ** 2 + x[:, D // 2 :].astype(np.float64) ** 2)
    norms = np.concatenate([norm, norm], axis=-1)
    measured = np.max(np.abs(_hf_float32(x, p) - exact) / norms, axis=-1)
    shifted = np.asarray(rr.apply_rope(x.astype(np.float64), spec, p + 1))
    off_by_one = np.max(np.abs(shifted - exact) / norms, axis=-1)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, style in (("float64", ":"), ("float32", "-"), ("bfloat16", "--")):
        ax.loglog(
            p, error_model(name).atol(p.astype(np.float64)), style, label=f"tolerance, {name}"
        )
    ax.loglog(p, measured, ".", label="HF float32 recipe, measured")
    ax.loglog(p, off_by_one, "x", ms=4, label="off-by-one position, measured")
    ax.set_xlabel("position (largest angle, rad)")
    ax.set_ylabel("max |error| / |pair|")
    ax.set_title(f"Error model vs measured error (d={D}, base={BASE:g})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = outdir / "testing_error_model.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
