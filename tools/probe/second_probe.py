"""The second probe: bad and odd inputs to rope_ref's public API, each run in a child process.

Every case is one call of the public API (or the `rope-ref` command) with an input chosen to
break it, and what the error policy (``docs/api.md``, ``docs/cli.md``) says it must give: a
TypeError/ValueError naming the parameter (and, where stated, the value received), or a value,
which is checked here against formulas written in this file (a float64 NumPy RoPE with
frequencies from mpmath, per-pair norms, orthogonality). Each case runs in a child forked from
this process (numpy, torch, jax and rope_ref are imported once), under a time limit and an
address-space cap, and is classified:

- ``error-ok``: TypeError/ValueError naming the parameter (CLI: exit 2, one ``error:`` line);
- ``value-ok``: a result, checked right;
- ``crash``: another exception type, a signal, MemoryError, a traceback from the CLI;
- ``hang``: past the time limit;
- ``leak``: an input or global state (NumPy error state and print options, ``jax_enable_x64``,
  torch's default dtype, threads and grad mode, warning filters, ``os.environ``, ``sys.stdout``,
  random states, signal handlers, ``sys.path``, live threads) changed;
- ``wrong``: a wrong value, a result where an error was due, or an error naming the wrong
  parameter or not showing the value received.

Run ``python tools/probe/second_probe.py`` (``-k TEXT`` selects cases by name, ``-j N`` runs N
children at once, ``--json FILE`` writes every outcome).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_strict as xps
import dask
import dask.array as da
import jax
import jax.numpy as jnp
import ml_dtypes
import mpmath
import numpy as np
import torch

import rope_ref as rr
import rope_ref.scaling as sc
import rope_ref.testing as rt
import rope_ref.testing.strategies as st

dask.config.set(scheduler="synchronous")  # no thread pool left behind by the probe itself
TIMEOUT_S = 20.0
MEMORY_HEADROOM = 6 << 30  # bytes of address space a child may add to what it inherits

# ---------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expect:
    """What a case must give: an error naming `param` (showing `got`), a value, or either."""

    param: str | None = None
    got: str | None = None
    check: Callable[[Any, list[np.ndarray]], None] | None = None
    passing: str = "value-ok"  # the category of a result that passes `check`


def err(param: str, got: str | None = None) -> Expect:
    """A TypeError/ValueError naming `param` (and showing `got`) is due."""
    return Expect(param=param, got=got)


def val(check: Callable[[Any, list[np.ndarray]], None]) -> Expect:
    """A result is due, and `check` must accept it."""
    return Expect(check=check)


def either(param: str, check: Callable[[Any, list[np.ndarray]], None]) -> Expect:
    """An error naming `param`, or a result that `check` accepts."""
    return Expect(param=param, check=check)


@dataclass(frozen=True)
class Case:
    """One call of the public API and what it must give."""

    func: str
    name: str
    call: Callable[[], Any]
    expect: Expect


CASES: list[Case] = []


def case(func: str, name: str, call: Callable[[], Any], expect: Expect) -> None:
    """Add a case to the table."""
    CASES.append(Case(func, name, call, expect))


# ---------------------------------------------------------------- inputs and their snapshots

_INPUTS: list[tuple[Any, Any, np.ndarray | None]] = []  # (object, raw snapshot, float64 copy)


def _raw(obj: Any) -> Any:
    """A byte-exact snapshot of an input, to tell whether the call changed it."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous().flatten()
        return (tuple(obj.shape), obj.stride(), bytes(t.view(torch.uint8).numpy()))
    if isinstance(obj, np.ndarray):
        return (
            obj.shape,
            obj.strides,
            obj.flags.writeable,
            obj.tobytes() if obj.dtype != object else repr(obj.tolist()),
        )
    if isinstance(obj, (list, tuple, dict)):
        return repr(obj)
    return np.asarray(as_np(obj, keep=True)).tobytes()


def as_np(a: Any, *, keep: bool = False) -> np.ndarray:
    """`a` as a NumPy array (float64 unless `keep`)."""
    if isinstance(a, torch.Tensor):
        t = a.detach().cpu()
        out = t.to(torch.float64).numpy() if not keep and t.is_floating_point() else t.numpy()
    elif isinstance(a, da.Array):
        out = np.asarray(a.compute())
    elif hasattr(a, "_array") and type(a).__module__.startswith("array_api_strict"):
        out = np.asarray(a._array)
    else:
        out = np.asarray(a)
    return out if keep else out.astype(np.float64)


def inp(obj: Any) -> Any:
    """Register an input of a case: it must come back unchanged."""
    try:
        f64: np.ndarray | None = as_np(obj)
    except (TypeError, ValueError, NotImplementedError):  # not numbers, or no data (meta)
        f64 = None
    try:
        raw = _raw(obj)
    except (NotImplementedError, RuntimeError):  # e.g. a meta tensor: no data to compare
        raw = None
    _INPUTS.append((obj, raw, f64))
    return obj


def X(shape: tuple[int, ...] = (2, 3, 8), seed: int = 0) -> np.ndarray:  # noqa: N802
    """Deterministic float64 data (a fresh array each time)."""
    return np.random.default_rng(seed).standard_normal(shape)


def xn(shape: tuple[int, ...] = (2, 3, 8), dtype: Any = np.float64) -> np.ndarray:
    """X as a registered NumPy input."""
    return inp(X(shape).astype(dtype))


def xt(shape: tuple[int, ...] = (2, 3, 8), dtype: Any = torch.float32) -> torch.Tensor:
    """X as a registered torch input."""
    return inp(torch.from_numpy(X(shape)).to(dtype))


def xj(shape: tuple[int, ...] = (2, 3, 8), dtype: Any = jnp.float32) -> Any:
    """X as a registered JAX input."""
    return inp(jnp.asarray(X(shape)).astype(dtype))


def xs(shape: tuple[int, ...] = (2, 3, 8), dtype: Any = xps.float64) -> Any:
    """X as a registered array-api-strict input."""
    return inp(xps.astype(xps.asarray(X(shape)), dtype))


def xd(shape: tuple[int, ...] = (2, 3, 8), dtype: Any = np.float64) -> Any:
    """X as a registered Dask (chunks of 1) input."""
    return inp(da.from_array(X(shape).astype(dtype), chunks=1))


S8 = rr.RopeSpec(head_dim=8)

# ---------------------------------------------------------------- the independent formula

mpmath.mp.dps = 40


