"""Benchmark tables and charts for ``benchmarks.md``, from recorded ``rope-ref bench`` output.

The measurements are not taken at build time (they take minutes and depend on the
machine): ``docs/data/bench_*.json`` hold the JSON that ``rope-ref bench --json`` printed,
and this module turns each into a CSV table and a chart.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib.pyplot as plt

DATA = Path(__file__).resolve().parent.parent / "data"


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _quartiles(r: dict) -> str:
    """``q1 - q3`` of a result, with "!" when it was flagged unsteady; "-" when not recorded."""
    if r.get("q1_s") is None:
        return "-"
    return f"{_fmt_time(r['q1_s'])} - {_fmt_time(r['q3_s'])}{' !' if r.get('unsteady') else ''}"


def results_table(report: dict, path: Path) -> None:
    """One row per case and implementation: median, quartiles, GB/s, % of copy, x reference."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["case", "implementation", "median", "quartiles", "GB/s", "% of copy",
                    "x reference"])
        for r in report["results"]:
            c = r["case"]
            n = c.get("sequences", 0)
            seqs = f", {n} sequence{'s' if n > 1 else ''}" if n else ""
            w.writerow([
                f"{'x'.join(map(str, c['shape']))} {c['dtype']}{' q+k' if c['qk'] else ''}{seqs}",
                r["name"],
                _fmt_time(r["median_s"]),
                _quartiles(r),
                "-" if r["gb_per_s"] is None else f"{r['gb_per_s']:.1f}",
                "-" if r["percent_of_copy"] is None else f"{r['percent_of_copy']:.0f}%",
                "-" if r["speedup_vs_reference"] is None else f"{r['speedup_vs_reference']:.1f}x",
            ])


def bar_chart(report: dict, path: Path, shape: list[int]) -> None:
    """Throughput (GB/s) of every implementation on the case of `shape`."""
    rows = [r for r in report["results"] if r["case"]["shape"] == shape and r["gb_per_s"]]
    names = [r["name"] for r in rows]
    values = [r["gb_per_s"] for r in rows]
    colors = ["#999999" if r["kind"] == "baseline" else
              "#1f77b4" if r["kind"] == "backend" else "#ff7f0e" for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    ax.barh(names[::-1], values[::-1], color=colors[::-1])
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.1f}", va="center", fontsize=8)
    ax.set_xlabel("GB/s (x read once + output written once)")
    ax.set_title(f"apply_rope on {'x'.join(map(str, shape))} {rows[0]['case']['dtype']}, "
                 f"{report['machine']['cpu']}, {report['machine']['date']}", fontsize=9)
    ax.set_xlim(0, max(values) * 1.2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def sweep_chart(report: dict, path: Path) -> None:
    """Median time against sequence length, one line per implementation."""
    fig, ax = plt.subplots(figsize=(7, 4))
    by_name: dict[str, list[tuple[int, float]]] = {}
    for r in report["results"]:
        if r["median_s"] is not None:
            by_name.setdefault(r["name"], []).append((r["case"]["shape"][1], r["median_s"]))
    for name, points in by_name.items():
        points.sort()
        ax.loglog([p[0] for p in points], [p[1] * 1e6 for p in points], marker="o", label=name)
    ax.set_xlabel("sequence length (batch 1, 32 heads, head_dim 128, float32)")
    ax.set_ylabel("median time per call (us)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def decoding_chart(report: dict, path: Path) -> None:
    """Median time per call against the number of sequences decoding in turn."""
    fig, ax = plt.subplots(figsize=(9, 4))
    by_name: dict[str, list[tuple[int, float]]] = {}
    for r in report["results"]:
        n = r["case"].get("sequences", 0)
        if n and r["median_s"] is not None:
            by_name.setdefault(r["name"], []).append((n, r["median_s"]))
    for name, points in by_name.items():
        points.sort()
        ax.loglog([p[0] for p in points], [p[1] * 1e6 for p in points], marker="o", label=name)
    ax.set_xlabel("sequences decoding in turn (1x1x32x128 float32, one token per call)")
    ax.set_ylabel("median time per call (us)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the lines
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def make(outdir: Path) -> list[Path]:
    """Write the benchmark tables and charts into `outdir`."""
    charts = {  # recording -> its chart
        "bench_cpu": lambda report, path: bar_chart(report, path, [1, 4096, 32, 128]),
        "bench_decode": decoding_chart,
        "bench_sweep": sweep_chart,
    }
    written = []
    for name, chart in charts.items():
        report = _load(f"{name}.json")
        results_table(report, outdir / f"{name}.csv")
        chart(report, outdir / f"{name}.png")
        written += [outdir / f"{name}.csv", outdir / f"{name}.png"]
    return written
