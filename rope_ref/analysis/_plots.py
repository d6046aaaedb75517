"""The Theory page's figures, drawn with matplotlib (the ``plot`` extra).

Used by ``rope-ref plot`` and by ``docs/figures/fig_theory.py``. Importing this module
imports matplotlib (with the non-interactive Agg backend unless one is already chosen).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib as mpl

if mpl.get_backend().lower() not in {"agg", "pdf", "svg", "ps", "cairo"}:
    mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure

from rope_ref._core.spec import RopeSpec
from rope_ref.analysis import (
    base_lower_bound,
    check_bound_size,
    decay_bound,
    discrimination,
    wavelengths,
)
from rope_ref.analysis._bound import MAX_DIM, smallest_feasible_log_base

__all__ = ["BOUND_CONTEXTS", "FIGURES", "FORMATS", "bound_figure", "check_figure"]

#: File formats matplotlib writes, by extension (png, pdf, svg, ...).
FORMATS = tuple(sorted(FigureCanvasBase.get_supported_filetypes()))

#: Context lengths of the base-bound figure: 1K .. 1M tokens.
BOUND_CONTEXTS = tuple(2**p for p in range(10, 21))
#: Bases of the discrimination figure.
DISCRIMINATION_BASES = (1e4, 1e5, 5e5, 1e7)
#: Colours (colour-blind safe, apart in grey) and line styles of several curves in one figure.
STYLES = (
    ("#0072B2", "-"),
    ("#D55E00", "--"),
    ("#009E73", "-."),
    ("#000000", ":"),
    ("#CC79A7", (0, (5, 1, 1, 1, 1, 1))),
)
#: Bases used by well-known models, marked on the base-bound figure.
KNOWN_BASES = {"10,000 (LLaMA 2)": 1e4, "500,000 (LLaMA 3)": 5e5}


def check_figure(figure: str, *, dim: int) -> None:
    """Raise ValueError naming the limit when `figure` cannot be drawn for `dim`.

    The bound figure takes `rope_ref.analysis.base_lower_bound`'s limits for its longest
    context; the others the same limit on `dim` (they are about rotary dimensions in use).
    """
    if figure == "bound":
        check_bound_size(dim, BOUND_CONTEXTS[-1])
    elif dim > MAX_DIM:
        msg = (
            f"`dim` must be at most {MAX_DIM} for a figure (they are about the rotary "
            f"dimensions in use, at most a few hundred); got {dim}."
        )
        raise ValueError(msg)


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def decay_figure(path: Path, *, dim: int = 128, base: float = 10000.0) -> None:
    """The long-term-decay curve (normalized) with its moving average."""
    m = np.arange(0, 4097, dtype=np.float64)
    curve = decay_bound(dim, m, base=base)
    window = 65
    smooth = np.convolve(curve, np.ones(window) / window, mode="valid")
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    (colour, _), (average, dashed) = STYLES[:2]
    ax.plot(m, curve, lw=0.6, color=colour, label="bound on |q . k| at distance m (1 at m = 0)")
    ax.plot(
        m[window // 2 : -(window // 2)],
        smooth,
        lw=2.0,
        color=average,
        ls=dashed,
        label=f"moving average over {window} distances",
    )
    ax.set_xscale("symlog", linthresh=16)
    ax.set_xlim(0, m[-1])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("relative distance m (tokens)")
    ax.set_ylabel("bound relative to distance 0")
    ax.set_title(f"Long-term decay of RoPE, d={dim}, base={base:g}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def bound_figure(
    path: Path,
    *,
    dim: int = 128,
    base: float = 10000.0,
    progress: Callable[[float], None] | None = None,
) -> list[tuple[int, float]]:
    """Smallest base against context length, 1K..1M (log-log); returns the points."""
    del base  # the bound is what the base should be; the option does not apply
    longest = max(BOUND_CONTEXTS)  # solves every shorter context of the figure on its way
    smallest_feasible_log_base(
        dim, longest, None if progress is None else lambda _, share: progress(share)
    )
    points = [(length, base_lower_bound(dim, length)) for length in BOUND_CONTEXTS]
    lengths, bounds = (np.array(v, dtype=np.float64) for v in zip(*points, strict=True))
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    colour, style = STYLES[0]
    ax.loglog(lengths, bounds, marker="o", color=colour, ls=style, label="smallest base (exact)")
    for i, (length, value) in enumerate(points):
        if i % 2 == 0 or i == len(points) - 1:  # below and right of the rising curve: clear
            ax.annotate(
                f"{value:.2g}",
                (length, value),
                textcoords="offset points",
                xytext=(7, -11),
                fontsize=7.5,
                ha="left",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    for (label, value), (tint, dashes) in zip(KNOWN_BASES.items(), STYLES[1:], strict=False):
        ax.axhline(value, color=tint, ls=dashes, lw=1.2, label=f"base {label}")
    ax.set_xlim(lengths[0] / 1.5, lengths[-1] * 2.5)  # room for the labels at both ends
    ax.set_ylim(bounds.min() / 3, bounds.max() * 3)
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel("smallest base b with B_m(b) >= 0, m = 0..L")
    ax.set_title(f"The base bound for context length, d={dim}", fontsize=10)
    ax.set_xticks(lengths[::2], [f"{int(v) // 1024}K" if v < 2**20 else "1M" for v in lengths[::2]])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)
    return points


def discrimination_figure(path: Path, *, dim: int = 128, base: float = 10000.0) -> None:
    """B_m against distance for several bases: the lowest value in each bin of distances.

    B_m oscillates from one m to the next; drawn point by point, the curves of several bases
    fill each other in. Per logarithmic bin of distances the line is the lowest B_m, which
    is what the base bound is about (it must stay at or above zero).
    """
    m = np.unique(np.round(np.geomspace(1, 2**20, 20000)))
    edges = np.geomspace(1, 2**20 + 1, 81)
    which = np.digitize(m, edges)
    bins = np.unique(which)
    centres = np.array([np.sqrt(m[which == b].min() * m[which == b].max()) for b in bins])
    bases = sorted({*DISCRIMINATION_BASES, base})
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    for b, (colour, style) in zip(bases, STYLES, strict=False):
        values = discrimination(dim, m, base=b)
        low = np.array([values[which == k].min() for k in bins])
        ax.plot(centres, low, color=colour, ls=style, lw=1.8, label=f"base {b:,.0f}")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("relative distance m (tokens)")
    ax.set_ylabel("B_m = sum_i cos(m theta_i)")
    ax.set_title(
        f"Discrimination of similar tokens, d={dim} (B_0 = {dim // 2})\n"
        f"the lowest B_m in each of {len(edges) - 1} log-spaced bins of m",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", framealpha=0.95)
    _save(fig, path)


def wavelengths_figure(path: Path, *, dim: int = 128, base: float = 10000.0) -> None:
    """Wavelength of every pair (log scale), with a few context lengths for reference."""
    spec = RopeSpec(head_dim=dim, base=base)
    lam = wavelengths(spec)
    j = np.arange(spec.n_pairs)
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    ax.semilogy(j, lam, "o", ms=3, color="tab:blue", label="wavelength 2 pi / theta_j")
    for length, style in ((4096, "--"), (131072, ":")):
        turned = int(np.sum(lam <= length - 1))
        ax.axhline(
            length,
            color="tab:gray",
            ls=style,
            lw=1,
            label=f"context {length:,}: {turned} of {spec.n_pairs} pairs turn fully",
        )
    ax.set_xlabel("pair index j")
    ax.set_ylabel("wavelength (tokens)")
    ax.set_title(f"Wavelengths, d={dim}, base={base:g}", fontsize=10)
    ax.set_ylim(1, 8 * max(131072, float(np.max(lam))))  # room above the top reference line
    ax.grid(True, which="both", alpha=0.3)
    # The wavelengths rise from lower left to upper right: the legend goes where none are.
    ax.legend(fontsize=8, loc="lower right", framealpha=0.95)
    _save(fig, path)


#: ``rope-ref plot`` figure name -> drawing function ``(path, *, dim, base)``.
FIGURES: dict[str, Callable[..., object]] = {
    "decay": decay_figure,
    "bound": bound_figure,
    "discrimination": discrimination_figure,
    "wavelengths": wavelengths_figure,
}