def inv64(rotary_dim: int, base: float = 10000.0) -> np.ndarray:
    """``base ** (-2j / rotary_dim)`` correctly rounded to float64 (mpmath)."""
    b = mpmath.mpf(base)
    return np.array([float(b ** (mpmath.mpf(-2 * j) / rotary_dim)) for j in range(rotary_dim // 2)])


def rope64(
    x: np.ndarray,
    pos: np.ndarray,
    *,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    rotary_start: int = 0,
    layout: str = "half",
    inverse: bool = False,
    freqs: np.ndarray | None = None,
) -> np.ndarray:
    """Float64 RoPE of `x` at positions `pos` (broadcasting to ``x.shape[:-1]``)."""
    d = x.shape[-1]
    rd = d - rotary_start if rotary_dim is None else rotary_dim
    n = rd // 2
    inv = inv64(rd, base) if freqs is None else np.asarray(freqs, np.float64)
    ang = np.asarray(pos, np.float64)[..., None] * inv
    ang = -ang if inverse else ang
    c, s = np.cos(ang), np.sin(ang)
    y = np.array(x, np.float64)
    part = y[..., rotary_start : rotary_start + rd]
    ia, ib = (
        (np.arange(n), np.arange(n) + n)
        if layout == "half"
        else (np.arange(0, rd, 2), np.arange(1, rd, 2))
    )
    a, b = part[..., ia].copy(), part[..., ib].copy()
    part[..., ia], part[..., ib] = a * c - b * s, b * c + a * s
    return y


_EPS = {"float64": 2.3e-16, "float32": 1.2e-7, "float16": 9.8e-4, "bfloat16": 7.9e-3}


def _dtype_name(a: Any) -> str:
    """The dtype's name, byte order aside (``>f4`` is float32)."""
    return a.dtype.name if isinstance(a.dtype, np.dtype) else str(a.dtype).rsplit(".", 1)[-1]


def close(actual: Any, expected: np.ndarray, like: Any, *, what: str = "result") -> None:
    """`actual` has `like`'s kind and dtype and equals `expected` to rounding in that dtype."""
    kind, got_kind = (
        ("numpy" if isinstance(a, np.ndarray) else type(a).__module__.split(".")[0])
        for a in (like, actual)
    )
    assert got_kind == kind, f"{what} is a {type(actual).__name__}, input a {type(like).__name__}"
    assert _dtype_name(actual) == _dtype_name(like), f"{what} dtype {actual.dtype} != {like.dtype}"
    a = as_np(actual)
    assert a.shape == expected.shape, f"{what} shape {a.shape} != {expected.shape}"
    eps = _EPS[_dtype_name(like)]
    tol = 2 * eps * max(1.0, float(np.max(np.abs(expected), initial=0.0))) + 1e-12
    bad = np.abs(a - expected) > tol
    assert not np.any(bad | np.isnan(a)), (
        f"{what} off by {np.nanmax(np.abs(a - expected)):.3g} (tolerance {tol:.3g})"
    )


def along(pos: Any, shape: tuple[int, ...], seq_axis: int = -2) -> np.ndarray:
    """1-D positions laid along `seq_axis` of an array of `shape`."""
    p = np.asarray(pos, np.float64)
    lead = len(shape) - 1
    axis = seq_axis % len(shape)
    return p.reshape((-1,) + (1,) * (lead - axis - 1)) if p.ndim == 1 else p


def rotated(
    pos: Any = None, *, seq_axis: int = -2, offset: float = 0, index: int = 0, **kw: Any
) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: the result is rope64 of input number `index` at `pos` (default arange)."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        x = inputs[index]
        p = np.arange(x.shape[seq_axis]) if pos is None else pos
        close(result, rope64(x, along(p, x.shape, seq_axis) + offset, **kw), _INPUTS[index][0])

    return check


def norms_kept(index: int = 0, layout: str = "half") -> Callable[[Any, list[np.ndarray]], None]:
    """Check: finite, same dtype, every pair's norm kept (for positions too large for rope64)."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        x, y = inputs[index], as_np(result)
        assert _dtype_name(result) == _dtype_name(_INPUTS[index][0]), f"dtype {result.dtype}"
        assert np.all(np.isfinite(y)), "non-finite result"
        n = x.shape[-1] // 2
        split = (
            (lambda v: (v[..., :n], v[..., n:]))
            if layout == "half"
            else (lambda v: (v[..., 0::2], v[..., 1::2]))
        )
        (xa, xb), (ya, yb) = split(x), split(y)
        eps = _EPS[_dtype_name(result)]
        assert np.allclose(np.hypot(xa, xb), np.hypot(ya, yb), rtol=8 * eps, atol=8 * eps), (
            "pair norms changed"
        )

    return check


def is_(expected: Any) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: the result equals `expected`."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        assert result == expected, f"got {result!r}, expected {expected!r}"

    return check


def holds(pred: Callable[[Any], bool], what: str) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: `pred(result)` is true (`what` says what it means)."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        assert pred(result), f"{what}; got {result!r}"[:300]

    return check


def cos_sin_at(
    pos: Any, rotary_dim: int = 8, base: float = 10000.0, dtype: str = "float64", scale: float = 1.0
) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: (cos, sin) tables of `pos` against the formula, in `dtype`."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        ang = np.asarray(pos, np.float64)[..., None] * inv64(rotary_dim, base)
        for got, want in zip(result, (np.cos(ang) * scale, np.sin(ang) * scale), strict=True):
            assert _dtype_name(got) == dtype, f"dtype {got.dtype}, expected {dtype}"
            g = as_np(got)
            assert g.shape == want.shape, f"shape {g.shape} != {want.shape}"
            assert np.allclose(g, want, rtol=0, atol=2 * _EPS[dtype]), (
                f"off by {np.max(np.abs(g - want)):.3g}"
            )

    return check


def angles_at(
    pos: Any, rotary_dim: int = 8, base: float = 10000.0
) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: angles of `pos` equal position * inv64 exactly (one float64 product)."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        want = np.asarray(pos, np.float64)[..., None] * inv64(rotary_dim, base)
        g = as_np(result)
        assert g.shape == want.shape, f"angles of shape {g.shape}, expected {want.shape}"
        assert np.array_equal(g, want), f"angles {g!r} != {want!r}"[:300]

    return check


# ---------------------------------------------------------------- the command line


@dataclass(frozen=True)
class CliResult:
    """Exit status, stdout and stderr of one ``rope-ref`` run."""

    code: int
    out: str
    err: str


def cli(*argv: str) -> CliResult:
    """Run ``python -m rope_ref ARGV`` in /tmp, capturing its streams and exit status."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run(
        [sys.executable, "-m", "rope_ref", *argv],
        capture_output=True,
        text=True,
        cwd="/tmp",
        env=env,
        timeout=TIMEOUT_S - 2,
        check=False,
    )
    return CliResult(run.returncode, run.stdout, run.stderr)


def usage_error(option: str, got: str | None = None) -> Expect:
    """Exit 2, no traceback, and an error line that names `option` (and `got`)."""

    def check(result: CliResult, inputs: list[np.ndarray]) -> None:
        text = result.err.strip()
        assert "Traceback" not in text, f"traceback: {text[-300:]}"
        assert result.code == 2, f"exit {result.code}; stderr {text[-300:]!r}"
        line = text.splitlines()[-1] if text else ""
        if '"verdict"' in result.out:  # --json: the error is in the JSON verdict
            line = json.loads(result.out)["error"] or ""
        line = line.replace(",", "")  # 99,999 shows 99999
        assert option in line, f"error line does not name {option}: {line!r}"
        assert got is None or got.replace(",", "") in line, (
            f"error line does not show {got!r}: {line!r}"
        )

    return Expect(check=check, passing="error-ok")


# ---------------------------------------------------------------- functions the cases use


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _unaligned(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    buf = np.zeros(n * 8 + 1, np.uint8)[1:].view(np.float64).reshape(shape)
    buf[...] = X(shape)
    return buf


class _Sub(np.ndarray):
    pass


class _UserRule:
    def inv_freq(self, inv: Any, *, seq_len: Any = None) -> Any:
        return inv


def _frac(a: int, b: int = 1) -> Any:
    from fractions import Fraction

    return Fraction(a, b)


def _poke(a: np.ndarray, value: float) -> np.ndarray:
    """`a` with element 5 moved by `value` (NaN: set to NaN)."""
    a.flat[5] = value if np.isnan(value) else a.flat[5] + value
    return a


def _ulp_off(a: np.ndarray) -> np.ndarray:
    """`a` with element 3 one ulp up."""
    a.flat[3] = np.nextafter(a.flat[3], np.inf)
    return a


def _is_gen(obj: Any) -> bool:
    return hasattr(obj, "__next__")


def _llama_config(**kw: Any) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=64, num_attention_heads=8, **kw)


def _mixed64(x: np.ndarray, layout: str) -> np.ndarray:
    """RoPE-Mixed in float64: pair j turns by sum over axes of positions[:, a] * F2[a, j]."""
    ang = P2 @ F2  # (seq, pairs)
    c, s = np.cos(ang), np.sin(ang)
    y = np.array(x, np.float64)
    n = x.shape[-1] // 2
    ia, ib = (
        (np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2))
        if layout == "interleaved"
        else (np.arange(n), np.arange(n, 2 * n))
    )
    a, b = y[..., ia].copy(), y[..., ib].copy()
    y[..., ia], y[..., ib] = a * c - b * s, b * c + a * s
    return y


def _overlap_call() -> Any:
    buf = inp(X((2, 3, 9)))
    x, out = buf[..., :8], buf[..., 1:]
    return apply(x, backend="numba", out=out)


def _alias_call() -> Any:
    x = inp(np.ascontiguousarray(X((2, 8, 3)).transpose(0, 2, 1)))
    _INPUTS.pop()  # rotated in place on purpose: the input is meant to change
    _INPUTS.append((x, None, x.astype(np.float64)))
    return apply(x, backend="numba", out=x)


def _grad_alias() -> Any:
    x = torch.from_numpy(X()).requires_grad_()
    return apply(x, backend="numba", out=x)


def _torch_alias() -> Any:
    x = torch.from_numpy(X((2, 8, 3))).transpose(1, 2)
    _INPUTS.append((x, None, as_np(x)))  # rotated in place on purpose
    return apply(x, backend="numba", out=x)


def _unshared(get: Callable[[], Any], mutate: Callable[[Any], None]) -> bool:
    """Whether a second call answers as the first after the first's result was changed."""
    first = get()
    before = repr(as_np(first, keep=True) if not isinstance(first, dict | list) else first)
    with contextlib.suppress(ValueError, TypeError):  # a read-only result is fine too
        mutate(first)
    again = get()
    return before == repr(as_np(again, keep=True) if not isinstance(again, dict | list) else again)


def _threads(fn: Callable[[int], Any], n: int) -> list[Any]:
    results: list[Any] = [None] * n
    barrier = threading.Barrier(n)

    def work(k: int) -> None:
        barrier.wait()
        results[k] = fn(k)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results


def _thread_check(
    want: Callable[[int, np.ndarray], np.ndarray],
) -> Callable[[Any, list[np.ndarray]], None]:
    def check(results: Any, inputs: list[np.ndarray]) -> None:
        x = X((2, 5, 8))
        for k, r in enumerate(results):
            assert r is not None, f"thread {k} gave nothing"
            w = want(k, x)
            assert np.allclose(as_np(r), w, atol=1e-12), f"thread {k} wrong"

    return check


# ---------------------------------------------------------------- the cases

apply = rr.apply_rope

# x of every array kind, in dtypes RoPE cannot rotate
for dt in (
    "uint32",
    "int16",
    "bool",
    "complex64",
    "object",
    "U2",
    "datetime64[s]",
    "timedelta64[ms]",
    "S4",
):
    case(
        "rope_cos_sin",
        f"numpy {dt} positions",
        lambda dt=dt: rr.rope_cos_sin(S8, inp(np.zeros(3, dt))),
        either("positions", cos_sin_at(np.zeros(3)))
        if dt in ("uint32", "int16")
        else err("positions"),
    )
    case(
        "convert_layout",
        f"numpy {dt} x",
        lambda dt=dt: rr.convert_layout(inp(np.zeros((2, 8), dt)), S8),
        either("x", holds(lambda r, dt=dt: r.dtype == np.dtype(dt), "dtype kept")),
    )
for tdt in (torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex32, torch.int64):
    case(
        "apply_rope",
        f"torch {tdt} x",
        lambda tdt=tdt: apply(inp(torch.zeros(2, 8, dtype=tdt))),
        err("x", got=str(tdt).split(".")[-1]),
    )
    case(
        "apply_rope_qk",
        f"torch {tdt} k",
        lambda tdt=tdt: rr.apply_rope_qk(xt((2, 8)), inp(torch.zeros(2, 8, dtype=tdt))),
        err("k"),
    )
    case(
        "rerotate",
        f"torch {tdt} x",
        lambda tdt=tdt: rr.rerotate(
            inp(torch.zeros(2, 8, dtype=tdt)), S8, from_seq_len=4, to_seq_len=8
        ),
        err("x"),
    )
for jdt in (jnp.int8, jnp.uint32, jnp.bool_, jnp.complex64):
    case(
        "apply_rope",
        f"jax {jdt.__name__} x",
        lambda jdt=jdt: apply(inp(jnp.zeros((2, 8), jdt))),
        err("x"),
    )
    case(
        "rope_angles",
        f"jax {jdt.__name__} positions",
        lambda jdt=jdt: rr.rope_angles(S8, inp(jnp.zeros(3, jdt))),
        either("positions", angles_at(np.zeros(3)))
        if jdt in (jnp.int8, jnp.uint32)
        else err("positions"),
    )
for sdt in ("int8", "uint64", "bool", "complex128"):
    case(
        "apply_rope",
        f"array-api-strict {sdt} x",
        lambda sdt=sdt: apply(inp(xps.zeros((2, 8), dtype=getattr(xps, sdt)))),
        err("x"),
    )
    case(
        "apply_rope",
        f"dask {sdt} x",
        lambda sdt=sdt: apply(inp(da.zeros((2, 8), dtype=sdt, chunks=1))),
        err("x"),
    )
case(
    "apply_rope",
    "torch float8_e4m3fn x",
    lambda: apply(inp(torch.zeros(2, 8, dtype=torch.float8_e4m3fn))),
    either(
        "x",
        holds(lambda r: r.dtype == torch.float8_e4m3fn and not r.float().any(), "zeros in float8"),
    ),
)
case(
    "apply_rope",
    "numpy float8_e4m3fn x (ml_dtypes)",
    lambda: apply(inp(np.zeros((2, 8), ml_dtypes.float8_e4m3fn))),
    either("x", holds(lambda r: r.dtype == ml_dtypes.float8_e4m3fn, "dtype kept")),
)
case(
    "apply_rope",
    "numpy longdouble x",
    lambda: apply(xn((2, 3, 8), np.longdouble)),
    either("x", holds(lambda r: r.dtype == np.longdouble, "dtype kept")),
)
case(
    "apply_rope",
    "numpy matrix x",
    lambda: apply(inp(np.matrix(np.ones((3, 8))))),
    either(
        "x",
        holds(
            lambda r: np.allclose(
                np.asarray(r, float), rope64(np.ones((3, 8)), np.arange(3)[:, None])
            ),
            "rotated",
        ),
    ),
)
case(
    "apply_rope",
    "numpy record x",
    lambda: apply(inp(np.zeros((2, 8), dtype=[("a", "f8")]))),
    err("x"),
)

# odd dtypes that are valid: the value must be right
for name, mk in {
    "numpy float16": lambda: xn((2, 5, 8), np.float16),
    "numpy bfloat16": lambda: xn((2, 5, 8), ml_dtypes.bfloat16),
    "numpy big-endian float32": lambda: xn((2, 5, 8), ">f4"),
    "numpy big-endian float64": lambda: xn((2, 5, 8), ">f8"),
    "torch bfloat16": lambda: xt((2, 5, 8), torch.bfloat16),
    "torch float16": lambda: xt((2, 5, 8), torch.float16),
    "torch float64 requires_grad": lambda: inp(torch.from_numpy(X((2, 5, 8))).requires_grad_()),
    "jax bfloat16": lambda: xj((2, 5, 8), jnp.bfloat16),
    "jax float16": lambda: xj((2, 5, 8), jnp.float16),
    "array-api-strict float32": lambda: xs((2, 5, 8), xps.float32),
    "dask float32 chunks of 1": lambda: xd((2, 5, 8), np.float32),
}.items():
    case("apply_rope", f"{name} x", lambda mk=mk: apply(mk()), val(rotated()))
    case(
        "apply_rope",
        f"{name} x, positions 7..11, inverse",
        lambda mk=mk: apply(mk(), positions=np.arange(7, 12), inverse=True),
        val(rotated(np.arange(7, 12), inverse=True)),
    )
    case(
        "apply_rope",
        f"{name} x, numba",
        lambda mk=mk: apply(mk(), backend="numba"),
        either("x", rotated()),
    )

# strides, views, read-only and odd shapes
for name, mk in {
    "numpy reversed features": lambda: inp(X((2, 5, 8))[..., ::-1]),
    "numpy Fortran order": lambda: inp(np.asfortranarray(X((2, 5, 8)))),
    "numpy every other token": lambda: inp(X((2, 10, 8))[:, ::2]),
    "numpy read-only": lambda: inp(_readonly(X((2, 5, 8)))),
    "numpy broadcast (stride 0)": lambda: inp(np.broadcast_to(X((1, 5, 8)), (3, 5, 8))),
    "numpy unaligned float64": lambda: inp(_unaligned((2, 5, 8))),
    "numpy memmap-like subclass": lambda: inp(X((2, 5, 8)).view(_Sub)),
    "torch transposed": lambda: inp(torch.from_numpy(X((2, 8, 5))).transpose(1, 2)),
    "torch expanded (stride 0)": lambda: inp(torch.from_numpy(X((1, 5, 8))).expand(3, 5, 8)),
    "torch channels_last 4-d": lambda: inp(
        torch.from_numpy(X((2, 3, 5, 8))).to(memory_format=torch.channels_last)
    ),
    "torch storage offset": lambda: inp(torch.from_numpy(X((3, 5, 8)))[1:]),
    "torch negative-step via flip": lambda: inp(torch.from_numpy(X((2, 5, 8))).flip(-1)),
}.items():
    case("apply_rope", f"{name} x", lambda mk=mk: apply(mk()), val(rotated()))
    case(
        "apply_rope",
        f"{name} x, numba",
        lambda mk=mk: apply(mk(), backend="numba"),
        either("x", rotated()),
    )
case("apply_rope", "numpy x of shape (0, 8)", lambda: apply(xn((0, 8))), val(rotated()))
case("apply_rope", "numpy x of shape (3, 0, 8)", lambda: apply(xn((3, 0, 8))), val(rotated()))
case("apply_rope", "numpy x of shape (3, 0)", lambda: apply(xn((3, 0))), err("x"))
case("apply_rope", "numpy x of shape (8,) (no seq axis)", lambda: apply(xn((8,))), err("x"))
case("apply_rope", "numpy x 7 features", lambda: apply(xn((3, 7))), err("x", got="7"))
case(
    "apply_rope",
    "head_dim past the limit (stride 0)",
    lambda: apply(inp(np.broadcast_to(np.float32(1), (2, 65538)))),
    err("head_dim"),
)
case("apply_rope", "torch x of shape (0, 0, 8)", lambda: apply(xt((0, 0, 8))), val(rotated()))
case("apply_rope", "jax x 1 token, 9-d", lambda: apply(xj((1,) * 8 + (8,))), val(rotated()))
case(
    "apply_rope",
    "torch meta-device x",
    lambda: apply(inp(torch.empty(2, 3, 8, device="meta"))),
    either("x", holds(lambda r: r.device.type == "meta" and r.shape == (2, 3, 8), "meta result")),
)

# positions
pos_cases: dict[str, tuple[Callable[[], Any], Expect]] = {
    "NaN in a float list": (lambda: [0.0, float("nan"), 2.0], err("positions")),
    "inf in torch float32": (lambda: torch.tensor([0.0, float("inf"), 2.0]), err("positions")),
    "-inf in jax": (lambda: jnp.array([0.0, -jnp.inf, 2.0]), err("positions")),
    "NaN in array-api-strict": (lambda: xps.asarray([0.0, float("nan"), 1.0]), err("positions")),
    "complex list": (lambda: [0j, 1j, 2j], err("positions")),
    "strings": (lambda: ["0", "1", "2"], err("positions")),
    "None inside a list": (lambda: [0, None, 2], err("positions")),
    "ragged nested list": (lambda: [[0, 1], [2]], err("positions")),
    "a set": (lambda: {0, 1, 2}, err("positions")),
    "a dict": (lambda: {0: 0, 1: 1, 2: 2}, err("positions")),
    "a generator": (lambda: (i for i in range(3)), err("positions")),
    "bytes": (lambda: b"\x00\x01\x02", err("positions")),
    "a string": (lambda: "012", err("positions")),
    "object array of Fractions": (
        lambda: np.array([_frac(0), _frac(1, 2), _frac(2)], dtype=object),
        either("positions", rotated([0, 0.5, 2])),
    ),
    "negative ints": (lambda: np.array([-3, -2, -1]), val(rotated([-3, -2, -1]))),
    "float halves": (lambda: np.array([0.5, 1.5, 2.5]), val(rotated([0.5, 1.5, 2.5]))),
    "int8 near its top": (
        lambda: np.array([125, 126, 127], np.int8),
        val(rotated([125, 126, 127])),
    ),
    "uint8": (lambda: np.array([253, 254, 255], np.uint8), val(rotated([253, 254, 255]))),
    "float16": (lambda: np.array([0.5, 1024, 2048], np.float16), val(rotated([0.5, 1024, 2048]))),
    "bfloat16 (ml_dtypes)": (
        lambda: np.array([1, 256, 512], ml_dtypes.bfloat16),
        val(rotated([1, 256, 512])),
    ),
    "torch bool": (
        lambda: torch.tensor([False, True, True]),
        either("positions", rotated([0, 1, 1])),
    ),
    "numpy bool": (lambda: np.array([False, True, True]), either("positions", rotated([0, 1, 1]))),
    "0-d numpy": (lambda: np.array(5), val(rotated(np.full(3, 5.0)))),
    "python float scalar": (lambda: 2.5, val(rotated(np.full(3, 2.5)))),
    "python bool scalar": (lambda: True, either("positions", rotated(np.ones(3)))),
    "2**62": (lambda: np.array([2**62, 2**62 + 1, 2**62 + 2]), val(norms_kept())),
    "-2**63 (int64 min)": (lambda: np.array([-(2**63), 0, 1]), val(norms_kept())),
    "uint64 max": (lambda: np.array([2**64 - 1] * 3, np.uint64), val(norms_kept())),
    "1e308": (lambda: np.array([1e308, 0, 1]), either("positions", norms_kept())),
    "float32 max": (lambda: np.array([3.4e38, 0, 1], np.float32), val(norms_kept())),
    "wrong length 4": (lambda: np.arange(4), err("positions", got="4")),
    "length 1 for 3 tokens": (lambda: np.arange(1), either("positions", rotated(np.zeros(3)))),
    "masked array": (lambda: np.ma.masked_array([0, 1, 2], mask=[0, 1, 0]), err("positions")),
    "dask with NaN": (
        lambda: da.from_array(np.array([0.0, np.nan, 2.0]), chunks=1),
        err("positions"),
    ),
    "torch on meta device": (lambda: torch.arange(3, device="meta"), err("positions")),
    "trailing axis of 1": (lambda: np.arange(3)[:, None], either("positions", rotated())),
}
for name, (mk, expect) in pos_cases.items():
    case(
        "apply_rope",
        f"positions: {name}",
        lambda mk=mk: apply(xn((2, 3, 8)), positions=inp(mk()) if not _is_gen(mk()) else mk()),
        expect,
    )
case(
    "apply_rope",
    "torch x, torch int8 positions + offset 100",
    lambda: apply(xt(), positions=inp(torch.tensor([100, 120, 127], dtype=torch.int8)), offset=100),
    val(rotated([200, 220, 227])),
)
case(
    "apply_rope",
    "torch x, jax positions",
    lambda: apply(xt(), positions=inp(jnp.arange(3))),
    err("positions"),
)
case(
    "apply_rope",
    "jax x, torch positions",
    lambda: apply(xj(), positions=inp(torch.arange(3))),
    err("positions"),
)
case(
    "apply_rope",
    "dask x, torch positions",
    lambda: apply(xd(), positions=inp(torch.arange(3))),
    err("positions"),
)
case(
    "apply_rope",
    "array-api-strict x, list positions",
    lambda: apply(xs(), positions=[4, 5, 6]),
    either("positions", rotated([4, 5, 6])),
)

# offset, seq_axis, inverse, seq_len, form, backend, out, role, spec: wrong types and values
kw_cases: list[tuple[str, Any, Expect]] = [
    ("offset", float("nan"), err("offset", "nan")),
    ("offset", "3", err("offset", "'3'")),
    ("offset", [1], err("offset")),
    ("offset", 1 + 2j, err("offset")),
    ("offset", None, err("offset", "None")),
    ("offset", np.array([1, 2]), err("offset")),
    ("offset", torch.tensor(2), either("offset", rotated(offset=2))),
    ("offset", np.float32(0.5), val(rotated(offset=0.5))),
    ("offset", np.int8(100), val(rotated(offset=100))),
    ("offset", True, either("offset", rotated(offset=1))),
    ("offset", 2**64, either("offset", norms_kept())),
    ("offset", -(10**400), err("offset")),
    ("offset", _frac(1, 3), either("offset", rotated(offset=1 / 3))),
    ("seq_axis", 1.0, err("seq_axis", "1.0")),
    ("seq_axis", "0", err("seq_axis", "'0'")),
    ("seq_axis", None, err("seq_axis", "None")),
    ("seq_axis", True, err("seq_axis", "True")),
    ("seq_axis", -1, err("seq_axis", "-1")),
    ("seq_axis", 2, err("seq_axis", "2")),
    ("seq_axis", -4, err("seq_axis", "-4")),
    ("seq_axis", 2**70, err("seq_axis")),
    ("seq_axis", np.uint8(1), val(rotated())),
    ("inverse", "yes", err("inverse", "'yes'")),
    ("inverse", 1, err("inverse", "1")),
    ("inverse", None, err("inverse", "None")),
    ("inverse", np.bool_(True), val(rotated(inverse=True))),
    ("inverse", torch.tensor(True), either("inverse", rotated(inverse=True))),
    ("seq_len", float("nan"), err("seq_len", "nan")),
    ("seq_len", -1, err("seq_len", "-1")),
    ("seq_len", "10", err("seq_len", "'10'")),
    ("seq_len", [10], err("seq_len")),
    ("seq_len", float("inf"), err("seq_len", "inf")),
    ("seq_len", 0, either("seq_len", rotated())),
    ("seq_len", True, either("seq_len", rotated())),
    ("form", "ROTATE_HALF", err("form", "'ROTATE_HALF'")),
    ("form", None, err("form", "None")),
    ("form", 0, err("form", "0")),
    ("form", ["complex"], err("form")),
    ("backend", "Numba", err("backend", "'Numba'")),
    ("backend", None, err("backend", "None")),
    ("backend", 1, err("backend", "1")),
    ("backend", "", err("backend", "''")),
    ("role", "q", err("role", "'q'")),
    ("role", 0, err("role", "0")),
    ("role", "query", either("role", rotated())),
    ("out", np.zeros((2, 3, 8)), err("out")),
    ("out", "buffer", err("out")),
    ("spec", 8, err("spec", "int")),
    ("spec", "half", err("spec", "str")),
    ("spec", {"head_dim": 8}, err("spec", "dict")),
    ("spec", rr.RopeSpec(head_dim=16), err("x", "(2, 3, 8)")),
    ("spec", rr.RopeSpec, err("spec")),
]
for kw, value, expect in kw_cases:
    case(
        "apply_rope",
        f"{kw}={value!r:.40}",
        lambda kw=kw, value=value: apply(xn(), **{kw: value}),
        expect,
    )
for kw, value, expect in kw_cases[:12] + kw_cases[13:27]:
    case(
        "apply_rope",
        f"torch x, {kw}={value!r:.40}",
        lambda kw=kw, value=value: apply(xt(), **{kw: value}),
        expect,
    )
for kw, value, expect in kw_cases[13:22] + kw_cases[28:45]:
    case(
        "apply_rope",
        f"jax x, numba, {kw}={value!r:.40}",
        lambda kw=kw, value=value: (
            apply(xj(), backend="numba", **{kw: value})
            if kw != "backend"
            else apply(xj(), **{kw: value})
        ),
        expect,
    )

# out= with the numba kernel
out_cases: dict[str, tuple[Callable[[], Any], Expect]] = {
    "wrong shape": (lambda: np.empty((2, 3, 9)), err("out")),
    "wrong dtype": (lambda: np.empty((2, 3, 8), np.float32), err("out")),
    "read-only": (lambda: _readonly(np.empty((2, 3, 8))), err("out")),
    "non-contiguous": (
        lambda: np.empty((2, 3, 16))[..., ::2],
        either("out", holds(lambda r: r.shape == (2, 3, 8), "shape")),
    ),
    "a torch tensor": (lambda: torch.empty(2, 3, 8, dtype=torch.float64), err("out")),
    "a list": (lambda: [0.0] * 48, err("out")),
    "overlapping x (shifted view)": (lambda: None, err("out")),
}
for name, (mk, expect) in out_cases.items():
    if name.startswith("overlapping"):
        case(
            "apply_rope",
            "numba out=: overlapping x (shifted view)",
            _overlap_call,
            either("out", holds(lambda r: r is not None, "a result")),
        )
        continue
    case(
        "apply_rope",
        f"numba out=: {name}",
        lambda mk=mk: apply(xn(), backend="numba", out=mk()),
        expect,
    )
case("apply_rope", "numba out=x on a transposed view", _alias_call, val(rotated()))

# threads: many callers at once must each get their own right answer
case(
    "apply_rope",
    "16 threads, distinct offsets, reference",
    lambda: _threads(lambda k: apply(X((2, 5, 8)), offset=k), 16),
    val(_thread_check(lambda k, x: rope64(x, along(np.arange(5), x.shape) + k))),
)
case(
    "apply_rope",
    "16 threads, distinct offsets, numba",
    lambda: _threads(lambda k: apply(X((2, 5, 8)), offset=k, backend="numba"), 16),
    val(_thread_check(lambda k, x: rope64(x, along(np.arange(5), x.shape) + k))),
)
case(
    "rope_cos_sin",
    "16 threads, same positions, cache",
    lambda: _threads(lambda k: rr.rope_cos_sin(S8, np.arange(5) + (k % 2))[0], 16),
    val(_thread_check(lambda k, x: np.cos((np.arange(5) + (k % 2))[:, None] * inv64(8)))),
)
case(
    "apply_rope",
    "8 threads, torch, distinct seq_len, DynamicNTK",
    lambda: _threads(
        lambda k: apply(
            torch.ones(1, 5, 8, dtype=torch.float64),
            rr.RopeSpec(8, scaling=sc.DynamicNTK(2.0, 4)),
            seq_len=4 + k,
        ),
        8,
    ),
    val(
        _thread_check(
            lambda k, x: as_np(
                apply(
                    torch.ones(1, 5, 8, dtype=torch.float64),
                    rr.RopeSpec(8, scaling=sc.DynamicNTK(2.0, 4)),
                    seq_len=4 + k,
                )
            )
        )
    ),
)

# multi-axis specs
MS = rr.RopeSpec(head_dim=8, sections=(2, 1, 1))
case(
    "apply_rope",
    "sections spec, 1-D positions",
    lambda: apply(xn(), MS, inp(np.arange(3))),
    err("positions"),
)
case(
    "apply_rope",
    "sections spec, trailing axis 2",
    lambda: apply(xn(), MS, inp(np.zeros((3, 2), int))),
    err("positions", "2"),
)
case(
    "apply_rope",
    "sections spec, NaN in one axis",
    lambda: apply(xn(), MS, inp(np.array([[0, 0, 0], [1, np.nan, 1], [2, 2, 2]]))),
    err("positions"),
)
case(
    "apply_rope",
    "sections spec, all axes equal = plain RoPE",
    lambda: apply(xn(), MS, inp(np.repeat(np.arange(3)[:, None], 3, 1))),
    val(rotated()),
)

# apply_rope_qk
qk = rr.apply_rope_qk
case(
    "apply_rope_qk",
    "q numpy, k torch",
    lambda: qk(xn(), xt((2, 3, 8), torch.float64)),
    err("k", "Tensor"),
)
case("apply_rope_qk", "q torch, k numpy", lambda: qk(xt(), xn()), err("k"))
case("apply_rope_qk", "q jax, k dask", lambda: qk(xj(), xd()), err("k"))
case("apply_rope_qk", "k a list", lambda: qk(xn(), [[0.0] * 8]), err("k", "list"))
case("apply_rope_qk", "k 0-d", lambda: qk(xn(), inp(np.float64(1.0))), err("k"))
case("apply_rope_qk", "k 6 features", lambda: qk(xn(), xn((2, 3, 6))), err("k", "6"))
case(
    "apply_rope_qk", "q more tokens than k", lambda: qk(xn((2, 5, 8)), xn((2, 3, 8))), err("q", "5")
)
case(
    "apply_rope_qk",
    "k_positions NaN",
    lambda: qk(xn(), xn(), k_positions=inp(np.array([0, np.nan, 2]))),
    err("k_positions"),
)
case(
    "apply_rope_qk",
    "k_positions strings",
    lambda: qk(xn(), xn(), k_positions=["a", "b", "c"]),
    err("k_positions"),
)
case(
    "apply_rope_qk",
    "k_positions wrong length",
    lambda: qk(xn(), xn(), positions=inp(np.arange(3)), k_positions=inp(np.arange(5))),
    err("k_positions"),
)
case(
    "apply_rope_qk",
    "positions NaN, k_positions fine",
    lambda: qk(xn(), xn(), positions=inp(np.array([0, np.nan, 1])), k_positions=inp(np.arange(3))),
    err("positions"),
)
case("apply_rope_qk", "offset string", lambda: qk(xn(), xn(), offset="1"), err("offset"))
case("apply_rope_qk", "seq_axis -1", lambda: qk(xn(), xn(), seq_axis=-1), err("seq_axis"))
case("apply_rope_qk", "seq_axis 1.5", lambda: qk(xn(), xn(), seq_axis=1.5), err("seq_axis", "1.5"))
case("apply_rope_qk", "inverse 'no'", lambda: qk(xn(), xn(), inverse="no"), err("inverse"))
case(
    "apply_rope_qk",
    "seq_len nan with DynamicNTK",
    lambda: qk(xn(), xn(), rr.RopeSpec(8, scaling=sc.DynamicNTK(2.0, 4)), seq_len=float("nan")),
    err("seq_len"),
)
case("apply_rope_qk", "form 7", lambda: qk(xn(), xn(), form=7), err("form"))
case(
    "apply_rope_qk", "backend 'gpu'", lambda: qk(xn(), xn(), backend="gpu"), err("backend", "'gpu'")
)
case("apply_rope_qk", "spec a dict", lambda: qk(xn(), xn(), {"head_dim": 8}), err("spec"))
case(
    "apply_rope_qk",
    "offset NaN, no positions",
    lambda: qk(xn((2, 1, 8)), xn((2, 4, 8)), offset=float("nan")),
    err("offset"),
)
case(
    "apply_rope_qk",
    "offset 2**64, no positions",
    lambda: qk(xn((2, 1, 8)), xn((2, 4, 8)), offset=2**64),
    either("offset", holds(lambda r: all(np.isfinite(as_np(a)).all() for a in r), "finite")),
)
case(
    "apply_rope_qk",
    "GQA numpy: q 4 heads, k 2 heads, 1 query",
    lambda: qk(xn((4, 1, 8)), xn((2, 6, 8), np.float32)),
    val(lambda r, i: (rotated([5], index=0)(r[0], i), rotated(index=1)(r[1], i))),
)
case(
    "apply_rope_qk",
    "q float16, k bfloat16 torch",
    lambda: qk(xt((1, 2, 8), torch.float16), xt((1, 2, 8), torch.bfloat16)),
    val(lambda r, i: (rotated(index=0)(r[0], i), rotated(index=1)(r[1], i))),
)
case(
    "apply_rope_qk",
    "jax q, numba, k_positions list",
    lambda: qk(xj(), xj(), k_positions=[3, 4, 5], backend="numba"),
    val(lambda r, i: (rotated([3, 4, 5], index=0)(r[0], i), rotated([3, 4, 5], index=1)(r[1], i))),
)
case(
    "apply_rope_qk",
    "torch q, numba, k int",
    lambda: qk(xt(), inp(torch.zeros(2, 3, 8, dtype=torch.int32)), backend="numba"),
    err("k"),
)

# rope_cos_sin and rope_angles
cs = rr.rope_cos_sin
for dtype, expect in [
    (np.int32, err("dtype", "int32")),
    ("int8", err("dtype", "int8")),
    (np.complex64, err("dtype", "complex64")),
    ("bogus", err("dtype", "'bogus'")),
    (bool, err("dtype")),
    (torch.float32, err("dtype")),
    (jnp.float32, either("dtype", cos_sin_at([1, 2, 3], dtype="float32"))),
    ("float16", val(cos_sin_at([1, 2, 3], dtype="float16"))),
    (ml_dtypes.bfloat16, val(cos_sin_at([1, 2, 3], dtype="bfloat16"))),
    (
        np.longdouble,
        either("dtype", holds(lambda r: r[0].dtype == np.longdouble, "longdouble kept")),
    ),
    (1, err("dtype", "1")),
    (object, err("dtype")),
]:
    case(
        "rope_cos_sin",
        f"numpy positions, dtype={dtype!r:.40}",
        lambda dtype=dtype: cs(S8, inp(np.array([1, 2, 3])), dtype),
        expect,
    )
case(
    "rope_cos_sin",
    "torch positions, dtype=np.float32",
    lambda: cs(S8, inp(torch.arange(3)), np.float32),
    either("dtype", holds(lambda r: r[0].dtype == torch.float32, "torch float32")),
)
case(
    "rope_cos_sin",
    "torch positions, dtype torch.int64",
    lambda: cs(S8, inp(torch.arange(3)), torch.int64),
    err("dtype"),
)
case(
    "rope_cos_sin",
    "jax positions, dtype jnp.bfloat16",
    lambda: cs(S8, inp(jnp.arange(1, 4)), jnp.bfloat16),
    val(cos_sin_at([1, 2, 3], dtype="bfloat16")),
)
case(
    "rope_cos_sin",
    "array-api-strict positions, dtype float32",
    lambda: cs(S8, inp(xps.arange(1, 4)), xps.float32),
    val(cos_sin_at([1, 2, 3], dtype="float32")),
)
case(
    "rope_cos_sin",
    "dask positions",
    lambda: cs(S8, inp(da.arange(1, 4, chunks=1))),
    val(cos_sin_at([1, 2, 3])),
)
case("rope_cos_sin", "full='yes'", lambda: cs(S8, [1, 2], full="yes"), err("full", "'yes'"))
case("rope_cos_sin", "full=1", lambda: cs(S8, [1, 2], full=1), err("full"))
case(
    "rope_cos_sin",
    "full=True",
    lambda: cs(S8, [1, 2], full=True),
    val(
        lambda r, i: (
            cos_sin_at([1, 2], 8)(tuple(t[..., :4] for t in r), i)
            or cos_sin_at([1, 2], 8)(tuple(t[..., 4:] for t in r), i)
        )
    ),
)
case(
    "rope_cos_sin",
    "backend='numba'",
    lambda: cs(S8, [1, 2], backend="numba"),
    err("backend", "'numba'"),
)
case("rope_cos_sin", "backend=None", lambda: cs(S8, [1, 2], backend=None), err("backend"))
case(
    "rope_cos_sin",
    "role='key' without xpos",
    lambda: cs(S8, [1, 2], role="key"),
    either("role", cos_sin_at([1, 2])),
)
case(
    "rope_cos_sin",
    "role='k' with xpos",
    lambda: cs(rr.RopeSpec(8, xpos=rr.XPos()), [1, 2], role="k"),
    err("role", "'k'"),
)
case("rope_cos_sin", "seq_len -3", lambda: cs(S8, [1, 2], seq_len=-3), err("seq_len", "-3"))
case("rope_cos_sin", "seq_len '4'", lambda: cs(S8, [1, 2], None, "4"), err("seq_len"))
case("rope_cos_sin", "spec None", lambda: cs(None, [1, 2]), err("spec", "None"))
case("rope_cos_sin", "spec a RopeSpec class", lambda: cs(rr.RopeSpec, [1, 2]), err("spec"))
case("rope_cos_sin", "positions a scalar", lambda: cs(S8, 3), val(cos_sin_at(3.0)))
case("rope_cos_sin", "positions []", lambda: cs(S8, []), val(cos_sin_at(np.zeros(0))))
case(
    "rope_cos_sin",
    "positions NaN (jax)",
    lambda: cs(S8, inp(jnp.array([jnp.nan]))),
    err("positions"),
)
case(
    "rope_cos_sin",
    "positions inf, exact backend",
    lambda: cs(S8, [float("inf")], backend="exact"),
    err("positions"),
)
case(
    "rope_cos_sin",
    "positions 3.0 exact backend float32",
    lambda: cs(S8, [3.0], np.float32, backend="exact"),
    val(cos_sin_at([3.0], dtype="float32")),
)
case(
    "rope_cos_sin",
    "positions 1e6 float32 tables",
    lambda: cs(S8, np.array([1e6]), np.float32),
    val(cos_sin_at([1e6], dtype="float32")),
)
case(
    "rope_cos_sin",
    "positions 2**70 python int",
    lambda: cs(S8, [2**70]),
    either(
        "positions",
        holds(lambda r: np.allclose(as_np(r[0]) ** 2 + as_np(r[1]) ** 2, 1), "cos^2+sin^2=1"),
    ),
)
case("rope_cos_sin", "positions 2**1100 python int", lambda: cs(S8, [2**1100]), err("positions"))
case(
    "rope_cos_sin",
    "AttentionScale(2) tables",
    lambda: cs(rr.RopeSpec(8, scaling=sc.AttentionScale(2.0)), [1, 2]),
    val(cos_sin_at([1, 2], scale=2.0)),
)
case(
    "rope_cos_sin",
    "past the table limit",
    lambda: cs(rr.RopeSpec(65536), inp(np.broadcast_to(np.int64(1), (2**13 + 1,)))),
    err("positions"),
)
ra = rr.rope_angles
case(
    "rope_angles", "positions 0-d torch", lambda: ra(S8, inp(torch.tensor(3))), val(angles_at(3.0))
)
case(
    "rope_angles",
    "positions float16 torch",
    lambda: ra(S8, inp(torch.tensor([0.5, 1024.0], dtype=torch.float16))),
    val(angles_at([0.5, 1024])),
)
case(
    "rope_angles",
    "positions bf16 jax",
    lambda: ra(S8, inp(jnp.array([1.0, 256.0], jnp.bfloat16))),
    val(angles_at([1, 256])),
)
case(
    "rope_angles",
    "positions int8 array-api-strict",
    lambda: ra(S8, inp(xps.asarray([-128, 127], dtype=xps.int8))),
    val(angles_at([-128, 127])),
)
case(
    "rope_angles",
    "positions uint64 2**63",
    lambda: ra(S8, inp(np.array([2**63], np.uint64))),
    val(angles_at([2.0**63])),
)
case(
    "rope_angles",
    "positions nested lists",
    lambda: ra(S8, [[1, 2], [3, 4]]),
    val(angles_at([[1, 2], [3, 4]])),
)
case("rope_angles", "positions ragged", lambda: ra(S8, [[1, 2], [3]]), err("positions"))
case("rope_angles", "positions inf", lambda: ra(S8, [float("inf")]), err("positions"))
case(
    "rope_angles",
    "positions 1e308 (angle finite)",
    lambda: ra(S8, [1e308]),
    either("positions", angles_at([1e308])),
)
case("rope_angles", "seq_len nan", lambda: ra(S8, [1], float("nan")), err("seq_len"))
case("rope_angles", "seq_len a list", lambda: ra(S8, [1], [3]), err("seq_len"))
case("rope_angles", "backend 'auto'", lambda: ra(S8, [1], backend="auto"), err("backend", "'auto'"))
case("rope_angles", "backend 0", lambda: ra(S8, [1], backend=0), err("backend"))
case("rope_angles", "spec an int", lambda: ra(8, [1]), err("spec"))
case(
    "rope_angles",
    "exact backend, NaN",
    lambda: ra(S8, [float("nan")], backend="exact"),
    err("positions"),
)
case(
    "rope_angles",
    "exact backend, 2.5",
    lambda: ra(S8, [2.5], backend="exact"),
    val(angles_at([2.5])),
)
case(
    "rope_angles",
    "sections spec, positions (2,) per token",
    lambda: ra(MS, [[1, 2]]),
    err("positions"),
)
case("rope_angles", "sections spec, positions str", lambda: ra(MS, "abc"), err("positions"))
case(
    "rope_angles",
    "masked positions",
    lambda: ra(S8, inp(np.ma.masked_array([1.0, 2.0], mask=[1, 0]))),
    err("positions"),
)

# rotation_matrix
rm = rr.rotation_matrix


def orthogonal(position: float, d: int = 8) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: a float64 (d, d) orthogonal matrix, R(position) where rope64 can tell."""

    def check(r: Any, inputs: list[np.ndarray]) -> None:
        assert isinstance(r, np.ndarray), f"a {type(r).__name__}"
        assert r.dtype == np.float64, f"dtype {r.dtype}"
        assert r.shape == (d, d), f"shape {r.shape}"
        assert np.allclose(r @ r.T, np.eye(d), atol=1e-12), "not orthogonal"
        if abs(position) < 1e6:
            want = rope64(np.eye(d), np.full(d, float(position))).T
            assert np.allclose(r, want, atol=1e-12), "not R(position)"

    return check


for pos, expect in [
    (float("nan"), err("position", "nan")),
    (float("-inf"), err("position", "-inf")),
    ("3", err("position", "'3'")),
    (None, err("position", "None")),
    ([1, 2], err("position")),
    ((1, 2), err("position")),
    (3 + 0j, err("position")),
    (np.array([3]), either("position", orthogonal(3))),
    (np.float16(2.5), val(orthogonal(2.5))),
    (True, either("position", orthogonal(1))),
    (-7, val(orthogonal(-7))),
    (1e300, val(orthogonal(1e300))),
    (2**1100, err("position")),
    (torch.tensor(2.0), either("position", orthogonal(2))),
    (_frac(7, 2), either("position", orthogonal(3.5))),
    (np.datetime64(3, "s"), err("position")),
]:
    case("rotation_matrix", f"position={pos!r:.40}", lambda pos=pos: rm(S8, pos), expect)
case(
    "rotation_matrix", "sections spec, 2 coordinates of 3", lambda: rm(MS, (1, 2)), err("position")
)
case(
    "rotation_matrix",
    "sections spec, a scalar",
    lambda: rm(MS, 1),
    either("position", orthogonal(1)),
)
case(
    "rotation_matrix",
    "sections spec, NaN coordinate",
    lambda: rm(MS, (1, float("nan"), 2)),
    err("position"),
)
case("rotation_matrix", "seq_len -1", lambda: rm(S8, 1, seq_len=-1), err("seq_len"))
case(
    "rotation_matrix",
    "role 'value'",
    lambda: rm(rr.RopeSpec(8, xpos=rr.XPos()), 1, role="value"),
    err("role", "'value'"),
)
case(
    "rotation_matrix",
    "xpos spec without role",
    lambda: rm(rr.RopeSpec(8, xpos=rr.XPos()), 1),
    err("role"),
)
case("rotation_matrix", "spec a dict", lambda: rm({"head_dim": 8}, 1), err("spec"))

# rerotate
rer = rr.rerotate
DS = rr.RopeSpec(head_dim=8, scaling=sc.DynamicNTK(2.0, 4))
for kw, value, expect in [
    ("from_seq_len", float("nan"), err("from_seq_len", "nan")),
    ("from_seq_len", -4, err("from_seq_len", "-4")),
    ("from_seq_len", "4", err("from_seq_len", "'4'")),
    ("from_seq_len", None, err("from_seq_len", "None")),
    ("to_seq_len", float("inf"), err("to_seq_len", "inf")),
    ("to_seq_len", [8], err("to_seq_len")),
    ("to_seq_len", 0, either("to_seq_len", norms_kept())),
    ("offset", float("nan"), err("offset")),
    ("offset", "2", err("offset")),
    ("seq_axis", -1, err("seq_axis")),
    ("seq_axis", 0.5, err("seq_axis")),
    ("role", "query", either("role", norms_kept())),
    ("role", 3, err("role")),
    ("backend", "numba", either("backend", norms_kept())),
    ("backend", "fast", err("backend", "'fast'")),
    ("positions", np.array([0, np.inf, 1]), err("positions")),
    ("positions", ["a", "b", "c"], err("positions")),
    ("positions", np.arange(7), err("positions")),
]:
    args = {"from_seq_len": 4, "to_seq_len": 16} | {kw: value}
    case("rerotate", f"{kw}={value!r:.40}", lambda args=args: rer(xn(), DS, **args), expect)
case(
    "rerotate",
    "from == to is the identity",
    lambda: rer(xn(), DS, from_seq_len=9, to_seq_len=9),
    val(lambda r, i: close(r, i[0], _INPUTS[0][0])),
)
case(
    "rerotate",
    "plain spec: identity",
    lambda: rer(xt((2, 3, 8), torch.float64), S8, from_seq_len=4, to_seq_len=100),
    val(lambda r, i: close(r, i[0], _INPUTS[0][0])),
)
case("rerotate", "spec None", lambda: rer(xn(), None, from_seq_len=4, to_seq_len=8), err("spec"))
case("rerotate", "x a list", lambda: rer([[0.0] * 8], DS, from_seq_len=4, to_seq_len=8), err("x"))
case(
    "rerotate", "x 7 features", lambda: rer(xn((2, 7)), DS, from_seq_len=4, to_seq_len=8), err("x")
)
case(
    "rerotate",
    "missing to_seq_len",
    lambda: rer(xn(), DS, from_seq_len=4),
    Expect(param="to_seq_len"),
)

# apply_rope_mixed
mix = rr.apply_rope_mixed
F2 = np.array([[1.0, 0.1], [0.5, 0.01]])  # (axes, pairs)
P2 = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])  # (seq, axes)


def mixed_ok(layout: str = "interleaved") -> Callable[[Any, list[np.ndarray]], None]:
    """Check: RoPE-Mixed of input 0 with F2 and P2, in float64 (`_mixed64`)."""

    def check(r: Any, inputs: list[np.ndarray]) -> None:
        close(r, _mixed64(inputs[0], layout), _INPUTS[0][0])

    return check


for name, call, expect in [
    ("x torch", lambda: mix(xt((3, 4)), F2, P2), err("x", "Tensor")),
    ("x int", lambda: mix(inp(np.zeros((3, 4), int)), F2, P2), err("x")),
    (
        "x bfloat16",
        lambda: mix(xn((3, 4), ml_dtypes.bfloat16), F2, P2),
        either("x", holds(lambda r: r.dtype == ml_dtypes.bfloat16, "dtype")),
    ),
    ("x 5 features", lambda: mix(xn((3, 5)), F2, P2), err("x")),
    ("freqs NaN", lambda: mix(xn((3, 4)), np.array([[1.0, np.nan], [0.5, 0.1]]), P2), err("freqs")),
    ("freqs 1-D", lambda: mix(xn((3, 4)), np.array([1.0, 0.1]), P2), err("freqs")),
    ("freqs wrong pairs", lambda: mix(xn((3, 4)), np.ones((2, 3)), P2), err("freqs")),
    ("freqs complex", lambda: mix(xn((3, 4)), F2 + 0j, P2), err("freqs")),
    ("freqs strings", lambda: mix(xn((3, 4)), [["a", "b"], ["c", "d"]], P2), err("freqs")),
    (
        "positions NaN",
        lambda: mix(xn((3, 4)), F2, np.array([[0, 1], [np.nan, 2], [3, 4]])),
        err("positions"),
    ),
    ("positions 3 axes", lambda: mix(xn((3, 4)), F2, np.zeros((3, 3))), err("positions")),
    ("positions wrong seq", lambda: mix(xn((3, 4)), F2, np.zeros((4, 2))), err("positions")),
    (
        "positions bool",
        lambda: mix(xn((3, 4)), F2, np.zeros((3, 2), bool)),
        either("positions", holds(lambda r: r.shape == (3, 4), "shape")),
    ),
    ("layout 'HALF'", lambda: mix(xn((3, 4)), F2, P2, layout="HALF"), err("layout", "'HALF'")),
    ("layout None", lambda: mix(xn((3, 4)), F2, P2, layout=None), err("layout")),
    ("inverse 'true'", lambda: mix(xn((3, 4)), F2, P2, inverse="true"), err("inverse")),
    (
        "backend 'exact'",
        lambda: mix(xn((3, 4)), F2, P2, backend="exact"),
        err("backend", "'exact'"),
    ),
    (
        "backend 'numba', float16",
        lambda: mix(xn((3, 4), np.float16), F2, P2, backend="numba"),
        val(mixed_ok()),
    ),
    (
        "read-only x, half",
        lambda: mix(inp(_readonly(X((3, 4)))), F2, P2, layout="half"),
        val(mixed_ok("half")),
    ),
    ("x reversed features", lambda: mix(inp(X((3, 4))[:, ::-1]), F2, P2), val(mixed_ok())),
]:
    case("apply_rope_mixed", name, call, expect)

# RopeSpec and its fields
for kw, value, expect in [
    ("head_dim", True, err("head_dim", "True")),
    ("head_dim", 8.0, err("head_dim", "8.0")),
    ("head_dim", "8", err("head_dim", "'8'")),
    (
        "head_dim",
        np.int8(8),
        val(holds(lambda s: s.head_dim == 8 and type(s.head_dim) is int, "head_dim int 8")),
    ),
    (
        "head_dim",
        torch.tensor(8),
        either("head_dim", holds(lambda s: type(s.head_dim) is int, "int")),
    ),
    ("head_dim", -8, err("head_dim", "-8")),
    ("head_dim", 0, err("head_dim", "0")),
    ("head_dim", 65538, err("head_dim", "65538")),
    ("head_dim", 2**100, err("head_dim")),
    ("rotary_dim", 0, err("rotary_dim", "0")),
    ("rotary_dim", 10, err("rotary_dim", "10")),
    ("rotary_dim", 4.0, err("rotary_dim", "4.0")),
    (
        "rotary_dim",
        np.uint16(4),
        val(holds(lambda s: s.rotary_dim == 4 and type(s.rotary_dim) is int, "rotary_dim 4")),
    ),
    ("rotary_start", -2, err("rotary_start", "-2")),
    ("rotary_start", True, err("rotary_start", "True")),
    ("rotary_start", 8, err("rotary_start")),
    (
        "rotary_start",
        3,
        either("rotary_start", holds(lambda s: s.rotary_dim == 4, "odd start, 4 rotated")),
    ),
    ("base", float("nan"), err("base", "nan")),
    ("base", float("inf"), err("base", "inf")),
    ("base", 1, err("base", "1")),
    ("base", 0.5, err("base", "0.5")),
    ("base", "10000", err("base", "'10000'")),
    ("base", 1e4 + 0j, err("base")),
    ("base", True, err("base")),
    (
        "base",
        np.float32(500000),
        val(holds(lambda s: s.base == 500000.0 and type(s.base) is float, "base float")),
    ),
    ("base", 10**400, err("base")),
    (
        "base",
        1 + 2**-52,
        either("base", holds(lambda s: np.all(np.isfinite(rr.inv_freq(s))), "finite frequencies")),
    ),
    ("layout", "HALF", err("layout", "'HALF'")),
    ("layout", None, err("layout", "None")),
    ("layout", "neox", err("layout", "'neox'")),
    ("output_layout", "bogus", err("output_layout", "'bogus'")),
    ("output_layout", 1, err("output_layout")),
    ("freqs", [1.0, float("nan"), 0.1, 0.01], err("freqs")),
    ("freqs", [1.0, 0.5], err("freqs")),
    (
        "freqs",
        [1.0, -0.5, 0.1, 0.01],
        either("freqs", holds(lambda s: len(s.freqs) == 4, "negative frequency kept")),
    ),
    ("freqs", ["1", "2", "3", "4"], err("freqs")),
    (
        "freqs",
        np.array([1.0, 0.5, 0.1, 0.01]),
        val(
            holds(
                lambda s: hash(s) is not None and s.freqs == (1.0, 0.5, 0.1, 0.01),
                "hashable, freqs kept",
            )
        ),
    ),
    (
        "freqs",
        (f for f in (1.0, 0.5, 0.1, 0.01)),
        either("freqs", holds(lambda s: s.freqs == (1.0, 0.5, 0.1, 0.01), "freqs kept")),
    ),
    ("freqs", 1.0, err("freqs")),
    ("freqs", [1 + 0j] * 4, err("freqs")),
    ("freqs", [1e308 * 10, 1.0, 1.0, 1.0], err("freqs")),
    ("xpos", rr.XPos, err("xpos")),
    ("xpos", 512, err("xpos")),
    ("scaling", 2.0, err("scaling", "2.0")),
    ("scaling", "linear", err("scaling", "'linear'")),
    ("scaling", sc.Linear, err("scaling")),
    ("sections", (2, 1), err("sections")),
    ("sections", (2, 2, 0), err("sections", "0")),
    ("sections", (5, -1), err("sections", "-1")),
    ("sections", "211", err("sections")),
    ("sections", (2.0, 2.0), err("sections")),
    ("sections", (), err("sections")),
    ("sections", (True, 3), err("sections")),
    ("section_order", "bogus", err("section_order", "'bogus'")),
    ("section_order", None, err("section_order")),
]:
    kws = {"head_dim": 8} | ({"freqs": None} if kw != "freqs" else {}) | {kw: value}
    case("RopeSpec", f"{kw}={value!r:.40}", lambda kws=kws: rr.RopeSpec(**kws), expect)
case(
    "RopeSpec",
    "freqs with base set",
    lambda: rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01], base=500.0),
    err("base"),
)
case(
    "RopeSpec",
    "freqs with scaling",
    lambda: rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01], scaling=sc.Linear(2)),
    err("scaling"),
)
case(
    "RopeSpec",
    "section_order without sections",
    lambda: rr.RopeSpec(8, section_order="interleaved"),
    either("section_order", holds(lambda s: s.sections is None, "plain")),
)
case("RopeSpec", "head_dim positional 2**16 + 2", lambda: rr.RopeSpec(2**16 + 2), err("head_dim"))
case(
    "RopeSpec",
    "replace() to an odd rotary_dim",
    lambda: __import__("dataclasses").replace(S8, rotary_dim=3),
    err("rotary_dim", "3"),
)
case(
    "RopeSpec",
    "replace() to base NaN",
    lambda: __import__("dataclasses").replace(S8, base=float("nan")),
    err("base", "nan"),
)

# XPos, the scaling rules and yarn_mscale
for name, call, expect in [
    ("XPos(nan)", lambda: rr.XPos(float("nan")), err("scale_base", "nan")),
    ("XPos(0)", lambda: rr.XPos(0), err("scale_base", "0")),
    ("XPos(-512)", lambda: rr.XPos(-512), err("scale_base")),
    ("XPos('512')", lambda: rr.XPos("512"), err("scale_base")),
    ("XPos(True)", lambda: rr.XPos(True), err("scale_base")),
    ("XPos(inf)", lambda: rr.XPos(float("inf")), err("scale_base")),
    ("Linear(0)", lambda: sc.Linear(0), err("factor", "0")),
    ("Linear(nan)", lambda: sc.Linear(float("nan")), err("factor", "nan")),
    ("Linear('2')", lambda: sc.Linear("2"), err("factor", "'2'")),
    ("Linear(True)", lambda: sc.Linear(True), err("factor")),
    (
        "Linear(1e-320)",
        lambda: sc.Linear(1e-320),
        either(
            "factor",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    ("Linear(2+0j)", lambda: sc.Linear(2 + 0j), err("factor")),
    (
        "Linear(np.float32(2))",
        lambda: sc.Linear(np.float32(2)),
        val(
            holds(
                lambda r: np.allclose(
                    rr.inv_freq(rr.RopeSpec(8, scaling=r)), inv64(8) / 2, rtol=1e-15
                ),
                "inv_freq / 2",
            )
        ),
    ),
    ("NTKAware(inf)", lambda: sc.NTKAware(float("inf")), err("factor")),
    ("NTKAware(-2)", lambda: sc.NTKAware(-2), err("factor")),
    ("NTKAware([2])", lambda: sc.NTKAware([2]), err("factor")),
    ("DynamicNTK(2, 0)", lambda: sc.DynamicNTK(2.0, 0), err("max_position", "0")),
    (
        "DynamicNTK(2, 1.5): lengths are real",
        lambda: sc.DynamicNTK(2.0, 1.5),
        val(
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            )
        ),
    ),
    ("DynamicNTK(2, '4096')", lambda: sc.DynamicNTK(2.0, "4096"), err("max_position")),
    ("DynamicNTK(nan, 4)", lambda: sc.DynamicNTK(float("nan"), 4), err("factor")),
    (
        "DynamicNTK(2, 2**60)",
        lambda: sc.DynamicNTK(2.0, 2**60),
        either("max_position", holds(lambda r: True, "built")),
    ),
    (
        "YaRN beta_fast < beta_slow (as HF)",
        lambda: sc.YaRN(4.0, 4096, beta_fast=1.0, beta_slow=32.0),
        either(
            "beta",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    ("YaRN beta_fast nan", lambda: sc.YaRN(4.0, 4096, beta_fast=float("nan")), err("beta_fast")),
    (
        "YaRN beta_slow -1",
        lambda: sc.YaRN(4.0, 4096, beta_slow=-1.0),
        either("beta_slow", holds(lambda r: True, "built")),
    ),
    ("YaRN mscale nan", lambda: sc.YaRN(4.0, 4096, mscale=float("nan")), err("mscale")),
    (
        "YaRN attention_factor -1",
        lambda: sc.YaRN(4.0, 4096, attention_factor=-1.0),
        err("attention_factor"),
    ),
    (
        "YaRN attention_factor 'x'",
        lambda: sc.YaRN(4.0, 4096, attention_factor="x"),
        err("attention_factor"),
    ),
    ("YaRN truncate 'no'", lambda: sc.YaRN(4.0, 4096, truncate="no"), err("truncate", "'no'")),
    ("YaRN original_max_position 0", lambda: sc.YaRN(4.0, 0), err("original_max_position")),
    (
        "YaRN original_max_position 4096.5: lengths are real",
        lambda: sc.YaRN(4.0, 4096.5),
        val(
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            )
        ),
    ),
    (
        "YaRN factor 0.5",
        lambda: sc.YaRN(0.5, 4096),
        either("factor", holds(lambda r: True, "built")),
    ),
    (
        "YaRN mscale_all_dim inf",
        lambda: sc.YaRN(4.0, 4096, mscale_all_dim=float("inf")),
        err("mscale_all_dim"),
    ),
    (
        "Llama3 low == high",
        lambda: sc.Llama3(8.0, 8192, low_freq_factor=4.0, high_freq_factor=4.0),
        either(
            "freq_factor",
            holds(
                lambda r: np.all(np.isfinite(rr.inv_freq(rr.RopeSpec(8, scaling=r)))),
                "finite frequencies",
            ),
        ),
    ),
    (
        "Llama3 low > high",
        lambda: sc.Llama3(8.0, 8192, low_freq_factor=4.0, high_freq_factor=1.0),
        err("freq_factor"),
    ),
    ("Llama3 low 0", lambda: sc.Llama3(8.0, 8192, low_freq_factor=0.0), err("low_freq_factor")),
    ("Llama3 factor -8", lambda: sc.Llama3(-8.0, 8192), err("factor")),
    (
        "Llama3 original_max_position True",
        lambda: sc.Llama3(8.0, True),
        err("original_max_position"),
    ),
    (
        "Llama3 high nan",
        lambda: sc.Llama3(8.0, 8192, high_freq_factor=float("nan")),
        err("high_freq_factor"),
    ),
    (
        "LongRoPE lengths differ",
        lambda: rr.RopeSpec(8, scaling=sc.LongRoPE([1.0] * 4, [1.0] * 3, 4096)),
        err("long_factor"),
    ),
    (
        "LongRoPE NaN factor",
        lambda: sc.LongRoPE([1.0, float("nan")], [1.0, 1.0], 4096),
        err("short_factor"),
    ),
    ("LongRoPE zero factor", lambda: sc.LongRoPE([1.0, 1.0], [0.0, 1.0], 4096), err("long_factor")),
    ("LongRoPE strings", lambda: sc.LongRoPE(["1", "1"], [1.0, 1.0], 4096), err("short_factor")),
    ("LongRoPE a scalar", lambda: sc.LongRoPE(1.0, [1.0, 1.0], 4096), err("short_factor")),
    (
        "LongRoPE 2-D factors",
        lambda: sc.LongRoPE([[1.0, 1.0]], [[1.0, 1.0]], 4096),
        err("short_factor"),
    ),
    (
        "LongRoPE original_max_position 0",
        lambda: sc.LongRoPE([1.0], [1.0], 0),
        err("original_max_position"),
    ),
    (
        "LongRoPE factor nan",
        lambda: sc.LongRoPE([1.0], [1.0], 4096, factor=float("nan")),
        err("factor"),
    ),
    (
        "LongRoPE attention_factor 0",
        lambda: sc.LongRoPE([1.0], [1.0], 4096, attention_factor=0.0),
        err("attention_factor"),
    ),
    (
        "LongRoPE wrong length for spec",
        lambda: rr.apply_rope(
            xn((1, 2, 8)), rr.RopeSpec(8, scaling=sc.LongRoPE([1.0] * 3, [1.0] * 3, 4096))
        ),
        err("factor"),
    ),
    (
        "Proportional(0): nothing rotates",
        lambda: sc.Proportional(0.0),
        val(holds(lambda r: not rr.inv_freq(rr.RopeSpec(8, scaling=r)).any(), "zero frequencies")),
    ),
    ("Proportional(1.5)", lambda: sc.Proportional(1.5), err("partial_rotary_factor", "1.5")),
    ("Proportional(nan)", lambda: sc.Proportional(float("nan")), err("partial_rotary_factor")),
    ("Proportional(0.5, factor=0)", lambda: sc.Proportional(0.5, factor=0.0), err("factor")),
    ("AttentionScale(0)", lambda: sc.AttentionScale(0.0), err("factor", "0")),
    ("AttentionScale(-1)", lambda: sc.AttentionScale(-1.0), err("factor")),
    ("AttentionScale(inf)", lambda: sc.AttentionScale(float("inf")), err("factor")),
    ("AttentionScale('2')", lambda: sc.AttentionScale("2"), err("factor")),
    ("Chain()", sc.Chain, either("rules", holds(lambda r: True, "built"))),
    ("Chain(1)", lambda: sc.Chain(1), err("rules")),
    ("Chain(Linear(2), 'x')", lambda: sc.Chain(sc.Linear(2.0), "x"), err("rules")),
    ("Chain(Linear) (a class)", lambda: sc.Chain(sc.Linear), err("rules")),
    (
        "Chain of Linear(2), Linear(3)",
        lambda: sc.Chain(sc.Linear(2.0), sc.Linear(3.0)),
        val(
            holds(
                lambda r: np.allclose(
                    rr.inv_freq(rr.RopeSpec(8, scaling=r)), inv64(8) / 6, rtol=1e-15
                ),
                "inv_freq / 6",
            )
        ),
    ),
    ("yarn_mscale(0)", lambda: sc.yarn_mscale(0.0), err("factor")),
    ("yarn_mscale(-1)", lambda: sc.yarn_mscale(-1.0), err("factor")),
    ("yarn_mscale(nan)", lambda: sc.yarn_mscale(float("nan")), err("factor")),
    ("yarn_mscale('2')", lambda: sc.yarn_mscale("2"), err("factor")),
    ("yarn_mscale(4, mscale=nan)", lambda: sc.yarn_mscale(4.0, float("nan")), err("mscale")),
    ("yarn_mscale(4, 1)", lambda: sc.yarn_mscale(4.0, 1.0), val(is_(0.1 * np.log(4.0) + 1.0))),
    ("yarn_mscale(0.5)", lambda: sc.yarn_mscale(0.5), val(is_(1.0))),
]:
    case("scaling" if "XPos" not in name else "XPos", name, call, expect)

# RopeSpec.from_hf with odd configs
fh = rr.RopeSpec.from_hf
L = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 8,
    "rope_theta": 10000.0,
    "max_position_embeddings": 128,
}
for name, cfg, expect in [
    ("None", None, err("config", "None")),
    ("a list", [L], err("config")),
    ("an int", 3, err("config", "3")),
    ("a JSON string that is not JSON", "{not json", err("config")),
    ("bytes", b"{}", err("config")),
    ("empty dict", {}, err("config")),
    ("hidden_size a string", L | {"hidden_size": "64"}, err("hidden_size", "'64'")),
    ("hidden_size not divisible", L | {"hidden_size": 60}, err("hidden_size")),
    ("num_attention_heads 0", L | {"num_attention_heads": 0}, err("num_attention_heads")),
    ("num_attention_heads True", L | {"num_attention_heads": True}, err("num_attention_heads")),
    ("head_dim 7", L | {"head_dim": 7}, err("head_dim", "7")),
    ("head_dim 8.5", L | {"head_dim": 8.5}, err("head_dim", "8.5")),
    ("head_dim 2**60", L | {"head_dim": 2**60}, err("head_dim")),
    ("rope_theta NaN", L | {"rope_theta": float("nan")}, err("rope_theta")),
    ("rope_theta '1e4'", L | {"rope_theta": "1e4"}, err("rope_theta")),
    ("rope_theta 1", L | {"rope_theta": 1}, err("rope_theta")),
    (
        "rope_theta None",
        L | {"rope_theta": None},
        either("rope_theta", holds(lambda s: s.base == 10000.0, "default base")),
    ),
    ("rope_scaling a string", L | {"rope_scaling": "linear"}, err("rope_scaling")),
    ("rope_scaling a list", L | {"rope_scaling": [2.0]}, err("rope_scaling")),
    (
        "rope_scaling unknown type",
        L | {"rope_scaling": {"rope_type": "wavy", "factor": 2.0}},
        err("rope_type", "wavy"),
    ),
    (
        "rope_scaling type an int",
        L | {"rope_scaling": {"rope_type": 3, "factor": 2.0}},
        err("rope_type"),
    ),
    ("linear without factor", L | {"rope_scaling": {"rope_type": "linear"}}, err("factor")),
    (
        "linear factor NaN",
        L | {"rope_scaling": {"rope_type": "linear", "factor": float("nan")}},
        err("factor"),
    ),
    (
        "linear factor '2'",
        L | {"rope_scaling": {"rope_type": "linear", "factor": "2"}},
        err("factor"),
    ),
    (
        "linear factor True",
        L | {"rope_scaling": {"rope_type": "linear", "factor": True}},
        err("factor"),
    ),
    (
        "yarn factor 0",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 0,
                "original_max_position_embeddings": 64,
            }
        },
        err("factor"),
    ),
    (
        "yarn original_max -5",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 2.0,
                "original_max_position_embeddings": -5,
            }
        },
        err("original_max_position"),
    ),
    (
        "llama3 missing keys",
        L | {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
        either(
            "rope_scaling",
            holds(
                lambda s: s.scaling.low_freq_factor == 1.0 and s.scaling.high_freq_factor == 4.0,
                "Llama 3.1 defaults",
            ),
        ),
    ),
    (
        "longrope short_factor wrong length",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": [1.0],
                "long_factor": [1.0],
                "original_max_position_embeddings": 64,
            }
        },
        err("short_factor"),
    ),
    (
        "dynamic with max_position_embeddings 0",
        L | {"max_position_embeddings": 0, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        err("max_position"),
    ),
    ("partial_rotary_factor 0", L | {"partial_rotary_factor": 0.0}, err("partial_rotary_factor")),
    ("partial_rotary_factor 1.5", L | {"partial_rotary_factor": 1.5}, err("partial_rotary_factor")),
    (
        "partial_rotary_factor '0.5'",
        L | {"partial_rotary_factor": "0.5"},
        err("partial_rotary_factor"),
    ),
    (
        "partial_rotary_factor 0.3 (odd rotary)",
        L | {"partial_rotary_factor": 0.3},
        either("partial_rotary_factor", holds(lambda s: s.rotary_dim % 2 == 0, "even")),
    ),
    (
        "rope_scaling with NaN in JSON text",
        json.dumps(L | {"rope_scaling": {"rope_type": "linear", "factor": 2}}).replace(
            "2}", "NaN}"
        ),
        err("factor"),
    ),
    (
        "unknown model_type, plain keys",
        L | {"model_type": "nonexistent-model"},
        either("model_type", holds(lambda s: s.head_dim == 8, "head_dim 8")),
    ),
    ("model_type an int", L | {"model_type": 5}, err("model_type")),
    ("text_config a list", L | {"text_config": [1]}, err("text_config")),
    ("rope_parameters not a dict", L | {"rope_parameters": 5}, err("rope_parameters")),
    (
        "mrope_section wrong sum",
        L | {"rope_scaling": {"rope_type": "default", "mrope_section": [1, 1]}},
        err("mrope_section"),
    ),
    (
        "mrope_section strings",
        L | {"rope_scaling": {"rope_type": "default", "mrope_section": ["a"]}},
        err("mrope_section"),
    ),
    ("layer_types not a list", L | {"layer_types": "full"}, err("layer_types")),
    (
        "max_position_embeddings 1e300",
        L
        | {
            "max_position_embeddings": 1e300,
            "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
        },
        err("max_position"),
    ),
]:
    case(
        "from_hf",
        f"config: {name}",
        lambda cfg=cfg: fh(copy.deepcopy(cfg) if not isinstance(cfg, dict) else inp(cfg)),
        expect,
    )
case("from_hf", "strict='yes'", lambda: fh(inp(dict(L)), strict="yes"), err("strict", "'yes'"))
case(
    "from_hf",
    "section_order 'bogus'",
    lambda: fh(inp(dict(L)), section_order="bogus"),
    err("section_order", "'bogus'"),
)
case("from_hf", "section_order 1", lambda: fh(inp(dict(L)), section_order=1), err("section_order"))
case(
    "from_hf",
    "layer_type 'bogus'",
    lambda: fh(inp(dict(L)), layer_type="bogus"),
    err("layer_type", "'bogus'"),
)
case("from_hf", "layer_type 3", lambda: fh(inp(dict(L)), layer_type=3), err("layer_type"))
case(
    "from_hf",
    "layer_type not among 2 layer_types",
    lambda: fh(inp(L | {"layer_types": ["full_attention"] * 2}), layer_type="sliding_attention"),
    err("layer_type", "sliding_attention"),
)
case(
    "from_hf",
    "transformers LlamaConfig with rope_theta NaN",
    lambda: fh(_llama_config(rope_theta=float("nan"))),
    err("rope_theta"),
)
case(
    "from_hf",
    "plain value: L",
    lambda: fh(inp(dict(L))),
    val(
        holds(
            lambda s: s.head_dim == 8 and s.base == 10000.0 and s.layout == "half",
            "llama head_dim 8",
        )
    ),
)
case("from_hf_layers", "config None", lambda: rr.RopeSpec.from_hf_layers(None), err("config"))
case(
    "from_hf_layers",
    "layer_types with None",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"layer_types": [None, "full_attention"]})),
    err("layer_types"),
)
case(
    "to_hf",
    "spec with freqs",
    lambda: rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.01]).to_hf(),
    err("freqs"),
)
case(
    "to_hf",
    "spec with a user scaling rule",
    lambda: rr.RopeSpec(8, scaling=_UserRule()).to_hf(),
    err("scaling"),
)

# the other public functions
for name, call, expect in [
    ("inv_freq seq_len nan", lambda: rr.inv_freq(DS, float("nan")), err("seq_len")),
    ("inv_freq spec str", lambda: rr.inv_freq("llama"), err("spec")),
    ("inv_freq seq_len '8'", lambda: rr.inv_freq(DS, "8"), err("seq_len")),
    ("attention_factor seq_len -1", lambda: rr.attention_factor(DS, -1), err("seq_len")),
    ("attention_factor spec None", lambda: rr.attention_factor(None), err("spec")),
    (
        "convert_layout src 'bogus'",
        lambda: rr.convert_layout(xn((2, 8)), S8, src="bogus"),
        err("src", "'bogus'"),
    ),
    ("convert_layout dst None", lambda: rr.convert_layout(xn((2, 8)), S8, dst=None), err("dst")),
    ("convert_layout 7 features", lambda: rr.convert_layout(xn((2, 7))), err("x")),
    ("convert_layout 0-d", lambda: rr.convert_layout(inp(np.float64(1))), err("x")),
    ("convert_layout a list", lambda: rr.convert_layout([[1.0] * 8]), err("x")),
    (
        "convert_layout torch bfloat16 exact",
        lambda: rr.convert_layout(xt((2, 8), torch.bfloat16), S8),
        val(lambda r, i: close(r, i[0][:, [0, 2, 4, 6, 1, 3, 5, 7]], _INPUTS[0][0])),
    ),
    (
        "permute_weights n_heads 0",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=0),
        err("n_heads", "0"),
    ),
    (
        "permute_weights n_heads 3",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=3),
        err("n_heads", "3"),
    ),
    (
        "permute_weights n_heads 2.0",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=2.0),
        err("n_heads", "2.0"),
    ),
    (
        "permute_weights n_heads True",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=True),
        err("n_heads"),
    ),
    (
        "permute_weights w 1-D",
        lambda: rr.permute_weights(xn((16,)), n_heads=2),
        either("w", holds(lambda r: r.shape == (16,), "shape")),
    ),
    (
        "permute_weights w int",
        lambda: rr.permute_weights(inp(np.zeros((16, 4), int)), n_heads=2),
        either("w", holds(lambda r: r.dtype.kind == "i", "int kept")),
    ),
    ("permute_weights w a list", lambda: rr.permute_weights([[0.0] * 4] * 16, n_heads=2), err("w")),
    (
        "permute_weights spec mismatch",
        lambda: rr.permute_weights(xn((16, 4)), n_heads=2, spec=rr.RopeSpec(16)),
        err("spec"),
    ),
    ("sinusoidal dim 0", lambda: rr.sinusoidal_embedding(np.arange(3), 0), err("dim", "0")),
    ("sinusoidal dim 3", lambda: rr.sinusoidal_embedding(np.arange(3), 3), err("dim", "3")),
    ("sinusoidal dim 4.0", lambda: rr.sinusoidal_embedding(np.arange(3), 4.0), err("dim", "4.0")),
    ("sinusoidal dim True", lambda: rr.sinusoidal_embedding(np.arange(3), True), err("dim")),
    (
        "sinusoidal base nan",
        lambda: rr.sinusoidal_embedding(np.arange(3), 4, base=float("nan")),
        err("base"),
    ),
    ("sinusoidal base 1", lambda: rr.sinusoidal_embedding(np.arange(3), 4, base=1.0), err("base")),
    (
        "sinusoidal positions NaN",
        lambda: rr.sinusoidal_embedding(inp(np.array([0.0, np.nan])), 4),
        err("positions"),
    ),
    ("sinusoidal positions strings", lambda: rr.sinusoidal_embedding(["a"], 4), err("positions")),
    (
        "sinusoidal torch int8 positions",
        lambda: rr.sinusoidal_embedding(inp(torch.tensor([127], dtype=torch.int8)), 4),
        val(
            holds(
                lambda r: (
                    np.allclose(as_np(r)[0], [np.sin(127), np.sin(1.27), np.cos(127), np.cos(1.27)])
                    or np.allclose(
                        as_np(r)[0], [np.sin(127), np.cos(127), np.sin(1.27), np.cos(1.27)]
                    )
                ),
                "sinusoid at 127",
            )
        ),
    ),
    (
        "sinusoidal dim past limit",
        lambda: rr.sinusoidal_embedding(inp(np.broadcast_to(np.int64(1), (2**20,))), 2**10),
        err("positions"),
    ),
    ("axial_freqs []", lambda: rr.axial_freqs([]), err("sections")),
    ("axial_freqs [0]", lambda: rr.axial_freqs([0]), err("sections", "0")),
    ("axial_freqs [-2]", lambda: rr.axial_freqs([-2]), err("sections", "-2")),
    ("axial_freqs ['a']", lambda: rr.axial_freqs(["a"]), err("sections")),
    ("axial_freqs 4 (not a sequence)", lambda: rr.axial_freqs(4), err("sections")),
    (
        "axial_freqs kind 'bogus'",
        lambda: rr.axial_freqs([2, 2], kind="bogus"),
        err("kind", "'bogus'"),
    ),
    (
        "axial_freqs max_freq nan",
        lambda: rr.axial_freqs([2, 2], kind="pixel", max_freq=float("nan")),
        err("max_freq"),
    ),
    ("axial_freqs base 0.5", lambda: rr.axial_freqs([2, 2], base=0.5), err("base")),
    ("axial_freqs [2.0, 2.0]", lambda: rr.axial_freqs([2.0, 2.0]), err("sections")),
    (
        "mrope_positions []",
        lambda: rr.mrope_positions([]),
        either("segments", holds(lambda r: r.shape[0] == 0, "empty")),
    ),
    ("mrope_positions [-1]", lambda: rr.mrope_positions([-1]), err("segments", "-1")),
    ("mrope_positions [1.5]", lambda: rr.mrope_positions([1.5]), err("segments")),
    ("mrope_positions [[1, 2]]", lambda: rr.mrope_positions([[1, 2]]), err("segments")),
    (
        "mrope_positions merge_size 0",
        lambda: rr.mrope_positions([[1, 4, 4]], merge_size=0),
        err("merge_size", "0"),
    ),
    (
        "mrope_positions merge_size 3 not dividing",
        lambda: rr.mrope_positions([[1, 4, 4]], merge_size=3),
        err("merge_size"),
    ),
    ("mrope_positions 'abc'", lambda: rr.mrope_positions("abc"), err("segments")),
    (
        "mrope_positions [3, [1, 2, 2]] value",
        lambda: rr.mrope_positions([3, [1, 2, 2]]),
        val(
            holds(
                lambda r: (
                    r.tolist()
                    == [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3], [3, 3, 4], [3, 4, 3], [3, 4, 4]]
                ),
                "text then grid",
            )
        ),
    ),
    (
        "patch_positions [0, 2]",
        lambda: rr.patch_positions([0, 2]),
        either("shape", holds(lambda r: r.shape[0] == 0, "empty")),
    ),
    ("patch_positions [-1, 2]", lambda: rr.patch_positions([-1, 2]), err("shape", "-1")),
    ("patch_positions kind 'bogus'", lambda: rr.patch_positions([2, 2], kind="bogus"), err("kind")),
    (
        "patch_positions merge_size 3",
        lambda: rr.patch_positions([4, 4], merge_size=3),
        err("merge_size"),
    ),
    ("patch_positions [2.5, 2]", lambda: rr.patch_positions([2.5, 2]), err("shape")),
    ("patch_positions 4", lambda: rr.patch_positions(4), err("shape")),
    ("feature_order src 'bogus'", lambda: rr.feature_order(S8, "bogus", "half"), err("src")),
    ("feature_order spec None", lambda: rr.feature_order(None, "half", "interleaved"), err("spec")),
    ("pair_axes spec str", lambda: rr.pair_axes("x"), err("spec")),
    (
        "available_backends unchanged",
        rr.available_backends,
        val(holds(lambda r: r.get("reference", 1) is None, "reference available")),
    ),
]:
    case(name.split(" ")[0], name, call, expect)

# rope_ref.testing: assertions, reports, the error model, strategies
xa = lambda: xn((2, 3, 8))  # noqa: E731
good = lambda: apply(X((2, 3, 8)))  # noqa: E731
for name, call, expect in [
    (
        "assert_rope_close actual wrong shape",
        lambda: rt.assert_rope_close(inp(np.zeros((2, 3, 9))), xa(), S8),
        Expect(param="AssertionError"),
    ),
    (
        "assert_rope_close actual int",
        lambda: rt.assert_rope_close(inp(np.zeros((2, 3, 8), int)), xa(), S8),
        err("actual"),
    ),
    (
        "assert_rope_close actual None",
        lambda: rt.assert_rope_close(None, xa(), S8),
        err("actual", "None"),
    ),
    (
        "assert_rope_close actual a list",
        lambda: rt.assert_rope_close(good().tolist(), xa(), S8),
        either("actual", holds(lambda r: r.ok, "ok")),
    ),
    (
        "assert_rope_close x int",
        lambda: rt.assert_rope_close(good(), inp(np.zeros((2, 3, 8), int)), S8),
        err("x"),
    ),
    (
        "assert_rope_close rtol -1",
        lambda: rt.assert_rope_close(good(), xa(), S8, rtol=-1.0),
        err("rtol", "-1"),
    ),
    (
        "assert_rope_close atol nan",
        lambda: rt.assert_rope_close(good(), xa(), S8, atol=float("nan")),
        err("atol", "nan"),
    ),
    (
        "assert_rope_close rtol 'x'",
        lambda: rt.assert_rope_close(good(), xa(), S8, rtol="x"),
        err("rtol"),
    ),
    (
        "assert_rope_close atol inf",
        lambda: rt.assert_rope_close(good() * 0, xa(), S8, atol=float("inf")),
        err("atol"),
    ),
    (
        "assert_rope_close max_ulps -1",
        lambda: rt.assert_rope_close(good(), xa(), S8, max_ulps=-1),
        err("max_ulps", "-1"),
    ),
    (
        "assert_rope_close max_ulps nan",
        lambda: rt.assert_rope_close(good(), xa(), S8, max_ulps=float("nan")),
        err("max_ulps"),
    ),
    (
        "assert_rope_close dtype 'bogus'",
        lambda: rt.assert_rope_close(good(), xa(), S8, dtype="bogus"),
        err("dtype", "bogus"),
    ),
    (
        "assert_rope_close angle_dtype int",
        lambda: rt.assert_rope_close(good(), xa(), S8, angle_dtype=np.int32),
        err("angle_dtype"),
    ),
    (
        "assert_rope_close position_dtype float64",
        lambda: rt.assert_rope_close(good(), xa(), S8, position_dtype=np.float64),
        either("position_dtype", holds(lambda r: r.ok, "ok")),
    ),
    (
        "assert_rope_close offset nan",
        lambda: rt.assert_rope_close(good(), xa(), S8, offset=float("nan")),
        err("offset"),
    ),
    (
        "assert_rope_close seq_axis 1.5",
        lambda: rt.assert_rope_close(good(), xa(), S8, seq_axis=1.5),
        err("seq_axis"),
    ),
    (
        "assert_rope_close inverse 'no'",
        lambda: rt.assert_rope_close(good(), xa(), S8, inverse="no"),
        err("inverse"),
    ),
    ("assert_rope_close spec None", lambda: rt.assert_rope_close(good(), xa(), None), err("spec")),
    (
        "assert_rope_close NaN actual must fail",
        lambda: rt.assert_rope_close(inp(np.full((2, 3, 8), np.nan)), xa(), S8),
        Expect(param="AssertionError"),
    ),
    (
        "assert_rope_close torch actual, numpy x",
        lambda: rt.assert_rope_close(torch.from_numpy(good()), xa(), S8),
        either("actual", holds(lambda r: r.ok, "ok")),
    ),
    (
        "rope_report NaN actual is not ok",
        lambda: rt.rope_report(inp(np.full((2, 3, 8), np.nan)), xa(), S8),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "rope_report inf actual is not ok",
        lambda: rt.rope_report(inp(np.full((2, 3, 8), np.inf)), xa(), S8),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "rope_report x zeros, actual zeros",
        lambda: rt.rope_report(inp(np.zeros((2, 3, 8))), inp(np.zeros((2, 3, 8))), S8),
        val(holds(lambda r: r.ok and r.max_error == 0, "zeros rotate to zeros")),
    ),
    (
        "rope_report actual x+1e-3 is not ok",
        lambda: rt.rope_report(good() + 1e-3, xa(), S8),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "rope_report empty arrays",
        lambda: rt.rope_report(inp(np.zeros((0, 8))), inp(np.zeros((0, 8))), S8),
        either("x", holds(lambda r: True, "report")),
    ),
    (
        "rope_report float16 actual for float64 x",
        lambda: rt.rope_report(good().astype(np.float16), xa(), S8),
        val(holds(lambda r: not r.ok, "a float16 result is not a float64 pass")),
    ),
    (
        "diagnose NaN actual",
        lambda: rt.diagnose(inp(np.full((2, 3, 8), np.nan)), xa(), S8),
        val(holds(lambda r: r is not None, "a diagnosis")),
    ),
    (
        "diagnose actual shape mismatch",
        lambda: rt.diagnose(inp(np.zeros((3, 8))), xa(), S8),
        err("actual"),
    ),
    (
        "diagnose positions NaN",
        lambda: rt.diagnose(good(), xa(), S8, inp(np.array([0, np.nan, 1]))),
        err("positions"),
    ),
    ("error_model('int32')", lambda: rt.error_model("int32"), err("dtype", "int32")),
    ("error_model(None)", lambda: rt.error_model(None), err("dtype", "None")),
    ("error_model(complex64)", lambda: rt.error_model(np.complex64), err("dtype")),
    (
        "error_model(torch.float16) value",
        lambda: rt.error_model(torch.float16),
        val(holds(lambda m: m.eps == 2.0**-10, "float16 eps 2**-10")),
    ),
    (
        "error_model(jnp.bfloat16) value",
        lambda: rt.error_model(jnp.bfloat16),
        val(holds(lambda m: m.eps == 2.0**-7, "bfloat16 eps 2**-7")),
    ),
    (
        "error_model angle_dtype 'int8'",
        lambda: rt.error_model("float32", angle_dtype="int8"),
        err("angle_dtype"),
    ),
    (
        "max_checkable_position dtype 'int8'",
        lambda: rt.max_checkable_position(S8, "int8"),
        err("dtype"),
    ),
    (
        "max_checkable_position seq_len nan",
        lambda: rt.max_checkable_position(S8, "float32", seq_len=float("nan")),
        err("seq_len"),
    ),
    ("max_checkable_position spec 8", lambda: rt.max_checkable_position(8, "float32"), err("spec")),
    (
        "rope_atol magnitude -1",
        lambda: rt.rope_atol(S8, [1, 2], dtype="float32", magnitude=-1.0),
        err("magnitude", "-1"),
    ),
    (
        "rope_atol magnitude nan",
        lambda: rt.rope_atol(S8, [1, 2], dtype="float32", magnitude=float("nan")),
        err("magnitude"),
    ),
    (
        "rope_atol positions NaN",
        lambda: rt.rope_atol(S8, [1, float("nan")], dtype="float32"),
        err("positions"),
    ),
    ("rope_atol dtype bool", lambda: rt.rope_atol(S8, [1, 2], dtype=bool), err("dtype")),
    (
        "rope_atol offset 'x'",
        lambda: rt.rope_atol(S8, [1, 2], dtype="float32", offset="x"),
        err("offset"),
    ),
    ("angle_error(nan)", lambda: rt.angle_error(float("nan")), err("max_angle", "nan")),
    (
        "angle_error(-1): only the size matters",
        lambda: rt.angle_error(-1.0),
        val(is_(2 * 2.0**-52 * 2)),
    ),
    ("angle_error('x')", lambda: rt.angle_error("x"), err("max_angle")),
    ("angle_error angle_eps -1", lambda: rt.angle_error(1.0, angle_eps=-1.0), err("angle_eps")),
    ("tolerance eps -1", lambda: rt.tolerance(-1.0, max_angle=1.0, magnitude=1.0), err("eps")),
    (
        "tolerance max_angle inf",
        lambda: rt.tolerance(1e-7, max_angle=float("inf"), magnitude=1.0),
        err("max_angle"),
    ),
    (
        "tolerance magnitude 'x'",
        lambda: rt.tolerance(1e-7, max_angle=1.0, magnitude="x"),
        err("magnitude"),
    ),
    (
        "tolerance roundings -1",
        lambda: rt.tolerance(1e-7, max_angle=1.0, magnitude=1.0, roundings=-1),
        err("roundings"),
    ),
    ("ErrorModel eps nan", lambda: rt.ErrorModel(float("nan"), 1e-7), err("eps")),
    (
        "RopeOracle().apply int x",
        lambda: rt.RopeOracle().apply(inp(np.zeros((2, 8), int))),
        err("x"),
    ),
    (
        "RopeOracle().diagnose spec str",
        lambda: rt.RopeOracle().diagnose(good(), xa(), "spec"),
        err("spec"),
    ),
    ("strategies.positions shape -1", lambda: st.positions(-1).example(), err("shape")),
    (
        "strategies.positions min > max",
        lambda: st.positions(3, min_value=10, max_value=2).example(),
        err("min_value"),
    ),
    (
        "strategies.positions max_value 2**70",
        lambda: st.positions(3, max_value=2**70).example(),
        either("max_value", holds(lambda r: r.shape == (3,), "shape")),
    ),
    (
        "strategies.rope_cases dtypes ['int32']",
        lambda: st.rope_cases(np, dtypes=["int32"]).example(),
        err("dtypes"),
    ),
    (
        "strategies.rope_cases max_batch 0",
        lambda: st.rope_cases(np, max_batch=0).example(),
        err("max_batch"),
    ),
    (
        "strategies.rope_cases axes ['xyz']",
        lambda: st.rope_cases(np, axes=["xyz"]).example(),
        err("axes"),
    ),
    (
        "strategies.rope_cases xp=a module without arrays",
        lambda: st.rope_cases(json).example(),
        err("xp"),
    ),
    (
        "strategies.rope_cases position_modes ['bogus']",
        lambda: st.rope_cases(np, position_modes=["bogus"]).example(),
        err("position_modes"),
    ),
    (
        "strategies.rope_specs head_dims [7]",
        lambda: st.rope_specs(head_dims=[7]).example(),
        val(holds(lambda s: s.head_dim == 7, "head_dim 7")),
    ),
    (
        "strategies.rope_specs head_dims [0]",
        lambda: st.rope_specs(head_dims=[0]).example(),
        err("head_dims"),
    ),
    (
        "strategies.rope_specs layouts ['diag']",
        lambda: st.rope_specs(layouts=["diag"]).example(),
        err("layouts"),
    ),
    (
        "strategies.rope_specs bases [0.5]",
        lambda: st.rope_specs(bases=[0.5]).example(),
        err("bases"),
    ),
    (
        "strategies.rope_specs min_rotary_dim 3",
        lambda: st.rope_specs(min_rotary_dim=3).example(),
        err("min_rotary_dim"),
    ),
    (
        "strategies.scaling_rules max_factor 0",
        lambda: st.scaling_rules(max_factor=0).example(),
        err("max_factor"),
    ),
    (
        "strategies.scaling_rules max_factor nan",
        lambda: st.scaling_rules(max_factor=float("nan")).example(),
        err("max_factor"),
    ),
]:
    fn = name.split(" ")[0].split("(")[0]
    case("testing." + fn, name, call, expect)

# more values that must be right: exact backend, forms, partial rotary, wide integer positions
NP_BIG = 2**31 - 1
for name, call, expect in [
    (
        "exact, numpy float16",
        lambda: apply(xn((2, 5, 8), np.float16), backend="exact"),
        val(rotated()),
    ),
    (
        "exact, torch bfloat16",
        lambda: apply(xt((2, 5, 8), torch.bfloat16), backend="exact"),
        val(rotated()),
    ),
    (
        "exact, jax float32, positions 1e6",
        lambda: apply(xj((1, 3, 8)), positions=np.array([1e6, 1e6 + 1, 1e6 + 2]), backend="exact"),
        val(rotated([1e6, 1e6 + 1, 1e6 + 2])),
    ),
    (
        "exact, NaN positions",
        lambda: apply(xn(), positions=inp(np.array([0, np.nan, 1])), backend="exact"),
        err("positions"),
    ),
    (
        "exact, form 'complex'",
        lambda: apply(xn(), form="complex", backend="exact"),
        either("form", rotated()),
    ),
    ("exact, out=", lambda: apply(xn(), backend="exact", out=np.empty((2, 3, 8))), err("out")),
    (
        "exact, xpos without role",
        lambda: apply(xn(), rr.RopeSpec(8, xpos=rr.XPos()), backend="exact"),
        err("role"),
    ),
    ("exact, int x", lambda: apply(inp(np.zeros((2, 8), int)), backend="exact"), err("x")),
    (
        "form complex, torch float16",
        lambda: apply(xt((2, 5, 8), torch.float16), form="complex"),
        val(rotated()),
    ),
    (
        "form matrix, jax bfloat16",
        lambda: apply(xj((2, 5, 8), jnp.bfloat16), form="matrix"),
        val(rotated()),
    ),
    (
        "form complex, interleaved, rotary_start 2",
        lambda: apply(
            xn((2, 5, 10)),
            rr.RopeSpec(10, rotary_dim=4, rotary_start=2, layout="interleaved"),
            form="complex",
        ),
        val(rotated(rotary_dim=4, rotary_start=2, layout="interleaved")),
    ),
    ("form matrix, head_dim 2", lambda: apply(xn((2, 5, 2)), form="matrix"), val(rotated())),
    (
        "partial rotary, dask",
        lambda: apply(xd((2, 5, 12)), rr.RopeSpec(12, rotary_dim=4, rotary_start=6)),
        val(rotated(rotary_dim=4, rotary_start=6)),
    ),
    (
        "partial rotary, array-api-strict float32, interleaved",
        lambda: apply(
            xs((2, 5, 12), xps.float32), rr.RopeSpec(12, rotary_dim=6, layout="interleaved")
        ),
        val(rotated(rotary_dim=6, layout="interleaved")),
    ),
    (
        "base 500000, torch float64, seq_axis -3",
        lambda: apply(xt((2, 5, 3, 8), torch.float64), rr.RopeSpec(8, base=5e5), seq_axis=-3),
        val(rotated(seq_axis=-3, base=5e5)),
    ),
    (
        "numba, positions given, bfloat16",
        lambda: apply(
            xn((2, 5, 8), ml_dtypes.bfloat16), positions=np.arange(3, 8), backend="numba"
        ),
        val(rotated(np.arange(3, 8))),
    ),
    (
        "numba, seq_axis -3, float32",
        lambda: apply(xn((2, 5, 3, 8), np.float32), seq_axis=-3, backend="numba"),
        val(rotated(seq_axis=-3)),
    ),
    (
        "numba, inverse, interleaved, rotary_start 2",
        lambda: apply(
            xn((2, 5, 10)),
            rr.RopeSpec(10, rotary_dim=6, rotary_start=2, layout="interleaved"),
            inverse=True,
            backend="numba",
        ),
        val(rotated(rotary_dim=6, rotary_start=2, layout="interleaved", inverse=True)),
    ),
    (
        "numba, jax float16, offset 7",
        lambda: apply(xj((2, 5, 8), jnp.float16), offset=7, backend="numba"),
        val(rotated(offset=7)),
    ),
    (
        "auto, torch int8 positions + offset",
        lambda: apply(
            xt(),
            positions=inp(torch.tensor([120, 125, 127], dtype=torch.int8)),
            offset=10,
            backend="auto",
        ),
        val(rotated([130, 135, 137])),
    ),
    (
        "jax int32 positions 2**31-1 + offset 10 (no x64)",
        lambda: apply(
            xj(), positions=inp(jnp.array([NP_BIG - 2, NP_BIG - 1, NP_BIG], jnp.int32)), offset=10
        ),
        val(rotated([NP_BIG + 8, NP_BIG + 9, NP_BIG + 10])),
    ),
    (
        "torch int32 positions 2**31-1 + offset 1",
        lambda: apply(
            xt(),
            positions=inp(torch.tensor([NP_BIG - 2, NP_BIG - 1, NP_BIG], dtype=torch.int32)),
            offset=1,
        ),
        val(rotated([NP_BIG - 1, NP_BIG, NP_BIG + 1])),
    ),
    (
        "numpy uint32 max + offset 5",
        lambda: apply(
            xn(), positions=inp(np.array([2**32 - 3, 2**32 - 2, 2**32 - 1], np.uint32)), offset=5
        ),
        val(rotated([2**32 + 2, 2**32 + 3, 2**32 + 4])),
    ),
    (
        "array-api-strict int8 positions + offset 1000",
        lambda: apply(
            xs(), positions=inp(xps.asarray([125, 126, 127], dtype=xps.int8)), offset=1000
        ),
        val(rotated([1125, 1126, 1127])),
    ),
    (
        "dask int16 positions + offset 40000",
        lambda: apply(
            xd(),
            positions=inp(da.from_array(np.array([32765, 32766, 32767], np.int16), chunks=1)),
            offset=40000,
        ),
        val(rotated([72765, 72766, 72767])),
    ),
    (
        "numpy int64 positions + offset -2**63 (exact)",
        lambda: apply(
            xn(), positions=inp(np.array([2**62, 2**62 + 1, 2**62 + 2])), offset=-(2**62)
        ),
        val(rotated([0, 1, 2])),
    ),
    (
        "float positions + huge offset cancels",
        lambda: apply(xn(), positions=inp(np.array([1e16, 1e16 + 2, 1e16 + 4])), offset=-1e16),
        val(rotated([0, 2, 4])),
    ),
    (
        "(batch, seq) ids, numpy",
        lambda: apply(xn((2, 4, 3, 8)), positions=inp(np.array([[0, 1, 2], [5, 6, 7]]))),
        val(
            lambda r, i: close(
                r, rope64(i[0], np.array([[0, 1, 2], [5, 6, 7]])[:, None, :]), _INPUTS[0][0]
            )
        ),
    ),
    (
        "(batch, seq) ids, torch, seq_axis -3",
        lambda: apply(
            xt((2, 3, 4, 8), torch.float64),
            positions=inp(torch.tensor([[0, 1, 2], [5, 6, 7]])),
            seq_axis=-3,
        ),
        val(
            lambda r, i: close(
                r, rope64(i[0], np.array([[0, 1, 2], [5, 6, 7]])[:, :, None]), _INPUTS[0][0]
            )
        ),
    ),
    (
        "Linear(2) = positions / 2",
        lambda: apply(
            xn(), rr.RopeSpec(8, scaling=sc.Linear(2.0)), positions=inp(np.array([2, 4, 6]))
        ),
        val(rotated([1, 2, 3])),
    ),
    (
        "AttentionScale(2) doubles the rotated part",
        lambda: apply(xn(), rr.RopeSpec(8, scaling=sc.AttentionScale(2.0))),
        val(
            lambda r, i: close(r, 2 * rope64(i[0], along(np.arange(3), i[0].shape)), _INPUTS[0][0])
        ),
    ),
    (
        "custom freqs",
        lambda: apply(xn(), rr.RopeSpec(8, freqs=[1.0, 0.5, 0.25, 0.0])),
        val(rotated(freqs=[1.0, 0.5, 0.25, 0.0])),
    ),
    (
        "freqs of 1e300 at position 1e10",
        lambda: apply(
            xn(), rr.RopeSpec(8, freqs=[1e300, 1.0, 1.0, 1.0]), positions=np.full(3, 1e10)
        ),
        err("positions"),
    ),
]:
    case("apply_rope", name, call, expect)
for name, call, expect in [
    (
        "full=True, interleaved",
        lambda: cs(rr.RopeSpec(8, layout="interleaved"), [1, 2], full=True),
        val(
            lambda r, i: (
                cos_sin_at([1, 2])(tuple(t[..., ::2] for t in r), i)
                or cos_sin_at([1, 2])(tuple(t[..., 1::2] for t in r), i)
            )
        ),
    ),
    (
        "partial rotary, rotary_dim 4 of 8",
        lambda: cs(rr.RopeSpec(8, rotary_dim=4), [3]),
        val(cos_sin_at([3], rotary_dim=4)),
    ),
    (
        "dtype float16 at 65504 (exact float16)",
        lambda: cs(S8, inp(np.array([65504.0], np.float16)), np.float16),
        val(cos_sin_at([65504.0], dtype="float16")),
    ),
    (
        "torch positions, dtype torch.bfloat16",
        lambda: cs(S8, inp(torch.tensor([3, 300])), torch.bfloat16),
        val(cos_sin_at([3, 300], dtype="bfloat16")),
    ),
    (
        "dask positions, dtype float32",
        lambda: cs(S8, inp(da.from_array(np.array([1, 2, 3]), chunks=2)), np.float32),
        val(cos_sin_at([1, 2, 3], dtype="float32")),
    ),
]:
    case("rope_cos_sin", name, call, expect)

# the oracle must never pass a wrong answer
XR = lambda: xn((2, 4, 8))  # noqa: E731
RIGHT = lambda: apply(X((2, 4, 8)))  # noqa: E731
for name, actual, expect in [
    ("identity", lambda: X((2, 4, 8)), val(holds(lambda r: not r.ok, "not ok"))),
    ("zeros", lambda: np.zeros((2, 4, 8)), val(holds(lambda r: not r.ok, "not ok"))),
    (
        "inverse rotation",
        lambda: apply(X((2, 4, 8)), inverse=True),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "interleaved instead of half",
        lambda: apply(X((2, 4, 8)), rr.RopeSpec(8, layout="interleaved")),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "positions off by one",
        lambda: apply(X((2, 4, 8)), offset=1),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "one element off by 1e-6",
        lambda: _poke(RIGHT(), 1e-6),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "float32 result for float64 x",
        lambda: RIGHT().astype(np.float32),
        val(holds(lambda r: not r.ok, "not ok")),
    ),
    (
        "right, as a torch tensor",
        lambda: torch.from_numpy(RIGHT()),
        either("actual", holds(lambda r: r.ok, "ok")),
    ),
    (
        "right, transposed copy of the wrong axes",
        lambda: RIGHT().transpose(1, 0, 2).copy(),
        either("actual", holds(lambda r: not r.ok, "not ok")),
    ),
    ("right with a NaN", lambda: _poke(RIGHT(), np.nan), val(holds(lambda r: not r.ok, "not ok"))),
    ("right", RIGHT, val(holds(lambda r: r.ok, "ok"))),
]:
    case(
        "testing.rope_report",
        f"rope_report, actual {name}",
        lambda actual=actual: rt.rope_report(inp(actual()), XR(), S8),
        expect,
    )
case(
    "testing.rope_report",
    "float16 x at position 60000: the right float16 result passes, x itself fails",
    lambda: [
        rt.rope_report(a, xn((1, 1, 8), np.float16), S8, [60000]).ok
        for a in (
            apply(X((1, 1, 8)).astype(np.float16), positions=[60000]),
            X((1, 1, 8)).astype(np.float16),
        )
    ],
    val(is_([True, False])),
)
case(
    "testing.assert_rope_close",
    "assert_rope_close max_ulps=0 on the exact result",
    lambda: rt.assert_rope_close(
        apply(X((2, 4, 8)).astype(np.float32), backend="exact"),
        xn((2, 4, 8), np.float32),
        S8,
        max_ulps=0,
    ),
    val(holds(lambda r: r.ok, "ok")),
)
case(
    "testing.assert_rope_close",
    "assert_rope_close max_ulps=0 on a 1-ulp miss",
    lambda: rt.assert_rope_close(
        _ulp_off(apply(X((2, 4, 8)).astype(np.float32), backend="exact")),
        xn((2, 4, 8), np.float32),
        S8,
        max_ulps=0,
    ),
    Expect(param="AssertionError"),
)
case(
    "testing.max_checkable_position",
    "max_checkable_position float16: float32 angles reach less far than float64 ones",
    lambda: [
        rt.max_checkable_position(S8, "float16", angle_dtype=a) for a in ("float32", "float64")
    ],
    val(holds(lambda n: all(isinstance(v, int) and v > 0 for v in n) and n[0] < n[1], "n32 < n64")),
)

# rerotate against an independent DynamicNTK


def dyn_inv(
    seq_len: float, d: int = 8, base: float = 1e4, factor: float = 2.0, max_pos: int = 4
) -> np.ndarray:
    """DynamicNTK's frequencies (HF's formula) in float64."""
    if seq_len > max_pos:
        base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (d / (d - 2))
    return base ** (-np.arange(0, d, 2) / d)


def rerotated(frm: float, to: float) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: R(to) R(from)^T x with DynamicNTK(2, 4) frequencies, positions arange(3)."""

    def check(r: Any, inputs: list[np.ndarray]) -> None:
        x = inputs[0]
        p = along(np.arange(3), x.shape)
        back = rope64(x, p, freqs=dyn_inv(frm), inverse=True)
        want = rope64(back, p, freqs=dyn_inv(to))
        a = as_np(r)
        assert np.allclose(a, want, rtol=0, atol=1e-12), f"off by {np.max(np.abs(a - want)):.3g}"

    return check


