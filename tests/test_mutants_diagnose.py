"""Diagnoses where a planted mistake in the testing kit's diagnoses hides.

Every wrong result is built here (the oracle with one ingredient changed, or a rotation
written in NumPy), and every number a message is checked for is worked out here.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from rope_ref.testing._diagnosis.precision import round_to
from rope_ref.testing._diagnosis.shared import ranges, wrap
from tests._independent import rotate_pairs

# -- the helpers the messages and the candidates are built with --------------------------------


def test_round_to_bfloat16_rounds_to_nearest_even_as_ml_dtypes_does():
    """Catches: the bfloat16 rounding's bias, tie bit or shift off (ties not to even, values
    truncated). Values: ties between odd and even neighbours either way, just off a tie, the
    largest finite values, a subnormal."""
    ulp = 2.0**-7
    tie, nudge = 1 + ulp / 2, 2.0**-20
    ties = [tie, 1 + 3 * ulp / 2, -tie, tie + nudge, tie - nudge]
    values = np.array([*ties, 3.0e38, -3.0e38, 1e-40, 255.5, 256.5, 257.0, 0.0, 1.0, -2.75e-3])
    want = values.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.array_equal(round_to(values, "bfloat16"), want)
    assert list(round_to(values[:3], "bfloat16")) == [1.0, 1 + 2 * ulp, -1.0]


def test_round_to_float16_is_numpys_cast():
    values = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 2049.0, 2051.0, -0.1])
    assert list(round_to(values, "float16")) == [1.0, 1 + 2.0**-9, 2048.0, 2052.0, -0.0999755859375]


def test_ranges_names_runs_and_single_indices():
    """Catches: a run closed one early or late, a single index written as a run."""
    assert ranges([0, 1, 2, 3, 7, 9, 10, 11]) == "0-3, 7, 9-11"
    assert ranges([5]) == "5"
    assert ranges([0, 2, 4, 5]) == "0, 2, 4-5"


def test_wrap_brings_angles_into_minus_pi_to_pi():
    """Catches: another period, or the half-open interval's ends swapped."""
    got = wrap(np.array([math.pi, -math.pi, 1.5 * math.pi, -1.5 * math.pi, 7.0, -20.0, 0.25]))
    want = [-math.pi, -math.pi, -0.5 * math.pi, 0.5 * math.pi, 7.0 - 2 * math.pi]
    want += [-20.0 + 6 * math.pi, 0.25]
    assert np.allclose(got, want, rtol=0.0, atol=1e-12)
    assert got[0] == -math.pi


@pytest.mark.parametrize(("shift", "off_by_one"), [(1, True), (-1, True), (2, False)])
def test_a_shifted_offset_is_called_off_by_one_only_for_one(shift, off_by_one):
    """Catches: the "(off by one)" hint given to the other shifts instead."""
    spec = rr.RopeSpec(16)
    x = np.random.default_rng(5).uniform(-1.0, 1.0, (6, 16))
    p = np.arange(6) * 37 + 5
    found = diagnose(rr.apply_rope(x, spec, p + shift), x, spec, p)
    assert found is not None
    assert found.cause == "offset"
    assert f"shifted by {shift:+d}" in found.message
    assert ("(off by one)" in found.message) == off_by_one


@pytest.mark.parametrize("inverse", [False, True])
def test_a_larger_shift_is_estimated_in_either_direction(inverse):
    """Catches: the estimate of the shift read with the wrong sign for the inverse (only
    shifts of one and two are tried without it)."""
    spec = rr.RopeSpec(16)
    x = np.random.default_rng(6).uniform(-1.0, 1.0, (6, 16))
    p = np.arange(6) * 37 + 5
    wrong = rr.apply_rope(x, spec, p + 5, inverse=inverse)
    found = diagnose(wrong, x, spec, p, inverse=inverse)
    assert found is not None
    assert found.cause == "offset"
    assert "shifted by +5:" in found.message


def test_a_table_of_n_positions_wrapped_past_64_turns_of_it_is_found():
    """Catches: wrapped table lengths tried only for up to 63 wraps, and the turns of the
    slowest pair counted with ``2 / pi`` for ``2 pi`` (over the 4096 tried): the first
    failing position, 200003, is 64 x 3125 + 3, 1006 turns of the slowest pair."""
    spec = rr.RopeSpec(8, base=100.0)  # slowest frequency 100**-0.75: 1006 turns at 200003
    p = np.array([0, 500, 1000, 1500, 2000, 2500, 3000, 200003, 203128])
    x = np.random.default_rng(7).uniform(-1.0, 1.0, (p.size, 8))
    found = diagnose(rr.apply_rope(x, spec, p % 3125), x, spec, p)
    assert found is not None
    assert found.cause == "position_range"
    assert "wrap around a table of 3125 positions (" in found.message


