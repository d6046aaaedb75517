"""Positions in a diagnosis: a (batch, seq, heads, head_dim) result checked without
``seq_axis`` (the positions ran along axis -3, and the diagnosis says to pass
``seq_axis=-3``), the shift estimate, the row-0 and position-0 checks, the scale check's
guards and the error model a shifted grid is judged by.

Every wrong result is planted in plain NumPy here, and every number a message is checked
for is worked out here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, diagnose
from tests._helpers import GRID_3_AXES as GRID
from tests._helpers import chunked_mrope as _mrope
from tests._helpers import inv_freq64 as _inv
from tests._helpers import uniform as _x
from tests._independent import rotate_pairs


def _bshd_rotation(x, p):
    """rotate_half RoPE of x (batch, seq, heads, d) with positions p along seq."""
    d = x.shape[-1]
    inv = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = p[None, :, None, None] * inv
    xr = x.astype(np.float64)
    a, b = xr[..., : d // 2], xr[..., d // 2 :]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(x.dtype)


@pytest.mark.parametrize(("seq", "heads", "given"), [(10, 4, False), (8, 8, True)])
def test_positions_along_axis_minus_3_are_named_with_seq_axis(seq, heads, given):
    x = np.random.default_rng(0).standard_normal((2, seq, heads, 16)).astype(np.float32)
    p = np.arange(seq) * 3 if given else np.arange(seq)
    y = _bshd_rotation(x, p)
    found = diagnose(y, x, rr.RopeSpec(16), p if given else None)
    assert found is not None
    assert found.cause == "positions", found
    assert "pass seq_axis=-3" in found.message
    with pytest.raises(AssertionError, match="pass seq_axis=-3"):
        assert_rope_close(y, x, rr.RopeSpec(16), p if given else None)
    assert diagnose(y, x, rr.RopeSpec(16), p if given else None, seq_axis=-3) is None


@pytest.mark.parametrize(
    ("k", "told"), [(1, "p + 1."), (-1, "p - 1."), (2, "p + 2."), (-2, "p - 2.")]
)
def test_a_multi_axis_offset_is_found_without_an_estimate(k, told):
    """Catches: one of the shifts tried by default (+1, -1, +2, -2) changed: a multi-axis
    spec has no single slowest pair to estimate the shift from, so only those are tried."""
    x = _x((GRID.shape[0], 16), 60)
    found = diagnose(_mrope(x, GRID + k, (2, 3, 3)), x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "offset"
    assert f"shifted by {k:+d}" in found.message
    assert found.message.endswith(f"rotated as if it sat at position {told}")


@pytest.mark.parametrize(
    ("spec", "k"),
    [
        (rr.RopeSpec(2, freqs=[0.01]), 5),
        (rr.RopeSpec(6, freqs=[0.3, 0.05, 0.0]), 5),
        (rr.RopeSpec(2, freqs=[1e-10]), 2**30 + 7),
    ],
    ids=["one-pair", "zero", "past-2**30"],
)
def test_a_larger_shift_is_estimated_for_one_pair_or_past_a_zero_frequency(spec, k):
    """Catches: the shift estimate skipped for a single pair, read off a pair that never
    turns (frequency 0) instead of the slowest turning one, or capped below 2**31: the
    shifts are not among the ones tried without it."""
    x, p = _x((6, spec.head_dim), 61), np.arange(6) * 3 + 2
    found = diagnose(rotate_pairs(x, (p + k)[:, None] * np.array(spec.freqs)), x, spec, p)
    assert found is not None
    assert found.cause == "offset"
    assert f"shifted by +{k}:" in found.message


def test_a_result_just_outside_the_tolerance_is_not_an_offset_of_zero():
    """Catches: an estimated shift of 0 kept (the oracle itself is then tried as a shift,
    and a result off by less than twice the tolerance was called "shifted by +0"), or a
    scale of 1 tried (it was called "1 x the oracle"), or the role swapped without xPos
    (where the role changes nothing: it was called "xpos_role")."""
    eps = 2.0**-52
    x, p = _x((6, 16), 62), np.arange(6) * 5 + 3
    y = rotate_pairs(x, p[:, None] * _inv(16))
    norm = math.hypot(x[5, 2], x[5, 10])
    y[5, 2] += 1.5 * norm * (2 * eps * (p[5] + 1) + 4 * eps)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause not in ("offset", "attention_factor")
    found = diagnose(y, x, rr.RopeSpec(16), p, role="key")  # a role, but no xPos
    assert found is not None
    assert found.cause not in ("offset", "attention_factor", "xpos_role")


@pytest.mark.parametrize(
    ("p", "shape"),
    [
        (np.array([[3, 7, 12, 20, 33], [11, 12, 13, 40, 41]])[:, None, :], (2, 3, 5, 16)),
        (np.array([[3], [11]]), (2, 1, 16)),
    ],
    ids=["batch-heads-seq", "one-token-per-row"],
)
def test_row_0s_positions_for_every_row_are_named_for_any_grid_shape(p, shape):
    """Catches: the row-0 check kept to 2-D grids, or to grids with more than one token."""
    x = _x(shape, 63)
    first = np.broadcast_to(p[:1], p.shape)
    grid = np.broadcast_to(first, shape[:-1])
    y = rotate_pairs(x, grid[..., None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "positions"
    assert "with the positions of row 0" in found.message


def test_one_sequence_rotated_at_its_first_position_is_not_a_batch_mistake():
    """Catches: the row-0 check run on 1-D positions (one sequence has no batch rows)."""
    x, p = _x((5, 16), 64), np.array([3, 7, 12, 20, 33])
    found = diagnose(rotate_pairs(x, np.full((5, 1), 3.0) * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert "positions of row 0" not in found.message


def test_x_with_no_rotated_features_and_a_wrong_result_is_diagnosed_without_error():
    """Catches: the scale check's guard against a zero oracle (all rotated features of x
    zero) changed: the ratio's division by zero then raises instead of a diagnosis."""
    x = _x((4, 16), 65)
    x[:, :8] = 0.0
    y = x.copy()
    y[:, :8] = _x((4, 8), 66)
    found = diagnose(y, x, rr.RopeSpec(16, rotary_dim=8), np.arange(4))
    assert found is not None
    assert found.cause == "unknown"


