"""`rope-ref check`: test any RoPE callable against the oracle and diagnose mismatches."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Any

__all__ = ["register"]

_CONVENTION_HELP = {
    "plain": "fn(x, positions): x (batch, heads, seq, head_dim) of --array (NumPy, torch, "
    "JAX, MLX), positions as --positions says (int64 (seq,) by default)",
    "hf": "fn(q, k, cos, sin) -> (q, k): torch (batch, heads, seq, head_dim), cos/sin "
    "(batch, seq, rotary_dim) as transformers' apply_rotary_pos_emb takes them",
    "cos_sin": "fn(x, cos, sin): torch x (batch, seq, heads, head_dim), half-width cos/sin "
    "(seq, rotary_dim/2) as flash-attn takes them",
    "complex": "fn(x, freqs_cis) or fn(xq, xk, freqs_cis): torch x (batch, seq, heads, "
    "head_dim), complex freqs_cis (seq, rotary_dim/2) as Meta LLaMA",
    "full": "fn(x, cos, sin): torch x (batch, heads, seq, head_dim), full-width cos/sin "
    "(batch, seq, rotary_dim) as litgpt takes them",
    "freqs": "fn(x, freqs): torch x (seq, batch, heads, head_dim), full-width angles "
    "(seq, 1, 1, rotary_dim) in float32 as Megatron-core takes them",
}


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to `commands`."""
    parser = commands.add_parser(
        "check",
        help="test a RoPE function against the oracle; shrink and diagnose a mismatch",
        description="Import TARGET, drive it with Hypothesis-generated cases through a "
        "calling convention, compare every result with rope_ref under the error model, "
        "shrink a failure to a minimal counterexample and name its likely cause. Inputs are "
        "fresh arrays the oracle copies before each call; a target that takes a `spec` "
        "keyword (or head_dim, rotary_dim, base, layout, ...) receives it. Exit status: 0 "
        "conformant, 1 not conformant (or the function raised, exited or hung), 2 usage "
        "error.",
        epilog="conventions: "
        + "; ".join(f"{name}: {text}" for name, text in _CONVENTION_HELP.items()),
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help="the callable to check")
    parser.add_argument(
        "--convention",
        required=True,
        choices=tuple(_CONVENTION_HELP),
        help="how the target is called (listed below)",
    )
    spec = parser.add_argument_group("the embedding (default: LLaMA's, head_dim 64)")
    spec.add_argument(
        "--hf-config",
        metavar="JSON",
        help="a transformers config.json path or JSON string: the spec via RopeSpec.from_hf "
        "(every scaling rule, M-RoPE sections); excludes the options below but --layout",
    )
    spec.add_argument("--head-dim", type=int, default=None, help="features per head (64)")
    spec.add_argument("--rotary-dim", type=int, default=None, help="rotated features")
    spec.add_argument("--rotary-start", type=int, default=None, help="first rotated feature")
    spec.add_argument("--base", type=float, default=None, help="frequency base (10000)")
    spec.add_argument(
        "--attention-factor",
        type=float,
        default=None,
        help="factor the results must carry on cos/sin, as YaRN's mscale (1)",
    )
    spec.add_argument(
        "--layout",
        choices=("half", "interleaved", "auto"),
        default=None,
        help="pairing of the spec: half (j, j + n/2) or interleaved (2j, 2j + 1); default: "
        "the spec's (half, or what --hf-config says). auto is an explicit opt-in that adopts "
        "whichever layout the function matches and says so in the verdict: it cannot catch "
        "a layout bug",
    )
    call = parser.add_argument_group("calling the target")
    call.add_argument(
        "--array",
        choices=("numpy", "torch", "jax", "mlx"),
        default="numpy",
        help="plain: array kind (numpy)",
    )
    call.add_argument(
        "--axes",
        choices=("bhsd", "bshd", "sbhd"),
        default=None,
        help="axis order of x: (batch, heads, seq, dim), (batch, seq, heads, dim) or "
        "(seq, batch, heads, dim)",
    )
    call.add_argument(
        "--positions",
        choices=("shared", "rows", "offset"),
        default=None,
        help="shared: one (seq,) row; rows: (batch, seq) ids; offset: a Python int, "
        "positions offset + arange(seq) (MLX, KV-cache decoding). Multi-axis specs add a "
        "trailing axis (t, h, w, ...)",
    )
    call.add_argument(
        "--in-place",
        action="store_true",
        help="the target rotates its array arguments in place (vLLM, flash-attn kernels); "
        "its return value is ignored",
    )
    run = parser.add_argument_group("the search")
    run.add_argument("--max-position", type=int, default=32768, help="largest position")
    run.add_argument(
        "--seq-len",
        type=float,
        default=None,
        metavar="L",
        help="the length a length-dependent scaling rule (dynamic NTK, LongRoPE) is computed "
        "at: the engine's configured maximum length (vLLM's max_model_len, llama.cpp's "
        "n_ctx); the oracle, the tables handed over and a target that takes a seq_len "
        "keyword all use it (default: the largest position of each call + 1)",
    )
    run.add_argument("--examples", type=int, default=100, help="Hypothesis examples (100)")
    run.add_argument(
        "--dtype",
        choices=("float32", "float64", "float16", "bfloat16"),
        default="float32",
        help="dtype of x (float32); bfloat16 needs torch or MLX arrays",
    )
    run.add_argument(
        "--angle-dtype",
        choices=("float32", "float64"),
        default=None,
        help="precision the angles must have; float64 is the strict mode that fails "
        "float32-grade angles (default: float32 below float64 results)",
    )
    run.add_argument(
        "--result-dtype",
        choices=("float32", "float64", "float16", "bfloat16"),
        default=None,
        help="allow results in this dtype and judge them at its precision (default: the "
        "results must be in --dtype; any other dtype fails)",
    )
    run.add_argument(
        "--position-dtype",
        choices=("float32", "bfloat16", "float16"),
        default=None,
        help="the target builds its own position grid in this dtype (a float32 linspace): "
        "allow the rounding that gives (default: positions exact as given)",
    )
    run.add_argument(
        "--max-ulps",
        type=float,
        default=None,
        metavar="N",
        help="also require every result (each drawn example and the probe) within N ulps of "
        "the correctly rounded RoPE (needs mpmath)",
    )
    run.add_argument("--device", default="cpu", help="torch device for torch arrays (cpu)")
    run.add_argument("--timeout", type=float, default=60.0, help="seconds per call (60)")
    run.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the verdict as one JSON object (same exit status)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from rope_ref.cli.check_json import outcome_json
    from rope_ref.cli.check_options import OptionError

    try:
        cfg = _setup(args)
    except OptionError as err:
        return _usage_error(args, str(err))
    outcome = _run_with_progress(args.target, cfg)
    if outcome.kind == "usage":
        return _usage_error(args, outcome.message)
    if outcome.kind == "interrupted":  # Ctrl-C: no verdict, the shell's status for SIGINT
        print(f"rope-ref check: {outcome.message}", file=sys.stderr)
        return 130
    status = 1 if outcome.report is None else outcome.report.exit_status
    if args.json:
        print(outcome_json(args.target, outcome, status, cfg.calling.seq_len))
        return status
    if outcome.report is None:
        print(f"rope-ref check {args.target}")
        failure = "importing the target raised " if outcome.kind == "import_failed" else ""
        print(f"FAIL: {failure}{outcome.message}")
        return status
    for line in _report_lines(args, cfg, outcome.report):
        print(line)
    return status


