"""Figures and tables of the Theory page (docs/theory.md), drawn from rope_ref's own code.

Files written to `outdir`:

- ``theory_decay.png``, ``theory_bound.png``, ``theory_discrimination.png``,
  ``theory_wavelengths.png``: the figures of ``rope-ref plot``.
- ``theory_islands.png``: min over m of B_m(b) against b for L = 4096: the feasible bases
  are not an interval.
- ``theory_bound_table.csv``: the smallest base per context length (1K..1M, d = 128),
  checked here by direct evaluation, beside what bisection and a coarse grid return.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from rope_ref.analysis import _plots as plots
from rope_ref.analysis import base_lower_bound

DIM = 128
ISLAND_CONTEXT = 4096


def worst_sum(dim: int, length: int, base: float) -> float:
    """min over m = 0..length of sum_i cos(m base^(-2i/dim)), evaluated directly."""
    theta = base ** (-2.0 * np.arange(dim // 2) / dim)
    worst = np.inf
    for start in range(0, length + 1, 1 << 15):
        m = np.arange(start, min(length + 1, start + (1 << 15)), dtype=np.float64)
        worst = min(worst, float(np.cos(np.multiply.outer(m, theta)).sum(axis=1).min()))
    return worst


def bisection(dim: int, length: int, low: float = 1.5, high: float = 1e12) -> float:
    """What plain bisection on 'all B_m >= 0' returns (low fails, high passes)."""
    for _ in range(60):
        mid = float(np.sqrt(low * high))
        low, high = (low, mid) if worst_sum(dim, length, mid) >= 0 else (mid, high)
    return high


def coarse_grid(dim: int, length: int, points_per_decade: int = 100) -> float:
    """First base that passes on a log grid (100 points per decade), as tables often use."""
    for exponent in np.arange(1, 12, 1 / points_per_decade):
        if worst_sum(dim, length, 10.0**exponent) >= 0:
            return float(10.0**exponent)
    return float("nan")


def islands_figure(path: Path) -> None:
    """min_m B_m(b) for L = 4096 against b: feasible where it is at least 0."""
    exact = base_lower_bound(DIM, ISLAND_CONTEXT)
    bases = np.geomspace(1.5e4, 1.2e5, 1500)
    worst = np.array([worst_sum(DIM, ISLAND_CONTEXT, b) for b in bases])
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    ax.plot(bases, worst, lw=0.8, color="tab:blue", label="min over m <= 4096 of B_m(b)")
    ax.fill_between(
        bases,
        0,
        1,
        where=worst >= 0,
        color="tab:green",
        alpha=0.25,
        transform=ax.get_xaxis_transform(),
        label="feasible bases",
    )
    ax.axhline(0.0, color="black", lw=1)
    ax.axvline(exact, color="tab:red", ls="--", lw=1.2, label=f"base_lower_bound = {exact:,.1f}")
    ax.set_xscale("log")
    ax.set_xlabel("base b")
    ax.set_ylabel("worst B_m")
    ax.set_title(
        f"Feasible bases for L = {ISLAND_CONTEXT}, d = {DIM}: not an interval", fontsize=10
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def bound_table(path: Path, points: list[tuple[int, float]]) -> None:
    """CSV: exact bound (checked), bisection and a 100-per-decade grid for short contexts."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "context length L",
                "smallest base (rope_ref)",
                "min B_m there",
                "min B_m at 0.99999 × it",
                "bisection",
                "grid, 100 per decade",
            ]
        )
        for length, value in points:
            short = length <= 8192
            writer.writerow(
                [
                    f"{length:,}",
                    f"{value:,.6g}",
                    f"{worst_sum(DIM, length, value):.1e}",
                    f"{worst_sum(DIM, length, value * (1 - 1e-5)):.2g}",
                    f"{bisection(DIM, length):,.6g}" if short else "",
                    f"{coarse_grid(DIM, length):,.4g}" if short else "",
                ]
            )


def make(outdir: Path) -> list[Path]:
    """Write this page's figures and table into `outdir`; return their paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("decay", "discrimination", "wavelengths"):
        path = outdir / f"theory_{name}.png"
        plots.FIGURES[name](path, dim=DIM, base=10000.0)
        written.append(path)
    started = time.perf_counter()
    points = plots.bound_figure(outdir / "theory_bound.png", dim=DIM)
    seconds = time.perf_counter() - started
    written.append(outdir / "theory_bound.png")
    (outdir / "theory_bound_seconds.txt").write_text(f"{seconds:.1f}\n", encoding="utf-8")
    written.append(outdir / "theory_bound_seconds.txt")
    islands_figure(outdir / "theory_islands.png")
    written.append(outdir / "theory_islands.png")
    bound_table(outdir / "theory_bound_table.csv", points)
    written.append(outdir / "theory_bound_table.csv")
    return written


if __name__ == "__main__":
    for p in make(Path(__file__).resolve().parent.parent / "_static" / "figures"):
        print(p)