case(
    "rerotate",
    "DynamicNTK from 4 to 16, numpy",
    lambda: rer(xn(), DS, from_seq_len=4, to_seq_len=16),
    val(rerotated(4, 16)),
)
case(
    "rerotate",
    "DynamicNTK from 16 to 64, torch float64",
    lambda: rer(xt((2, 3, 8), torch.float64), DS, from_seq_len=16, to_seq_len=64),
    val(rerotated(16, 64)),
)
case(
    "rerotate",
    "DynamicNTK from 64 to 8, numpy",
    lambda: rer(xn(), DS, from_seq_len=64, to_seq_len=8),
    val(rerotated(64, 8)),
)
case(
    "apply_rope",
    "DynamicNTK, seq_len 32, float64",
    lambda: apply(xn(), DS, seq_len=32),
    val(
        lambda r, i: close(
            r, rope64(i[0], along(np.arange(3), i[0].shape), freqs=dyn_inv(32)), _INPUTS[0][0]
        )
    ),
)
case(
    "apply_rope",
    "DynamicNTK, seq_len inferred = max(positions) + 1",
    lambda: apply(xn(), DS, positions=np.array([0, 10, 19])),
    val(rotated([0, 10, 19], freqs=dyn_inv(20))),
)
case(
    "apply_rope_qk",
    "DynamicNTK: q and k share seq_len",
    lambda: qk(xn((2, 1, 8)), xn((2, 20, 8)), DS),
    val(
        lambda r, i: (
            rotated([19], index=0, freqs=dyn_inv(20))(r[0], i),
            rotated(np.arange(20), index=1, freqs=dyn_inv(20))(r[1], i),
        )
    ),
)
case(
    "convert_layout",
    "convert_layout jax float16 half -> interleaved",
    lambda: rr.convert_layout(xj((2, 8), jnp.float16), S8, src="half", dst="interleaved"),
    val(lambda r, i: close(r, i[0][:, [0, 4, 1, 5, 2, 6, 3, 7]], _INPUTS[0][0])),
)
case(
    "convert_layout",
    "convert_layout rotary_start 2, dask",
    lambda: rr.convert_layout(xd((2, 8)), rr.RopeSpec(8, rotary_dim=4, rotary_start=2)),
    val(lambda r, i: close(r, i[0][:, [0, 1, 2, 4, 3, 5, 6, 7]], _INPUTS[0][0])),
)
case(
    "permute_weights",
    "permute_weights torch, 2 heads",
    lambda: rr.permute_weights(xt((16, 4), torch.float64), n_heads=2),
    val(
        lambda r, i: close(
            r, i[0][[h * 8 + j for h in range(2) for j in (0, 2, 4, 6, 1, 3, 5, 7)]], _INPUTS[0][0]
        )
    ),
)
case(
    "sinusoidal",
    "sinusoidal float positions 0.5, jax",
    lambda: rr.sinusoidal_embedding(inp(jnp.array([0.5])), 4),
    val(
        holds(
            lambda r: np.allclose(
                np.sort(as_np(r)[0]),
                np.sort([np.sin(0.5), np.sin(0.005), np.cos(0.5), np.cos(0.005)]),
                atol=1e-7,
            ),
            "sinusoid at 0.5",
        )
    ),
)


