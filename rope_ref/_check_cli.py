"""`rope-ref check`: test any RoPE callable against the oracle and diagnose mismatches."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
from typing import Any

__all__ = ["register"]

_CONVENTION_HELP = {
    "plain": "fn(x, positions): NumPy x (batch, heads, seq, head_dim), int64 positions (seq,)",
    "hf": "fn(q, k, cos, sin) -> (q, k): torch (batch, heads, seq, head_dim), cos/sin "
    "(batch, seq, rotary_dim) as transformers' apply_rotary_pos_emb takes them",
    "cos_sin": "fn(x, cos, sin): torch x (batch, seq, heads, head_dim), half-width cos/sin "
    "(seq, rotary_dim/2) as flash-attn takes them",
    "complex": "fn(x, freqs_cis) or fn(xq, xk, freqs_cis): torch x (batch, seq, heads, "
    "head_dim), complex freqs_cis (seq, rotary_dim/2) as Meta LLaMA",
}


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to `commands`."""
    parser = commands.add_parser(
        "check",
        help="test a RoPE function against the oracle; shrink and diagnose a mismatch",
        description="Import TARGET, drive it with Hypothesis-generated cases through a "
        "calling convention, compare every result with rope_ref under the error model, "
        "shrink a failure to a minimal counterexample and name its likely cause. Exit "
        "status: 0 conformant, 1 not conformant (or the function raised), 2 usage error.",
        epilog="conventions: "
        + "; ".join(f"{name}: {text}" for name, text in _CONVENTION_HELP.items()),
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help="the callable to check")
    parser.add_argument("--convention", required=True, choices=tuple(_CONVENTION_HELP))
    parser.add_argument("--head-dim", type=int, default=64, help="features per head (64)")
    parser.add_argument("--rotary-dim", type=int, default=None, help="rotated features")
    parser.add_argument("--rotary-start", type=int, default=0, help="first rotated feature")
    parser.add_argument("--base", type=float, default=10000.0, help="frequency base (10000)")
    parser.add_argument(
        "--attention-factor",
        type=float,
        default=1.0,
        help="factor the results must carry on cos/sin, as YaRN's mscale (1)",
    )
    parser.add_argument("--layout", choices=("auto", "half", "interleaved"), default="auto")
    parser.add_argument("--max-position", type=int, default=32768, help="largest position")
    parser.add_argument("--examples", type=int, default=100, help="Hypothesis examples (100)")
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64", "float16", "bfloat16"),
        default="float32",
        help="dtype of x (float32); bfloat16 needs a torch convention",
    )
    parser.add_argument("--device", default="cpu", help="torch device for torch conventions")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0)")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from rope_ref.testing._check import UsageError

    try:
        cfg, fn = _setup(args)
    except UsageError as err:
        print(f"rope-ref check: error: {err}")
        return 2
    except _ImportFailedError as failed:
        print(f"rope-ref check {args.target}")
        print(f"FAIL: importing the target raised {failed}")
        return 1
    from rope_ref.testing._check import check

    report = check(fn, cfg)
    for line in _report_lines(args, cfg, report):
        print(line)
    return report.exit_status


class _ImportFailedError(Exception):
    pass


def _setup(args: argparse.Namespace) -> tuple[Any, Any]:
    from rope_ref._spec import RopeSpec
    from rope_ref.testing._check import CheckConfig, UsageError, describe_exception, load_target
    from rope_ref.testing._conventions import TORCH_CONVENTIONS, TargetError

    if importlib.util.find_spec("hypothesis") is None:
        msg = "needs Hypothesis: pip install 'rope-ref[testing]'"
        raise UsageError(msg)
    if args.convention in TORCH_CONVENTIONS and importlib.util.find_spec("torch") is None:
        msg = f"--convention {args.convention} passes torch tensors; torch is not installed."
        raise UsageError(msg)
    if args.convention == "plain" and args.dtype == "bfloat16":
        msg = "--dtype bfloat16 needs a torch convention (NumPy has no bfloat16)."
        raise UsageError(msg)
    if args.examples < 1:
        msg = f"--examples must be positive; got {args.examples}."
        raise UsageError(msg)
    if args.max_position < 0:
        msg = f"--max-position must be non-negative; got {args.max_position}."
        raise UsageError(msg)
    if not (math.isfinite(args.attention_factor) and args.attention_factor > 0):
        msg = f"--attention-factor must be positive; got {args.attention_factor}."
        raise UsageError(msg)
    try:
        spec = RopeSpec(
            args.head_dim,
            rotary_dim=args.rotary_dim,
            rotary_start=args.rotary_start,
            base=args.base,
            layout="half" if args.layout == "auto" else args.layout,
            scaling=None if args.attention_factor == 1.0 else _Factor(args.attention_factor),
        )
    except (TypeError, ValueError) as err:
        raise UsageError(str(err).replace("`", "")) from None
    try:
        fn = load_target(args.target)
    except TargetError as err:
        raise _ImportFailedError(describe_exception(err.error)) from None
    cfg = CheckConfig(
        convention=args.convention,
        spec=spec,
        layout=args.layout,
        dtype=args.dtype,
        max_position=args.max_position,
        examples=args.examples,
        seed=args.seed,
        device=args.device,
    )
    return cfg, fn


@dataclasses.dataclass(frozen=True)
class _Factor:
    """A scaling rule that keeps the frequencies and sets an attention factor."""

    factor: float

    def inv_freq(self, inv_freq: Any, *, base: float, rotary_dim: int, seq_len: Any) -> Any:
        return inv_freq

    def attention_factor(self, *, seq_len: Any) -> float:
        return self.factor


def _report_lines(args: argparse.Namespace, cfg: Any, report: Any) -> list[str]:
    spec = cfg.spec
    lines = [
        f"rope-ref check {args.target}",
        f"  convention: {cfg.convention}: {_CONVENTION_HELP[cfg.convention]}",
        f"  spec: head_dim {spec.head_dim}, rotary_dim {spec.rotary_dim}, rotary_start "
        f"{spec.rotary_start}, base {spec.base:g}, attention factor {args.attention_factor:g}, "
        f"dtype {cfg.dtype}, positions 0..{cfg.max_position}",
        f"  layout: {report.layout}, {report.layout_note}",
    ]
    if report.status == "conformant":
        lines += [
            f"OK: conformant on {report.examples} examples",
            f"  measured error: max |error| {report.max_error:.3g}, at most "
            f"{report.max_ratio:.3g} of the tolerance",
            f"  error model: {report.model}",
        ]
        return lines
    if report.status == "error":
        lines.append(f"FAIL: {report.error}")
    else:
        lines.append(f"FAIL: not conformant (after {report.examples} calls, shrunk)")
    if report.counterexample is not None:
        lines.append(f"  minimal counterexample: {report.counterexample.describe()}")
    if report.worst is not None:
        lines.append(f"  worst element: {report.worst}")
    if report.diagnosis is not None:
        lines.append(f"  diagnosis: {report.diagnosis.cause}")
        lines.append(f"    {report.diagnosis.message}")
    lines += [f"  {detail}" for detail in report.details]
    return lines
