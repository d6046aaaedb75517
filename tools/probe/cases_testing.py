"""Second-probe cases for `rope_ref.testing`: assertions, reports, the error model, strategies."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import torch
from _expect import S8, Expect, X, case, either, err, holds, inp, is_, val, xn

import rope_ref as rr
import rope_ref.testing as rt
import rope_ref.testing.strategies as st

apply = rr.apply_rope

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
