"""What the second probe's cases are made of: expectations, inputs, independent formulas.

A case (`Case`, added to `CASES` by `case`) is one call of rope_ref's public API and what it
must give (`Expect`: `err` an error naming a parameter, `val` a value that a check accepts,
`either`). The inputs a call gets are registered (`inp`, and `xn`, `xt`, `xj`, `xs`, `xd` for
NumPy, torch, JAX, array-api-strict and Dask data) so that the runner can tell whether the call
changed them. The checks compare results with formulas written here, independent of rope_ref: a
float64 NumPy RoPE (`rope64`) with frequencies from mpmath (`inv64`), per-pair norms
(`norms_kept`), the cos/sin tables and angles (`cos_sin_at`, `angles_at`), DynamicNTK's
frequencies (`dyn_inv`). Last come small functions several case modules use.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_strict as xps
import dask.array as da
import jax.numpy as jnp
import mpmath
import numpy as np
import torch

import rope_ref as rr
import rope_ref.scaling as sc

TIMEOUT_S = 20.0

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


# the specs and the config several case modules use
S8 = rr.RopeSpec(head_dim=8)
MS = rr.RopeSpec(head_dim=8, sections=(2, 1, 1))  # multi-axis
DS = rr.RopeSpec(head_dim=8, scaling=sc.DynamicNTK(2.0, 4))
L = {  # a Llama config for from_hf
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 8,
    "rope_theta": 10000.0,
    "max_position_embeddings": 128,
}

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


def holds(pred: Callable[[Any], Any], what: str) -> Callable[[Any, list[np.ndarray]], None]:
    """Check: `pred(result)` is true (`what` says what it means; NumPy booleans count)."""

    def check(result: Any, inputs: list[np.ndarray]) -> None:
        assert bool(pred(result)), f"{what}; got {result!r}"[:300]

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


def dyn_inv(
    seq_len: float, d: int = 8, base: float = 1e4, factor: float = 2.0, max_pos: int = 4
) -> np.ndarray:
    """DynamicNTK's frequencies (HF's formula) in float64."""
    if seq_len > max_pos:
        base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (d / (d - 2))
    return base ** (-np.arange(0, d, 2) / d)


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