# out= through the PyTorch and JAX CPU paths of the numba kernel
for name, call, expect in [
    (
        "torch x, out float32 for float64 x",
        lambda: apply(xt((2, 3, 8), torch.float64), backend="numba", out=torch.empty(2, 3, 8)),
        err("out"),
    ),
    (
        "torch x, out a NumPy array",
        lambda: apply(xt(), backend="numba", out=np.empty((2, 3, 8), np.float32)),
        err("out"),
    ),
    (
        "torch x, out wrong shape",
        lambda: apply(xt(), backend="numba", out=torch.empty(2, 3, 9)),
        err("out"),
    ),
    (
        "torch x, out expanded (stride 0)",
        lambda: apply(xt(), backend="numba", out=torch.empty(1, 3, 8).expand(2, 3, 8)),
        err("out"),
    ),
    (
        "jax x, out a jax array",
        lambda: apply(xj(), backend="numba", out=jnp.zeros((2, 3, 8), jnp.float32)),
        err("out"),
    ),
    ("torch leaf requiring grad, out=x", _grad_alias, err("out")),
    ("torch x, out=x transposed view, in place", _torch_alias, val(rotated())),
]:
    case("apply_rope", f"numba out=: {name}", call, expect)

# more threads, more configs, more keywords
case(
    "apply_rope_qk",
    "8 threads, GQA, distinct offsets",
    lambda: _threads(lambda k: qk(X((4, 1, 8)), X((2, 5, 8)), offset=k)[1], 8),
    val(_thread_check(lambda k, x: rope64(X((2, 5, 8)), along(np.arange(5), (2, 5, 8)) + k))),
)
case(
    "rerotate",
    "8 threads, distinct to_seq_len",
    lambda: _threads(lambda k: rer(X((2, 5, 8)), DS, from_seq_len=4, to_seq_len=8 + k), 8),
    val(
        _thread_check(
            lambda k, x: rope64(
                rope64(x, along(np.arange(5), x.shape), freqs=dyn_inv(4), inverse=True),
                along(np.arange(5), x.shape),
                freqs=dyn_inv(8 + k),
            )
        )
    ),
)
case(
    "apply_rope",
    "8 threads, exact backend",
    lambda: _threads(lambda k: apply(X((2, 5, 8)), offset=k, backend="exact"), 8),
    val(_thread_check(lambda k, x: rope64(x, along(np.arange(5), x.shape) + k))),
)
case(
    "from_hf",
    "8 threads, one config",
    lambda: _threads(lambda k: fh(dict(L) | {"rope_theta": 1e4 + k}).base, 8),
    val(is_([1e4 + k for k in range(8)])),
)
for name, cfg, expect in [
    (
        "rope_parameters with NaN factor",
        L | {"rope_parameters": {"rope_type": "linear", "factor": float("nan"), "rope_theta": 1e4}},
        err("factor"),
    ),
    (
        "rope_parameters rope_theta string",
        L | {"rope_parameters": {"rope_type": "default", "rope_theta": "1e4"}},
        err("rope_theta"),
    ),
    (
        "rope_parameters per layer type, unknown type",
        L
        | {
            "layer_types": ["full_attention"],
            "rope_parameters": {"bogus_attention": {"rope_type": "default", "rope_theta": 1e4}},
        },
        either("rope_parameters", holds(lambda s: s.head_dim == 8, "spec")),
    ),
    ("head_dim 0", L | {"head_dim": 0}, err("head_dim", "0")),
    ("head_dim -8", L | {"head_dim": -8}, err("head_dim", "-8")),
    (
        "head_dim None, hidden_size None",
        L | {"head_dim": None, "hidden_size": None},
        err("hidden_size"),
    ),
    ("hidden_size 1e300", L | {"hidden_size": 1e300}, err("hidden_size")),
    ("num_attention_heads 2**60", L | {"num_attention_heads": 2**60}, err("num_attention_heads")),
    ("rope_theta inf", L | {"rope_theta": float("inf")}, err("rope_theta")),
    ("rope_theta True", L | {"rope_theta": True}, err("rope_theta")),
    ("rope_theta a list", L | {"rope_theta": [1e4]}, err("rope_theta")),
    (
        "yarn beta_fast NaN",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "beta_fast": float("nan"),
                "original_max_position_embeddings": 64,
            }
        },
        err("beta_fast"),
    ),
    (
        "yarn mscale string",
        L
        | {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "mscale": "1",
                "original_max_position_embeddings": 64,
            }
        },
        err("mscale"),
    ),
    (
        "longrope factors strings",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": ["a"] * 4,
                "long_factor": [1.0] * 4,
                "original_max_position_embeddings": 64,
            }
        },
        err("short_factor"),
    ),
    (
        "longrope factors NaN",
        L
        | {
            "rope_scaling": {
                "rope_type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [float("nan")] * 4,
                "original_max_position_embeddings": 64,
            }
        },
        err("long_factor"),
    ),
    (
        "dynamic factor inf",
        L | {"rope_scaling": {"rope_type": "dynamic", "factor": float("inf")}},
        err("factor"),
    ),
    (
        "rope_scaling type None",
        L | {"rope_scaling": {"rope_type": None, "factor": 2.0}},
        either("rope_type", holds(lambda s: s.scaling is None or True, "spec")),
    ),
    (
        "rope_scaling empty dict",
        L | {"rope_scaling": {}},
        either("rope_scaling", holds(lambda s: s.scaling is None, "no scaling")),
    ),
    (
        "a key with a typo warns, strict raises",
        L | {"rope_thetta": 5e5},
        either("rope_thetta", holds(lambda s: s.base == 1e4, "base kept")),
    ),
    (
        "text_config holding the keys",
        {"model_type": "llava", "text_config": dict(L)},
        either("text_config", holds(lambda s: s.head_dim == 8, "head_dim 8")),
    ),
    ("JSON string of a list", "[1, 2]", err("config")),
    ("JSON string nested 10000 deep", "[" * 10000 + "]" * 10000, err("config")),
]:
    case(
        "from_hf",
        f"config: {name}",
        lambda cfg=cfg: fh(inp(cfg) if isinstance(cfg, dict) else cfg),
        expect,
    )