def test_every_batch_row_at_row_0s_positions_is_named():
    """Catches: the first row's positions taken as an empty slice (the check then fails)."""
    spec = rr.RopeSpec(16)
    p = np.stack([np.arange(5) + 3, np.arange(5) + 11])
    x = np.random.default_rng(8).uniform(-1.0, 1.0, (2, 5, 16))
    found = diagnose(rr.apply_rope(x, spec, np.broadcast_to(p[:1], p.shape)), x, spec, p)
    assert found is not None
    assert found.cause == "positions"
    assert "positions of row 0" in found.message


def test_an_unknown_multi_axis_mismatch_names_the_failing_rows_positions_per_axis():
    """Catches: a multi-axis grid flattened to one row for the message (which then raises)."""
    spec = rr.RopeSpec(16, sections=(2, 3, 3))
    rng = np.random.default_rng(9)
    p = np.array([[1, 0, 2], [4, 6, 1], [8, 3, 5], [5, 7, 4], [2, 2, 3]])
    x = rng.uniform(-1.0, 1.0, (5, 16))
    wrong = rr.apply_rope(x, spec, p)
    wrong[3] = rng.uniform(-1.0, 1.0, 16)  # one row of noise
    found = diagnose(wrong, x, spec, p)
    assert found is not None
    assert found.cause == "unknown"
    assert "failing rows sit at positions axis 0: 5 to 5, axis 1: 7 to 7, axis 2: 4 to 4" in (
        found.message
    )


def test_a_tiny_scale_in_float16_is_an_attention_factor_despite_subnormal_rounding():
    """Catches: the scale's tolerance shrunk with the ratio: float16 results near 1e-5 are
    subnormal, rounded to steps of 2**-24 however small the ratio."""
    spec = rr.RopeSpec(16)
    p = np.arange(6) * 50
    x = np.random.default_rng(10).uniform(-1.0, 1.0, (6, 16)).astype(np.float16)
    scaled = (rr.apply_rope(x.astype(np.float32), spec, p) * np.float32(1e-5)).astype(np.float16)
    assert np.any(np.abs(scaled) < np.finfo(np.float16).smallest_normal)
    found = diagnose(scaled, x, spec, p)
    assert found is not None
    assert found.cause == "attention_factor"


def test_a_table_clamped_just_below_the_first_failing_position_is_found():
    """Catches: the table row at the first failing position misread, by ``pi`` for ``2 pi``
    (the turns tried then reach only half way) or a product for the division by the
    slowest frequency: row 3124 is 31 turns of the slowest pair, position 3200 17."""
    spec = rr.RopeSpec(8, base=100.0)
    p = np.array([0, 500, 1000, 1500, 2000, 2500, 3000, 3200, 3500])
    x = np.random.default_rng(11).uniform(-1.0, 1.0, (p.size, 8))
    found = diagnose(rr.apply_rope(x, spec, np.minimum(p, 3124)), x, spec, p)
    assert found is not None
    assert found.cause == "position_range"
    assert "larger positions are clamped to 3124 (" in found.message


def test_a_table_row_is_found_for_specs_with_a_zero_frequency():
    """Catches: the table-row search run for a zero frequency (its division by zero then
    drops the whole position-range check); the table length is found without it."""
    spec = rr.RopeSpec(6, freqs=[0.3, 0.05, 0.0])
    p = np.arange(13)
    x = np.random.default_rng(12).uniform(-1.0, 1.0, (p.size, 6))
    found = diagnose(rr.apply_rope(x, spec, p % 10), x, spec, p)
    assert found is not None
    assert found.cause == "position_range"
    assert "wrap around a table of 10 positions (" in found.message


def test_fractional_positions_past_the_last_good_one_are_not_called_a_short_table():
    """Catches: a fractional first failing position truncated to a table length. A cos/sin
    cache has a row per whole position; 10.5 indexes none, so the wrap that explains this
    result (positions taken modulo 10) is not a cache too short."""
    spec = rr.RopeSpec(16)
    p = np.array([0.0, 1.0, 2.0, 3.0, 10.5, 11.5])
    x = np.random.default_rng(13).uniform(-1.0, 1.0, (p.size, 16))
    found = diagnose(rr.apply_rope(x, spec, p % 10), x, spec, p)
    assert found is not None
    assert found.cause != "position_range"


# -- the inverse rotation: every angle read off the result turns the other way ---------------


