"""The options of `rope-ref check`: validated, and turned into a spec and a `Calling`.

Every bad value raises `OptionError` with a message that names the option and the value
received (printed as one line, exit status 2, never a traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import re
from typing import Any, NoReturn

from rope_ref._config.hf_file import MAX_CONFIG_BYTES, read_config

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_HEAD_DIM",
    "MAX_POSITION",
    "AttentionFactorOnly",
    "OptionError",
    "calling_from_args",
    "check_options",
    "spec_from_args",
]

_DEFAULT_AXES = {
    "plain": "bhsd",
    "hf": "bhsd",
    "cos_sin": "bshd",
    "complex": "bshd",
    "full": "bhsd",
    "freqs": "sbhd",
}
_DEFAULT_POSITIONS = {
    "plain": "shared",
    "hf": "rows",
    "cos_sin": "shared",
    "complex": "shared",
    "full": "shared",
    "freqs": "shared",
}
#: Limits that keep a check's arrays and positions meaningful (float64 holds integers
#: exactly up to 2**53; real heads have at most a few hundred features).
MAX_POSITION, MAX_HEAD_DIM = 2**53, 4096


class OptionError(Exception):
    """A bad option value: printed as one line, exit status 2."""


def fail(msg: str) -> NoReturn:
    raise OptionError(msg)


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any work, options that cannot run (a usage error naming the option)."""
    if importlib.util.find_spec("hypothesis") is None:
        fail("needs Hypothesis: pip install 'rope-ref[testing]'")
    if not 1 <= args.examples <= 10**6:
        fail(f"--examples must be between 1 and 1000000; got {args.examples}.")
    if not 0 <= args.max_position <= MAX_POSITION:
        fail(
            f"--max-position must be between 0 and 2**53 = {MAX_POSITION}; got {args.max_position}."
        )
    if args.head_dim is not None and not 1 <= args.head_dim <= MAX_HEAD_DIM:
        fail(f"--head-dim must be between 1 and {MAX_HEAD_DIM}; got {args.head_dim}.")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        fail(f"--timeout must be a positive number of seconds; got {args.timeout}.")
    factor = args.attention_factor
    if factor is not None and not (math.isfinite(factor) and factor > 0):
        fail(f"--attention-factor must be positive; got {factor}.")
    bound = args.max_ulps
    if bound is not None and not (math.isfinite(bound) and bound >= 0):
        fail(f"--max-ulps must be a number of ulps >= 0; got {bound}.")
    if bound is not None and importlib.util.find_spec("mpmath") is None:
        fail("--max-ulps needs mpmath: pip install mpmath")
    if not -(2**63) <= args.seed < 2**63:
        fail(f"--seed must fit in 64 bits; got {args.seed}.")


def spec_from_args(args: argparse.Namespace) -> Any:
    """The `RopeSpec` the options describe (``--hf-config`` or the single fields)."""
    from rope_ref._core.spec import RopeSpec

    layout = None if args.layout == "auto" else args.layout
    fields = ("head_dim", "rotary_dim", "rotary_start", "base", "attention_factor")
    if args.hf_config is not None:
        given = [f"--{f.replace('_', '-')}" for f in fields if getattr(args, f) is not None]
        if given:
            fail(f"--hf-config sets the spec; drop {', '.join(given)}.")
        spec = spec_from_hf(args.hf_config)
        if spec.head_dim > MAX_HEAD_DIM:
            fail(
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
            scaling=None if factor == 1.0 else AttentionFactorOnly(factor),
        )
    except (TypeError, ValueError) as err:
        raise OptionError(_as_options(str(err))) from None


def _as_options(message: str) -> str:
    """A `RopeSpec` error in the words of the command line: `rotary_dim` is --rotary-dim."""
    for field in ("head_dim", "rotary_dim", "rotary_start", "base"):
        message = message.replace(f"`{field}`", "--" + field.replace("_", "-"))
    return message.replace("`", "")


def spec_from_hf(text: str) -> Any:
    """The spec of ``--hf-config``: a JSON object string, or a config.json file's path."""
    from rope_ref._core.spec import RopeSpec

    config = _parse_json(text) if text.lstrip().startswith(("{", "[")) else _read_config(text)
    try:
        return RopeSpec.from_hf(config)
    except (TypeError, ValueError, KeyError) as err:
        msg = f"--hf-config: {str(err).replace('`', '')}"
        raise OptionError(msg) from None
    except RecursionError:
        fail("--hf-config: the config is nested too deeply.")


