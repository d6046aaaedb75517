"""`rope-ref check`: test any RoPE callable against the oracle and diagnose mismatches."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

__all__ = ["register"]

_CONVENTION_HELP = {
    "plain": "fn(x, positions): x (batch, heads, seq, head_dim) of --array (NumPy), "
    "positions as --positions says (int64 (seq,) by default)",
    "hf": "fn(q, k, cos, sin) -> (q, k): torch (batch, heads, seq, head_dim), cos/sin "
    "(batch, seq, rotary_dim) as transformers' apply_rotary_pos_emb takes them",
    "cos_sin": "fn(x, cos, sin): torch x (batch, seq, heads, head_dim), half-width cos/sin "
    "(seq, rotary_dim/2) as flash-attn takes them",
    "complex": "fn(x, freqs_cis) or fn(xq, xk, freqs_cis): torch x (batch, seq, heads, "
    "head_dim), complex freqs_cis (seq, rotary_dim/2) as Meta LLaMA",
}
_DEFAULT_AXES = {"plain": "bhsd", "hf": "bhsd", "cos_sin": "bshd", "complex": "bshd"}
_DEFAULT_POSITIONS = {"plain": "shared", "hf": "rows", "cos_sin": "shared", "complex": "shared"}
#: Limits that keep a check's arrays and positions meaningful (float64 holds integers
#: exactly up to 2**53; real heads have at most a few hundred features).
MAX_POSITION, MAX_HEAD_DIM = 2**53, 4096


class _UsageError(Exception):
    pass


class _ImportFailedError(Exception):
    pass


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
    parser.add_argument("--convention", required=True, choices=tuple(_CONVENTION_HELP))
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
    spec.add_argument("--layout", choices=("auto", "half", "interleaved"), default="auto")
    call = parser.add_argument_group("calling the target")
    call.add_argument(
        "--array", choices=("numpy", "torch", "mlx"), default="numpy", help="plain: array kind"
    )
    call.add_argument(
        "--axes",
        choices=("bhsd", "bshd"),
        default=None,
        help="axis order of x: (batch, heads, seq, dim) or (batch, seq, heads, dim)",
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
    run.add_argument("--device", default="cpu", help="torch device for torch arrays (cpu)")
    run.add_argument("--timeout", type=float, default=60.0, help="seconds per call (60)")
    run.add_argument("--seed", type=int, default=0, help="Hypothesis seed (0)")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        cfg, fn = _setup(args)
    except _UsageError as err:
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


def _setup(args: argparse.Namespace) -> tuple[Any, Any]:
    from rope_ref.testing._check import CheckConfig, UsageError, describe_exception, load_target
    from rope_ref.testing._conventions import TargetError

    _check_options(args)
    spec = _spec(args)
    calling = _calling(args, spec)
    try:
        fn = load_target(args.target)
    except UsageError as err:
        raise _UsageError(str(err)) from None
    except TargetError as err:
        raise _ImportFailedError(describe_exception(err.error)) from None
    cfg = CheckConfig(
        calling=calling,
        spec=spec,
        layout=args.layout,
        max_position=args.max_position,
        examples=args.examples,
        seed=args.seed,
        angle_dtype=args.angle_dtype,
    )
    return cfg, fn


def _fail(msg: str) -> None:
    raise _UsageError(msg)


def _check_options(args: argparse.Namespace) -> None:
    if importlib.util.find_spec("hypothesis") is None:
        _fail("needs Hypothesis: pip install 'rope-ref[testing]'")
    if not 1 <= args.examples <= 10**6:
        _fail(f"--examples must be between 1 and 1000000; got {args.examples}.")
    if not 0 <= args.max_position <= MAX_POSITION:
        _fail(
            f"--max-position must be between 0 and 2**53 = {MAX_POSITION}; got {args.max_position}."
        )
    if args.head_dim is not None and not 1 <= args.head_dim <= MAX_HEAD_DIM:
        _fail(f"--head-dim must be between 1 and {MAX_HEAD_DIM}; got {args.head_dim}.")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        _fail(f"--timeout must be a positive number of seconds; got {args.timeout}.")
    factor = args.attention_factor
    if factor is not None and not (math.isfinite(factor) and factor > 0):
        _fail(f"--attention-factor must be positive; got {factor}.")
    if not -(2**63) <= args.seed < 2**63:
        _fail(f"--seed must fit in 64 bits; got {args.seed}.")


def _spec(args: argparse.Namespace) -> Any:
    from rope_ref._spec import RopeSpec

    layout = None if args.layout == "auto" else args.layout
    fields = ("head_dim", "rotary_dim", "rotary_start", "base", "attention_factor")
    if args.hf_config is not None:
        given = [f"--{f.replace('_', '-')}" for f in fields if getattr(args, f) is not None]
        if given:
            _fail(f"--hf-config sets the spec; drop {', '.join(given)}.")
        spec = _spec_from_hf(args.hf_config)
        if spec.head_dim > MAX_HEAD_DIM:
            _fail(
                f"--hf-config must give a head_dim of at most {MAX_HEAD_DIM}; got {spec.head_dim}."
            )
        return spec if layout is None else dataclasses.replace(spec, layout=layout)
    factor = args.attention_factor or 1.0
    try:
        return RopeSpec(
            64 if args.head_dim is None else args.head_dim,
            rotary_dim=args.rotary_dim,
            rotary_start=args.rotary_start or 0,
            base=10000.0 if args.base is None else args.base,
            layout=layout or "half",
            scaling=None if factor == 1.0 else _Factor(factor),
        )
    except (TypeError, ValueError) as err:
        raise _UsageError(str(err).replace("`", "")) from None


def _spec_from_hf(text: str) -> Any:
    from rope_ref._spec import RopeSpec

    source = "the JSON string"
    if not text.lstrip().startswith("{"):
        path = Path(text)
        if not path.is_file():
            _fail(f"--hf-config must be a JSON string or a config.json file; got {text!r}.")
        text, source = path.read_text(encoding="utf-8"), str(path)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        msg = f"--hf-config: {source} is not valid JSON ({err})."
        raise _UsageError(msg) from None
    if not isinstance(config, dict):
        _fail(f"--hf-config must hold a JSON object; got {type(config).__name__}.")
    try:
        return RopeSpec.from_hf(config)
    except (TypeError, ValueError, KeyError) as err:
        msg = f"--hf-config: {str(err).replace('`', '')}"
        raise _UsageError(msg) from None


def _calling(args: argparse.Namespace, spec: Any) -> Any:
    from rope_ref.testing._conventions import TORCH_CONVENTIONS, Calling

    convention = args.convention
    array = "torch" if convention in TORCH_CONVENTIONS else args.array
    if convention in TORCH_CONVENTIONS and args.array != "numpy":
        _fail(f"--array is for --convention plain; {convention} passes torch tensors.")
    module = {"numpy": "numpy", "torch": "torch", "mlx": "mlx"}[array]
    if importlib.util.find_spec(module) is None:
        _fail(
            f"{'--convention ' + convention if array == 'torch' else '--array mlx'} passes "
            f"{module} arrays; {module} is not installed."
        )
    if array == "numpy" and args.dtype == "bfloat16":
        _fail("--dtype bfloat16 needs torch or MLX arrays (NumPy has no bfloat16).")
    positions = args.positions or _DEFAULT_POSITIONS[convention]
    allowed = {"plain": ("shared", "rows", "offset"), "hf": ("shared", "rows")}
    if positions not in allowed.get(convention, ("shared",)):
        _fail(f"--positions {positions} cannot be expressed by --convention {convention}.")
    if spec.sections is not None and (convention != "plain" or positions == "offset"):
        _fail(
            f"a multi-axis spec (sections {list(spec.sections)}) needs --convention plain "
            "with --positions shared or rows (positions carry a trailing axis)."
        )
    _check_device(args.device, array)
    return Calling(
        convention=convention,
        dtype=args.dtype,
        array=array,
        axes=args.axes or _DEFAULT_AXES[convention],
        positions=positions,
        in_place=args.in_place,
        device=args.device,
        timeout=args.timeout,
    )


def _check_device(device: str, array: str) -> None:
    if array != "torch":
        if device != "cpu":
            _fail(f"--device is for torch tensors; --array {array} runs on cpu, got {device!r}.")
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        _fail(f"--device must be a torch device such as cpu or cuda:0; got {device!r}.")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        _fail(f"--device {device}: torch sees no CUDA device here.")
    if parsed.type not in ("cpu", "cuda"):
        module = getattr(torch, parsed.type, None)
        available = getattr(module, "is_available", None)
        if available is None or not available():
            _fail(f"--device {device}: torch has no usable {parsed.type!r} device here.")


@dataclasses.dataclass(frozen=True)
class _Factor:
    """A scaling rule that keeps the frequencies and sets an attention factor."""

    factor: float

    def inv_freq(self, inv_freq: Any, *, base: float, rotary_dim: int, seq_len: Any) -> Any:
        return inv_freq

    def attention_factor(self, *, seq_len: Any) -> float:
        return self.factor


def _describe_spec(spec: Any) -> str:
    text = (
        f"head_dim {spec.head_dim}, rotary_dim {spec.rotary_dim}, rotary_start "
        f"{spec.rotary_start}, base {spec.base:g}"
    )
    if spec.scaling is not None:
        from rope_ref._frequencies import attention_factor

        rule = spec.scaling
        text += f", scaling {rule!r}" if not isinstance(rule, _Factor) else ""
        text += f", attention factor {attention_factor(spec):g}"
    if spec.sections is not None:
        text += f", sections {list(spec.sections)} ({spec.section_order})"
    return text


def _report_lines(args: argparse.Namespace, cfg: Any, report: Any) -> list[str]:
    calling = cfg.calling
    strict = " (strict)" if cfg.angle_dtype == "float64" else ""
    lines = [
        f"rope-ref check {args.target}",
        f"  convention: {calling.convention}: {_CONVENTION_HELP[calling.convention]}",
        f"  calling: {calling.array} arrays, axes {calling.axes}, positions "
        f"{calling.positions}{', in place' if calling.in_place else ''}",
        f"  spec: {_describe_spec(cfg.spec)}",
        f"  dtype {calling.dtype}, positions 0..{cfg.max_position}, angle precision "
        f"{cfg.angle_dtype or 'float32 or better'}{strict}",
        f"  layout: {report.layout}, {report.layout_note}",
    ]
    precision = (
        f"  angle precision: {report.precision} (max angle error {report.max_angle_error:.2g} rad)"
    )
    if report.status == "conformant":
        lines += [
            f"OK: conformant on {report.examples} examples",
            f"  measured error: max |error| {report.max_error:.3g}, at most "
            f"{report.max_ratio:.3g} of the tolerance",
            precision,
            f"  error model: {report.model}",
        ]
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
    return lines
