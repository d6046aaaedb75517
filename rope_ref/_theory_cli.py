"""`rope-ref bound` and `rope-ref plot`: subcommands of the command line."""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]

PLOTS = ("decay", "bound", "discrimination", "wavelengths")


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `bound` and `plot` to `commands`."""
    bound = commands.add_parser(
        "bound",
        help="the smallest RoPE base that keeps B_m >= 0 over each context length",
        description="For each context length L, print the smallest base b such that "
        "B_m(b) = sum_i cos(m b^(-2i/d)) >= 0 for every distance m = 0..L (the base bound "
        "of Men et al., 2024). The feasible bases are not an interval, so the search proves "
        "every smaller base fails; long contexts show a progress bar on stderr.",
    )
    bound.add_argument("--dim", type=int, default=128, help="rotary dimension d (default 128)")
    bound.add_argument(
        "--context",
        type=int,
        action="append",
        required=True,
        metavar="L",
        help="context length in tokens; repeat for several",
    )
    bound.set_defaults(run=_bound)
    plot = commands.add_parser(
        "plot",
        help="draw a theory figure (needs the plot extra: pip install 'rope-ref[plot]')",
        description="Write one figure of the Theory page: the long-term-decay curve, the "
        "base bound against context length, discrimination curves for several bases, or "
        "the wavelength of every pair. Needs matplotlib (pip install 'rope-ref[plot]').",
    )
    plot.add_argument("figure", choices=PLOTS, help="which figure")
    plot.add_argument("--out", required=True, type=Path, metavar="FILE.png", help="output file")
    plot.add_argument("--dim", type=int, default=128, help="rotary dimension d (default 128)")
    plot.add_argument("--base", type=float, default=10000.0, help="RoPE base (default 10000)")
    plot.set_defaults(run=_plot)


def _bound(args: argparse.Namespace) -> int:
    from rope_ref._progress import ProgressBar
    from rope_ref.analysis import base_lower_bound

    lengths = sorted(set(args.context))
    bar = ProgressBar("rope-ref bound")
    results = {}
    try:
        for done, length in enumerate(lengths):

            def show(base: float, done: int = done, length: int = length) -> None:
                bar.update(done / len(lengths), f"L={length:,}: every base below {base:.4g} fails")

            results[length] = base_lower_bound(args.dim, length, progress=show)
    except ValueError as err:
        bar.close()
        print(f"rope-ref bound: error: {err}", file=sys.stderr)
        return 2
    bar.update(1.0, "done", now=True)
    bar.close()
    print(f"{'context length':>15}  {'smallest base':>15}  (d = {args.dim})")
    for length in args.context:
        print(f"{length:>15,}  {results[length]:>15.6g}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        print(
            "rope-ref plot: error: matplotlib is not installed; install the plot extra: "
            "pip install 'rope-ref[plot]'",
            file=sys.stderr,
        )
        return 2
    from rope_ref import _analysis_plots

    if args.dim < 2 or args.dim % 2 or not (math.isfinite(args.base) and args.base > 1):
        print(
            f"rope-ref plot: error: --dim must be even and --base > 1; got {args.dim}, "
            f"{args.base}.",
            file=sys.stderr,
        )
        return 2
    if args.figure == "bound":
        from rope_ref._progress import ProgressBar

        bar = ProgressBar("rope-ref plot bound")
        _analysis_plots.bound_figure(
            args.out, dim=args.dim, progress=lambda f: bar.update(f, "contexts 1K..1M", now=True)
        )
        bar.close()
    else:
        _analysis_plots.FIGURES[args.figure](args.out, dim=args.dim, base=args.base)
    print(args.out)
    return 0