def _usage_error(args: argparse.Namespace, message: str) -> int:
    if args.json:
        import json

        error = {"target": args.target, "verdict": "usage_error", "error": message}
        print(json.dumps({**error, "exit_status": 2}))
    else:  # errors go to stderr, as for every subcommand (docs/cli.md)
        print(f"rope-ref check: error: {message}", file=sys.stderr)
    return 2


def _run_with_progress(target: str, cfg: Any) -> Any:
    """The supervised check (the target runs in a child process only), with progress.

    The bar on stderr counts the calls of the target against the examples asked for;
    shrinking and the layout probe add calls past them.
    """
    from rope_ref.cli.check.supervise import run_supervised
    from rope_ref.cli.progress import Progress

    calls = 0
    with Progress("rope-ref check", total=cfg.examples) as bar:

        def returned() -> None:
            nonlocal calls
            calls += 1
            bar.update(calls, detail=f"{calls} calls")

        return run_supervised(target, cfg, on_return=returned)


def _setup(args: argparse.Namespace) -> Any:
    from rope_ref.cli.check.engine import CheckConfig, UsageError
    from rope_ref.cli.check.target import parse_target
    from rope_ref.cli.check_options import (
        OptionError,
        calling_from_args,
        check_options,
        spec_from_args,
    )

    check_options(args)
    spec = spec_from_args(args)
    calling = dataclasses.replace(
        calling_from_args(args, spec), seq_len=_seq_len(args.seq_len, OptionError)
    )
    try:
        parse_target(args.target)
    except UsageError as err:
        raise OptionError(str(err)) from None
    return CheckConfig(
        calling=calling,
        spec=spec,
        layout=args.layout or spec.layout,
        max_position=args.max_position,
        examples=args.examples,
        seed=args.seed,
        angle_dtype=args.angle_dtype,
        position_dtype=args.position_dtype,
        result_dtype=args.result_dtype,
        max_ulps=args.max_ulps,
    )


