"""`rope-ref survey --transformers`: every RoPE model family of transformers against `from_hf`.

For each model package of the installed transformers whose modeling code defines a rotary
module, the sweep builds the package's default config, drives the family's own rotary module
(every layer type it accepts) and its own apply function at positions far from 0 (M-RoPE
with distinct axes), and compares the result with `RopeSpec.from_hf` of the same config
applied by rope_ref under the default error model. Each family agrees, disagrees (with the
largest error as a share of the tolerance), makes from_hf raise on a config its own code
accepts, has no RoPE (from_hf refuses, naming why), is refused (a rotation no RopeSpec
states, from_hf saying so), or is listed with the reason it cannot be driven.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import pkgutil
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.testing._report import rope_report

__all__ = ["FamilyResult", "families", "sweep", "sweep_family", "sweep_lines"]

BATCH, HEADS = 1, 2
#: Positions: small ones, powers of two and their neighbours, and far ones.
PROBE = np.array(
    [0, 1, 2, 3, 7, 255, 256, 257, 2047, 2048, 2049, 16383, 16384, 16385, 65535, 65536, 131071]
)
#: Words in a rotary class name that mark a vision or audio tower (positions are patches).
_TOWER = re.compile(r"Vision|Visual|Patch|Image|Video|2D|Axial|Vit|ViT|Pixel")


@dataclass(frozen=True)
class FamilyResult:
    """The sweep's verdict on one model package."""

    model_type: str
    #: "agree", "disagree", "from_hf refuses" (a config the family's code accepts), "no RoPE",
    #: "refused" (a rotation no RopeSpec states), "not driven".
    verdict: str
    detail: str = ""
    cases: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""
        return asdict(self)


class NotDrivenError(Exception):
    """A family the sweep cannot drive; the message says why."""


class FromHfRefusesError(Exception):
    """`RopeSpec.from_hf` raised on a config the family's own rotary module accepts."""


def families() -> list[str]:
    """The model packages of the installed transformers whose modeling code defines a RoPE.

    Examples
    --------
    >>> "llama" in families()  # doctest: +SKIP
    True
    """
    from transformers import models

    found = []
    for info in pkgutil.iter_modules(models.__path__):
        if not info.ispkg:
            continue
        folder = f"{models.__path__[0]}/{info.name}"
        texts = [
            Path(f"{folder}/{m.name}.py").read_text(encoding="utf-8")
            for m in pkgutil.iter_modules([folder])
            if m.name.startswith("modeling_")
            and not m.name.startswith(("modeling_tf", "modeling_flax"))
        ]
        if any(re.search(r"class \w*Rotary\w*\(|def apply_rotary", t) for t in texts):
            found.append(info.name)
    return sorted(found)


def _quiet(call: Callable[[], Any]) -> Any:
    transformers: Any = importlib.import_module("transformers")
    transformers.logging.set_verbosity_error()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return call()


def _modules(name: str) -> list[Any]:
    from transformers import models

    folder = f"{models.__path__[0]}/{name}"
    names = [
        m.name
        for m in pkgutil.iter_modules([folder])
        if m.name.startswith("modeling_")
        and not m.name.startswith(("modeling_tf", "modeling_flax"))
    ]
    return [
        _quiet(functools.partial(importlib.import_module, f"transformers.models.{name}.{n}"))
        for n in names
    ]


def _default_config(name: str) -> Any:
    from transformers import CONFIG_MAPPING

    if name in CONFIG_MAPPING:
        return _quiet(CONFIG_MAPPING[name])
    mod = _quiet(lambda: importlib.import_module(f"transformers.models.{name}"))
    for attr in dir(mod):
        obj = getattr(mod, attr, None)
        if (
            isinstance(obj, type)
            and attr.endswith("Config")
            and getattr(obj, "model_type", "") == name
        ):
            return _quiet(obj)
    msg = f"no config class with model_type {name!r}"
    raise NotDrivenError(msg)