def test_a_negatively_scaled_result_is_not_an_attention_factor():
    """Catches: negative ratios let through the scale check: -0.5 x the oracle is no
    attention factor (cos/sin scales are positive)."""
    x, p = _x((6, 16), 67), np.arange(6) * 5 + 3
    y = -0.5 * rotate_pairs(x, p[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "attention_factor"


def test_position_0_never_counts_as_a_correctly_rotated_row():
    """Catches: rows at position 0 (where every result is x) counted as rotated correctly,
    or rows at position 1 left out of them."""
    x = _x((4, 16), 68)
    p = np.array([0, 1, 5, 6])
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[2:] = x[2:]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith("positions up to 1 are rotated correctly, but from 5 on")
    y[1] = x[1]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith(
        "no row was rotated: the result equals x (identity) at positions 1 and up"
    )


def test_a_short_table_is_told_from_the_rows_past_position_0():
    """Catches: rows at position 0 (right whatever the table) counted as correct rows below
    the table's end, or rows at position 1 left out of them."""
    x = _x((4, 16), 69)
    p = np.array([0, 1, 15, 16])
    found = diagnose(rotate_pairs(x, (p % 10)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_range"
    assert found.message.startswith(
        "positions up to 1 are correct; larger positions wrap around a table of 10 "
    )
    p = np.array([0, 15, 16])
    found = diagnose(rotate_pairs(x[:3], (p % 10)[:, None] * _inv(16)), x[:3], rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "position_range"


def test_a_row_right_and_a_row_unrotated_at_the_same_position_is_no_cut_off():
    """Catches: a correct row at the first unrotated position taken as "correct up to"."""
    x = _x((2, 3, 16), 70)
    p = np.array([[1, 2, 5], [1, 2, 5]])
    y = rotate_pairs(x, p[..., None] * _inv(16))
    y[1, 2] = x[1, 2]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "identity"


def test_a_shift_is_judged_by_the_error_model_of_the_shifted_positions():
    """Catches: the tolerance of a shifted grid taken at p - k instead of p + k. Positions
    3000 to 3002 shifted by +3000 turn through 6000 rad with float32 angles; at p - k (0 to
    2) the float32 bound is far too tight for them."""
    x, p, k = _x((3, 64), 71).astype(np.float32), np.array([3000, 3001, 3002]), 3000
    angles32 = (p + k).astype(np.float32)[:, None] * _inv(64).astype(np.float32)
    y = rotate_pairs(x.astype(np.float64), angles32.astype(np.float64)).astype(np.float32)
    found = diagnose(y, x, rr.RopeSpec(64), p)
    assert found is not None
    assert found.cause == "offset"
    assert "shifted by +3000:" in found.message


def test_changed_pass_through_features_are_named_only_when_the_rotated_ones_are_right():
    """Catches: the pass-through verdict given while the rotated features are wrong too, or
    lost for a spec with explicit frequencies (whose other rotated ranges cannot be built)."""
    spec = rr.RopeSpec(16, rotary_dim=8, freqs=_inv(8))
    x, p = _x((6, 16), 72), np.arange(6) * 7
    y = x.copy()
    y[:, :8] = rotate_pairs(x[:, :8], p[:, None] * _inv(8))
    y[:, 12] *= 2.0
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message.startswith("features [12] changed although the spec rotates only [0, 8)")
    y[:, :8] += 0.2 * _x((6, 8), 73)
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause != "rotary_dim"


def test_a_mismatch_in_every_pair_does_not_list_the_pairs():
    """Catches: the failing pairs listed in the unknown message when every pair fails (the
    list is meant for a mismatch confined to some pairs)."""
    x, p = _x((6, 16), 74), np.arange(6) * 5 + 3
    y = rotate_pairs(x, p[:, None] * _inv(16)) + 0.3 * _x((6, 16), 75)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message == "no single known cause explains the mismatch."


def test_a_shift_is_estimated_from_the_rows_whose_slowest_pair_is_not_zero():
    """Catches: rows whose slowest pair is zero (no angle to read) counted in the shift
    estimate: their shift reads 0 and outvotes the rows that show the shift of +5."""
    spec = rr.RopeSpec(2, freqs=[0.01])
    x, p = _x((6, 2), 76), np.arange(6) * 3 + 2
    x[:4] = 0.0
    found = diagnose(rotate_pairs(x, (p + 5)[:, None] * 0.01), x, spec, p)
    assert found is not None
    assert found.cause == "offset"
    assert "shifted by +5:" in found.message


def test_a_cut_off_is_found_when_a_pair_of_x_is_zero():
    """Catches: an unrotated row not called the identity where a pair of x is zero (its
    tolerance is 0 and its result, 0, equals x exactly), or those zero features counted as
    changed by the result (they are then listed as changed pass-through features)."""
    x, p = _x((4, 16), 77), np.array([1, 2, 5, 6])
    x[:, [3, 11]] = 0.0
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[2:] = x[2:]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith("positions up to 2 are rotated correctly, but from 5 on")
    spec = rr.RopeSpec(16, rotary_dim=8)
    x = _x((6, 16), 78)
    x[:, 14:] = 0.0
    p = np.arange(6) * 7
    y = x.copy()
    y[:, :8] = rotate_pairs(x[:, :8], p[:, None] * _inv(8))
    y[:, 12] *= 2.0
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.message.startswith("features [12] changed although the spec rotates only [0, 8)")


def test_a_table_wrapped_back_to_its_row_0_is_found():
    """Catches: row 0 of the table left out of the rows the first failing position may
    carry (a table of 10 read at 20 gives row 0)."""
    x, p = _x((4, 16), 80), np.array([1, 5, 20, 23])
    found = diagnose(rotate_pairs(x, (p % 10)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_range"
    assert found.message.startswith(
        "positions up to 5 are correct; larger positions wrap around a table of 10 "
    )


def test_a_rotated_range_wider_than_the_specs_is_found_past_the_specs_width():
    """Catches: the search of rotated ranges stopped at the spec's own width instead of
    skipping it. x is zero past feature 5, so only [0, 6) looks changed, but the result
    rotates 12 features (its frequencies are those of rotary_dim=12)."""
    spec = rr.RopeSpec(16, rotary_dim=8, layout="interleaved")
    x, p = _x((6, 16), 81), np.arange(6) * 7 + 1
    x[:, 6:] = 0.0
    y = x.copy()
    y[:, :12] = rotate_pairs(x[:, :12], p[:, None] * _inv(12), layout="interleaved")
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message.startswith("the result rotates features [0, 12) (rotary_dim=12, ")


@pytest.mark.parametrize(
    ("last", "bad"), [(113254, 117228), (81378186, 81382160)], ids=["6-turns", "4096-turns"]
)
def test_a_table_clamped_many_turns_of_the_slowest_pair_in_is_found(last, bad):
    """Catches: the turns of the slowest pair searched for the table row cut short: the
    row sits 0.7 of a turn into the same turn as the first failing position (0.9), so its
    wrapped angle is negative and it lies on the last branch; and the search refused
    below its limit of 4096 turns (the second case needs 4096; the slowest frequency of
    RopeSpec(16) is 10000**(-14/16), one turn every 19869.2 positions)."""
    x, p = _x((5, 16), 82), np.array([1, 5, last, bad, bad + 3])
    y = rotate_pairs(x, np.minimum(p, last)[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_range"
    assert found.message.endswith(
        f"larger positions are clamped to {last} (a cos/sin cache shorter than the positions)."
    )


def test_a_table_row_read_in_float32_is_refined_by_the_faster_pairs():
    """Catches: the table row taken from the slowest pair alone, or refined with a wrong
    step: in float32 its angle at 40 (4e-7 rad) is off by some positions, which the pairs
    at 0.05 and 0.7 rad per position pin down."""
    freqs = np.array([0.7, 0.05, 1e-8])
    x, p = _x((5, 6), 83).astype(np.float32), np.array([1, 3, 30, 40, 41])
    y = rotate_pairs(x.astype(np.float64), np.minimum(p, 30)[:, None] * freqs).astype(np.float32)
    found = diagnose(y, x, rr.RopeSpec(6, freqs=freqs), p)
    assert found is not None
    assert found.cause == "position_range"
    assert found.message.startswith(
        "positions up to 30 are correct; larger positions are clamped to 30 "
    )


def test_an_unknown_mismatch_names_multi_axis_positions_of_a_batch():
    """Catches: a batched multi-axis grid (batch, seq, axes) reshaped by its sequence length
    instead of its number of axes for the unknown message."""
    p = np.array([[[1, 0, 2], [4, 6, 1], [8, 3, 5], [5, 7, 4]], [[2, 2, 3], [6, 1, 1]] * 2])
    x = _x((2, 4, 16), 85)
    axis = np.repeat(np.arange(3), (2, 3, 3))
    y = rotate_pairs(x, p[..., axis] * _inv(16))
    y[0, 3] = _x((16,), 86)  # one row of noise
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), p)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith(
        "no single known cause explains the mismatch; failing rows sit at positions "
        "axis 0: 5 to 5, axis 1: 7 to 7, axis 2: 4 to 4; passing rows at "
        "axis 0: 1 to 8, axis 1: 0 to 6, axis 2: 1 to 5"
    )


def test_a_wrong_checkable_row_is_diagnosed_beside_unchecked_ones():
    """Catches: a comparison with some rows past what float32 can check called "not
    checkable" although a checkable row (position 5) fails: that row's mistake is named."""
    p = np.array([5, 2**23 + 1])
    x = _x((2, 16), 87).astype(np.float32)
    y = rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16)).astype(np.float32)
    y[0] = x[0]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "not_checkable"


@pytest.mark.parametrize(("ratio", "told"), [(1.0, "was not applied"), (4.0, "was applied twice")])
def test_an_attention_factor_of_two_dropped_or_applied_twice_is_named(ratio, told):
    """Catches: an attention factor of exactly 2 passed over by the "not applied" and
    "applied twice" checks (it is then called "a different factor")."""
    spec = rr.RopeSpec(16, scaling=rr.scaling.AttentionScale(2.0))
    x, p = _x((6, 16), 89), np.arange(6) * 5 + 3
    found = diagnose(ratio * rotate_pairs(x, p[:, None] * _inv(16)), x, spec, p)
    assert found is not None
    assert found.cause == "attention_factor"
    assert found.message.startswith(f"the result is {ratio / 2:g} x the oracle: ")
    assert f"attention factor 2 {told}" in found.message


def test_a_result_slightly_scaled_without_an_attention_factor_is_a_different_factor():
    """Catches: a spec without attention factor (factor 1) put through the "not applied" or
    "applied twice" checks: 1.0005 x the oracle is then told as one of them."""
    x, p = _x((6, 16), 90), np.arange(6) * 5 + 3
    found = diagnose(1.0005 * rotate_pairs(x, p[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "attention_factor"
    assert found.message.startswith(
        "the result is 1.0005 x the oracle, whose attention factor is 1: cos/sin were scaled "
        "by a different factor"
    )


@pytest.mark.parametrize(("share", "scaled"), [(2.2, True), (3.0, False)])
def test_a_scaled_result_is_judged_by_a_tolerance_scaled_as_much(share, scaled):
    """Catches: the tolerance of a result 1.2 x the oracle divided by the ratio instead of
    multiplied (an error of 2.2 tolerances, within 2 x 1.2, is then refused), or multiplied
    by at least 2 (an error of 3 tolerances, beyond 2 x 1.2, then passes). The float64
    tolerance per unit norm is 2 eps (angle + 1) + 4 eps, eps = 2**-52, for the fastest
    pair's angle p."""
    eps = 2.0**-52
    x, p = _x((6, 16), 91), np.arange(6) * 5 + 3
    y = 1.2 * rotate_pairs(x, p[:, None] * _inv(16))
    norm = math.hypot(x[5, 0], x[5, 8])
    y[5, 0] += share * norm * (2 * eps * (p[5] + 1) + 4 * eps)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert (found.cause == "attention_factor") is scaled


def test_a_table_clamped_one_below_the_first_failing_position_is_found():
    """Catches: the table length equal to the first failing position (20, clamped to 19)
    left out of the clamped lengths tried."""
    x, p = _x((4, 16), 92), np.array([1, 5, 20, 23])
    found = diagnose(rotate_pairs(x, np.minimum(p, 19)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_range"
    assert found.message.startswith(
        "positions up to 5 are correct; larger positions are clamped to 19 "
    )


def test_the_table_row_of_one_pair_is_found():
    """Catches: the table row not searched for a spec with a single pair (the table is then
    only tried at the first failing position's length)."""
    x, p = _x((4, 2), 84), np.array([1, 37, 300, 301])
    found = diagnose(
        rotate_pairs(x, np.minimum(p, 37)[:, None] * 0.01), x, rr.RopeSpec(2, freqs=[0.01]), p
    )
    assert found is not None
    assert found.message.startswith(
        "positions up to 37 are correct; larger positions are clamped to 37 "
    )


def test_the_table_row_is_read_from_the_rows_with_a_pair_there():
    """Catches: a pair of zeros at the first failing position counted when reading which
    table row it carries: its angle, 0, halves the median angle of the fastest pair (3 rad
    at the clamped row 3), which moves the row found."""
    x, p = _x((5, 16), 93), np.array([1, 2, 20, 20, 23])
    x[3, [0, 8]] = 0.0
    found = diagnose(rotate_pairs(x, np.minimum(p, 3)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith(
        "positions up to 2 are correct; larger positions are clamped to 3 "
    )


@pytest.mark.parametrize(
    ("table", "told"),
    [
        (lambda p: p % 10, "wrap around a table of 20 positions ("),
        (lambda p: np.minimum(p, 9), None),
    ],
    ids=["wrapped", "clamped"],
)
def test_no_table_is_shorter_than_the_last_correct_position(table, told):
    """Catches: a table of 10 positions offered where position 10 counts as correct (its row
    of x is zero, so it cannot tell): a table of 10 wraps or clamps position 10 itself. A
    table of 20 fits every row; clamped to 9, nothing longer fits."""
    x, p = _x((4, 16), 94), np.array([1, 10, 25, 26])
    x[1] = 0.0
    found = diagnose(rotate_pairs(x, table(p)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    if told is None:
        assert found.cause != "position_range"
    else:
        assert found.message.startswith(f"positions up to 10 are correct; larger positions {told}")


def test_a_result_of_near_zeros_is_no_attention_factor_of_zero():
    """Catches: a scale of 0 let through the scale check: a result of the smallest
    subnormal where the oracle is below 0.5 (each product with the oracle rounds to 0) and
    0 elsewhere is no attention factor."""
    x, p = _x((6, 16), 95), np.arange(6) * 5 + 3
    want = rotate_pairs(x, p[:, None] * _inv(16))
    y = np.where(np.abs(want) < 0.5, 5e-324, 0.0)
    assert float(np.sum(y * want)) == 0.0
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "attention_factor"


@pytest.mark.parametrize("past", [0, 1], ids=["at-the-limit", "past-it"])
def test_rounded_positions_are_blamed_only_where_the_model_alone_checks(past: int) -> None:
    """Catches: position_dtype blamed for a row that the float32 model alone cannot check
    (past its limit), or not blamed for a row at the limit itself, which the model alone
    checks and only the rounded positions make unchecked. The limit is where 2 eps
    (angle + 1) + 4 eps, eps = 2**-23, reaches half a pair at 1 rad per position."""
    eps = 2.0**-23
    limit = math.floor((0.5 - 4 * eps) / (2 * eps) - 1)
    p = np.array([limit + past])
    x = _x((1, 16), 98).astype(np.float32)
    y = rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16)).astype(np.float32)
    found = diagnose(y, x, rr.RopeSpec(16), p, position_dtype="float32")
    assert found is not None
    assert found.cause == "not_checkable"
    if past:
        assert found.message.startswith(
            f"not checkable here: from position {limit + 1} the float32 error model allows "
        )
        assert f"checkable up to position {limit}; check larger" in found.message
    else:
        assert found.message.startswith(
            "not checkable here: with positions rounded to float32 (position_dtype) the error "
            f"model allows |error| of half a pair's norm or more at positions up to {limit}:"
        )


@pytest.mark.parametrize("k", [2**31 - 1, -(2**31 - 1), 2**31, -(2**31)])
def test_a_shift_is_estimated_only_below_2_to_the_31(k: int) -> None:
    """Catches: the documented limit of the shift estimate moved: shifts of magnitude up to
    2**31 - 1 are named, 2**31 (past int32 positions) is not. The one pair turns 1e-10
    rad per position, so 2**31 positions are 0.21 rad."""
    spec = rr.RopeSpec(2, freqs=[1e-10])
    x, p = _x((6, 2), 99), np.arange(6) * 3 + 2
    found = diagnose(rotate_pairs(x, (p + k)[:, None] * 1e-10), x, spec, p)
    assert found is not None
    if abs(k) < 2**31:
        assert found.cause == "offset"
        assert f"shifted by {k:+d}:" in found.message
    else:
        assert found.cause != "offset"


@pytest.mark.parametrize("wraps", [64, 65])
def test_a_table_is_found_wrapped_up_to_64_times_before_the_first_failing_position(
    wraps: int,
) -> None:
    """Catches: the documented limit of 64 wraps moved. The table has 3119 (a prime)
    positions and row 3 is read at the first failing position wraps x 3119 + 3: 65 wraps
    leave only lengths 65, 13 and 5 x 3119 to try (the row one table further on tells them
    apart, the row one position further on tells a clamped table). The slowest pair of
    RopeSpec(8, base=100) turns 100**-0.75 rad per position: about 1020 turns there."""
    n = 3119
    bad = wraps * n + 3
    p = np.array([1, 500, 1000, 1500, 2000, 2500, 3000, bad, bad + 1, bad + n])
    x = _x((p.size, 8), 100)
    found = diagnose(
        rotate_pairs(x, (p % n)[:, None] * _inv(8, 100.0)), x, rr.RopeSpec(8, base=100.0), p
    )
    assert found is not None
    if wraps <= 64:
        assert found.message == (
            f"positions up to 3000 are correct; larger positions wrap around a table of {n} "
            "positions (a cos/sin cache shorter than the positions)."
        )
    else:
        assert found.cause != "position_range"


def test_a_table_row_is_not_searched_4096_turns_of_the_slowest_pair_in() -> None:
    """Catches: the documented limit of the table-row search moved: the first failing
    position 4096.9 turns of the slowest pair in (one turn every 19869.2 positions for
    RopeSpec(16)) is not searched, so a table clamped 0.2 of a turn before it is not found
    (test_a_table_clamped_many_turns_of_the_slowest_pair_in_is_found finds it at 4095.9)."""
    period = 2 * math.pi / 10000 ** (-14 / 16)
    last, bad = round(4096.7 * period), round(4096.9 * period)
    assert int(bad / period) == 4096
    x, p = _x((5, 16), 101), np.array([1, 5, last, bad, bad + 3])
    y = rotate_pairs(x, np.minimum(p, last)[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "position_range"


@pytest.mark.parametrize(
    "grid",
    [
        lambda p: np.stack([p, p, p], axis=-1),
        lambda p: np.stack([p, p // 2, p % 7], axis=-1),
    ],
    ids=["text", "three-axes"],
)
def test_a_multi_axis_table_is_found_from_its_first_axis(
    grid: Callable[[np.ndarray], np.ndarray],
) -> None:
    """Catches: the table row not searched for a multi-axis spec (only a table as long as
    the first failing position was then tried): a table of 10 read at 25 gives row 5 of
    the first axis, whose pairs (0 and 1 of sections (2, 3, 3)) tell it, whatever the other
    axes hold (here positions below the table's length)."""
    p = np.array([1, 3, 5, 25, 26, 38])
    g = grid(p)
    axis = np.repeat(np.arange(3), (2, 3, 3))
    x = _x((p.size, 16), 102)
    y = rotate_pairs(x, (g % 10)[:, axis] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), g)
    assert found is not None
    assert found.message == (
        "positions up to 5 are correct; larger positions wrap around a table of 10 positions "
        "(a cos/sin cache shorter than the positions)."
    )


def test_the_table_row_of_one_pair_is_found_from_an_angle_just_short_of_it() -> None:
    """Catches: the first estimate of the table row floored: with one pair nothing refines
    it, and rows clamped to 37 whose angle reads 2e-15 rad short of 37 x 0.01 (a rounding,
    within the tolerance) are then read as row 36."""
    x, p = _x((4, 2), 103), np.array([1, 37, 300, 301])
    angles = np.minimum(p, 37) * 0.01 - np.where(p > 37, 2e-15, 0.0)
    found = diagnose(rotate_pairs(x, angles[:, None]), x, rr.RopeSpec(2, freqs=[0.01]), p)
    assert found is not None
    assert found.message.startswith(
        "positions up to 37 are correct; larger positions are clamped to 37 "
    )


@pytest.mark.parametrize("seed", [104, 105])
def test_a_table_row_is_read_among_the_rows_a_table_has(seed: int) -> None:
    """Catches: row -1 let into the table-row search. For one pair turning 1 rad per
    position, rows 709 and -1 lie 710 positions apart (113 turns less 6e-5 rad), which
    bfloat16 cannot tell: a result clamped to 709 whose rounding leans towards -1 was then
    read as row -1, which no table has, and the clamp went unnamed (1001 = 7 x 11 x 13
    has no divisor in (500, 1000] to wrap at instead)."""
    assert abs(710 - 113 * 2 * math.pi) < 1e-4
    x, p = _x((5, 2), seed).astype(ml_dtypes.bfloat16), np.array([1, 200, 500, 1000, 1003])
    y = rotate_pairs(x.astype(np.float64), np.minimum(p, 709)[:, None] * 1.0)
    found = diagnose(y.astype(ml_dtypes.bfloat16), x, rr.RopeSpec(2), p)
    assert found is not None
    assert found.message == (
        "positions up to 500 are correct; larger positions are clamped to 709 (a cos/sin "
        "cache shorter than the positions)."
    )


def test_a_table_row_is_offered_where_the_first_failing_rows_lean_to_their_own_angle() -> None:
    """Catches: the first failing position taken as the row its rows carry, which no table
    gives (so no table was tried). For one pair with 50 positions a turn and 3.5 float32
    tolerances (per unit norm 2 eps (angle + 1) + 4 eps, eps = 2**-23, at position 80),
    the row at 80 leans 0.52 of the way from row 30's angle towards its own: it fits 80
    better, yet lies within twice the tolerance of row 30, and the rows past it carry row
    30 exactly: a table clamped to 30."""
    eps, d = 2.0**-23, 1e-5
    for _ in range(5):  # d: 3.5 tolerances at the angle of position 80
        theta = (2 * math.pi + d) / 50
        d = 3.5 * (2 * eps * (80 * theta + 1) + 4 * eps)
    x, p = _x((6, 2), 106).astype(np.float32), np.array([1, 10, 30, 80, 83, 95])
    angles = np.minimum(p, 30) * theta + np.where(p == 80, 0.52 * d, 0.0)
    y = rotate_pairs(x.astype(np.float64), angles[:, None]).astype(np.float32)
    found = diagnose(y, x, rr.RopeSpec(2, freqs=[theta]), p)
    assert found is not None
    assert found.message == (
        "positions up to 30 are correct; larger positions are clamped to 30 (a cos/sin "
        "cache shorter than the positions)."
    )


def test_a_multi_axis_table_row_is_read_off_the_first_axis_pairs_alone() -> None:
    """Catches: the pairs of the other axes read as if they turned with the first: with a
    table of 22, the first failing row (39, 1, 49) carries row 17 on the first axis but rows
    1 and 5 on the others, and a search over every pair misses row 17."""
    g = np.array([[3, 2, 21], [6, 16, 21], [10, 2, 15], [39, 1, 49], [40, 4, 18], [51, 32, 32]])
    axis = np.repeat(np.arange(3), (2, 3, 3))
    x = _x((6, 16), 107)
    y = rotate_pairs(x, (g % 22)[:, axis] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), g)
    assert found is not None
    assert found.message == (
        "positions up to 10 are correct; larger positions wrap around a table of 22 positions "
        "(a cos/sin cache shorter than the positions)."
    )
