"""diagnose() names the cause of each kind of bug seen in real RoPE code.

Each buggy result is built independently of the diagnosis: the oracle with one ingredient
changed the way the peer bug changes it (peer survey, section C), or a result edited by hand.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref.testing import CAUSES, Diagnosis, assert_rope_close, diagnose
from rope_ref.testing.strategies import rope_cases, rope_specs


def _diag(actual, x, spec, positions=None) -> Diagnosis:
    found = diagnose(actual, x, spec, positions)
    assert found is not None
    return found


CASES = rope_cases(dtypes=["float32", "float64"], max_position=2**16)


def _rng_x(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def _clearly_wrong(wrong, case, positions, offset=0):
    """The planted bug changes the result by far more than the largest tolerance anywhere
    (the one-number bound `rope_atol`, at the largest angle): an input-side condition, so
    the comparison must fail and the diagnosis must name something."""
    right = np.asarray(rr.apply_rope(case.x, case.spec, positions), dtype=np.float64)
    gap = float(np.max(np.abs(np.asarray(wrong, dtype=np.float64) - right), initial=0.0))
    dtype = str(case.x.dtype)
    bound = rr.testing.rope_atol(case.spec, positions, dtype=dtype, magnitude=2.0, offset=offset)
    return gap > 100 * bound


@given(CASES)
def test_inverse_rotation_is_a_direction_bug(case):
    wrong = rr.apply_rope(case.x, case.spec, case.positions, inverse=True)
    assume(_clearly_wrong(wrong, case, case.positions))  # e.g. not every angle 0 or pi
    found = diagnose(wrong, case.x, case.spec, case.positions)
    assert found is not None
    assert found.cause == "direction"


@given(CASES, st.sampled_from([1, -1, 2, -2]))
def test_shifted_positions_are_an_offset_bug(case, k):
    p = np.asarray(case.positions)
    assume(not np.array_equal(p + k, -p))  # p + k == -p is the inverse rotation as well
    wrong = rr.apply_rope(case.x, case.spec, case.positions, offset=k)
    assume(_clearly_wrong(wrong, case, case.positions, offset=k))
    found = diagnose(wrong, case.x, case.spec, case.positions)
    assert found is not None
    assert found.cause == "offset"
    assert f"{k:+d}" in found.message


@given(rope_cases(dtypes=["float64"], max_position=4096, specs=rope_specs(partial=False)))
def test_other_layout_is_a_layout_bug(case):
    other = "interleaved" if case.spec.layout == "half" else "half"
    wrong = rr.apply_rope(case.x, dataclasses.replace(case.spec, layout=other), case.positions)
    assume(_clearly_wrong(wrong, case, case.positions))  # e.g. not a single pair
    found = diagnose(wrong, case.x, case.spec, case.positions)
    assert found is not None
    assert found.cause == "layout"


@pytest.mark.parametrize("bug", ["direction", "offset", "layout"])
def test_every_planted_bug_in_a_fixed_set_is_found(bug):
    """Over a fixed set of 40 seeded cases with positions past 100 and a full head, every
    planted bug changes the result, and every one is found and named."""
    rng = np.random.default_rng(["direction", "offset", "layout"].index(bug))
    for _ in range(40):
        d = int(rng.choice([8, 16, 64, 128]))
        spec = rr.RopeSpec(
            d, base=float(rng.choice([1e4, 5e5])), layout=str(rng.choice(["half", "interleaved"]))
        )
        p = np.sort(rng.integers(100, 30000, size=5))
        x = rng.uniform(-1, 1, (2, 5, d)).astype(str(rng.choice(["float32", "float64"])))
        if bug == "direction":
            wrong = rr.apply_rope(x, spec, p, inverse=True)
        elif bug == "offset":
            wrong = rr.apply_rope(x, spec, p, offset=1)
        else:
            other = "interleaved" if spec.layout == "half" else "half"
            wrong = rr.apply_rope(x, dataclasses.replace(spec, layout=other), p)
        found = diagnose(wrong, x, spec, p)
        assert found is not None, (spec, p)
        assert found.cause == bug, (spec, p, found)


@pytest.mark.parametrize("k", [7, -100, 3000])
def test_larger_offsets_are_estimated_from_the_slowest_pair(k):
    spec = rr.RopeSpec(head_dim=64)
    p = np.array([5, 9, 400])
    x = _rng_x((2, 3, 64), dtype=np.float32)
    found = _diag(rr.apply_rope(x, spec, p + k), x, spec, p)
    assert found.cause == "offset"
    assert f"shifted by {k:+d}" in found.message


def test_per_row_positions_ignored():
    spec = rr.RopeSpec(head_dim=16)
    x = _rng_x((3, 2, 4, 16))
    rows = np.array([[0, 1, 2, 3], [5, 6, 7, 8], [100, 101, 102, 103]])[:, None, :]
    wrong = rr.apply_rope(x, spec, rows[:1])  # mlx #3795 / HF #22161: row 0's positions
    assert _diag(wrong, x, spec, rows).cause == "positions"
    arange = rr.apply_rope(x, spec)  # cache_position instead of position_ids
    found = _diag(arange, x, spec, rows)
    assert found.cause == "positions"
    assert "ignored" in found.message


@pytest.mark.parametrize("table", [2048, 4096, 300])
def test_identity_beyond_a_table(table):
    spec = rr.RopeSpec(head_dim=32, base=500000.0)
    p = np.array([0, 1, 17, table - 1, table, table + 5, 2 * table])
    x = _rng_x((2, len(p), 32), dtype=np.float32)
    wrong = rr.apply_rope(x, spec, p)
    wrong[:, p >= table] = x[:, p >= table]  # flash-attn: masked load, cos=1, sin=0
    found = _diag(wrong, x, spec, p)
    assert found.cause == "identity"
    assert f"from {table} on" in found.message
    assert f"up to {table - 1}" in found.message


def test_table_wrap_around_is_a_position_range_bug():
    spec = rr.RopeSpec(head_dim=16)
    p = np.array([1, 5, 63, 64, 65, 100])
    x = _rng_x((len(p), 16))
    wrong = rr.apply_rope(x, spec, p % 64)  # a 64-row cache indexed modulo its length
    found = _diag(wrong, x, spec, p)
    assert found.cause == "position_range"
    assert "wrap around a table of 64" in found.message


@given(CASES, st.data())
def test_rotating_other_features_is_a_rotary_dim_bug(case, data):
    spec = case.spec
    assume(spec.head_dim >= 4)
    width = data.draw(st.integers(1, spec.head_dim // 2).map(lambda n: 2 * n))
    assume(width != spec.rotary_dim)
    start = data.draw(st.integers(0, spec.head_dim - width))
    other = dataclasses.replace(spec, rotary_dim=width, rotary_start=start)
    wrong = rr.apply_rope(case.x, other, case.positions)
    found = diagnose(wrong, case.x, spec, case.positions)
    assume(found is not None)
    assert found is not None
    # Either the rotated range is named, or (same range, other frequencies) the frequencies.
    assert found.cause in {"rotary_dim", "frequencies"}, found


def test_partial_rotary_with_head_dim_in_the_exponent():
    # pie-project/pie PR #603: theta_j = base^(-2j/head_dim) for a rotary_dim slice.
    spec = rr.RopeSpec(head_dim=64, rotary_dim=16)
    wrong_freqs = 10000.0 ** (-2.0 * np.arange(8) / 64)
    wrong_spec = rr.RopeSpec(head_dim=64, rotary_dim=16, freqs=tuple(wrong_freqs))
    x = _rng_x((5, 64), dtype=np.float32)
    found = _diag(rr.apply_rope(x, wrong_spec), x, spec)
    assert found.cause == "frequencies"
    assert "head_dim = 64 instead of rotary_dim = 16" in found.message


@pytest.mark.parametrize(("used", "wanted"), [(10000.0, 500000.0), (1e6, 1e4), (12345.0, 1e4)])
def test_base_not_passed_through(used, wanted):
    x = _rng_x((9, 32))
    wrong = rr.apply_rope(x, rr.RopeSpec(head_dim=32, base=used))
    found = _diag(wrong, x, rr.RopeSpec(head_dim=32, base=wanted))
    assert found.cause == "frequencies"
    assert f"base {used:.6g} instead of the spec's base {wanted:.6g}" in found.message


@pytest.mark.parametrize("factor", [4.0, 16.0])
def test_yarn_attention_factor_dropped_or_doubled(factor):
    # vLLM #48621 & co.: YaRN's frequencies kept, its attention factor (mscale) dropped.
    yarn = rr.RopeSpec(head_dim=64, scaling=rr.scaling.YaRN(factor, original_max_position=4096))
    a = rr.attention_factor(yarn)
    same_freqs = rr.RopeSpec(head_dim=64, freqs=tuple(rr.inv_freq(yarn)))
    p = np.arange(0, 20000, 997)
    x = _rng_x((2, len(p), 64), dtype=np.float32)
    dropped = _diag(rr.apply_rope(x, same_freqs, p), x, yarn, p)
    assert dropped.cause == "attention_factor"
    assert f"attention factor {a:.6g} was not applied" in dropped.message
    doubled = rr.apply_rope(x, yarn, p) * np.float32(a)
    assert "applied twice" in _diag(doubled, x, yarn, p).message


def test_attention_factor_where_none_is_expected():
    spec = rr.RopeSpec(head_dim=8)
    x = _rng_x((4, 8))
    found = _diag(rr.apply_rope(x, spec) * 1.2772, x, spec)
    assert found.cause == "attention_factor"
    assert "1.2772 x the oracle" in found.message


@pytest.mark.parametrize(("name", "limit"), [("bfloat16", 256), ("float16", 2048)])
def test_positions_held_in_low_precision(name, limit):
    torch = pytest.importorskip("torch")
    p = torch.tensor([1, 2, limit - 1, limit + 1, limit + 3, 3 * limit + 1])
    rounded = p.to(getattr(torch, name)).double()  # Megatron-LM #535, candle PR #3520
    spec = rr.RopeSpec(head_dim=16)
    x = _rng_x((len(p), 16), dtype=np.float32)
    found = _diag(rr.apply_rope(x, spec, rounded.numpy()), x, spec, p)
    assert found.cause == "precision"
    assert f"positions were held in {name}" in found.message


def test_rotary_embedding_torch_bfloat16_positions_are_caught():
    # rotary-embedding-torch builds positions in the input dtype (get_seq_pos(dtype=t.dtype)).
    torch = pytest.importorskip("torch")
    ret = pytest.importorskip("rotary_embedding_torch")
    module = ret.RotaryEmbedding(dim=32)
    t = torch.randn(1, 2, 8, 32, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    out = module.rotate_queries_or_keys(t, offset=1001)
    spec = rr.RopeSpec(head_dim=32, layout="interleaved")
    with pytest.raises(AssertionError, match="positions were held in bfloat16"):
        assert_rope_close(out, t, spec, offset=1001)
    # Positions of 8 or fewer tokens from 0 are exact in bfloat16: that call is conformant.
    assert_rope_close(module.rotate_queries_or_keys(t), t, spec)


def test_float32_angles_in_a_float64_pipeline():
    # HF casts position_ids.float() even for float64 inputs.
    d, p = 32, np.arange(0, 50000, 4999)
    inv32 = (1.0 / (10000.0 ** (np.arange(0, d, 2, dtype=np.float32) / d))).astype(np.float32)
    angles = (p.astype(np.float32)[:, None] * inv32).astype(np.float64)
    x = _rng_x((len(p), d))
    a, b = x[:, : d // 2], x[:, d // 2 :]
    cos, sin = np.cos(angles), np.sin(angles)
    actual = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    found = _diag(actual, x, rr.RopeSpec(head_dim=d), p)
    assert found.cause == "precision"
    assert "float32" in found.message


def test_cos_sin_rounded_to_bfloat16_for_float32_inputs():
    p = np.arange(6)
    spec = rr.RopeSpec(head_dim=16)
    x = _rng_x((len(p), 16), dtype=np.float32)
    cos, sin = rr.rope_cos_sin(spec, p)
    bits = np.asarray(cos, np.float32).view(np.uint32) & 0xFFFF0000  # bf16 by truncation
    cos_bf = bits.view(np.float32).astype(np.float64)
    bits = np.asarray(sin, np.float32).view(np.uint32) & 0xFFFF0000
    sin_bf = bits.view(np.float32).astype(np.float64)
    a, b = x[:, :8].astype(np.float64), x[:, 8:].astype(np.float64)
    actual = np.concatenate([a * cos_bf - b * sin_bf, b * cos_bf + a * sin_bf], -1)
    found = _diag(actual.astype(np.float32), x, spec, p)
    assert found.cause == "precision"
    assert "bfloat16" in found.message


def test_non_finite_and_unknown():
    spec = rr.RopeSpec(head_dim=8)
    x = _rng_x((3, 8))
    y = rr.apply_rope(x, spec)
    y[1, 2] = np.nan
    assert _diag(y, x, spec).cause == "non-finite"
    noise = rr.apply_rope(x, spec) + _rng_x((3, 8), seed=5) * 0.1
    found = _diag(noise, x, spec)
    assert found.cause == "unknown"
    assert set(CAUSES) >= {found.cause}


def test_a_conformant_result_has_no_diagnosis_and_str_names_the_cause():
    spec = rr.RopeSpec(head_dim=8)
    x = _rng_x((3, 8), dtype=np.float32)
    assert diagnose(rr.apply_rope(x, spec), x, spec) is None
    assert str(Diagnosis("offset", "shifted")) == "offset: shifted"


def _interleaved_in_half_out(x, p, inv):
    """A target written here: pairs (2j, 2j + 1) read, rotated, written as [a | b]."""
    angle = p[:, None] * inv
    a, b = x[..., 0::2], x[..., 1::2]
    cos, sin = np.cos(angle), np.sin(angle)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def test_a_wrong_base_written_in_half_order_is_a_frequency_mistake():
    spec = rr.RopeSpec(64, layout="interleaved", output_layout="half")
    x, p = _rng_x((2, 3, 16, 64)), np.arange(16) * 37.0
    inv = 500000.0 ** (-np.arange(0, 64, 2) / 64)
    d = _diag(_interleaved_in_half_out(x, p, inv), x, spec, p)
    assert d.cause == "frequencies"
    assert "500000" in d.message


def test_a_wrong_pair_written_in_half_order_is_named_by_its_read_index():
    # the pairs are compared in the order they are written, not in the read layout's
    spec = rr.RopeSpec(64, layout="interleaved", output_layout="half")
    x, p = _rng_x((2, 3, 16, 64)), np.arange(16) * 37.0
    inv = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    inv[5] = 0.5
    d = _diag(_interleaved_in_half_out(x, p, inv), x, spec, p)
    assert d.cause != "layout"
    assert "pairs 0-4, 6-31 match" in d.message
    assert "pairs 5 do not" in d.message