def _sub_configs(config: Any, depth: int = 0) -> Iterator[Any]:
    """`config` and the configs nested in it (text, vision, audio towers ...)."""
    from transformers import PreTrainedConfig

    yield config
    if depth > 2:
        return
    for value in vars(config).values():
        if isinstance(value, PreTrainedConfig):
            yield from _sub_configs(value, depth + 1)


def _rotary_classes(modules: list[Any]) -> list[type[Any]]:
    import torch

    found = []
    for mod in modules:
        for attr, obj in vars(mod).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, torch.nn.Module)
                and obj.__module__ == mod.__name__
                and "Rotary" in attr
                and "config" in inspect.signature(obj).parameters
            ):
                found.append(obj)
    return found


def _build_rotary(rotary: type[Any], config: Any) -> tuple[Any, Any]:
    """The rotary module and the config it is built from (`config` or one nested in it).

    The config its signature names comes first, then the text config, then the others.
    """
    annotation = inspect.signature(rotary).parameters["config"].annotation
    subs = list(_sub_configs(config))
    named = [s for s in subs if isinstance(annotation, type) and isinstance(s, annotation)]
    text = [s for s in subs if "text" in type(s).__name__.lower()]
    ordered = list({id(s): s for s in [*named, *text, *subs]}.values())
    errors = []
    for sub in ordered:
        try:
            build: Callable[..., Any] = rotary
            return _quiet(functools.partial(build, sub)), sub
        except Exception as err:
            errors.append(f"{type(err).__name__}: {err}")
    msg = f"{rotary.__name__} cannot be built from the default config: {errors[0]}"
    raise NotDrivenError(msg)


def _apply_function(modules: list[Any], config: Any) -> tuple[str, Callable[..., Any]]:
    """The apply function the family's text attention calls (name, function)."""
    candidates: dict[str, Callable[..., Any]] = {}
    for mod in modules:
        for attr, obj in vars(mod).items():
            if (
                callable(obj)
                and inspect.isfunction(obj)
                and attr.startswith("apply_")
                and "rot" in attr
                and not re.search(r"vision|visual|2d|image|audio|video", attr)
            ):
                candidates.setdefault(attr, obj)
    if not candidates:
        msg = "no apply_*rotary* function for text positions"
        raise NotDrivenError(msg)
    interleave = [k for k in candidates if "interleave" in k]
    if interleave and any(getattr(c, "rope_interleave", False) for c in _sub_configs(config)):
        return interleave[0], candidates[interleave[0]]
    rest = [k for k in candidates if "interleave" not in k]
    multimodal = [k for k in rest if "multimodal" in k or "mrope" in k]
    order = multimodal + [k for k in rest if k not in multimodal] or interleave
    return order[0], candidates[order[0]]


def _head_dim(modules: list[Any], config: Any) -> int | None:
    """The per-head size the family's attention gives its apply function (meta device)."""
    import torch

    for mod in modules:
        for attr, obj in vars(mod).items():
            if not (
                isinstance(obj, type)
                and issubclass(obj, torch.nn.Module)
                and attr.endswith("Attention")
                and not _TOWER.search(attr)
                and obj.__module__ == mod.__name__
            ):
                continue
            params = inspect.signature(obj).parameters
            if "config" not in params:
                continue
            kwargs = {"layer_idx": 0} if "layer_idx" in params else {}
            try:
                with torch.device("meta"):
                    attention = _quiet(functools.partial(obj, config, **kwargs))
            except Exception:
                continue
            for key in ("qk_rope_head_dim", "head_dim", "attention_head_size", "head_size"):
                value = getattr(attention, key, None)
                if isinstance(value, int) and value >= 2:
                    return value
    return None


