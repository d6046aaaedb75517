"""Second-probe cases for `apply_rope` and `apply_rope_qk`.

x of every array kind in dtypes RoPE cannot rotate and odd dtypes it can, strides, views and
odd shapes, positions, every keyword's wrong types and values, ``out=`` with the numba kernel,
threads, multi-axis specs; then `apply_rope_qk`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_strict as xps
import dask.array as da
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch
from _expect import (
    _INPUTS,
    MS,
    S8,
    Expect,
    X,
    _frac,
    _is_gen,
    _readonly,
    _Sub,
    _thread_check,
    _threads,
    _unaligned,
    along,
    angles_at,
    as_np,
    case,
    cos_sin_at,
    either,
    err,
    holds,
    inp,
    inv64,
    norms_kept,
    rope64,
    rotated,
    val,
    xd,
    xj,
    xn,
    xs,
    xt,
)

import rope_ref as rr
import rope_ref.scaling as sc

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


def _overlap_call() -> Any:
    buf = inp(X((2, 3, 9)))
    x, out = buf[..., :8], buf[..., 1:]
    return apply(x, backend="numba", out=out)


def _alias_call() -> Any:
    x = inp(np.ascontiguousarray(X((2, 8, 3)).transpose(0, 2, 1)))
    _INPUTS.pop()  # rotated in place on purpose: the input is meant to change
    _INPUTS.append((x, None, x.astype(np.float64)))
    return apply(x, backend="numba", out=x)


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