def _inv(d, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


P = np.array([0, 1, 2, 3, 5, 8, 13, 100, 1000, 4000])


def test_an_inverse_rotation_with_a_table_of_the_other_layout_is_named():
    """Catches: the sign of the inverse dropped from the table-layout candidate (it then
    rotates forwards, and the inverse rotation's mistake goes unnamed)."""
    d = 16
    x = np.random.default_rng(20).uniform(-1.0, 1.0, (2, P.size, d))
    angles = P[:, None] * _inv(d)
    cos, sin = np.repeat(np.cos(angles), 2, -1), np.repeat(np.sin(angles), 2, -1)
    partner = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)  # rotate_half
    y = x * cos - partner * sin  # sin negated: the inverse
    found = diagnose(y, x, rr.RopeSpec(d), P, inverse=True)
    assert found is not None
    assert found.cause == "table_layout"
    assert "built for the 'interleaved' layout" in found.message


def test_an_inverse_rotation_with_another_base_is_fitted():
    """Catches: the frequencies measured off an inverse result with the wrong sign (no base
    can then be fitted: 12345 is not a common one)."""
    d = 32
    x = np.random.default_rng(21).uniform(-1.0, 1.0, (P.size, d))
    y = rotate_pairs(x, -P[:, None] * _inv(d, 12345.0))
    found = diagnose(y, x, rr.RopeSpec(d), P, inverse=True)
    assert found is not None
    assert found.cause == "frequencies"
    assert "follow base 12345 instead of the spec's base 10000" in found.message


def test_an_inverse_rotation_with_another_linear_factor_is_fitted():
    """Catches: the low-position frequencies of an inverse result read with the wrong sign
    (factor 5 is not among the common ones: it must be fitted)."""
    d = 32
    x = np.random.default_rng(22).uniform(-1.0, 1.0, (P.size, d))
    y = rotate_pairs(x, -P[:, None] * _inv(d) / 5.0)
    spec = rr.RopeSpec(d, scaling=rr.scaling.Linear(2.0))
    found = diagnose(y, x, spec, P, inverse=True)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message == (
        "the result follows Linear(factor=5.0), but the spec says Linear(factor=2.0): "
        "the factor is 5, not 2."
    )


def test_an_inverse_rotation_from_a_clamped_table_is_found():
    """Catches: the table row at the first failing position read with the wrong sign for
    the inverse (the clamped length, 3125, is then not found)."""
    spec = rr.RopeSpec(8, base=100.0)
    p = np.array([0, 500, 1000, 1500, 2000, 2500, 3000, 3200, 3500])
    x = np.random.default_rng(23).uniform(-1.0, 1.0, (p.size, 8))
    y = rotate_pairs(x, -np.minimum(p, 3124)[:, None] * _inv(8, 100.0))
    found = diagnose(y, x, spec, p, inverse=True)
    assert found is not None
    assert found.cause == "position_range"
    assert "larger positions are clamped to 3124 (" in found.message


# -- what each message says, with its numbers worked out here ------------------------------


