"""A Python snippet that replays the minimal counterexample of a failed `rope-ref check`.

The snippet rebuilds the inputs exactly as the check drew them (the same generator, seed,
dtype, array kind and axis order, and for the table conventions the same cos/sin, complex
or angle tables), calls the target the same way, and ends in `assert_rope_close` on each
result, which raises the same failure with its diagnosis. It does so for every calling
convention, with or without ``--in-place``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check.cases import CheckConfig
from rope_ref.cli.check.conventions import TORCH_CONVENTIONS, Calling, Case, _x_shape

__all__ = ["reproducer"]

_IMPORTS = {
    "torch": "import torch",
    "jax": "import jax.numpy as jnp",
    "mlx": "import mlx.core as mx",
}


def _import_lines(target: str) -> list[str]:
    module, _, attr = target.partition(":")
    if module.endswith(".py") or "/" in module:
        path = str(Path(module).resolve())
        return [
            "import importlib.util",
            f"_spec = importlib.util.spec_from_file_location('target', {path!r})",
            "_module = importlib.util.module_from_spec(_spec)",
            "_spec.loader.exec_module(_module)",
            f"fn = _module.{attr}",
        ]
    head, _, rest = attr.partition(".")
    return [f"from {module} import {head} as fn"] + ([f"fn = fn.{rest}"] if rest else [])


def _spec_lines(spec: RopeSpec) -> list[str]:
    lines = ["from rope_ref import RopeSpec"]
    if spec.xpos is not None:
        lines.append("from rope_ref import XPos")
    if spec.scaling is not None:
        lines.append(f"from rope_ref.scaling import {type(spec.scaling).__name__}")
    if type(spec.scaling).__name__ == "AttentionFactorOnly":
        lines[-1] = "from rope_ref.cli.check_options import AttentionFactorOnly"
    lines.append(f"spec = {spec!r}")
    return lines


def _kind(calling: Calling) -> str:
    return "torch" if calling.convention in TORCH_CONVENTIONS else calling.array


def _to_array(calling: Calling) -> str:
    """A lambda that turns float64 NumPy values into the target's array, as the check does."""
    body = {
        "numpy": f"v.astype({calling.dtype!r})",
        "torch": f"torch.from_numpy(v).to(device={calling.device!r}, dtype=torch.{calling.dtype})",
        "jax": f"jnp.asarray(v).astype(jnp.{calling.dtype})",
        "mlx": f"mx.array(v.astype(np.float32)).astype(mx.{calling.dtype})",
    }[_kind(calling)]
    return f"array = lambda v: {body}"


def _positions_arg(case: Case, calling: Calling) -> str:
    if calling.positions == "offset":
        return str(int(case.positions[0]))
    return {
        "numpy": "positions.copy()",
        "torch": f"torch.from_numpy(positions.copy()).to({calling.device!r})",
        "jax": "jnp.asarray(positions)",
        "mlx": "mx.array(positions)",
    }[calling.array]


def _table_lines(spec: RopeSpec, calling: Calling) -> tuple[list[str], list[str]]:
    """Lines that build the tables of a table convention, and the call's table arguments."""
    wide = (
        "wide = lambda t: np.concatenate([t, t], axis=-1)"
        if spec.layout == "half"
        else "wide = lambda t: np.repeat(t, 2, axis=-1)"
    )
    length = "" if calling.seq_len is None else f", seq_len={calling.seq_len!r}"
    tables = (
        "cos, sin = (np.asarray(t, dtype=np.float64) for t in rope_cos_sin(spec, {}" + length + "))"
    )
    rows = "positions if positions.ndim == 2 else positions[None, :]"
    convention = calling.convention
    if convention in ("hf", "full"):
        lines = ["from rope_ref import rope_cos_sin", wide, tables.format(rows)]
        return lines, ["array(wide(cos))", "array(wide(sin))"]
    if convention == "cos_sin":
        return ["from rope_ref import rope_cos_sin", tables.format("positions")], [
            "array(cos)",
            "array(sin)",
        ]
    to = f"device={calling.device!r}, dtype=torch"
    if convention == "complex":
        dtype = "complex128" if calling.dtype == "float64" else "complex64"
        build = f"freqs_cis = torch.from_numpy(cos + 1j * sin).to({to}.{dtype})"
        return ["from rope_ref import rope_cos_sin", tables.format("positions"), build], [
            "freqs_cis"
        ]
    dtype = "float64" if calling.dtype == "float64" else "float32"
    return [
        "from rope_ref import rope_angles",
        wide,
        "angles = np.asarray(rope_angles(spec, positions.astype(np.float64)"
        + length
        + "), dtype=np.float64)",
        f"freqs = torch.from_numpy(wide(angles)[:, None, None, :]).to({to}.{dtype})",
    ], ["freqs"]


