"""Calling conventions of `rope-ref check`: build a callable's inputs, call it, read results.

=========  ===================================  ======================================
name       call                                 arrays
=========  ===================================  ======================================
plain      ``fn(x, positions)``                 x ``(batch, heads, seq, d)`` (or
                                                ``--axes bshd``) of NumPy, torch or
                                                MLX; positions per `Calling.positions`
hf         ``fn(q, k, cos, sin)`` -> (q, k)     torch, cos/sin ``(batch, seq,
                                                rotary_dim)`` as transformers builds them
cos_sin    ``fn(x, cos, sin)``                  torch x ``(batch, seq, heads, d)``,
                                                cos/sin ``(seq, rotary_dim / 2)``
                                                (flash-attn)
complex    ``fn(x, freqs_cis)`` or              torch x ``(batch, seq, heads, d)``,
           ``fn(xq, xk, freqs_cis)``            complex ``(seq, rotary_dim / 2)``
                                                (Meta LLaMA)
full       ``fn(x, cos, sin)``                  torch x ``(batch, heads, seq, d)``,
                                                full-width cos/sin ``(batch, seq,
                                                rotary_dim)`` (litgpt)
freqs      ``fn(x, freqs)``                     torch x ``(seq, batch, heads, d)``,
                                                full-width angles ``(seq, 1, 1,
                                                rotary_dim)`` (Megatron-core)
=========  ===================================  ======================================

Every input is a fresh array built from the case's seed, and the checker rebuilds its own
copy for the oracle (`oracle_setup`), so a target that overwrites its inputs cannot change
what it is compared with. A target that
accepts a ``spec`` keyword gets the `RopeSpec`; one that accepts keywords named after its
fields (``head_dim``, ``rotary_dim``, ``base``, ...) gets those.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref._core.frequencies import rope_angles, rope_cos_sin
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check.timeout import TargetTimeoutError, call_with_timeout
from rope_ref.testing._compare import Setup, setup

__all__ = [
    "CONVENTIONS",
    "LABELS",
    "POSITION_MODES",
    "TORCH_CONVENTIONS",
    "Calling",
    "Case",
    "OutputError",
    "Returned",
    "TargetError",
    "TargetTimeoutError",
    "call_target",
    "input_of",
    "oracle_setup",
    "run_case",
    "spec_keywords",
    "takes_seq_len",
]

CONVENTIONS = ("plain", "hf", "cos_sin", "complex", "full", "freqs")
TORCH_CONVENTIONS = ("hf", "cos_sin", "complex", "full", "freqs")
#: What the target receives as positions: one row ``(seq,)`` shared by the batch, one row
#: per batch row ``(batch, seq)``, or a Python int offset (positions offset + arange(seq)).
POSITION_MODES = ("shared", "rows", "offset")
#: Spec fields a target may take as keywords.
SPEC_FIELDS = ("head_dim", "rotary_dim", "rotary_start", "base", "layout", "sections")


@dataclass(frozen=True)
class Calling:
    """How to call the target: convention, array kind, axis order, positions, dtype."""

    convention: str
    dtype: str
    array: str = "numpy"  # plain only: "numpy", "torch", "jax" or "mlx"
    axes: str = "bhsd"  # or "bshd", "sbhd"
    positions: str = "shared"
    in_place: bool = False
    device: str = "cpu"
    timeout: float | None = None
    #: The length the scaling rule is computed at (an engine's configured maximum length):
    #: the oracle's and the tables' ``seq_len``; None: the largest position + 1.
    seq_len: float | None = None

    @property
    def seq_axis(self) -> int:
        """Axis of x that indexes tokens."""
        return {"bhsd": -2, "bshd": -3, "sbhd": -4}[self.axes]

    @property
    def per_row(self) -> bool:
        """Whether positions differ per batch row."""
        return self.positions == "rows"


@dataclass(frozen=True)
class Case:
    """Sizes, positions and the seed of the values of x.

    Positions are ``(seq,)`` or ``(batch, seq)``, plus a trailing axis for a multi-axis
    spec.
    """

    batch: int
    heads: int
    seq: int
    positions: np.ndarray
    seed: int

    def describe(self) -> str:
        """One line: the sizes, the positions and the seed."""
        return (
            f"batch {self.batch}, heads {self.heads}, seq {self.seq}, "
            f"positions {self.positions.tolist()}, x drawn with seed {self.seed}"
        )


class TargetError(Exception):
    """The checked callable raised (or exited); `error` is its exception.

    `description` is the checker's one-line account of it, when it was written where the
    exception was raised (the child process of `rope-ref check`).
    """

    def __init__(self, error: BaseException, description: str | None = None) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.description = description


class OutputError(Exception):
    """The checked callable returned something that is not the expected array(s)."""


@dataclass(frozen=True)
class Output:
    """One compared result: which argument it rotates, its oracle setup, the result."""

    label: str
    setup: Setup
    actual: Any


def _values(case: Case, shape: tuple[int, ...], salt: int) -> np.ndarray:
    rng = np.random.default_rng([case.seed, salt])
    return rng.uniform(-1.0, 1.0, shape)


def _array(values: np.ndarray, calling: Calling, kind: str | None = None) -> Any:
    kind = kind or ("torch" if calling.convention in TORCH_CONVENTIONS else calling.array)
    if kind == "torch":
        import torch

        return torch.from_numpy(values).to(
            device=calling.device, dtype=getattr(torch, calling.dtype)
        )
    if kind == "mlx":
        import mlx.core as mx

        return mx.array(values.astype(np.float32)).astype(getattr(mx, calling.dtype))
    if kind == "jax":
        import jax.numpy as jnp

        return jnp.asarray(values).astype(getattr(jnp, calling.dtype))
    return values.astype(calling.dtype)


def _positions_arg(p: np.ndarray, calling: Calling) -> Any:
    if calling.array == "torch":
        import torch

        return torch.from_numpy(p.copy()).to(calling.device)
    if calling.array == "mlx":
        import mlx.core as mx

        return mx.array(p)
    if calling.array == "jax":
        import jax.numpy as jnp

        return jnp.asarray(p)
    return p.copy()


def _tables(
    spec: RopeSpec, positions: np.ndarray, seq_len: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    cos, sin = rope_cos_sin(spec, positions, seq_len=seq_len)
    return np.asarray(cos, dtype=np.float64), np.asarray(sin, dtype=np.float64)


def _full_width(table: np.ndarray, layout: str) -> np.ndarray:
    """HF's full-width table: ``cat(c, c)`` for "half", ``repeat(c, 2)`` for "interleaved"."""
    if layout == "half":
        return np.concatenate([table, table], axis=-1)
    return np.repeat(table, 2, axis=-1)