def _x(shape, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def test_a_rotation_over_the_whole_head_for_a_partial_spec_names_both_ranges():
    """Catches: the range tried, or the range named, off by a pair or at the wrong start."""
    x, p = _x((6, 16), 30), np.arange(6) * 7
    y = rotate_pairs(x, p[:, None] * _inv(16))  # all 16 features, where the spec rotates 8
    found = diagnose(y, x, rr.RopeSpec(16, rotary_dim=8), p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message == (
        "the result rotates features [0, 16) (rotary_dim=16, rotary_start=0), but the spec "
        "rotates [0, 8) (rotary_dim=8, rotary_start=0); partial rotary was ignored or misplaced."
    )


def test_changed_pass_through_features_are_listed_first_eight():
    """Catches: the pass-through check skipped or inverted, or the list cut elsewhere."""
    x, p = _x((6, 32), 31), np.arange(6) * 7
    y = x.copy()
    y[:, :8] = rotate_pairs(x[:, :8], p[:, None] * _inv(8))
    y[:, 8:] *= 2.0  # the pass-through features doubled
    found = diagnose(y, x, rr.RopeSpec(32, rotary_dim=8), p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message.startswith(
        "features [8, 9, 10, 11, 12, 13, 14, 15] changed although the spec rotates only [0, 8)"
    )


def test_a_result_equal_to_x_everywhere_says_no_row_was_rotated():
    """Catches: the all-identity case told as a cut-off after some correct rows."""
    x, p = _x((4, 16), 32), np.array([5, 6, 7, 9])
    found = diagnose(x.copy(), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "identity"
    assert found.message.startswith(
        "no row was rotated: the result equals x (identity) at positions 5 and up;"
    )


def test_non_finite_and_zeros_count_their_elements():
    spec, x, p = rr.RopeSpec(16), _x((4, 16), 33), np.arange(4) * 3 + 1
    y = rotate_pairs(x, p[:, None] * _inv(16))
    bad = y.copy()
    bad[1, 2], bad[3, 0] = np.nan, -np.inf
    found = diagnose(bad, x, spec, p)
    assert found is not None
    assert found.cause == "non-finite"
    assert found.message.startswith("2 element(s) of the result are NaN or infinite")
    zeroed = y.copy()
    zeroed[2] = 0.0
    found = diagnose(zeroed, x, spec, p)
    assert found is not None
    assert found.cause == "zeros"
    assert "(16 of them)" in found.message


def test_an_unexplained_mismatch_names_the_failing_rows_and_pairs():
    """Catches: the failing and passing rows swapped or merged, the pairs not listed."""
    x, p = _x((6, 16), 34), np.arange(6) * 10
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[4:, 3] += 0.3  # pair 3 of the rows at positions 40 and 50 corrupted
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message == (
        "no single known cause explains the mismatch; failing rows sit at positions 40 to 50; "
        "passing rows at 0 to 30; only pairs 3 (of 8) differ."
    )


def _mrope(x, grid, sections, base=10000.0):
    """Chunked M-RoPE written out: pair j turns with the axis whose section holds it."""
    d = x.shape[-1]
    axis = np.repeat(np.arange(len(sections)), sections)
    return rotate_pairs(x, grid[:, axis] * _inv(d, base))


GRID = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [12, 8, 11], [3, 3, 6]])


def test_multi_axis_positions_read_in_another_axis_order_are_named():
    x = _x((GRID.shape[0], 16), 35)
    y = _mrope(x, GRID[:, [1, 0, 2]], (2, 3, 3))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message.startswith("the position axes are read in the order [1, 0, 2] ")


@pytest.mark.parametrize("axis", [0, 2])
def test_multi_axis_positions_collapsed_to_one_axis_name_that_axis(axis):
    x = _x((GRID.shape[0], 16), 36)
    y = rotate_pairs(x, GRID[:, axis : axis + 1] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message.startswith(f"the result is 1-D RoPE at the positions of axis {axis} ")


def _bf16(values):
    return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize(
    ("angles", "what"),
    [
        (lambda p, t: _bf16(p * t), "the angles were rounded to bfloat16"),
        (lambda p, t: _bf16(_bf16(p) * _bf16(t)), "positions * inv_freq was computed in bfloat16"),
        (lambda p, t: p * _bf16(t), "the inverse frequencies were held in bfloat16"),
    ],
)
def test_angles_built_in_bfloat16_say_which_step_was_rounded(angles, what):
    """Catches: a rounding candidate dropped, or its message given to another."""
    x, p = _x((12, 16), 37), np.arange(0, 3000, 250)[:, None]
    y = rotate_pairs(x, angles(p.astype(np.float64), _inv(16)))
    found = diagnose(y, x, rr.RopeSpec(16), p[:, 0])
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(what + " (under autocast")


def test_an_exponent_stepping_by_one_over_d_is_named():
    x, p = _x((6, 16), 38), np.arange(6) * 3
    y = rotate_pairs(x, p[:, None] * 10000.0 ** (-np.arange(8) / 16))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "frequencies"
    assert found.message.startswith("theta_j = base^(-j/16) instead of base^(-2j/16)")


def test_one_pair_at_another_frequency_names_that_pair_and_both_frequencies():
    """Catches: the pair with the largest relative error misread, or the frequencies
    measured off the wrong rows, or claimed from fewer than two positions. Every angle
    stays below pi (positions 0 to 2), where the frequencies can be read off a single
    rotation; one position alone fits any frequencies, so it names none."""
    x, p = _x((3, 16), 39), np.arange(3)
    theta = _inv(16)
    wrong = theta.copy()
    wrong[2] *= 1.5  # 0.1 rad per position becomes 0.15
    found = diagnose(rotate_pairs(x, p[:, None] * wrong), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "frequencies"
    assert "pair 2 turns by 0.15 rad per position, the spec says 0.1 " in found.message
    found = diagnose(rotate_pairs(x[1:2], p[1:2, None] * wrong), x[1:2], rr.RopeSpec(16), p[1:2])
    assert found is not None
    assert found.cause != "frequencies"


def test_multi_axis_result_with_a_common_split_of_the_pairs_names_it():
    """Catches: the common section splits not tried (they are not a permutation of the
    spec's)."""
    x = _x((GRID.shape[0], 16), 40)
    y = _mrope(x, GRID, (2, 3, 3))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(4, 2, 2)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message == "the sections are [2, 3, 3], not the spec's [4, 2, 2]."


def test_dynamic_ntk_with_another_context_length_is_named():
    """Catches: the context lengths of a dynamic NTK rule not tried. The result is written
    with HF's dynamic base at L = max(position) + 1 = 6001 and max_position 2048. At one
    length that is NTK-aware scaling by a factor the slowest pair gives away; with that
    pair zero in `x` no factor can be fitted, and the dynamic rule's lengths are tried."""
    d, p = 16, np.array([0, 1, 2, 3, 40, 700, 3000, 6000])
    x = _x((p.size, d), 41)
    x[:, [7, 15]] = 0.0
    ratio = 2.0 * 6001 / 2048 - 1.0
    y = rotate_pairs(x, p[:, None] * _inv(d, 10000.0 * ratio ** (d / (d - 2))))
    spec = rr.RopeSpec(d, scaling=rr.scaling.DynamicNTK(2.0, max_position=4096))
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message == (
        "the result follows DynamicNTK(factor=2.0, max_position=2048), but the spec says "
        "DynamicNTK(factor=2.0, max_position=4096): the original (pre-training) context "
        "length differs."
    )


def test_an_inverted_yarn_ramp_names_the_fast_and_the_slow_pairs():
    """Catches: the fast and slow pairs split at another share of the ramp, or swapped. The
    ramp is YaRN's as written in the paper: d = 32, factor 4, original length 256 put the
    ramp's ends at dims 0 and 7, so pairs 0-3 keep more than half their frequency."""
    d, factor, original, base = 32, 4.0, 256, 10000.0

    def dim(rotations):
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(dim(32.0)), 0), min(math.ceil(dim(1.0)), d - 1)
    assert (low, high) == (0, 7)
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0.0, 1.0)
    inv = _inv(d, base)
    inverted = inv / factor * (1 - ramp) + inv * ramp  # fast pairs slowed, slow ones kept
    p = np.array([0, 1, 2, 3, 7, 50, 300, 1000])
    x = _x((p.size, d), 42)
    y = rotate_pairs(x, p[:, None] * inverted) * (0.1 * math.log(factor) + 1.0)
    spec = rr.RopeSpec(d, scaling=rr.scaling.YaRN(factor, original_max_position=original))
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith(
        "YaRN's ramp is inverted: the result slows the fast pairs 0-3 by the factor 4 and "
        "leaves the slow pairs 4-15 at their original frequency; the rule keeps fast pairs "
        "(wavelength below original_max_position / beta_fast) and divides slow pairs by 4."
    )


def test_positions_past_what_float32_can_check_name_the_first_and_the_limit():
    """Catches: the first unchecked position or the checkable limit misreported. The limit
    is where float32's tolerance per unit norm, 2 eps (angle + 1) + 4 eps with eps = 2**-23,
    reaches half a pair, for the fastest pair's 1 rad per position."""
    eps = 2.0**-23
    limit = math.floor((0.5 - 4 * eps) / (2 * eps) - 1)
    spec, p = rr.RopeSpec(16), np.array([5, 2**23 + 1])
    x = _x((2, 16), 43).astype(np.float32)
    y = rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16)).astype(np.float32)
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "not_checkable"
    assert found.message.startswith("not checkable here: from position 8388609 the float32 ")
    assert f"this spec is checkable up to position {limit}; check larger" in found.message
    p = np.array([5, 1_500_000])
    y = rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16)).astype(np.float32)
    assert diagnose(y, x, spec, p) is None  # checkable, and right
    found = diagnose(y, x, spec, p, position_dtype="float32")
    assert found is not None
    assert found.cause == "not_checkable"
    assert found.message.startswith(
        "not checkable here: with positions rounded to float32 (position_dtype) the error "
        "model allows |error| of half a pair's norm or more at positions up to 1500000:"
    )