case(
    "from_hf",
    "strict=True, a typo",
    lambda: fh(inp(L | {"rope_thetta": 5e5}), strict=True),
    err("rope_thetta"),
)
case(
    "from_hf_layers",
    "num_hidden_layers -1",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": -1})),
    err("num_hidden_layers"),
)
case(
    "from_hf_layers",
    "num_hidden_layers 2**40",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": 2**40})),
    err("num_hidden_layers"),
)
case(
    "from_hf_layers",
    "layer_types a string",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"layer_types": "full_attention"})),
    err("layer_types"),
)
case(
    "from_hf_layers",
    "two layers, value",
    lambda: rr.RopeSpec.from_hf_layers(inp(L | {"num_hidden_layers": 2})),
    val(holds(lambda r: len(r) == 2 and all(s.head_dim == 8 for s in r), "two specs")),
)
case(
    "to_hf",
    "max_position_embeddings -1",
    lambda: S8.to_hf(max_position_embeddings=-1),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "max_position_embeddings 1.5",
    lambda: S8.to_hf(max_position_embeddings=1.5),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "max_position_embeddings 'x'",
    lambda: S8.to_hf(max_position_embeddings="x"),
    err("max_position_embeddings"),
)
case(
    "to_hf",
    "round trip of a YaRN spec",
    lambda: rr.RopeSpec.from_hf(
        rr.RopeSpec(128, scaling=sc.YaRN(4.0, 4096)).to_hf()
        | {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8}
    ),
    val(holds(lambda s: s.scaling == sc.YaRN(4.0, 4096) and s.head_dim == 128, "same rule")),
)
for kw, value in [
    ("head_dims", "8"),
    ("layouts", "half"),
    ("bases", 1e4),
    ("scalings", [sc.Linear(2.0)]),
    ("partial", "yes"),
    ("sections", 1),
    ("min_rotary_dim", 2.0),
    ("nonzero_start", None),
]:
    case(
        "testing.strategies.rope_specs",
        f"rope_specs {kw}={value!r}",
        lambda kw=kw, value=value: st.rope_specs(**{kw: value}).example(),
        err(kw),
    )