def _parse_json(text: str) -> dict[str, Any]:
    """The JSON object string given to ``--hf-config``."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        msg = f"--hf-config: the JSON string is not valid JSON ({err})."
        raise OptionError(msg) from None
    except RecursionError:
        fail("--hf-config: the JSON string is nested too deeply to be a config.")
    if not isinstance(config, dict):
        fail(f"--hf-config must hold a JSON object; got {type(config).__name__}.")
    return config


def _short(text: str, limit: int = 80) -> str:
    """`text` quoted, cut to `limit` characters (a long argument stays one line)."""
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(shown)


def _read_config(name: str) -> dict[str, Any]:
    """The config file `name` read by `read_config` (what `RopeSpec.from_hf` reads).

    One reader, one size limit (`MAX_CONFIG_BYTES`): a device, a FIFO or a socket is
    refused unread, a file past the limit unparsed. Its refusals become one-line
    `OptionError` messages naming the option; a directory is refused here (the option
    takes a file).
    """
    where = f"--hf-config {_short(name)}"
    if os.path.isdir(name):
        fail(f"{where}: is a directory, not a config.json file.")
    try:
        return read_config(name)
    except (TypeError, ValueError) as err:
        fail(f"{where}: {_in_option_words(str(err), name)}")


def _in_option_words(message: str, name: str) -> str:
    """A `read_config` refusal said of the option's argument (the path is named before)."""
    stripped = name.strip()
    hint = (
        " (give a config.json path or a JSON object string)"
        if not stripped.endswith((".json", "/"))
        else ""
    )
    if "does not exist" in message:
        return f"file not found{hint}."
    if "is not a regular file" in message:
        return "is not a regular file (a device, a pipe or a socket); give a config.json."
    if "too large for a config.json" in message:
        return f"is larger than {MAX_CONFIG_BYTES // 2**20} MiB; a config.json is a few kB."
    unreadable = re.search(r"cannot be read: (.*)\.$", message)
    if unreadable is not None:
        return f"cannot be read as a file ({unreadable.group(1)}){hint}."
    byte = re.search(r"is not UTF-8 text \(byte (\d+)\)", message)
    if byte is not None:
        return f"is not UTF-8 text (byte {byte.group(1)}); a config.json is UTF-8 JSON."
    return message.replace("`", "")


def default_axes(convention: str) -> str:
    """The axis order of x for `convention` when --axes is not given."""
    return _DEFAULT_AXES[convention]


def calling_from_args(args: argparse.Namespace, spec: Any) -> Any:
    """How the target is called: its convention, array kind, axis order and positions."""
    from rope_ref.cli.check.conventions import TORCH_CONVENTIONS, Calling

    convention = args.convention
    array = "torch" if convention in TORCH_CONVENTIONS else args.array
    if convention in TORCH_CONVENTIONS and args.array != "numpy":
        fail(f"--array is for --convention plain; {convention} passes torch tensors.")
    module = array
    if importlib.util.find_spec(module) is None:
        fail(
            f"{'--convention ' + convention if array == 'torch' else '--array ' + array} "
            f"passes {module} arrays; {module} is not installed."
        )
    if array == "numpy" and args.dtype == "bfloat16":
        fail("--dtype bfloat16 needs torch, JAX or MLX arrays (NumPy has no bfloat16).")
    x64 = os.environ.get("JAX_ENABLE_X64", "").lower() in ("1", "true", "yes")
    if array == "jax" and args.dtype == "float64" and not x64:
        fail("--array jax --dtype float64 needs JAX_ENABLE_X64=1 (JAX computes in 32 bits).")
    positions = args.positions or _DEFAULT_POSITIONS[convention]
    allowed = {
        "plain": ("shared", "rows", "offset"),
        "hf": ("shared", "rows"),
        "full": ("shared", "rows"),
    }
    if positions not in allowed.get(convention, ("shared",)):
        fail(f"--positions {positions} cannot be expressed by --convention {convention}.")
    if spec.sections is not None and (convention != "plain" or positions == "offset"):
        fail(
            f"a multi-axis spec (sections {list(spec.sections)}) needs --convention plain "
            "with --positions shared or rows (positions carry a trailing axis)."
        )
    check_device(args.device, array)
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


def check_device(device: str, array: str) -> None:
    if array != "torch":
        if device != "cpu":
            fail(f"--device is for torch tensors; --array {array} runs on cpu, got {device!r}.")
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        fail(f"--device must be a torch device such as cpu or cuda:0; got {device!r}.")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        fail(f"--device {device}: torch sees no CUDA device here.")
    if parsed.type not in ("cpu", "cuda"):
        module = getattr(torch, parsed.type, None)
        available = getattr(module, "is_available", None)
        if available is None or not available():
            fail(f"--device {device}: torch has no usable {parsed.type!r} device here.")


@dataclasses.dataclass(frozen=True)
class AttentionFactorOnly:
    """A scaling rule that keeps the frequencies and sets an attention factor."""

    factor: float

    def inv_freq(self, inv_freq: Any, *, base: float, rotary_dim: int, seq_len: Any) -> Any:
        """The frequencies, unchanged."""
        return inv_freq

    def attention_factor(self, *, seq_len: Any) -> float:
        """The factor given."""
        return self.factor