def test_a_float32_grid_is_named_with_how_far_its_positions_are_off():
    """Catches: the size of a float32 grid's error misstated: 2 eps (max |p| + 1) with
    eps = 2**-23 and max |p| = 1 is 4.8e-07."""
    n = 15
    grid32 = np.arange(n, dtype=np.float32) * np.float32(2.0 / (n - 1)) - np.float32(1.0)
    exact = np.linspace(-1.0, 1.0, n)
    assert np.any(grid32 != exact)  # float32 steps off the meant grid
    freqs = np.linspace(1.0, 64.0, 8) * np.pi
    x = _x((n, 16), 44)
    y = rotate_pairs(x, grid32.astype(np.float64)[:, None] * freqs)
    found = diagnose(y, x, rr.RopeSpec(16, freqs=freqs), exact)
    assert found is not None
    assert found.cause == "position_precision"
    assert f"(up to about {2 * 2.0**-23 * 2:.2g} off at every position" in found.message


def test_an_inverse_read_in_half_order_names_a_wrong_pair_by_its_index():
    """Catches: the layouts of an inverse taken the forward way round (it reads the
    written layout and writes the read one): the failing pair is then misnamed. The target
    undoes an interleaved-in, half-out rotation: it reads [a | b], turns pair j back by
    its angle, and writes pairs (2j, 2j + 1); pair 5 turns at 0.5 rad per position."""
    d, p = 64, np.arange(16) * 37.0
    x = _x((2, 16, d), 45)
    inv = _inv(d)
    inv[5] = 0.5
    angle = p[:, None] * inv
    a, b = x[..., : d // 2], x[..., d // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = np.stack([a * cos + b * sin, b * cos - a * sin], axis=-1).reshape(x.shape)
    spec = rr.RopeSpec(d, layout="interleaved", output_layout="half")
    found = diagnose(y, x, spec, p, inverse=True)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith("pairs 0-4, 6-31 match the given positions and pairs 5 do")


def test_a_right_inverse_read_in_half_order_passes_in_float64():
    """Catches: the tolerance of an inverse result built from pairs in the forward written
    layout (pairing features that the inverse never pairs): a right result, rounded as
    float64 rounds, then fails where a mis-paired norm is small."""
    d, p = 64, np.arange(16) * 37.0
    x = _x((2, 16, d), 45)
    angle = p[:, None] * _inv(d)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = np.stack([a * cos + b * sin, b * cos - a * sin], axis=-1).reshape(x.shape)
    spec = rr.RopeSpec(d, layout="interleaved", output_layout="half")
    assert diagnose(y, x, spec, p, inverse=True) is None


# -- tables of the other layout, inverted YaRN ramps -------------------------------------------


def _other_table(x, angles, table, rotation):
    """x cos + partner(x) sin with full-width tables built for `table`, rotated as `rotation`."""
    d = x.shape[-1]
    if table == "half":
        cos, sin = (np.concatenate([t, t], -1) for t in (np.cos(angles), np.sin(angles)))
    else:
        cos, sin = np.repeat(np.cos(angles), 2, -1), np.repeat(np.sin(angles), 2, -1)
    if rotation == "half":
        partner = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    else:
        partner = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    return x * cos + partner * sin


def test_a_table_of_the_other_layout_is_named_for_two_pairs():
    """Catches: the table-layout check skipped for two pairs (the fewest it can tell)."""
    x, p = _x((P.size, 4), 46), P
    y = _other_table(x, p[:, None] * _inv(4), "interleaved", "half")
    found = diagnose(y, x, rr.RopeSpec(4), p)
    assert found is not None
    assert found.cause == "table_layout"


def test_a_multi_axis_table_of_the_other_layout_is_named():
    """Catches: M-RoPE left out of the table-layout check (the result was `unknown`): a
    chunked M-RoPE cos/sin table built as repeat_interleave and rotated with rotate_half."""
    x = _x((GRID.shape[0], 16), 47)
    axis = np.repeat(np.arange(3), (2, 3, 3))
    y = _other_table(x, GRID[:, axis] * _inv(16), "interleaved", "half")
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "table_layout"
    assert "built for the 'interleaved' layout" in found.message


def test_a_linear_result_under_a_yarn_factor_below_one_is_not_an_inverted_ramp():
    """Catches: the ramp of a YaRN rule with factor below 1 read as "every pair kept" (its
    span plain - plain / factor is negative): the inverted-ramp candidate is then Linear
    scaling, and a Linear result was called an inverted ramp. The attention factor is 1
    for a factor of at most 1 (HF's get_mscale)."""
    d, p = 32, np.array([0, 1, 2, 3, 7, 50, 300, 1000])
    x = _x((p.size, d), 48)
    y = rotate_pairs(x, p[:, None] * _inv(d) / 0.5)
    spec = rr.RopeSpec(d, scaling=rr.scaling.YaRN(0.5, original_max_position=256))
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith("the result follows Linear(factor=0.5), but the spec says")
    assert found.message.endswith(": Linear used where YaRN belongs.")


def test_a_pair_in_the_middle_of_an_inverted_ramp_is_told_with_the_slow_ones():
    """Catches: a pair that keeps exactly half its frequency named twice (fast and slow) or
    not at all. d = 16, original length 1024, factor 2: the ramp runs from dim 1 to 5, so
    pair 3 sits at its middle; fast pairs keep more than half."""
    d, factor, original, base = 16, 2.0, 1024, 10000.0

    def dim(rotations):
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = math.floor(dim(32.0)), math.ceil(dim(1.0))
    assert (low, high) == (1, 5)
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0.0, 1.0)
    assert ramp[3] == 0.5
    inv = _inv(d, base)
    inverted = inv / factor * (1 - ramp) + inv * ramp
    p = np.array([0, 1, 2, 3, 7, 50, 300, 1000, 3000])
    x = _x((p.size, d), 49)
    y = rotate_pairs(x, p[:, None] * inverted) * (0.1 * math.log(factor) + 1.0)
    spec = rr.RopeSpec(d, scaling=rr.scaling.YaRN(factor, original_max_position=original))
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith(
        "YaRN's ramp is inverted: the result slows the fast pairs 0-2 by the factor 2 and "
        "leaves the slow pairs 3-7 at their original frequency;"
    )


