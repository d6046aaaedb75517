"""`rope-ref bound` and `rope-ref plot`: subcommands of the command line."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import stat
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
        "every smaller base fails. Progress goes to stderr: a bar on a terminal, a line "
        "every 10 s elsewhere.",
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
    bound.add_argument("--json", action="store_true", help="print the bases as JSON")
    bound.add_argument(
        "--wide", action="store_true", help="never fit the table to the terminal's width"
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
    plot.add_argument(
        "--out",
        required=True,
        type=_out_path,
        metavar="FILE.png",
        help="output file (.png, .pdf, .svg, ...), or a directory to write FIGURE.png into",
    )
    plot.add_argument("--dim", type=int, default=128, help="rotary dimension d (default 128)")
    plot.add_argument("--base", type=float, default=10000.0, help="RoPE base (default 10000)")
    plot.set_defaults(run=_plot)


#: Parameter names in error messages of the API, and the options that set them.
_OPTIONS = {"`dim`": "--dim", "`context_length`": "--context"}


def _error(command: str, message: str) -> int:
    for name, option in _OPTIONS.items():
        message = message.replace(name, option)
    print(f"rope-ref {command}: error: {message}", file=sys.stderr)
    return 2


def _bound(args: argparse.Namespace) -> int:
    from rope_ref.analysis import check_bound_size
    from rope_ref.analysis._bound import log_base_ceiling, smallest_feasible_log_base
    from rope_ref.cli.progress import Progress
    from rope_ref.cli.tables import Column, print_table

    lengths = sorted(set(args.context))
    try:  # every size is checked before any work starts
        for length in lengths:
            check_bound_size(args.dim, length)
    except (TypeError, ValueError) as err:
        return _error("bound", str(err))
    results = {}
    with Progress("rope-ref bound", total=len(lengths)) as bar:
        try:
            for done, length in enumerate(lengths):

                def show(log_base: float, share: float, done: int = done, n: int = length) -> None:
                    detail = f"L={n:,}: every base below {math.exp(log_base):.4g} fails"
                    bar.update(done + share, detail=detail)

                log_base = smallest_feasible_log_base(args.dim, length, show)
                results[length] = 1.0 if log_base == 0.0 else log_base_ceiling(log_base)
        except ValueError as err:
            return _error("bound", str(err))
        bar.update(len(lengths), detail="done")
    if args.json:
        rows = [{"context_length": n, "smallest_base": results[n]} for n in args.context]
        print(json.dumps({"dim": args.dim, "bounds": rows}, indent=2))
        return 0
    columns = [Column("context length", "right"), Column("smallest base", "right")]
    print_table(
        columns,
        [(f"{n:,}", format_base(results[n])) for n in args.context],
        wide=args.wide,
    )
    print(f"d = {args.dim}; bases rounded up, so every base printed works")
    return 0


def format_base(base: float) -> str:
    """`base` rounded up to one decimal, digits grouped: every base printed works.

    Examples
    --------
    >>> format_base(26952.31), format_base(629978.0), format_base(65374837.92)
    ('26,952.4', '629,978.0', '65,374,838.0')
    """
    return f"{math.ceil(base * 10) / 10:,.1f}"


def _plot(args: argparse.Namespace) -> int:
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return _error(
            "plot",
            "matplotlib is not installed; install the plot extra: pip install 'rope-ref[plot]'",
        )
    from rope_ref.analysis import _plots

    if args.dim < 2 or args.dim % 2 or not (math.isfinite(args.base) and args.base > 1):
        return _error("plot", f"--dim must be even and --base > 1; got {args.dim}, {args.base}.")
    try:
        out = _output_file(args.out, args.figure, _plots.FORMATS)
        _plots.check_figure(args.figure, dim=args.dim)
    except (TypeError, ValueError) as err:
        return _error("plot", str(err))
    try:
        _draw(args.figure, out, args.dim, args.base)
    except OSError as err:
        return _error("plot", f"cannot write {str(out)!r}: {_reason(err)}.")
    print(out)
    return 0


def _out_path(text: str) -> Path:
    """``--out`` as a path; an empty one is refused (Path("") would mean the current directory)."""
    if not text.strip():
        msg = f"--out must name a file or a directory; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return Path(text)


def _output_file(out: Path, figure: str, formats: tuple[str, ...]) -> Path:
    """The file to write: `out`, or ``out/<figure>.png`` when `out` is a directory."""
    if _is_dir(out):
        out = out / f"{figure}.png"
    if not _is_dir(out.parent):
        msg = f"--out must be in an existing directory; got {str(out)!r} (no {str(out.parent)!r})."
        raise ValueError(msg)
    if _is_special(out):  # a FIFO would block the write, a device swallow the figure
        msg = f"--out must name a regular file or a directory; got {str(out)!r} (neither)."
        raise ValueError(msg)
    if out.suffix.lower().lstrip(".") not in formats:
        msg = (
            f"--out must end in an image format ({', '.join('.' + f for f in formats)}), "
            f"or name a directory; got {str(out)!r}."
        )
        raise ValueError(msg)
    return out


def _reason(err: OSError) -> str:
    """Why the system refused, without a closing period (the message adds one)."""
    return str(err.strerror or err).rstrip(".")


def _is_dir(path: Path) -> bool:
    """Whether `path` is a directory; a path the system refuses to look up is a ValueError.

    `Path.is_dir` raises OSError for a name too long for the file system (ENAMETOOLONG) or a
    directory that may not be searched (EACCES); those become one line naming ``--out``.
    """
    try:
        return path.is_dir()
    except OSError as err:
        msg = f"--out cannot be used: {str(path)!r}: {_reason(err)}."
        raise ValueError(msg) from None


def _is_special(path: Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a directory."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as err:
        msg = f"--out cannot be used: {str(path)!r}: {_reason(err)}."
        raise ValueError(msg) from None
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _draw(figure: str, out: Path, dim: int, base: float) -> None:
    from rope_ref.analysis import _plots

    if figure != "bound":
        _plots.FIGURES[figure](out, dim=dim, base=base)
        return
    from rope_ref.cli.progress import Progress

    with Progress("rope-ref plot bound") as bar:

        def show(share: float) -> None:
            bar.update(share, detail="contexts 1K..1M")

        _plots.bound_figure(out, dim=dim, progress=show)
