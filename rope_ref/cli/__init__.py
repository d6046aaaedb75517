"""The `rope-ref` command line.

Exit status, for every subcommand: 0 success, 1 a failed check (or a benchmark that could
not run), 2 a usage error (an unknown subcommand or option, a bad value), 130 interrupted,
141 the output's reader left.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

#: Exit status of a run stopped with Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130
#: Exit status when the output's reader has gone (128 + SIGPIPE), as shells report it.
CLOSED_PIPE = 141
#: Loggers of optional peers that warn when imported, about themselves, not about RoPE:
#: torchao (pulled in by transformers and torchtune) on its CUDA extensions, and torch's
#: pytree on torchao's registrations. The commands raise them to errors only.
PEER_IMPORT_LOGGERS = ("torchao", "torch.utils._pytree")

#: Modules that add further subcommands; each defines ``register(commands)``, where
#: `commands` is the parser's subparsers action, and sets ``run`` as the default.
_SUBCOMMAND_MODULES = (
    "rope_ref.cli.bench",
    "rope_ref.cli.theory",
    "rope_ref.cli.check",
    "rope_ref.cli.survey",
)


def _verify(args: argparse.Namespace) -> int:
    from rope_ref.cli.progress import Progress
    from rope_ref.cli.verify import describe_setup, print_table, run_checks

    with Progress("rope-ref verify", total=None) as bar:
        results, skipped = run_checks(progress=lambda text: bar.advance(detail=text))
    if args.json:
        report = {
            "setup": describe_setup(),
            "checks": [r.as_dict() for r in results],
            "skipped": skipped,
        }
        print(json.dumps(report, indent=2))
    else:
        print_table(results, skipped, wide=args.wide)
    return 0 if results and all(r.passed for r in results) else 1


def _example(args: argparse.Namespace) -> int:
    from rope_ref.cli.example import run_example

    return run_example(json_output=args.json, wide=args.wide)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `rope-ref` and its subcommands."""
    from rope_ref import __version__

    parser = argparse.ArgumentParser(
        prog="rope-ref",
        description="Reference engine for rotary position embedding (RoPE).",
        epilog="Exit status: 0 success, 1 a check failed, 2 usage error, 130 interrupted, "
        "141 output closed. "
        "Run `rope-ref COMMAND --help` for a command's options.",
    )
    parser.add_argument(
        "--version", action="version", version=f"rope-ref {__version__}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = commands.add_parser(
        "verify",
        help="check the engine's invariants on every installed namespace and backend",
        description="Measure RoPE's invariants (identity at 0, norms, inverse, composition, "
        "relative position, forms, layouts, partial rotary, agreement with an exact per-pair "
        "rotation) for RopeSpec(head_dim=128) on every installed array namespace and "
        "backend, in float64 and float32. Exit status 1 if any check fails.",
    )
    verify.add_argument("--json", action="store_true", help="print the results as JSON")
    verify.add_argument(
        "--wide", action="store_true", help="never fit the table to the terminal's width"
    )
    verify.set_defaults(run=_verify)
    example = commands.add_parser(
        "example",
        help="the 4-token, d = 4 worked example: absolute sinusoidal PE vs RoPE",
        description="Print four tokens with d = 4: the absolute sinusoidal position "
        "embedding added to them, beside RoPE rotating them (interleaved pairs, base "
        "10000), the relative-position property, and three slips to avoid by hand.",
    )
    example.add_argument("--json", action="store_true", help="print the numbers as JSON")
    example.add_argument(
        "--wide", action="store_true", help="never fit the tables to the terminal's width"
    )
    example.set_defaults(run=_example)
    for module_name in _SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `rope-ref` with `argv` (default: the command line); return the exit status.

    Examples
    --------
    >>> try:
    ...     main(["verfy"])  # the usage, and "did you mean verify?", go to stderr
    ... except SystemExit as stop:
    ...     print(stop.code)
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    _refuse_unknown_words(parser, argv)
    args = parser.parse_args(argv)
    for name in PEER_IMPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print(f"rope-ref {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # the reader left (`rope-ref verify | head`): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _refuse_unknown_words(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Exit (status 2) on a mistyped subcommand or option, naming it and the nearest match.

    argparse alone reports an unknown option of a subcommand with the top-level usage, and
    reports a missing required option before the mistyped one that was meant to give it.
    """
    commands = _subcommands(parser)
    position = next((i for i, word in enumerate(argv) if not word.startswith("-")), None)
    if position is None:
        return
    command = argv[position]
    if command not in commands:
        parser.error(f"unknown command {command!r}{_nearest(command, list(commands))}")
    sub = commands[command]
    known = [o for o in sub._option_string_actions if o.startswith("--")]
    for word in argv[position + 1 :]:
        if word == "--":
            return
        if not word.startswith("--"):
            continue
        name = word.split("=", 1)[0]
        if name in known or sum(k.startswith(name) for k in known) == 1:  # a known abbreviation
            continue
        sub.error(f"unrecognized option {name}{_nearest(name, known)}")


def _nearest(word: str, choices: list[str]) -> str:
    """``"; did you mean X?"`` for the choice nearest `word`, or ``"; choose from ..."``."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; choose from {', '.join(sorted(choices))}"
