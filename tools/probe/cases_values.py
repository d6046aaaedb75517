"""Second-probe cases where a value is due, checked against the formulas.

The exact backend, forms, partial rotary and wide integer positions; the oracle, which must
never pass a wrong answer; `rerotate` against an independent DynamicNTK; ``out=`` through the
PyTorch and JAX CPU paths of the numba kernel.
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
    S8,
    Expect,
    X,
    _poke,
    _ulp_off,
    along,
    as_np,
    case,
    close,
    cos_sin_at,
    dyn_inv,
    either,
    err,
    holds,
    inp,
    is_,
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
import rope_ref.testing as rt

apply = rr.apply_rope
qk = rr.apply_rope_qk
cs = rr.rope_cos_sin
rer = rr.rerotate

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


def _grad_alias() -> Any:
    x = torch.from_numpy(X()).requires_grad_()
    return apply(x, backend="numba", out=x)


def _torch_alias() -> Any:
    x = torch.from_numpy(X((2, 8, 3))).transpose(1, 2)
    _INPUTS.append((x, None, as_np(x)))  # rotated in place on purpose
    return apply(x, backend="numba", out=x)


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