def _full_tables(spec: RopeSpec, positions: np.ndarray, calling: Calling) -> tuple[Any, ...]:
    """The tables of the ``full`` and ``freqs`` conventions.

    ``full``: cos and sin ``(batch, seq, rotary_dim)`` (litgpt); ``freqs``: the angles
    ``(seq, 1, 1, rotary_dim)`` (Megatron-core; float32, float64 for float64 inputs).
    """
    if calling.convention == "full":
        rows = positions if positions.ndim == 2 else positions[None, :]
        cos, sin = _tables(spec, rows, calling.seq_len)
        return (
            _array(_full_width(cos, spec.layout), calling),
            _array(_full_width(sin, spec.layout), calling),
        )
    import torch

    angles = np.asarray(
        rope_angles(spec, positions.astype(np.float64), seq_len=calling.seq_len), dtype=np.float64
    )
    full = _full_width(angles, spec.layout)[:, None, None, :]
    dtype = torch.float64 if calling.dtype == "float64" else torch.float32
    return (torch.from_numpy(full).to(device=calling.device, dtype=dtype),)


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def _n_positional(fn: Callable[..., Any]) -> int | None:
    params = _parameters(fn)
    if params is None or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    given = ("spec", *SPEC_FIELDS)
    return sum(
        1
        for p in params
        if p.kind in kinds and p.default is inspect.Parameter.empty and p.name not in given
    )


