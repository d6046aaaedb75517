"""Second-probe cases for the tables and the other rotations.

`rope_cos_sin`, `rope_angles`, `rotation_matrix` (checked orthogonal), `rerotate` and
`apply_rope_mixed` (against a float64 RoPE-Mixed written here).
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
    DS,
    MS,
    S8,
    Expect,
    X,
    _frac,
    _readonly,
    angles_at,
    as_np,
    case,
    close,
    cos_sin_at,
    either,
    err,
    holds,
    inp,
    norms_kept,
    rope64,
    val,
    xn,
    xt,
)

import rope_ref as rr
import rope_ref.scaling as sc

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
