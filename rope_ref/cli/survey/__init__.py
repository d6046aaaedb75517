"""`rope-ref survey`: the conformance table of the RoPE implementations installed here."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

__all__ = ["register"]

#: Largest position surveyed: the peers that index a cos/sin cache (torchtune, litgpt,
#: llama-models, mistral-inference, vLLM) get one of max_position + 1 rows, 256 MiB at 2**20.
MAX_POSITION = 2**20 - 1
PACKAGES = (
    "transformers",
    "rotary-embedding-torch",
    "torchtune",
    "keras-hub",
    "mlx",
    "flash-attn",
    "vllm",
    "litgpt",
    "diffusers",
    "timm",
    "x-transformers",
    "llama-models",
    "mistral-inference",
    "ai2-olmo-core",
    "megatron-core",
    "gemma",
    "onnxruntime",
    "ggml-python",
)


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to `commands`."""
    parser = commands.add_parser(
        "survey",
        help="check every RoPE implementation installed here against the oracle",
        description="Find the RoPE implementations installed beside rope_ref (transformers' "
        "rotaries, rotary-embedding-torch, torchtune, keras-hub, MLX, flash-attn's "
        "PyTorch reference; litgpt, diffusers, timm, x-transformers, llama-models, "
        "mistral-inference, OLMo-core, Megatron-core and Gemma; the engines ONNX Runtime, "
        "vLLM and ggml), drive each with its own "
        "settings mapped to a RopeSpec, and print one row each: conformant or not, the "
        "largest error as a share of the tolerance, the angle-precision class, and the "
        "diagnosis of a mismatch. Missing packages are skipped with the reason. Exit "
        "status 0 (a survey reports, it does not judge); 2 for a usage error.",
    )
    parser.add_argument(
        "--max-position",
        type=int,
        default=131071,
        help=f"largest position (131071; at most {MAX_POSITION})",
    )
    parser.add_argument("--only", action="append", choices=PACKAGES, help="survey only these")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument(
        "--wide", action="store_true", help="never fit the table to the terminal's width"
    )
    parser.add_argument(
        "--transformers",
        nargs="*",
        metavar="MODEL_TYPE",
        help="instead: drive every RoPE model family of transformers (or those named) through "
        "its own rotary module and apply function, and compare with RopeSpec.from_hf",
    )
    parser.add_argument(
        "--ulps",
        action="store_true",
        help="add the worst and median distance from the correctly rounded result, in ulps "
        "(backend='exact'; needs mpmath)",
    )
    parser.set_defaults(run=_run)


def _run_transformers(args: argparse.Namespace) -> int:
    from rope_ref.cli.progress import Progress
    from rope_ref.cli.survey.transformers_sweep import sweep, sweep_lines

    with Progress("rope-ref survey --transformers", total=None) as bar:
        results = sweep(args.transformers or None, progress=lambda text: bar.advance(detail=text))
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        print("\n".join(sweep_lines(results)))
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.transformers is not None:
        return _run_transformers(args)
    from rope_ref.cli.progress import Progress
    from rope_ref.cli.survey.run import survey
    from rope_ref.cli.tables import table_width

    if not 16 <= args.max_position <= MAX_POSITION:
        print(
            f"rope-ref survey: error: --max-position must be between 16 and {MAX_POSITION} "
            f"(the cos/sin caches of some peers are built that long); got {args.max_position}.",
            file=sys.stderr,
        )
        return 2
    only = None if args.only is None else tuple(args.only)
    with Progress("rope-ref survey", total=None) as bar:
        rows = survey(
            args.max_position,
            only=only,
            progress=lambda text: bar.advance(detail=text),
            ulps=args.ulps,
        )
    if args.json:
        print(
            json.dumps(
                {"max_position": args.max_position, "rows": [r.as_dict() for r in rows]}, indent=2
            )
        )
    else:
        for line in table_lines(rows, width=table_width(wide=args.wide)):
            print(line)
    return 0


def table_lines(rows: list[Any], *, width: int | None = None) -> list[str]:
    """The survey as a table at most `width` wide, with the diagnoses and skips below it."""
    from rope_ref.cli.tables import Column, format_table

    columns = [
        Column("peer", wrap=True),
        Column("settings", wrap=True),
        Column("verdict"),
        Column("error/tol", "right"),
        Column("angles", wrap=True),
    ]
    if any(r.max_ulps is not None for r in rows):
        columns.append(Column("ulps max / median", "right"))
    body = []
    notes = []
    for row in rows:
        ratio = "-" if row.max_ratio is None else f"{row.max_ratio:.3g}"
        angles = (
            "-" if row.precision is None else (f"{row.precision} ({row.max_angle_error:.1e} rad)")
        )
        line = (f"{row.peer} {row.version}".strip(), row.settings, row.verdict, ratio, angles)
        body.append(line + _ulps_cell(row, rows))
        if row.diagnosis is not None:
            notes.append(f"- {row.peer} ({row.settings}): {row.diagnosis}")
    return format_table(columns, body, width=width) + (
        ["", *_wrapped(notes, width)] if notes else []
    )


def _wrapped(notes: list[str], width: int | None) -> list[str]:
    """The notes, each wrapped at word boundaries to `width` (None: one line each)."""
    if width is None:
        return notes
    lines = []
    for note in notes:
        lines += textwrap.wrap(
            note, width=max(width, 20), subsequent_indent="  ", break_on_hyphens=False
        )
    return lines


def _ulps_cell(row: Any, rows: list[Any]) -> tuple[str, ...]:
    """The ulps column's cell (none when no row measured ulps)."""
    if not any(r.max_ulps is not None for r in rows):
        return ()
    if row.max_ulps is None:
        return ("-",)
    return (f"{row.max_ulps:.4g} / {row.median_ulps:.3g}",)
