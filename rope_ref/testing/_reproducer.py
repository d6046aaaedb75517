"""A Python snippet that replays the minimal counterexample of a failed `rope-ref check`.

The snippet rebuilds the inputs exactly as the check drew them (the same generator, seed
and dtype), calls the target the same way, and ends in `assert_rope_close`, which raises
the same failure with its diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.testing._check_cases import CheckConfig
from rope_ref.testing._conventions import Case, oracle_grid

__all__ = ["reproducer"]


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


def _x_shape(case: Case, cfg: CheckConfig) -> tuple[int, ...]:
    b, s, d = case.batch, case.seq, cfg.spec.head_dim
    return (b, case.heads, s, d) if cfg.calling.axes == "bhsd" else (b, s, case.heads, d)


def reproducer(
    target: str, cfg: CheckConfig, spec: RopeSpec, case: Case, keywords: tuple[str, ...] = ()
) -> list[str] | None:
    """The lines of a snippet that replays `case`; None for a convention it cannot write.

    `keywords` are the spec keywords the target takes (``spec``, ``head_dim``, ...).
    """
    calling = cfg.calling
    if calling.convention != "plain" or calling.in_place:
        return None
    shape = _x_shape(case, cfg)
    positions = np.asarray(case.positions).tolist()
    lines = ["import numpy as np", *_spec_lines(spec), *_import_lines(target)]
    lines.append(
        f"x = np.random.default_rng([{case.seed}, 0]).uniform(-1.0, 1.0, {shape})"
        + (".astype(np.float32)" if calling.array == "mlx" else "")
    )
    convert = {
        "numpy": f"x.astype({calling.dtype!r})",
        "torch": f"torch.from_numpy(x).to(torch.{calling.dtype})",
        "jax": f"jnp.asarray(x).astype(jnp.{calling.dtype})",
        "mlx": f"mx.array(x).astype(mx.{calling.dtype})",
    }[calling.array]
    imports = {
        "torch": "import torch",
        "jax": "import jax.numpy as jnp",
        "mlx": "import mlx.core as mx",
    }
    if calling.array in imports:
        lines.insert(0, imports[calling.array])
    lines.append(f"x = {convert}")
    if calling.positions == "offset":
        lines.append(f"positions = {int(case.positions[0])}")
    else:
        wrap = {
            "numpy": "np.array({})",
            "torch": "torch.tensor({})",
            "jax": "jnp.asarray(np.array({}))",
            "mlx": "mx.array(np.array({}))",
        }[calling.array]
        lines.append(f"positions = {wrap.format(positions)}")
    given = "".join(f", {k}=spec" if k == "spec" else f", {k}=spec.{k}" for k in keywords)
    grid = np.asarray(oracle_grid(case, calling, spec)).tolist()
    lines += [
        f"result = fn(x, positions{given})",
        "from rope_ref.testing import assert_rope_close",
        f"assert_rope_close(result, x, spec, np.array({grid}), seq_axis={calling.seq_axis}"
        + (f", angle_dtype={cfg.angle_dtype!r}" if cfg.angle_dtype else "")
        + (f", position_dtype={cfg.position_dtype!r}" if cfg.position_dtype else "")
        + (f", dtype={cfg.result_dtype!r}" if cfg.result_dtype else "")
        + ")",
    ]
    return lines