# -- how close an alternative must come: twice its own error model --------------------------


@pytest.mark.parametrize(("share", "named"), [(1.5, True), (2.5, False)])
def test_an_alternative_explains_a_result_within_twice_its_error_model(share, named):
    """Catches: the slack of `explains` changed from 2. The result is the rotation at
    positions p + 1 (float64), with one element moved by `share` times the documented
    float64 bound at those positions, |pair| (2 eps (|angle| + 1) + 4 eps), where the row's
    largest angle is p + 1 (the first pair turns 1 rad per position)."""
    eps = 2.0**-52
    x, p = _x((6, 16), 50), np.arange(6) * 5 + 3
    y = rotate_pairs(x, (p + 1)[:, None] * _inv(16))
    row, feature = 5, 2
    norm = math.hypot(x[row, feature], x[row, feature + 8])
    y[row, feature] += share * norm * (2 * eps * (p[row] + 1 + 1) + 4 * eps)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert (found.cause == "offset") == named


@pytest.mark.parametrize(
    ("used", "told"),
    [(10000.0, 1000.0), (500000.0, 1e4), (1e6, 1e4), (1000.0, 1e4), (100000.0, 1e4)],
)
def test_each_common_base_is_tried_where_no_base_can_be_fitted(used, told):
    """Catches: a common base (rope_theta of 10^4, 5 x 10^5, 10^6, 10^3 or 10^5) mistyped.
    Only positions of hundreds and more are given: every pair has turned past pi, so the
    frequencies cannot be read off the result and only the common bases can name it."""
    x, p = _x((4, 16), 51), np.array([0, 700, 1500, 4000])
    y = rotate_pairs(x, p[:, None] * _inv(16, used))
    found = diagnose(y, x, rr.RopeSpec(16, base=told), p)
    assert found is not None
    assert found.cause == "frequencies"
    assert f"follow base {used:.6g} instead of the spec's base {told:.6g} " in found.message


