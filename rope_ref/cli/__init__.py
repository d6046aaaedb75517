"""The `rope-ref` command line."""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Sequence

__all__ = ["main"]

#: Modules that add further subcommands; each defines ``register(commands)``, where
#: `commands` is the parser's subparsers action, and sets ``run`` as the default.
_SUBCOMMAND_MODULES = (
    "rope_ref.cli.bench",
    "rope_ref.cli.theory",
    "rope_ref.cli.check",
    "rope_ref.cli.survey",
)


def _verify(args: argparse.Namespace) -> int:
    from rope_ref.cli.verify import describe_setup, print_table, progress_to_stderr, run_checks

    results, skipped = run_checks(progress=None if args.json else progress_to_stderr)
    if args.json:
        report = {
            "setup": describe_setup(),
            "checks": [r.as_dict() for r in results],
            "skipped": skipped,
        }
        print(json.dumps(report, indent=2))
    else:
        print_table(results, skipped)
    return 0 if results and all(r.passed for r in results) else 1


def _example(args: argparse.Namespace) -> int:
    from rope_ref.cli.example import run_example

    return run_example()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `rope-ref` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="rope-ref", description="Reference engine for rotary position embedding (RoPE)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser(
        "verify",
        help="check the engine's invariants on every installed namespace and backend",
        description="Measure RoPE's invariants (identity at 0, norms, inverse, composition, "
        "relative position, forms, layouts, partial rotary, agreement with an exact per-pair "
        "rotation) for RopeSpec(head_dim=128) on every installed array namespace and "
        "backend, in float64 and float32. Exit status 1 if any check fails.",
    )
    verify.add_argument("--json", action="store_true", help="print the results as JSON")
    verify.set_defaults(run=_verify)
    example = commands.add_parser(
        "example", help="the 4-token, d = 4 worked example: absolute sinusoidal PE vs RoPE"
    )
    example.set_defaults(run=_example)
    for module_name in _SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `rope-ref` with `argv` (default: the command line); return the exit status."""
    args = build_parser().parse_args(argv)
    return int(args.run(args))
