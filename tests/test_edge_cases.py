"""Edge cases: namespaces without float64, overflow, lazy and traced arrays, odd arguments."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host
from tests._independent import assert_rope_equal, fits_int64, rope_half, shifted_grid
from tests._rules import CentredXPos


@dataclasses.dataclass(frozen=True)
class ShrinkWithLength:
    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return inv_freq * (16.0 / max(seq_len, 16.0))

    def attention_factor(self, *, seq_len):
        return 1.25


def test_apply_rope_qk_joint_seq_len_on_every_namespace(xp):
    spec = rr.RopeSpec(head_dim=8, scaling=ShrinkWithLength())
    rng = np.random.default_rng(5)
    q_np, k_np = rng.standard_normal((4, 8)), rng.standard_normal((40, 8))
    q_rot, _ = rr.apply_rope_qk(
        xp.asarray(q_np),
        xp.asarray(k_np),
        spec,
        xp.asarray(range(4)),
        k_positions=xp.asarray(range(40)),
    )
    expected = rr.apply_rope(q_np, spec, np.arange(4), seq_len=40)  # seq_len of the keys
    np.testing.assert_allclose(host(q_rot), expected, rtol=0, atol=1e-14)


def test_apply_rope_qk_xpos_shares_the_centre():
    spec = rr.RopeSpec(head_dim=8, xpos=CentredXPos(scale_base=64.0))
    q, k = np.ones((4, 8)), np.ones((40, 8))
    q_rot, k_rot = rr.apply_rope_qk(q, k, spec, np.arange(4), k_positions=np.arange(40))
    q_ref, k_ref = rr.apply_rope_qk(q, k, spec, np.arange(4), k_positions=np.arange(40), seq_len=40)
    np.testing.assert_array_equal(q_rot, q_ref)
    np.testing.assert_array_equal(k_rot, k_ref)


def test_apply_rope_qk_queries_default_to_the_newest_key_positions():
    q, k = np.ones((2, 3, 8)), np.ones((2, 10, 8))
    ids = np.arange(20).reshape(2, 10) * 7  # per-batch key positions
    q_rot, _ = rr.apply_rope_qk(q, k, None, k_positions=ids)
    np.testing.assert_array_equal(q_rot, rr.apply_rope(q, None, ids[:, 7:]))


def test_inverse_is_the_transpose_with_an_attention_factor():
    spec = rr.RopeSpec(head_dim=8, scaling=ShrinkWithLength())
    x = np.random.default_rng(6).standard_normal((5, 8))
    back = rr.apply_rope(rr.apply_rope(x, spec, seq_len=64), spec, inverse=True, seq_len=64)
    np.testing.assert_allclose(back, 1.25**2 * x, rtol=1e-14, atol=1e-15)  # (aR)^T (aR) = a^2


def test_namespace_without_float64_builds_tables_on_the_host():
    # JAX without x64 has no float64: positions and offset must not pass through float32.
    pytest.importorskip("jax")
    code = """
import json, numpy as np, jax, jax.numpy as jnp, rope_ref as rr
x = jnp.ones((4, 8), dtype=jnp.float32)
pos = np.array([0.3, 1e7 + 0.3, 2.0**31 + 1, 123.0])
out = {
    "given": np.asarray(rr.apply_rope(x, None, pos)).tolist(),
    "offset": np.asarray(rr.apply_rope(x, offset=2**31 + 0.25)).tolist(),
    "dtype": str(rr.apply_rope(x).dtype),
    "sinusoidal": np.asarray(rr.sinusoidal_embedding(jnp.asarray([3, 4]), 4)).tolist(),
    "jit": np.asarray(jax.jit(lambda x: rr.apply_rope(x, offset=2**31 + 0.25))(x)).tolist(),
}
try:
    jax.jit(lambda x, p: rr.apply_rope(x, None, p))(x, jnp.arange(4))
except ValueError as err:
    out["traced"] = str(err)