def _seq_len(value: float | None, error: type[Exception]) -> float | None:
    """`--seq-len` checked: a finite length of at least 1, or None."""
    if value is None:
        return None
    if not math.isfinite(value) or value < 1:
        msg = f"--seq-len must be a finite length of at least 1; got {value!r}."
        raise error(msg)
    return value


def _describe_spec(spec: Any) -> str:
    text = (
        f"head_dim {spec.head_dim}, rotary_dim {spec.rotary_dim}, rotary_start "
        f"{spec.rotary_start}, base {spec.base:g}"
    )
    if spec.scaling is not None:
        from rope_ref._core.frequencies import attention_factor
        from rope_ref.cli.check_options import AttentionFactorOnly

        rule = spec.scaling
        text += f", scaling {rule!r}" if not isinstance(rule, AttentionFactorOnly) else ""
        text += f", attention factor {attention_factor(spec):g}"
    if spec.sections is not None:
        text += f", sections {list(spec.sections)} ({spec.section_order})"
    return text


#: The shape of x in each axis order (`--axes`).
_X_SHAPES = {
    "bhsd": "(batch, heads, seq, head_dim)",
    "bshd": "(batch, seq, heads, head_dim)",
    "sbhd": "(seq, batch, heads, head_dim)",
}


def _convention_line(calling: Any) -> str:
    """The convention's description, with x's shape in the axis order actually used."""
    from rope_ref.cli.check_options import default_axes

    text = _CONVENTION_HELP[calling.convention]
    default = _X_SHAPES[default_axes(calling.convention)]
    return text.replace(default, _X_SHAPES[calling.axes], 1)


def _report_lines(args: argparse.Namespace, cfg: Any, report: Any) -> list[str]:
    calling = cfg.calling
    strict = " (strict)" if cfg.angle_dtype == "float64" else ""
    lines = [
        f"rope-ref check {args.target}",
        f"  convention: {calling.convention}: {_convention_line(calling)}",
        f"  calling: {calling.array} arrays, axes {calling.axes}, positions "
        f"{calling.positions}{', in place' if calling.in_place else ''}",
        f"  spec: {_describe_spec(cfg.spec)}"
        + ("" if calling.seq_len is None else f", seq_len {calling.seq_len:g}"),
        f"  dtype {calling.dtype}"
        + (f" (results allowed in {cfg.result_dtype})" if cfg.result_dtype else "")
        + f", positions 0..{cfg.max_position}, angle precision "
        f"{cfg.angle_dtype or 'float32 or better'}{strict}",
        f"  layout: {report.layout}, {report.layout_note}",
    ]
    adopted = report.layout != cfg.spec.layout
    if adopted:
        lines.append(
            f"  NOTE: checked with the layout {report.layout!r} adopted by --layout auto; it "
            f"differs from the spec's {cfg.spec.layout!r}"
        )
    precision = (
        f"  angle precision: {report.precision} (max angle error {report.max_angle_error:.2g} rad)"
    )
    if report.status == "conformant":
        with_layout = f" with the adopted layout {report.layout!r}" if adopted else ""
        lines += [
            f"OK: conformant on {report.examples} examples{with_layout}",
            f"  measured error: max |error| {report.max_error:.3g}, at most "
            f"{report.max_ratio:.3g} of the tolerance",
            *_ulps_lines(report),
            precision,
            f"  error model: {report.model}",
        ]
        return lines
    if report.status == "not_checkable":
        lines += [f"NOT CHECKABLE past position {report.checkable_to}: no verdict there", precision]
        lines += [f"  {detail}" for detail in report.details]
        return lines
    if report.status == "error":
        lines.append(f"FAIL: {report.error}")
    else:
        lines.append(f"FAIL: not conformant (after {report.examples} calls, shrunk)")
        lines.append(precision)
    if report.counterexample is not None:
        lines.append(f"  minimal counterexample: {report.counterexample.describe()}")
    if report.worst is not None:
        lines.append(f"  worst element: {report.worst}")
    if report.diagnosis is not None:
        lines.append(f"  diagnosis: {report.diagnosis.cause}")
        lines.append(f"    {report.diagnosis.message}")
    lines += [f"  {detail}" for detail in report.details]
    if report.reproducer:
        lines.append("  reproduce it (paste into Python, from the directory you ran this in):")
        lines += [f"    {line}" for line in report.reproducer]
    return lines


def _ulps_lines(report: Any) -> list[str]:
    if report.max_ulps is None:
        return []
    return [
        f"  errors in ulps: at most {report.max_ulps:.3g} over the {report.examples} "
        "examples and the probe"
    ]
