"""`rope-ref bench`: time backends and peers against a same-run copy of the same array."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from rope_ref.cli.bench.exact import EXACT_PRESETS, run_exact
from rope_ref.cli.bench.gpu import GPU_PRESETS
from rope_ref.cli.bench.machine import machine_description
from rope_ref.cli.bench.oracle import ORACLE_PRESETS, run_oracle

__all__ = ["machine_description", "register"]

#: Named cases: (shape (B, S, H, D), dtype, device, q and k).
PRESETS: dict[str, tuple[tuple[int, int, int, int], str, str, bool]] = {
    "prefill": ((1, 4096, 32, 128), "float32", "cpu", False),
    "decode": ((1, 1, 32, 128), "float32", "cpu", False),
    "decode-interleaved": ((1, 1, 32, 128), "float32", "cpu", False),
}
#: Numbers of sequences decoding in turn for "decode-interleaved" (unless --sequences).
INTERLEAVED_SEQUENCES = (1, 10, 100, 1000)
#: The harness holds about this many bytes per element of a case at once: the input
#: (drawn in float64), each output, and the reference backend's float64 temporaries.
BYTES_PER_ELEMENT = 64
#: Most interleaved rounds (--rounds): beyond this a run would not end in a working day.
MAX_ROUNDS = 10_000
SWEEP_LENGTHS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
SWEEP_IMPLS = ("copy (memory)", "copy (parallel)", "numba", "torch eager (HF-style)")


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `bench` to `commands`."""
    bench = commands.add_parser(
        "bench",
        help="time the backends and installed peers against a same-run copy baseline",
        description="Time apply_rope (seq_axis=-3 on x of shape (batch, seq, heads, head_dim)) "
        "with each backend and each installed peer (PyTorch eager HF-style, torch.compile, "
        "rotary-embedding-torch; on a GPU also Liger-Kernel), against a copy of the same "
        "array measured in the same interleaved rounds. Reports the median time, GB/s of "
        "the bytes that must move, percent of the copy's throughput and the speed-up over "
        "the reference backend.",
    )
    bench.add_argument(
        "--preset",
        action="append",
        type=_preset,
        metavar="{" + ",".join(_preset_names()) + "}",
        help="a named case (repeatable); default: prefill and decode on the CPU",
    )
    bench.add_argument(
        "--shape",
        action="append",
        type=_shape,
        metavar="B,S,H,D",
        help="a custom shape (repeatable), with each --dtype",
    )
    bench.add_argument(
        "--dtype",
        action="append",
        choices=["float16", "bfloat16", "float32", "float64"],
        help="dtype(s) for --shape and --sweep (default float32)",
    )
    bench.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="for --shape")
    bench.add_argument("--only", action="append", metavar="NAME", help="time only these")
    bench.add_argument(
        "--rounds",
        type=_rounds,
        default=15,
        help="interleaved rounds: one timed call of each implementation per round (15; at "
        f"most {MAX_ROUNDS:,})",
    )
    bench.add_argument(
        "--sweep",
        action="store_true",
        help=f"batch 1, 32 heads of 128, seq {SWEEP_LENGTHS[0]} to {SWEEP_LENGTHS[-1]}: "
        "how time grows with size (copy, numba and torch eager unless --only)",
    )
    bench.add_argument(
        "--sweep-max",
        type=_positive,
        default=SWEEP_LENGTHS[-1],
        metavar="S",
        help=f"the longest sequence of --sweep (default {SWEEP_LENGTHS[-1]})",
    )
    bench.add_argument(
        "--sequences",
        action="append",
        type=_positive,
        metavar="N",
        help="for --preset decode-interleaved: N sequences decode in turn, one token per "
        f"call (repeatable; default {', '.join(map(str, INTERLEAVED_SEQUENCES))})",
    )
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.add_argument(
        "--wide", action="store_true", help="never fit the table to the terminal's width"
    )
    bench.set_defaults(run=run)


def _shape(text: str) -> tuple[int, int, int, int]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or min(values) < 1:
        msg = f"--shape must be four positive integers B,S,H,D; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    if values[3] % 2:
        msg = f"--shape must have an even head_dim D (features rotate in pairs); got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return values


def _preset_names() -> list[str]:
    """Every preset's name, sorted."""
    return sorted([*PRESETS, *GPU_PRESETS, *EXACT_PRESETS, *ORACLE_PRESETS])