for kw, value in [
    ("max_heads", -1),
    ("max_seq", 0),
    ("min_position", -5),
    ("max_position", 2**70),
    ("per_row_positions", "no"),
    ("specs", S8),
    ("dtypes", "float32"),
    ("dtypes", ["bfloat16"]),
]:
    expect = err(kw)
    if value == ["bfloat16"]:
        expect = either(kw, holds(lambda c: c.x.dtype.name == "bfloat16", "bfloat16 x"))
    elif kw in ("min_position", "max_position"):  # negative positions are positions; the top
        expect = either(kw, holds(lambda c: c.x is not None, "a case"))  # is capped at draw
    case(
        "testing.strategies.rope_cases",
        f"rope_cases {kw}={value!r}",
        lambda kw=kw, value=value: st.rope_cases(np, **{kw: value}).example(),
        expect,
    )
case(
    "testing.strategies.scaling_rules",
    "scaling_rules max_factor '2'",
    lambda: st.scaling_rules(max_factor="2").example(),
    err("max_factor"),
)
case(
    "testing.strategies.scaling_rules",
    "scaling_rules max_factor 1",
    lambda: st.scaling_rules(max_factor=1.0).example(),
    either("max_factor", holds(lambda r: r is not None, "a rule")),
)
for argv, option, got in [
    (("survey", "--max-position", "1e400"), "--max-position", None),
    (("survey", "--max-position", "0x10"), "--max-position", "0x10"),
    (("bound", "--context", "100", "--dim", "2.5"), "--dim", "2.5"),
    (("bound", "--context", ""), "--context", None),
    (("plot", "decay", "--out", "/tmp/x.png", "--dim", "100000"), "--dim", "100000"),
    (("plot", "decay", "--out", "/tmp/x.png", "--base", "inf"), "--base", "inf"),
    (("bench", "--sweep-max", "-1", "--sweep"), "--sweep-max", "-1"),
    (("bench", "--rounds", "1e9"), "--rounds", "1e9"),
    (
        ("check", "numpy:add", "--convention", "plain", "--examples", "10000001"),
        "--examples",
        "10000001",
    ),
    (
        ("check", "numpy:add", "--convention", "plain", "--max-position", "9007199254740993"),
        "--max-position",
        None,
    ),
    (("check", "numpy:add", "--convention", "plain", "--rotary-dim", "0"), "--rotary-dim", "0"),
    (
        (
            "check",
            "numpy:add",
            "--convention",
            "plain",
            "--hf-config",
            json.dumps(L | {"rope_scaling": {"rope_type": "bogus"}}),
        ),
        "--hf-config",
        None,
    ),
]:
    case(
        f"cli {argv[0]}", " ".join(argv[1:]), lambda argv=argv: cli(*argv), usage_error(option, got)
    )