print(json.dumps(out))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    out = json.loads(result.stdout)
    assert out["dtype"] == "float32"
    x = np.ones((4, 8))
    truth_given = rr.apply_rope(x, None, np.array([0.3, 1e7 + 0.3, 2.0**31 + 1, 123.0]))
    truth_offset = rr.apply_rope(x, offset=2**31 + 0.25)
    eps32 = float(np.finfo(np.float32).eps)
    np.testing.assert_allclose(out["given"], truth_given, rtol=0, atol=2 * eps32)
    np.testing.assert_allclose(out["offset"], truth_offset, rtol=0, atol=2 * eps32)
    np.testing.assert_allclose(out["jit"], truth_offset, rtol=0, atol=2 * eps32)
    assert out["traced"].startswith("`positions` must be readable when x's namespace has no")
    np.testing.assert_allclose(out["sinusoidal"], rr.sinusoidal_embedding([3, 4], 4), atol=eps32)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16])
def test_integer_positions_plus_offset_do_not_wrap(dtype):
    info = np.iinfo(dtype)
    pos = np.array([info.max - 1, info.max], dtype=dtype)
    x = np.ones((2, 4))
    for offset in (10, -10, 2**40):
        expected = rr.apply_rope(x, None, pos.astype(np.float64) + offset)
        np.testing.assert_array_equal(rr.apply_rope(x, None, pos, offset=offset), expected)


def test_nan_positions_are_refused_on_jax():
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(ValueError, match=re.escape("`positions` must be finite")):
        rr.apply_rope(jnp.ones((2, 4), dtype=jnp.float32), None, jnp.asarray([0.0, jnp.nan]))


def test_empty_torch_positions_with_a_scaling_rule():
    torch = pytest.importorskip("torch")
    spec = rr.RopeSpec(head_dim=8, scaling=ShrinkWithLength())
    q = torch.zeros(0, 8, dtype=torch.float64)
    assert tuple(rr.apply_rope(q, spec).shape) == (0, 8)
    q_rot, k_rot = rr.apply_rope_qk(q, q, spec)
    assert tuple(q_rot.shape) == tuple(k_rot.shape) == (0, 8)


def test_seq_axis_takes_numpy_integers_and_is_always_validated():
    x = np.ones((2, 3, 8))
    np.testing.assert_array_equal(rr.apply_rope(x, seq_axis=np.int64(1)), rr.apply_rope(x))
    with pytest.raises(TypeError, match=re.escape("`seq_axis` must be an integer; got 'foo'.")):
        rr.apply_rope(x, None, np.zeros((2, 3)), seq_axis="foo")


def test_dask_with_unknown_chunks_names_the_problem():
    da = pytest.importorskip("dask.array")
    x = da.ones((6, 8), chunks=(3, 8))
    x = x[x[:, 0] > 0]  # boolean mask: the length is unknown (NaN) until computed
    with pytest.raises(ValueError, match=re.escape("`x` must have a known size on every axis")):
        rr.apply_rope(x)


def test_huge_integers_are_value_errors():
    with pytest.raises(ValueError, match=re.escape("`base` must be finite")):
        rr.RopeSpec(head_dim=8, base=10**400)
    for field in ("offset", "seq_len"):
        with pytest.raises(ValueError, match=re.escape(f"`{field}` must be finite")):
            rr.apply_rope(np.ones((2, 8)), **{field: 10**400})


def test_feature_order_checks_its_spec():
    with pytest.raises(TypeError, match=re.escape("`spec` must be a RopeSpec; got str.")):
        rr.feature_order("x", "half", "interleaved")


def test_array_api_strict_older_standard_versions():
    xps = pytest.importorskip("array_api_strict")
    with xps.ArrayAPIStrictFlags(api_version="2022.12"):
        x = xps.ones((3, 4), dtype=xps.float64)
        y = rr.apply_rope(x, offset=2)
    expected = rr.apply_rope(np.ones((3, 4)), offset=2)
    assert np.max(np.abs(host(y) - expected)) == 0.0


def test_array_api_strict_strictest_flags():
    xps = pytest.importorskip("array_api_strict")
    with xps.ArrayAPIStrictFlags(
        boolean_indexing=False, data_dependent_shapes=False, enabled_extensions=()
    ):
        x = xps.ones((2, 3, 8), dtype=xps.float32)
        y = rr.apply_rope(x, None, xps.asarray([[1, 2, 3], [4, 5, 6]]))
    expected = rr.apply_rope(
        np.ones((2, 3, 8), dtype=np.float32), None, np.array([[1, 2, 3], [4, 5, 6]])
    )
    assert np.array_equal(host(y), expected)
    assert math.isfinite(float(np.max(host(y))))


# --- integer shifts: exact while the sum fits int64, else float64; never wrapped ----------