def _preset(text: str) -> str:
    """A preset's name; a near miss gets a "did you mean"."""
    names = _preset_names()
    if text in names:
        return text
    close = difflib.get_close_matches(text, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    msg = f"invalid choice: {text!r} (choose from {', '.join(map(repr, names))}){hint}"
    raise argparse.ArgumentTypeError(msg)


def _rounds(text: str) -> int:
    value = _positive(text)
    if value > MAX_ROUNDS:
        msg = (
            f"must be at most {MAX_ROUNDS:,} (each round times every implementation once); "
            f"got {text!r}"
        )
        raise argparse.ArgumentTypeError(msg)
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        msg = f"must be a positive integer; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 1:
        msg = f"must be a positive integer; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by `args`; print a table or JSON."""
    from rope_ref.cli.bench.cpu import not_timed
    from rope_ref.cli.bench.harness import run_case, sweep_cases
    from rope_ref.cli.bench.rows import Case, Unavailable
    from rope_ref.cli.progress import Progress
    from rope_ref.cli.tables import table_width

    if set(args.preset or ()) & set(EXACT_PRESETS):  # runs on its own (seconds per call)
        return run_exact(args)
    if set(args.preset or ()) & set(ORACLE_PRESETS):  # the oracle kit, on its own
        return run_oracle(args)
    dtypes = args.dtype or ["float32"]
    cases: list[tuple[Case, Sequence[str] | None]] = []
    for name in args.preset or ([] if args.shape or args.sweep else ["prefill", "decode"]):
        if name in GPU_PRESETS:
            cases.append((GPU_PRESETS[name], args.only))
            continue
        shape, dtype, device, qk = PRESETS[name]
        if name == "decode-interleaved":
            for n in args.sequences or INTERLEAVED_SEQUENCES:
                cases.append((Case(shape, dtype, device, qk, sequences=n), args.only))
        else:
            cases.append((Case(shape, dtype, device, qk), args.only))
    for shape in args.shape or []:
        cases.extend((Case(shape, d, args.device), args.only) for d in dtypes)
    if args.sweep:
        lengths = [s for s in SWEEP_LENGTHS if s <= args.sweep_max]
        for d in dtypes:
            cases.extend((c, args.only or SWEEP_IMPLS) for c in sweep_cases(lengths, dtype=d))
    problem = (
        _too_large([c for c, _ in cases])
        or _unknown_names(args.only, cases)
        or _misplaced_sequences(args)
    )
    if problem:
        print(f"rope-ref bench: error: {problem}", file=sys.stderr)
        return 2
    results = []
    with Progress("rope-ref bench", total=len(cases) * args.rounds) as bar:
        try:
            for case, only in cases:

                def step(detail: str, rounds: int) -> None:
                    bar.advance(rounds, detail=detail)

                results.extend(run_case(case, only=only, rounds=args.rounds, progress=step))
        except Unavailable as why:
            print(f"rope-ref bench: {why}", file=sys.stderr)
            return 1
    if args.json:
        report = {"machine": machine_description(), "results": [r.as_dict() for r in results]}
        print(json.dumps(report, indent=2))
    else:
        print(_describe(machine_description()))
        print(format_table(results, width=table_width(wide=args.wide)))
        missing = dict.fromkeys(m for case, _ in cases for m in not_timed(case))
        if missing and not args.only:
            print(f"not timed here: {'; '.join(missing)}")
    return 0


def _too_large(cases: Sequence[Any]) -> str | None:
    """Why the largest case cannot run on this machine, or None."""
    memory = _memory_bytes()
    limit = memory // BYTES_PER_ELEMENT
    case = max(cases, key=lambda c: math.prod(c.shape), default=None)
    if case is None or math.prod(case.shape) <= limit:
        return None
    return (
        f"shape {','.join(map(str, case.shape))} has {math.prod(case.shape):,} elements; "
        f"the benchmark holds about {BYTES_PER_ELEMENT} bytes per element at once (the "
        "input, each output, the reference backend's float64 temporaries), so a case may "
        f"have at most {limit:,} elements with this machine's {memory / 2**30:.0f} GiB "
        "of memory"
    )


def _memory_bytes() -> int:
    """Physical memory (8 GiB where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 8 << 30


def _unknown_names(only: Sequence[str] | None, cases: Sequence[Any]) -> str | None:
    """Why some --only names match nothing that these cases time, or None."""
    from rope_ref.cli.bench.harness import rows
    from rope_ref.cli.bench.rows import Unavailable

    if not only:
        return None
    known: dict[str, None] = {}
    for case, _ in cases:
        try:
            known.update((impl.name, None) for impl in rows(case))
        except Unavailable:  # reported when the case runs
            return None
    unknown = [name for name in only if name not in known]
    if not unknown:
        return None
    return (
        f"--only names no implementation timed here: {', '.join(map(repr, unknown))}; "
        f"choose from {', '.join(map(repr, known))}"
    )


def _misplaced_sequences(args: argparse.Namespace) -> str | None:
    if args.sequences and "decode-interleaved" not in (args.preset or []):
        return f"--sequences applies to --preset decode-interleaved; got {args.sequences}"
    return None


def _describe(info: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in info.items())


def format_table(results: Sequence[Any], *, width: int | None = None) -> str:
    """Results as a table per case, at most `width` wide; unsteady medians marked "!"."""
    from rope_ref.cli.bench.harness import UNSTEADY_SPREAD
    from rope_ref.cli.tables import Column
    from rope_ref.cli.tables import format_table as layout

    columns = [
        Column("implementation", wrap=True),
        *(Column(h, "right") for h in ("median", "quartiles", "GB/s", "% of copy")),
        Column("x reference", "right"),
        Column("n", "right"),
        Column("note", wrap=True),
    ]
    lines: list[str] = []
    for case in dict.fromkeys(r.case for r in results):
        rows = [
            (
                r.name,
                _time(r.median_s) + (" !" if r.unsteady else ""),
                "-" if r.q1_s is None else f"{_time(r.q1_s)} - {_time(r.q3_s)}",
                _num(r.gb_per_s, "{:.1f}"),
                _num(r.percent_of_copy, "{:.0f}%"),
                _num(r.speedup_vs_reference, "{:.1f}x"),
                str(r.samples),
                r.note,
            )
            for r in results
            if r.case == case
        ]
        lines += [*([""] if lines else []), f"[{case.label}]", *layout(columns, rows, width=width)]
    if any(r.unsteady for r in results):
        lines.append(
            f"! unsteady: the quartiles span more than {UNSTEADY_SPREAD:.0%} of the median; "
            "the machine was busy or the call's time varies (run again, or with more --rounds)"
        )
    return "\n".join(lines)


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)