# rope_ref.attention and rope_ref.analysis


def softmax64(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """Softmax attention of RoPE'd q and k (positions arange), in float64."""
    qr, kr = (
        rope64(q, along(np.arange(q.shape[-2]), q.shape)),
        rope64(k, along(np.arange(k.shape[-2]), k.shape)),
    )
    s = qr @ np.swapaxes(kr, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


att = rr.attention
for name, call, expect in [
    (
        "softmax q int",
        lambda: att.softmax_attention(inp(np.zeros((3, 8), int)), xn((3, 8)), xn((3, 8))),
        err("q"),
    ),
    (
        "softmax k torch, q numpy",
        lambda: att.softmax_attention(xn((3, 8)), xt((3, 8), torch.float64), xn((3, 8))),
        err("k"),
    ),
    (
        "softmax v wrong length",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((4, 8))),
        err("v"),
    ),
    (
        "softmax v a list",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), [[0.0] * 8] * 3),
        err("v"),
    ),
    (
        "softmax causal 'yes'",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), causal="yes"),
        err("causal"),
    ),
    (
        "softmax positions NaN",
        lambda: att.softmax_attention(
            xn((3, 8)), xn((3, 8)), xn((3, 8)), positions=inp(np.array([0, np.nan, 1]))
        ),
        err("positions"),
    ),
    (
        "softmax spec wrong head_dim",
        lambda: att.softmax_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), rr.RopeSpec(16)),
        err("q"),
    ),
    (
        "softmax value, causal",
        lambda: att.softmax_attention(
            xn((3, 8)), inp(X((3, 8), 1)), inp(X((3, 8), 2)), causal=True
        ),
        val(lambda r, i: close(r, softmax64(i[0], i[1], i[2], True), _INPUTS[0][0])),
    ),
    (
        "softmax value, torch float32",
        lambda: att.softmax_attention(
            xt((2, 3, 8)),
            inp(torch.from_numpy(X((2, 3, 8), 1)).float()),
            inp(torch.from_numpy(X((2, 3, 8), 2)).float()),
        ),
        val(
            lambda r, i: np.testing.assert_allclose(
                as_np(r), softmax64(i[0], i[1], i[2]), atol=1e-5
            )
        ),
    ),
    (
        "softmax empty sequence",
        lambda: att.softmax_attention(xn((0, 8)), xn((0, 8)), xn((0, 8))),
        val(holds(lambda r: r.shape == (0, 8) and r.dtype == np.float64, "empty (0, 8)")),
    ),
    (
        "linear feature_map 'gelu'",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map="gelu"),
        err("feature_map", "'gelu'"),
    ),
    (
        "linear feature_map 3",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map=3),
        err("feature_map"),
    ),
    (
        "linear feature_map returning NaN",
        lambda: att.linear_attention(
            xn((3, 8)), xn((3, 8)), xn((3, 8)), feature_map=lambda a: a * np.nan
        ),
        either("feature_map", holds(lambda r: not np.all(np.isfinite(as_np(r))), "NaN shows")),
    ),
    (
        "linear causal None",
        lambda: att.linear_attention(xn((3, 8)), xn((3, 8)), xn((3, 8)), causal=None),
        err("causal"),
    ),
    (
        "linear q complex",
        lambda: att.linear_attention(inp(np.zeros((3, 8), complex)), xn((3, 8)), xn((3, 8))),
        err("q"),
    ),
]:
    case("attention", name, call, expect)