@pytest.mark.parametrize(
    ("name", "limit", "p"),
    [("bfloat16", 256, [1, 2, 255, 257, 259, 769]), ("float16", 2048, [1, 2, 2047, 2049, 6145])],
)
def test_positions_held_in_16_bits_name_where_the_format_stops_being_exact(name, limit, p):
    """Catches: the limit of exact integers misstated (2**8 for bfloat16, 2**11 for float16)."""
    p = np.array(p)
    held = p.astype(np.float32).astype(getattr(ml_dtypes, name, np.float16)).astype(np.float64)
    assert np.any(held != p)
    x = _x((p.size, 16), 52)
    found = diagnose(rotate_pairs(x, held[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        f"positions were held in {name}, which is exact only up to {limit}:"
    )


def test_a_default_base_where_its_square_root_was_told_is_a_base_mistake():
    """Catches: the order of the doubled-exponent and common-base candidates, which give the
    same frequencies when the spec's base squared is a common base: told base 100, a
    result at base 10**4 is the default base; told 10**4, a result at 10**8 is the exponent."""
    x, p = _x((8, 16), 53), np.arange(8) * 3
    found = diagnose(rotate_pairs(x, p[:, None] * _inv(16, 1e4)), x, rr.RopeSpec(16, base=100.0), p)
    assert found is not None
    assert found.message == (
        "the frequencies follow base 10000 instead of the spec's base 100 (rope_theta / base "
        "not passed through)."
    )
    found = diagnose(rotate_pairs(x, p[:, None] * _inv(16, 1e8)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith("theta_j = base^(-2j/8) instead of base^(-2j/16)")


def test_float32_angles_and_bfloat16_tables_are_told_apart_in_the_message():
    """Catches: the precision messages' dtypes or advice swapped: float32 angles (positions
    times inverse frequencies in float32) for float64 data, and cos/sin rounded to bfloat16
    for float32 data at small angles: a table rounded once, not bfloat16 angles (which the
    error's size alone would also fit, 2**-7 x |angle|, but not element by element)."""
    d, p = 32, np.arange(0, 50000, 4999)
    x = _x((p.size, d), 54)
    angles32 = (p.astype(np.float32)[:, None] * _inv(d).astype(np.float32)).astype(np.float64)
    found = diagnose(rotate_pairs(x, angles32), x, rr.RopeSpec(d), p)
    assert found is not None
    assert found.cause == "precision"
    assert found.message == (
        "the errors grow with the angle and fit angles computed in float32 (about 1.2e-07 x "
        "|angle| rad): build positions * inv_freq in float64 or better."
    )
    p, x32 = np.arange(6), _x((6, 16), 55).astype(np.float32)
    angles = p[:, None] * _inv(16)
    cos, sin = (_bf16(t) for t in (np.cos(angles), np.sin(angles)))
    a, b = x32[:, :8].astype(np.float64), x32[:, 8:].astype(np.float64)
    y = np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(np.float32)
    found = diagnose(y, x32, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        "the cos/sin table was rounded once to bfloat16 (a bfloat16 cache), and the rotation "
        "itself done in float32: keep the cos/sin cache in float32"
    )


# A zero first pair in `x` stays zero: the first changed feature is then past the start.
@pytest.mark.parametrize(
    ("spec", "start", "width", "zero", "want"),
    [
        (
            rr.RopeSpec(16, rotary_dim=8, rotary_start=4),
            0,
            8,
            (),
            "[4, 12) (rotary_dim=8, rotary_start=4)",
        ),
        (rr.RopeSpec(16, rotary_dim=8), 2, 8, (), "[0, 8) (rotary_dim=8, rotary_start=0)"),
        (
            rr.RopeSpec(16, rotary_dim=6, rotary_start=2),
            2,
            10,
            (),
            "[2, 8) (rotary_dim=6, rotary_start=2)",
        ),
        (
            rr.RopeSpec(16, rotary_dim=6, rotary_start=2),
            2,
            10,
            (2, 7),
            "[2, 8) (rotary_dim=6, rotary_start=2)",
        ),
        (
            rr.RopeSpec(16, rotary_dim=8, rotary_start=4),
            0,
            8,
            (0, 4),
            "[4, 12) (rotary_dim=8, rotary_start=4)",
        ),
    ],
)
def test_a_rotated_range_at_another_start_or_width_is_named(spec, start, width, zero, want):
    """Catches: the starts tried (the first changed feature, the spec's start, 0) or the
    widths tried (from the changed span rounded up to whole pairs) cut short."""
    x, p = _x((6, 16), 56), np.arange(6) * 7 + 1
    x[:, list(zero)] = 0.0
    y = x.copy()
    y[:, start : start + width] = rotate_pairs(
        x[:, start : start + width], p[:, None] * _inv(width)
    )
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message == (
        f"the result rotates features [{start}, {start + width}) (rotary_dim={width}, "
        f"rotary_start={start}), but the spec rotates {want}; partial rotary was ignored or "
        "misplaced."
    )


def test_rows_near_x_but_not_equal_to_it_are_not_called_identity():
    """Catches: the identity test of a row loosened (x within more than the tolerance): rows
    past position 20 that are x plus a small disturbance were not left unrotated."""
    x, p = _x((8, 16), 57), np.array([0, 5, 10, 20, 30, 40, 50, 60])
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[4:] = x[4:] + 0.05 * _x((4, 16), 58)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause != "identity"
    y[4:] = x[4:]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "identity"
    assert "positions up to 20 are rotated correctly, but from 30 on" in found.message


def _llama3_freqs(inv, factor, original, low=1.0, high=4.0):
    """Llama 3.1's inverse frequencies as transformers writes them (rope_type "llama3")."""
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return np.where(medium, smoothed, scaled)


def test_a_rule_the_spec_lacks_is_found_at_the_shorter_common_context_length():
    """Catches: the context lengths tried without a rule in the spec (8192, then 4096)."""
    d, p = 32, np.array([0, 1, 2, 3, 5, 9, 40, 300, 2000, 9000])
    x = _x((p.size, d), 59)
    y = rotate_pairs(x, p[:, None] * _llama3_freqs(_inv(d), 8.0, 4096))
    found = diagnose(y, x, rr.RopeSpec(d), p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith(
        "the result follows Llama3(factor=8.0, original_max_position=4096, "
    )
    assert found.message.endswith(
        "but the spec says no scaling rule: a scaling rule was applied that the spec does not have."
    )