def _grid(case: Case, calling: Calling, spec: RopeSpec) -> str:
    """The positions laid along the batch and seq axes, as `oracle_grid` lays them."""
    if np.asarray(case.positions).ndim == (2 if spec.sections is not None else 1):
        return "positions"
    return f"np.expand_dims(positions, {1 if calling.axes == 'bhsd' else 2})"


def reproducer(
    target: str,
    cfg: CheckConfig,
    spec: RopeSpec,
    case: Case,
    keywords: tuple[str, ...] = (),
    two_inputs: bool = False,
) -> list[str]:
    """The lines of a snippet that replays `case` through the calling convention of `cfg`.

    `keywords` are the spec keywords the target takes (``spec``, ``head_dim``, ...);
    `two_inputs` says that a ``complex`` target takes ``(xq, xk, freqs_cis)``.
    """
    calling = cfg.calling
    kind = _kind(calling)
    p = np.asarray(case.positions)
    d, h = spec.head_dim, case.heads
    inputs = {"x": _x_shape(case, h, d, calling)}
    if calling.convention == "hf" or (calling.convention == "complex" and two_inputs):
        inputs["k"] = _x_shape(case, (h + 1) // 2, d, calling)
    lines = ["import numpy as np"] + ([_IMPORTS[kind]] if kind in _IMPORTS else [])
    lines += [*_spec_lines(spec), *_import_lines(target)]
    lines += [
        "from rope_ref.testing import assert_rope_close",
        f"positions = np.array({p.tolist()}, dtype=np.{p.dtype})",
        f"values = lambda shape, salt: np.random.default_rng([{case.seed}, salt])"
        ".uniform(-1.0, 1.0, shape)",
        _to_array(calling),
    ]
    args = []
    for salt, (name, shape) in enumerate(inputs.items()):
        lines.append(f"{name} = array(values({shape}, {salt}))")
        args.append(name)
    if calling.convention == "plain":
        args.append(_positions_arg(case, calling))
    else:
        table_lines, table_args = _table_lines(spec, calling)
        lines += table_lines
        args += table_args
    given = "".join(
        f", {k}=spec" if k == "spec" else f", {k}=spec.{k}" for k in keywords if k != "seq_len"
    )
    if calling.seq_len is not None and "seq_len" in keywords:
        given += f", seq_len={calling.seq_len!r}"
    call = f"fn({', '.join(args)}{given})"
    names = list(inputs)
    if calling.in_place:
        lines.append(call)
    elif len(names) == 1:
        lines.append(f"x = {call}")
    else:
        lines.append(f"{', '.join(names)} = {call}")
    options = (
        f", seq_axis={calling.seq_axis}"
        + (f", angle_dtype={cfg.model_angle_dtype!r}" if cfg.model_angle_dtype else "")
        + (f", position_dtype={cfg.position_dtype!r}" if cfg.position_dtype else "")
        + (f", dtype={cfg.result_dtype!r}" if cfg.result_dtype else "")
        + (f", max_ulps={cfg.max_ulps!r}" if cfg.max_ulps is not None else "")
        + (f", seq_len={calling.seq_len!r}" if calling.seq_len is not None else "")
    )
    grid = _grid(case, calling, spec)
    for salt, (name, shape) in enumerate(inputs.items()):
        before = f"array(values({shape}, {salt}))"  # the input as it was before the call
        lines.append(f"assert_rope_close({name}, {before}, spec, {grid}{options})")
    return lines