SHIFTS = [
    # three reported reproducers, each wrapped to -2**63 before; then more edges
    (np.array([2**63 - 1, 0, 1]), 1),
    (np.array([2**62 + 5, 0, 1]), 2**62 - 1),
    (np.array([2**63, 0, 1], dtype=np.uint64), 1),
    (np.array([-(2**63), 5, 6]), -1),
    (np.array([2**64 - 1, 0, 1], dtype=np.uint64), -(2**63)),
    (np.array([0, 1, 2]), 2**64),  # an offset beyond int64
    (np.array([0, 1, 2]), 2.0**70),
    (np.array([2**63 - 10, 0, 1]), 5),  # fits: exact, rounded once
    (np.array([2**55 + 3, 0, 1]), 2),  # exact 2**55 + 5 rounds up; float64 sums would not
    (np.array([2**55 + 3, 0, 1], dtype=np.uint64), 2),
    (np.array([7, 8, 9], dtype=np.int8), 2**62),
    (np.array([2**31 - 1, 0, 1], dtype=np.int32), 2**63 - 2**31),
]


@pytest.mark.parametrize(("positions", "offset"), SHIFTS)
def test_integer_shifts_are_exact_or_float64_never_wrapped(positions, offset):
    spec = rr.RopeSpec(4)
    x = np.random.default_rng(7).standard_normal((3, 4))
    truth = shifted_grid(positions, offset)
    expected = rope_half(x, truth, rr.inv_freq(spec))
    assert_rope_equal(rr.apply_rope(x, spec, positions, offset=offset), expected, x)
    cos, _ = rr.rope_cos_sin(spec, truth)
    np.testing.assert_array_equal(cos, np.cos(truth[:, None] * rr.inv_freq(spec)))


def test_the_exact_sum_differs_from_a_float64_sum_where_it_matters():
    # 2**55 + 3 + 2 is 2**55 + 5, nearest float64 2**55 + 8; float64(2**55 + 3) + 2.0 is 2**55.
    assert shifted_grid(np.array([2**55 + 3]), 2)[0] == 2.0**55 + 8
    assert float(np.float64(2**55 + 3) + 2.0) == 2.0**55


@pytest.mark.parametrize("offset", [2**63 - 3, 2**63 - 2, 2**63 - 1, -(2**63), 2**63, 3e19])
def test_default_positions_near_int64_limits(offset):
    x = np.random.default_rng(8).standard_normal((3, 4))
    truth = (
        np.array([float(offset + i) for i in range(3)])
        if fits_int64(int(offset), int(offset) + 2)
        else np.float64(float(offset)) + np.arange(3.0)
    )
    expected = rope_half(x, truth, rr.inv_freq(rr.RopeSpec(4)))
    assert_rope_equal(rr.apply_rope(x, offset=offset), expected, x)


# --- overflow after shifting or scaling: an error naming what overflowed -----------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: rr.apply_rope(np.ones((3, 4)), None, np.array([1e308, 0, 1]), offset=1e308),
            "`offset` moves `positions` beyond float64",
        ),
        (
            lambda: rr.apply_rope(np.ones((1, 2)), rr.RopeSpec(2, freqs=[1e308]), np.array([10])),
            "`positions` times the inverse frequencies overflow float64",
        ),
        (
            lambda: rr.rope_cos_sin(rr.RopeSpec(2, freqs=[4.0]), [1e308]),
            "`positions` times the inverse frequencies overflow float64",
        ),
        (
            lambda: rr.rope_angles(rr.RopeSpec(4, freqs=[1, 4], sections=(1, 1)), [[0.0, 1e308]]),
            "`positions` times the inverse frequencies overflow float64",
        ),
        (
            lambda: rr.apply_rope(
                np.ones((2, 8)), rr.RopeSpec(8, xpos=rr.XPos(1.0)), np.array([0.0, 1e6]), role="key"
            ),
            "`positions` lie too far from the xPos centre for float64",
        ),
    ],
)
def test_overflow_raises_naming_what_overflowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_large_finite_angles_are_computed_not_refused():
    spec = rr.RopeSpec(2, freqs=[1.0])
    cos, sin = rr.rope_cos_sin(spec, [1e308])
    assert (float(cos[0, 0]), float(sin[0, 0])) == (math.cos(1e308), math.sin(1e308))