def _positions(n_axes: int | None, config: Any) -> np.ndarray:
    """The probe below the model's position limit (some rotaries hold a table that long)."""
    limit = getattr(config, "max_position_embeddings", None)
    probe = PROBE if not isinstance(limit, int) else PROBE[limit > PROBE]
    if n_axes is None:
        return probe.copy()
    axes = [probe] + [(probe // (3 + a)) % (97 + a) for a in range(n_axes - 1)]
    return np.stack(axes, axis=-1)


def _n_axes(rotary: Any, config: Any, spec: RopeSpec | None) -> int | None:
    sections = getattr(rotary, "mrope_section", None)
    if sections is None:
        params = getattr(config, "rope_parameters", None) or {}
        sections = params.get("mrope_section") if isinstance(params, dict) else None
    if sections is not None:
        return len(sections)
    return None if spec is None or spec.sections is None else len(spec.sections)


def _call_rotary(rotary: Any, p: np.ndarray, layer_type: str | None) -> Any:
    import torch

    x = torch.zeros((BATCH, p.shape[0], 8), dtype=torch.float32)
    ids = torch.as_tensor(p, dtype=torch.int64)
    kwargs = {} if layer_type is None else {"layer_type": layer_type}
    if p.ndim == 1:
        return rotary(x, ids[None, :], **kwargs)
    try:
        return rotary(x, ids.T[:, None, :].contiguous(), **kwargs)  # (axes, batch, seq)
    except Exception:
        return rotary(x, ids[None, :, :], **kwargs)


def _is_cos(table: Any) -> bool:
    """Whether `table` holds cosines: the probe starts at position 0, where cos is 1."""
    first = table.reshape(-1, *table.shape[-2:])[0, 0] if table.ndim >= 2 else table
    return bool((first.abs() > 0.5).all())


def _call_apply(apply: Callable[..., Any], q: Any, table: Any) -> Any:
    """`apply` on q (batch, heads, seq, width) with the rotary output; (batch, heads, seq, ...)."""
    params = list(inspect.signature(apply).parameters)
    tables = list(table) if isinstance(table, tuple | list) else [table]
    names: dict[str, Any] = {"cos": None, "sin": None}
    if len(tables) == 2 and "cos" in params and "sin" in params:
        cos, sin = tables if _is_cos(tables[0]) else tables[::-1]  # GPT-J returns (sin, cos)
        names = {"cos": cos, "sin": sin}
    tensors = [p for p in params if p not in ("cos", "sin", "freqs_cis", "freqs", "position_ids")]
    takes_k = len(tensors) > 1 and tensors[1] in ("k", "xk", "key", "key_states", "k_pe")

    def run(q_in: Any, unsqueeze: int | None) -> Any:
        kwargs: dict[str, Any] = {tensors[0]: q_in}
        if takes_k:
            kwargs[tensors[1]] = q_in.clone()
        if names["cos"] is not None:
            kwargs.update(names)
        else:
            rest = [p for p in params if p in ("freqs_cis", "freqs", "cos", "sin")]
            kwargs.update(dict(zip(rest, tables, strict=False)))
        if unsqueeze is not None and "unsqueeze_dim" in params:
            kwargs["unsqueeze_dim"] = unsqueeze
        out = apply(**kwargs)
        return out[0] if isinstance(out, tuple | list) else out

    try:
        return run(q, 1)
    except Exception:
        return run(q.transpose(1, 2).contiguous(), 2).transpose(1, 2)


def _case(
    rotary: Any,
    apply: Callable[..., Any],
    config: Any,
    head_dim: int | None,
    layer_type: str | None,
    seed: int,
) -> tuple[str, float, str | None]:
    """One layer type: (label, worst error/tolerance, diagnosis or None)."""
    import torch

    from rope_ref._config.hf import spec_from_hf

    label = layer_type or "all layers"
    try:
        spec = _quiet(lambda: spec_from_hf(config, layer_type=layer_type))
    except (TypeError, ValueError) as err:
        refusal = f"{type(err).__name__}: {err}"
        spec = None
    p = _positions(_n_axes(rotary, config, spec), config)
    try:
        table = _quiet(lambda: _call_rotary(rotary, p, layer_type))
    except Exception as err:
        msg = (
            "its rotary module refuses the call (x, position_ids) on the default config: "
            f"{type(err).__name__}: {err}"
        )
        raise NotDrivenError(msg[:240]) from None
    rng = np.random.default_rng(seed)
    if spec is None:
        _check_own_code_runs(apply, table, head_dim, p.shape[0], refusal)
        raise FromHfRefusesError(refusal)  # the family's code runs it; from_hf should read it
    first = table[0] if isinstance(table, tuple | list) else table
    widths = [] if head_dim is None else [head_dim]
    widths += [w for w in (first.shape[-1], 2 * first.shape[-1]) if w not in widths]
    for width in widths:
        x = rng.uniform(-1.0, 1.0, (BATCH, HEADS, p.shape[0], width)).astype(np.float32)
        try:
            y = _quiet(functools.partial(_call_apply, apply, torch.from_numpy(x.copy()), table))
        except Exception as err:
            last = err
            continue
        y = y.detach().to(torch.float32).numpy()
        if y.shape != x.shape:
            last = ValueError(f"apply returned shape {tuple(y.shape)} for {x.shape}")
            continue
        compared = spec
        if width != spec.head_dim:
            if width != spec.rotary_dim or spec.rotary_start:
                return (
                    label,
                    np.inf,
                    (
                        f"the family rotates {width} features, from_hf gives head_dim="
                        f"{spec.head_dim} rotary_dim={spec.rotary_dim}"
                    ),
                )
            compared = _narrowed(spec, width)
        if p.ndim == 2 and compared.sections is None:
            return (
                label,
                np.inf,
                (f"the family's M-RoPE has {p.shape[1]} position axes; from_hf gives no sections"),
            )
        report = rope_report(y, x, compared, p)
        diagnosis = None if report.ok else f"{report.diagnosis} (from_hf: {_brief(spec)})"
        return label, report.max_ratio, diagnosis
    raise NotDrivenError(f"apply function refuses the inputs: {type(last).__name__}: {last}"[:200])


def _check_own_code_runs(
    apply: Callable[..., Any], table: Any, head_dim: int | None, n: int, refusal: str
) -> None:
    """Raise `NotDrivenError` when the family's own apply fails on its attention's head size."""
    import torch

    if head_dim is None:
        return
    x = torch.zeros((BATCH, HEADS, n, head_dim), dtype=torch.float32)
    try:
        _quiet(functools.partial(_call_apply, apply, x, table))
    except Exception as err:
        msg = (
            f"the family's own apply function fails on its default config's head size "
            f"({head_dim}): {type(err).__name__}: {err}; from_hf refuses too: {refusal}"
        )
        raise NotDrivenError(msg[:320]) from None


def _narrowed(spec: RopeSpec, width: int) -> RopeSpec:
    from dataclasses import replace

    return replace(spec, head_dim=width, rotary_dim=width)


def _brief(spec: RopeSpec) -> str:
    parts = [f"head_dim={spec.head_dim}", f"rotary_dim={spec.rotary_dim}", f"base={spec.base:g}"]
    if spec.layout != "half":
        parts.append(f"layout={spec.layout}")
    if spec.scaling is not None:
        parts.append(f"scaling={type(spec.scaling).__name__}")
    if spec.sections is not None:
        parts.append(f"sections={tuple(spec.sections)} {spec.section_order}")
    return ", ".join(parts)


def _layer_types(rotary_cls: type[Any], config: Any) -> list[str | None]:
    forward = inspect.signature(rotary_cls.forward).parameters
    if "layer_type" not in forward:
        return [None]
    kinds = list(dict.fromkeys(getattr(config, "layer_types", None) or []))
    params = getattr(config, "rope_parameters", None) or {}
    keyed = [k for k in kinds if k in params]  # layer types with RoPE ("conv" layers have none)
    labels = [k for k in getattr(config, "_rope_type_labels", None) or () if k in params]
    return keyed or labels or kinds or [None]  # labels: RoPEs not named by layer types


def sweep_family(name: str) -> FamilyResult:
    """Drive one model package; never raises (a failure is the verdict "not driven")."""
    try:
        return _sweep_family(name)
    except NotDrivenError as err:
        return FamilyResult(name, "not driven", str(err))
    except FromHfRefusesError as err:
        return FamilyResult(name, "from_hf refuses", str(err)[:240])
    except Exception as err:
        text = f"{type(err).__name__}: {err}".splitlines()[0][:240]
        if "ALiBi" in text or "no RoPE" in text:
            return FamilyResult(name, "no RoPE", text)
        return FamilyResult(name, "not driven", text)


def _sweep_family(name: str) -> FamilyResult:
    from rope_ref._config.families import FAMILIES
    from rope_ref._config.hf import spec_from_hf

    modules = _modules(name)
    config = _default_config(name)
    family = FAMILIES.get(name)
    if family is not None and (family.no_rope or family.refused):
        try:
            _quiet(lambda: spec_from_hf(config))
        except ValueError as err:
            verdict = "no RoPE" if family.no_rope else "refused"
            return FamilyResult(name, verdict, str(err))
    found = _rotary_classes(modules)
    rotaries = [r for r in found if not _TOWER.search(r.__name__)]
    if not found:
        msg = (
            "no rotary module: the modeling code carries an apply function, but its "
            "attention applies no RoPE"
        )
        raise NotDrivenError(msg)
    if not rotaries:
        msg = "its rotary modules serve vision or audio towers only (patch positions)"
        raise NotDrivenError(msg)
    rotary_cls = rotaries[0]
    rotary, sub = _build_rotary(rotary_cls, config)
    apply_name, apply = _apply_function(modules, sub)
    cases, worst, notes = [], 0.0, []
    for i, layer_type in enumerate(_layer_types(rotary_cls, sub)):
        head_dim = _head_dim(modules, sub)
        label, ratio, diagnosis = _case(rotary, apply, sub, head_dim, layer_type, seed=i)
        cases.append(f"{label}: {ratio:.3g}")
        worst = max(worst, ratio)
        if diagnosis is not None:
            notes.append(f"{label}: {diagnosis}")
    verdict = "agree" if not notes else "disagree"
    detail = f"{rotary_cls.__name__} + {apply_name}; worst error/tol {worst:.3g}"
    if notes:
        detail += "; " + "; ".join(notes)
    return FamilyResult(name, verdict, detail, tuple(cases))


def sweep(
    names: list[str] | None = None, *, progress: Callable[[str], None] | None = None
) -> list[FamilyResult]:
    """Drive every RoPE model family of the installed transformers (or those `names`).

    Parameters
    ----------
    names : list of str, optional
        Model packages (``"llama"``, ``"qwen2_vl"``); by default every one of `families`.
    progress : callable, optional
        Called with each package's name before it is driven.

    Returns
    -------
    list of FamilyResult
        One per package, in the order driven.

    Examples
    --------
    >>> [r.verdict for r in sweep(["llama"])]  # doctest: +SKIP
    ['agree']
    """
    results = []
    for name in families() if names is None else names:
        if progress is not None:
            progress(name)
        results.append(sweep_family(name))
    return results


def sweep_lines(results: list[FamilyResult]) -> list[str]:
    """The sweep as text: the counts, then one line per family grouped by verdict."""
    order = ("disagree", "from_hf refuses", "agree", "no RoPE", "refused", "not driven")
    counts = {v: sum(r.verdict == v for r in results) for v in order}
    lines = [", ".join(f"{counts[v]} {v}" for v in order)]
    for verdict in order:
        for r in results:
            if r.verdict == verdict:
                lines.append(f"{verdict:15}  {r.model_type:26}  {r.detail}")
    return lines