def spec_keywords(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The keywords of ``spec`` and `SPEC_FIELDS` that `fn` takes by name."""
    params = _parameters(fn) or []
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = {p.name for p in params if p.kind in by_name}
    return tuple(n for n in ("spec", *SPEC_FIELDS) if n in names)


def takes_seq_len(fn: Callable[..., Any]) -> bool:
    """Whether `fn` takes a ``seq_len`` keyword by name (it then receives ``--seq-len``)."""
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return any(p.name == "seq_len" and p.kind in by_name for p in _parameters(fn) or [])


def _keywords(
    fn: Callable[..., Any], spec: RopeSpec, seq_len: float | None = None
) -> dict[str, Any]:
    values = {name: getattr(spec, name, None) for name in SPEC_FIELDS}
    values["spec"] = spec
    given = {name: values[name] for name in spec_keywords(fn)}
    if seq_len is not None and takes_seq_len(fn):
        given["seq_len"] = seq_len
    return given


def _call(fn: Callable[..., Any], calling: Calling, spec: RopeSpec, *args: Any) -> Any:
    try:
        return call_with_timeout(fn, args, _keywords(fn, spec, calling.seq_len), calling.timeout)
    except TargetTimeoutError:
        raise
    except BaseException as err:  # any bug, exit or interrupt in the checked code is reported
        raise TargetError(err) from err


_IN_PLACE_HINT = " (if it rotates its input in place, pass --in-place)"


def _array_like(value: Any, label: str) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return value
    hint = _IN_PLACE_HINT if value is None else ""
    msg = f"the result for {label} must be an array; got {type(value).__name__}{hint}."
    raise OutputError(msg)


def _pair(result: Any, labels: tuple[str, str]) -> tuple[Any, Any]:
    if not isinstance(result, tuple | list) or len(result) != 2:
        names = ", ".join(labels)
        hint = _IN_PLACE_HINT if result is None else ""
        msg = f"the callable must return two arrays ({names}); got {type(result).__name__}{hint}."
        raise OutputError(msg)
    return _array_like(result[0], labels[0]), _array_like(result[1], labels[1])


def _x_shape(case: Case, heads: int, d: int, calling: Calling) -> tuple[int, ...]:
    b, s = case.batch, case.seq
    return {"bhsd": (b, heads, s, d), "bshd": (b, s, heads, d), "sbhd": (s, b, heads, d)}[
        calling.axes
    ]


def oracle_grid(case: Case, calling: Calling, spec: RopeSpec) -> np.ndarray:
    """The positions of `case` as a grid for `setup`: laid along the batch and seq axes."""
    p = np.asarray(case.positions)
    multi = spec.sections is not None
    if p.ndim == (2 if multi else 1):  # shared: 1-D along seq_axis
        return p
    # (batch, seq[, axes]): insert the heads axis where x has it
    return np.expand_dims(p, 1 if calling.axes == "bhsd" else 2)


#: Each result's label: the salt of its input's values and whether it has the heads of k.
LABELS = {"x": (0, False), "q": (0, False), "xq": (0, False), "k": (1, True), "xk": (1, True)}


@dataclass(frozen=True)
class Returned:
    """One result of a call of the target, as it came back: its label and the array."""

    label: str
    actual: Any


def input_of(
    calling: Calling, case: Case, spec: RopeSpec, label: str, device: str | None = None
) -> Any:
    """The array the target is given for `label`, rebuilt from the case's seed.

    The checker rebuilds it on its side (on the CPU: `device`) rather than reading what
    the target was given, so nothing the target does to its inputs reaches the oracle.
    """
    salt, k_heads = LABELS[label]
    heads = (case.heads + 1) // 2 if k_heads else case.heads
    values = _values(case, _x_shape(case, heads, spec.head_dim, calling), salt)
    on = calling if device is None else dataclasses.replace(calling, device=device)
    return _array(values, on)


def oracle_setup(calling: Calling, case: Case, spec: RopeSpec, label: str) -> Setup:
    """The oracle's setup of the result `label` of `case`: its own input, grid and axis."""
    x = input_of(calling, case, spec, label, device="cpu")
    grid = oracle_grid(case, calling, spec)
    return setup(x, spec, grid, seq_axis=calling.seq_axis, seq_len=calling.seq_len)


def run_case(fn: Callable[..., Any], calling: Calling, case: Case, spec: RopeSpec) -> list[Output]:
    """Call `fn` on `case` through `calling`; return each result with its oracle setup.

    Raises `TargetError` when `fn` raises or exits, `TargetTimeoutError` when it does not
    return in time, and `OutputError` for a malformed result.
    """
    return [
        Output(r.label, oracle_setup(calling, case, spec, r.label), r.actual)
        for r in call_target(fn, calling, case, spec)
    ]


def call_target(
    fn: Callable[..., Any], calling: Calling, case: Case, spec: RopeSpec
) -> list[Returned]:
    """Build the inputs of `case`, call `fn` through `calling`, return its results.

    Raises `TargetError` when `fn` raises or exits, `TargetTimeoutError` when it does not
    return in time, and `OutputError` for a malformed result.
    """

    def given(label: str) -> Any:
        return input_of(calling, case, spec, label)

    if calling.convention == "plain":
        x = given("x")
        if calling.positions == "offset":
            arg: Any = int(case.positions[0])
        else:
            arg = _positions_arg(case.positions, calling)
        y = _call(fn, calling, spec, x, arg)
        return [Returned("x", x if calling.in_place else _array_like(y, "x"))]
    if calling.convention == "hf":
        q, k = given("q"), given("k")
        rows = case.positions if case.positions.ndim == 2 else case.positions[None, :]
        cos, sin = _tables(spec, rows, calling.seq_len)
        cos_t = _array(_full_width(cos, spec.layout), calling)
        sin_t = _array(_full_width(sin, spec.layout), calling)
        result = _call(fn, calling, spec, q, k, cos_t, sin_t)
        q_out, k_out = (q, k) if calling.in_place else _pair(result, ("q", "k"))
        return [Returned("q", q_out), Returned("k", k_out)]
    x = given("x")
    if calling.convention in ("full", "freqs"):
        y = _call(fn, calling, spec, x, *_full_tables(spec, case.positions, calling))
        return [Returned("x", x if calling.in_place else _array_like(y, "x"))]
    cos, sin = _tables(spec, case.positions, calling.seq_len)
    if calling.convention == "cos_sin":
        cos_t, sin_t = (_array(t, calling) for t in (cos, sin))
        y = _call(fn, calling, spec, x, cos_t, sin_t)
        return [Returned("x", x if calling.in_place else _array_like(y, "x"))]
    import torch

    complex_dtype = torch.complex128 if calling.dtype == "float64" else torch.complex64
    freqs_cis = torch.from_numpy(cos + 1j * sin).to(device=calling.device, dtype=complex_dtype)
    if _n_positional(fn) == 3:
        k = given("xk")
        result = _call(fn, calling, spec, x, k, freqs_cis)
        q_out, k_out = (x, k) if calling.in_place else _pair(result, ("xq", "xk"))
        return [Returned("xq", q_out), Returned("xk", k_out)]
    y = _call(fn, calling, spec, x, freqs_cis)
    return [Returned("x", x if calling.in_place else _array_like(y, "x"))]