an = rr.analysis
for name, call, expect in [
    ("base_lower_bound dim 0", lambda: an.base_lower_bound(0, 100), err("dim", "0")),
    ("base_lower_bound dim 3", lambda: an.base_lower_bound(3, 100), err("dim", "3")),
    ("base_lower_bound dim 2.0", lambda: an.base_lower_bound(2.0, 100), err("dim")),
    (
        "base_lower_bound context -1",
        lambda: an.base_lower_bound(8, -1),
        err("context_length", "-1"),
    ),
    ("base_lower_bound context 1.5", lambda: an.base_lower_bound(8, 1.5), err("context_length")),
    ("base_lower_bound context True", lambda: an.base_lower_bound(8, True), err("context_length")),
    (
        "base_lower_bound context past the limit",
        lambda: an.base_lower_bound(128, 2**23),
        err("context_length"),
    ),
    (
        "base_lower_bound progress 'x'",
        lambda: an.base_lower_bound(8, 100, progress="x"),
        err("progress"),
    ),
    ("decay_bound distances NaN", lambda: an.decay_bound(8, [1.0, float("nan")]), err("distances")),
    ("decay_bound distances strings", lambda: an.decay_bound(8, ["a"]), err("distances")),
    ("decay_bound base 1", lambda: an.decay_bound(8, [1.0], base=1.0), err("base")),
    (
        "decay_bound normalize 'no'",
        lambda: an.decay_bound(8, [1.0], normalize="no"),
        err("normalize"),
    ),
    ("decay_bound dim 65538", lambda: an.decay_bound(65538, [1.0]), err("dim")),
    ("discrimination dim -2", lambda: an.discrimination(-2, [1.0]), err("dim")),
    (
        "discrimination distances inf",
        lambda: an.discrimination(8, [float("inf")]),
        err("distances"),
    ),
    (
        "discrimination value at 0",
        lambda: an.discrimination(8, [0.0]),
        val(holds(lambda r: np.isfinite(r).all(), "finite")),
    ),
    ("full_turn_pairs context -1", lambda: an.full_turn_pairs(S8, -1), err("context_length")),
    ("full_turn_pairs spec str", lambda: an.full_turn_pairs("x", 10), err("spec")),
    (
        "full_turn_pairs value",
        lambda: an.full_turn_pairs(S8, 10),
        val(
            holds(
                lambda r: r.tolist() == [True, False, False, False],
                "2*pi/theta_j < 10 only for j = 0",
            )
        ),
    ),
    ("wavelengths seq_len nan", lambda: an.wavelengths(DS, seq_len=float("nan")), err("seq_len")),
    (
        "wavelengths value",
        lambda: an.wavelengths(S8),
        val(holds(lambda r: np.allclose(r, 2 * np.pi / inv64(8), rtol=1e-15), "2 pi / theta")),
    ),
    (
        "wavelengths freqs with a zero",
        lambda: an.wavelengths(rr.RopeSpec(8, freqs=[1.0, 0.5, 0.1, 0.0])),
        val(holds(lambda r: r[3] == np.inf, "infinite wavelength of a zero frequency")),
    ),
]:
    case("analysis", name, call, expect)

# a returned value is the caller's: changing it must not change the next call's answer
for func, name, get, mutate in [
    ("inv_freq", "inv_freq", lambda: rr.inv_freq(S8), lambda a: a.__setitem__(0, 99)),
    (
        "inv_freq",
        "inv_freq, DynamicNTK at seq_len 64",
        lambda: rr.inv_freq(DS, 64),
        lambda a: a.__setitem__(0, 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin (cached tables)",
        lambda: cs(S8, np.arange(3))[0],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin full, interleaved",
        lambda: cs(rr.RopeSpec(8, layout="interleaved"), np.arange(3), full=True)[1],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_cos_sin",
        "rope_cos_sin torch",
        lambda: cs(S8, torch.arange(3))[0],
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "rope_angles",
        "rope_angles",
        lambda: ra(S8, np.arange(3)),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    ("rotation_matrix", "rotation_matrix", lambda: rm(S8, 3), lambda a: a.__setitem__((0, 0), 99)),
    (
        "available_backends",
        "available_backends",
        rr.available_backends,
        lambda a: a.__setitem__("reference", "x"),
    ),
    (
        "feature_order",
        "feature_order",
        lambda: rr.feature_order(S8, "interleaved", "half"),
        lambda a: a.__setitem__(0, 99),
    ),
    ("pair_axes", "pair_axes", lambda: rr.pair_axes(S8), lambda a: a.__setitem__(0, 99)),
    (
        "mrope_positions",
        "mrope_positions",
        lambda: rr.mrope_positions([3, [1, 2, 2]]),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    (
        "patch_positions",
        "patch_positions",
        lambda: rr.patch_positions([2, 2]),
        lambda a: a.__setitem__((0, 0), 99),
    ),
    ("analysis", "wavelengths", lambda: an.wavelengths(S8), lambda a: a.__setitem__(0, 99)),
    (
        "apply_rope",
        "apply_rope numba result",
        lambda: apply(np.ones((1, 3, 8)), backend="numba"),
        lambda a: a.__setitem__((0, 0, 0), 99),
    ),
    (
        "apply_rope",
        "apply_rope reference result",
        lambda: apply(np.ones((1, 3, 8))),
        lambda a: a.__setitem__((0, 0, 0), 99),
    ),
]:
    case(
        func,
        f"changing the result of {name}",
        lambda get=get, mutate=mutate: _unshared(get, mutate),
        val(is_(True)),
    )
case("apply_rope", "x a Python list", lambda: apply([[0.0] * 8] * 3), err("x", "list"))
case("apply_rope", "x a NumPy scalar", lambda: apply(np.float64(1.0)), err("x"))
case(
    "apply_rope",
    "xpos spec, reference, no role",
    lambda: apply(xn(), rr.RopeSpec(8, xpos=rr.XPos())),
    err("role"),
)
case(
    "rope_cos_sin",
    "xpos spec, no role",
    lambda: cs(rr.RopeSpec(8, xpos=rr.XPos()), [1, 2]),
    err("role"),
)
case(
    "convert_layout",
    "src == dst: a copy of x",
    lambda: rr.convert_layout(xn((2, 8)), S8, src="half", dst="half"),
    val(lambda r, i: close(r, i[0], _INPUTS[0][0])),
)

# the rope-ref command
SUBCOMMANDS = ("bench", "bound", "check", "example", "plot", "survey", "verify")
T = ("check", "numpy:add", "--convention", "plain")
for argv, option, got in [
    ((*T, "--head-dim", "-2"), "--head-dim", "-2"),
    ((*T, "--head-dim", "7"), "--rotary-dim", "7"),
    ((*T, "--head-dim", "1e3"), "--head-dim", "1e3"),
    ((*T, "--head-dim", "65538"), "--head-dim", "65538"),
    ((*T, "--rotary-dim", "3"), "--rotary-dim", "3"),
    ((*T, "--rotary-dim", "66"), "--rotary-dim", "66"),
    ((*T, "--rotary-start", "-1"), "--rotary-start", "-1"),
    ((*T, "--rotary-start", "64"), "--rotary-start", "64"),
    ((*T, "--base", "nan"), "--base", "nan"),
    ((*T, "--base", "inf"), "--base", "inf"),
    ((*T, "--base", "1"), "--base", "1"),
    ((*T, "--base", "0x10"), "--base", "0x10"),
    ((*T, "--attention-factor", "nan"), "--attention-factor", "nan"),
    ((*T, "--attention-factor", "-1"), "--attention-factor", "-1"),
    ((*T, "--attention-factor", "0"), "--attention-factor", "0"),
    ((*T, "--max-position", "-1"), "--max-position", "-1"),
    ((*T, "--max-position", "nan"), "--max-position", "nan"),
    ((*T, "--max-position", "1e400"), "--max-position", "1e400"),
    ((*T, "--examples", "0"), "--examples", "0"),
    ((*T, "--examples", "-5"), "--examples", "-5"),
    ((*T, "--examples", "10.5"), "--examples", "10.5"),
    ((*T, "--timeout", "0"), "--timeout", "0"),
    ((*T, "--timeout", "nan"), "--timeout", "nan"),
    ((*T, "--timeout", "-1"), "--timeout", "-1"),
    ((*T, "--timeout", "inf"), "--timeout", "inf"),
    ((*T, "--seed", str(2**64)), "--seed", str(2**64)),
    ((*T, "--seed", "abc"), "--seed", "abc"),
    ((*T, "--seed", "1e30"), "--seed", "1e30"),
    ((*T, "--max-ulps", "-1"), "--max-ulps", "-1"),
    ((*T, "--max-ulps", "nan"), "--max-ulps", "nan"),
    ((*T, "--dtype", "int8"), "--dtype", "int8"),
    ((*T, "--angle-dtype", "float16"), "--angle-dtype", "float16"),
    ((*T, "--result-dtype", "bogus"), "--result-dtype", "bogus"),
    ((*T, "--position-dtype", "float64"), "--position-dtype", "float64"),
    ((*T, "--device", "tpu:9"), "--device", "tpu:9"),
    ((*T, "--device", "cuda:99"), "--device", "cuda:99"),
    ((*T, "--hf-config", '{"head_dim": "x", "model_type": "llama"}'), "--hf-config", None),
    ((*T, "--hf-config", "[1, 2]"), "--hf-config", None),
    ((*T, "--hf-config", "NaN"), "--hf-config", None),
    ((*T, "--hf-config", ""), "--hf-config", None),
    ((*T, "--hf-config", "/nonexistent/config.json"), "--hf-config", None),
    ((*T, "--hf-config", "/dev/null"), "--hf-config", None),
    (
        (*T, "--hf-config", json.dumps(L | {"rope_theta": -5})),
        "--hf-config",
        None,
    ),
    ((*T, "--layout", "diag"), "--layout", "diag"),
    ((*T, "--array", "cupy"), "--array", "cupy"),
    ((*T, "--axes", "hbsd"), "--axes", "hbsd"),
    ((*T, "--positions", "random"), "--positions", "random"),
    ((*T, "--head-dim", "64", "--rotary-dim", "32", "--rotary-start", "40"), "--rotary-dim", "32"),
    ((*T, "--json", "--head-dim", "-2"), "--head-dim", "-2"),
    ((*T, "--json", "--base", "nan"), "--base", "nan"),
    (("check", "numpy:add", "--convention", "bogus"), "--convention", "bogus"),
    (("check", "--convention", "plain"), "MODULE:FUNCTION", None),
    (("bound", "--dim", "0", "--context", "100"), "--dim", "0"),
    (("bound", "--dim", "-2", "--context", "100"), "--dim", "-2"),
    (("bound", "--dim", "1026", "--context", "100"), "--dim", "1026"),
    (("bound", "--dim", "abc", "--context", "100"), "--dim", "abc"),
    (("bound", "--context", "-1"), "--context", "-1"),
    (("bound", "--context", "1e3"), "--context", "1e3"),
    (("bound", "--context", "nan"), "--context", "nan"),
    (("bound", "--context", "100", "--context", "99999999999"), "--context", "99999999999"),
    (("bound",), "--context", None),
    (("plot", "decay", "--out", "/nonexistent/dir/x.png"), "--out", None),
    (("plot", "decay", "--out", "/tmp/x.txt"), "--out", None),
    (("plot", "decay", "--out", "/tmp/x.png", "--base", "0.5"), "--base", "0.5"),
    (("plot", "decay", "--out", "/tmp/x.png", "--base", "nan"), "--base", "nan"),
    (("plot", "decay", "--out", "/tmp/x.png", "--dim", "3"), "--dim", "3"),
    (("plot", "bogus", "--out", "/tmp/x.png"), "bogus", "bogus"),
    (("plot", "decay", "--out", ""), "--out", None),
    (("bench", "--rounds", "0"), "--rounds", "0"),
    (("bench", "--rounds", "-1"), "--rounds", "-1"),
    (("bench", "--shape", "1,2,3"), "--shape", "1,2,3"),
    (("bench", "--shape", "a,b,c,d"), "--shape", "a,b,c,d"),
    (("bench", "--shape", "1,1,1,7"), "--shape", "1,1,1,7"),
    (("bench", "--shape", "0,1,1,8"), "--shape", "0,1,1,8"),
    (("bench", "--shape", "100000,100000,1000,128"), "shape", "100000,100000,1000,128"),
    (("bench", "--sweep", "--sweep-max", "0"), "--sweep-max", "0"),
    (("bench", "--sequences", "0", "--preset", "decode-interleaved"), "--sequences", "0"),
    (("bench", "--only", "bogus"), "--only", "bogus"),
    (("bench", "--preset", "nope"), "--preset", "nope"),
    (("survey", "--max-position", "-1"), "--max-position", "-1"),
    (("survey", "--max-position", "nan"), "--max-position", "nan"),
    (("survey", "--only", "nope"), "--only", "nope"),
    (("verify", "--jsn"), "--jsn", None),
    (("example", "--wide=yes"), "--wide", None),
    (("exampel",), "exampel", None),
]:
    case(
        f"cli {argv[0] if argv[0] in SUBCOMMANDS else '(unknown command)'}",
        " ".join(argv[1:]) or argv[0],
        lambda argv=argv: cli(*argv),
        usage_error(option, got),
    )


# ---------------------------------------------------------------- running and classifying


def _state() -> dict[str, Any]:
    """The global state no call may change."""
    return {
        "numpy errstate": np.geterr(),
        "numpy print options": repr(np.get_printoptions()),
        "numpy legacy random": np.random.get_state()[1].tobytes(),  # noqa: NPY002
        "random": random.getstate(),
        "jax_enable_x64": jax.config.read("jax_enable_x64"),
        "torch default dtype": torch.get_default_dtype(),
        "torch threads": torch.get_num_threads(),
        "torch grad mode": torch.is_grad_enabled(),
        "torch rng": torch.random.get_rng_state().numpy().tobytes(),
        "warnings filters": list(warnings.filters),
        "os.environ": dict(os.environ),
        "sys.stdout/stderr": (sys.stdout, sys.stderr),
        "sys.path": list(sys.path),
        "cwd": os.getcwd(),
        "signal handlers": [
            signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM)
        ],
        "threads": sorted(t.name for t in threading.enumerate()),
    }


def _classify(c: Case) -> tuple[str, str]:
    """Run case `c` here (in the child): its category and a note."""
    _INPUTS.clear()
    before = _state()
    try:
        result = c.call()
    except AssertionError as e:
        outcome = (
            ("error-ok", "AssertionError")
            if c.expect.param == "AssertionError"
            else ("crash", f"AssertionError: {e}")
        )
    except (TypeError, ValueError) as e:
        msg = f"{type(e).__name__}: {e}"
        p, got = c.expect.param, c.expect.got
        if p is None or p == "AssertionError":
            outcome = ("wrong", f"an error where a value was due: {msg}")
        elif p not in str(e):
            outcome = ("wrong", f"message does not name `{p}`: {msg}")
        elif got is not None and got not in str(e):
            outcome = ("wrong", f"message does not show the value {got!r}: {msg}")
        else:
            outcome = ("error-ok", msg)
    except MemoryError as e:
        outcome = ("crash", f"MemoryError {e}")
    except BaseException as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        outcome = (
            "crash",
            f"{type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})",
        )
    else:
        if c.expect.check is None:
            outcome = (
                "wrong",
                f"returned {type(result).__name__} where an error naming "
                f"`{c.expect.param}` was due: {result!r:.200}",
            )
        else:
            try:
                c.expect.check(result, [f for _, _, f in _INPUTS])
                outcome = (c.expect.passing, "")
            except Exception as e:
                outcome = ("wrong", f"{type(e).__name__}: {e}")
    after = _state()
    for key, value in before.items():
        if key == "random" and c.func.startswith("testing.strategies"):
            continue  # Hypothesis's own .example() draws from the global random
        if after[key] != value:
            return "leak", f"{key} changed: {value!r:.120} -> {after[key]!r:.120}; {outcome[1]}"
    for k, (obj, raw, _) in enumerate(_INPUTS):
        if raw is not None and _raw(obj) != raw:
            return "leak", f"input {k} ({type(obj).__name__}) was changed; {outcome[1]}"
    return outcome


def _child(c: Case, fd: int) -> None:
    try:
        with open("/proc/self/status") as status:
            vm = int(status.read().split("VmSize:")[1].split()[0]) * 1024
        limit = vm + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        warnings.simplefilter("ignore")  # a call's warnings are not findings; changing filters is
        with (
            open(os.devnull, "w") as null,
            contextlib.redirect_stdout(null),
            contextlib.redirect_stderr(null),
        ):
            outcome = _classify(c)
    except BaseException as e:
        outcome = ("crash", f"in the probe: {type(e).__name__}: {e}")
    os.write(fd, json.dumps(outcome).encode())
    os._exit(0)


def run_all(cases: list[Case], jobs: int) -> list[tuple[Case, str, str, float]]:
    """Run `cases`, `jobs` children at a time: (case, category, note, seconds) each."""
    pending = list(cases)
    running: dict[int, tuple[Case, int, float, bytearray]] = {}
    done: list[tuple[Case, str, str, float]] = []
    import sympy  # noqa: F401  (imported here, its warning filter is not a call's doing)
    import torch._dynamo  # noqa: F401
    import transformers  # noqa: F401

    while pending or running:
        while pending and len(running) < jobs:
            c = pending.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(c, w)
            os.close(w)
            running[pid] = (c, r, time.monotonic(), bytearray())
        fds = {r: pid for pid, (_, r, _, _) in running.items()}
        ready, _, _ = select.select(list(fds), [], [], 0.2)
        for r in ready:
            chunk = os.read(r, 1 << 16)
            running[fds[r]][3].extend(chunk)
        for pid, (c, r, t0, buf) in list(running.items()):
            elapsed = time.monotonic() - t0
            waited, status = os.waitpid(pid, os.WNOHANG)
            if waited == 0 and elapsed < TIMEOUT_S:
                continue
            if waited == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                cat, note = "hang", f"no answer in {TIMEOUT_S:.0f} s"
            else:
                while chunk := os.read(r, 1 << 16):
                    buf.extend(chunk)
                if buf:
                    cat, note = json.loads(buf)
                else:
                    sig = -os.waitstatus_to_exitcode(status)
                    cat, note = (
                        "crash",
                        "child ended without a verdict "
                        f"(signal {signal.Signals(sig).name if sig > 0 else 'none'})",
                    )
            os.close(r)
            del running[pid]
            done.append((c, cat, note, elapsed))
            say(
                f"{cat:9} {c.func}: {c.name}"
                + (f"\n          {note}" if cat not in ("error-ok", "value-ok") else "")
            )
    return done


def say(text: str = "") -> None:
    """Write a line to stdout."""
    sys.stdout.write(f"{text}\n")
    sys.stdout.flush()


CATEGORIES = ("error-ok", "value-ok", "crash", "hang", "leak", "wrong")


def report(done: list[tuple[Case, str, str, float]]) -> None:
    """Counts by category and by function, then every finding."""
    by_cat = Counter(cat for _, cat, _, _ in done)
    by_func: dict[str, Counter[str]] = defaultdict(Counter)
    for c, cat, _, _ in done:
        by_func[c.func][cat] += 1
    say(f"\n{len(done)} cases: " + ", ".join(f"{k} {by_cat[k]}" for k in CATEGORIES))
    width = max(len(f) for f in by_func)
    say(f"\n{'function':{width}} " + " ".join(f"{k:>8}" for k in CATEGORIES))
    for func in sorted(by_func):
        say(f"{func:{width}} " + " ".join(f"{by_func[func][k]:8}" for k in CATEGORIES))
    findings = [(c, cat, note) for c, cat, note, _ in done if cat not in ("error-ok", "value-ok")]
    say(f"\n{len(findings)} findings")
    for c, cat, note in findings:
        say(f"- [{cat}] {c.func}: {c.name}\n    {note}")


def main() -> int:
    """Run the cases asked for; exit status 1 if any is a finding."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "-k", default="", help="run only cases whose function or name contains this"
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="children at once (default 2)")
    parser.add_argument("--json", help="write every outcome to this file")
    args = parser.parse_args()
    cases = [c for c in CASES if args.k in f"{c.func}: {c.name}"]
    done = run_all(cases, args.jobs)
    done.sort(key=lambda d: CASES.index(d[0]))
    report(done)
    if args.json:
        rows = [
            {"func": c.func, "name": c.name, "category": cat, "note": note}
            for c, cat, note, _ in done
        ]
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(cat in ("error-ok", "value-ok") for _, cat, _, _ in done) else 1


if __name__ == "__main__":
    sys.exit(main())
