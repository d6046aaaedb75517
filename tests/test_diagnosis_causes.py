"""The causes a diagnosis names: offsets and shifts, short or clamped tables, inverse
rotations with another base, factor or layout, precision steps, scaling rules at other
lengths, identity results and unexplained mismatches.

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
from tests._helpers import SPARSE_POSITIONS as P
from tests._helpers import inv_freq64 as _inv
from tests._helpers import uniform as _x
from tests._independent import rotate_pairs


def _bf16(v):
    return (
        np.asarray(v, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    )


def _f16(v):
    return np.asarray(v, np.float64).astype(np.float16).astype(np.float64)


def test_bfloat16_angles_under_an_attention_factor_are_named_precision():
    """Catches: the candidate rotations by rounded angles built with cos or sin divided by
    the attention factor instead of multiplied (LongRoPE with unit factors and an explicit
    attention factor 1.5: plain frequencies, cos and sin times 1.5)."""
    x, p = _x((12, 16), 1), np.arange(0, 6000, 500) + 3.0
    rule = rr.scaling.LongRoPE(
        [1.0] * 8, [1.0] * 8, original_max_position=8192, attention_factor=1.5
    )
    y = rotate_pairs(x, _bf16(p[:, None] * _inv(16))) * 1.5
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rule), p)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith("the angles were rounded to bfloat16 (under autocast")


@pytest.mark.parametrize(("share", "name"), [(0.9, "float32"), (1.5, "bfloat16")])
def test_a_grid_off_by_more_than_float32_allows_is_not_a_float32_grid(share, name):
    """Catches: the float32 grid's allowance taken twice (slack 2): positions off by 1.5
    times 2 eps (max |p| + 1), alternately up and down, are then called a float32 grid
    (the next dtype tried, bfloat16, is the one whose allowance holds them)."""
    x, p = _x((12, 16), 2), np.arange(12) * 0.75 + 0.5
    delta = share * 2.0 * 2.0**-23 * (p.max() + 1.0) * np.where(np.arange(12) % 2, 1.0, -1.0)
    found = diagnose(rotate_pairs(x, (p + delta)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_precision"
    assert found.message.startswith(f"the errors fit positions rounded to {name} by")


@pytest.mark.parametrize(
    ("rounded", "name", "exact"), [(_f16, "float16", 2**11), (_bf16, "bfloat16", 2**8)]
)
def test_positions_held_in_a_half_precision_name_where_it_stops_being_exact(rounded, name, exact):
    """Catches: the largest exact integer of float16 (2**11) or bfloat16 (2**8) misstated."""
    x, p = _x((12, 16), 3), np.arange(0, 6000, 500) + 3.0
    found = diagnose(rotate_pairs(x, rounded(p)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        f"positions were held in {name}, which is exact only up to {exact}:"
    )


@pytest.mark.parametrize(("shape", "seq_axis"), [((12, 16), -2), ((2, 12, 16), 1)])
def test_an_arange_in_bfloat16_plus_an_offset_is_named(shape, seq_axis):
    """Catches: the offset of ``arange(n, dtype=bfloat16) + offset`` (rounded on its own,
    then the sum rounded again) read along another axis than the sequence's, or not at all
    for 2-D inputs. From 1001, bfloat16 steps by 4 and ties go to even: 1001 + 2 gives
    round(1000 + 2) = 1000 this way, round(1003) = 1004 rounded once."""
    p = 1001.0 + np.arange(12)
    twice = _bf16(_bf16(1001.0) + _bf16(p - 1001.0))
    assert not np.array_equal(twice, _bf16(p))
    x = _x(shape, 4)
    y = rotate_pairs(x, twice[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p, seq_axis=seq_axis)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        "positions were held in bfloat16, which is exact only up to 256:"
    )


def _angles_off(pmax, share, eps, **kwargs):
    """The rotation at positions 0..pmax with every angle off by ``share * eps`` of itself,
    up or down at random (no frequency, scale or rounding rule explains it)."""
    rng = np.random.default_rng(16)
    p = np.arange(pmax + 1.0)
    x = rng.uniform(-1.0, 1.0, (p.size, 16))
    angles = p[:, None] * _inv(16)
    angles = angles * (1.0 + share * eps * rng.choice([-1.0, 1.0], angles.shape))
    return diagnose(rotate_pairs(x, angles), x, rr.RopeSpec(16), p, **kwargs)


BF16_BOUND = "fit angles computed in bfloat16 (about 0.0078 x |angle| rad): build positions * "
BF16_BOUND += "inv_freq in float32 or better."


@pytest.mark.parametrize("stated", [None, "float32"])
def test_angles_off_by_bfloat16_rounding_below_15_rad_are_named(stated):
    """Catches: the bfloat16 angle model judged uninformative below its bound, where its
    allowance 2 eps (|angle| + 1) = 2 * 2**-7 * (14 + 1) stays under 0.25 rad; the search
    stopped at a dtype the caller stated for the angles (float32) instead of going on to
    coarser ones; float64 advised where float32 is enough."""
    found = _angles_off(14, 0.5, 2.0**-7, angle_dtype=stated)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.endswith(BF16_BOUND)


def test_angles_off_by_bfloat16_rounding_at_15_rad_are_not_named():
    """Catches: the bfloat16 angle model taken as informative at or past its bound: at the
    largest angle 15 its allowance 2 * 2**-7 * 16 is 0.25 rad, which excuses too much."""
    found = _angles_off(15, 0.5, 2.0**-7)
    assert found is not None
    assert "bfloat16" not in found.message, found


@pytest.mark.parametrize(("share", "name"), [(2.0, "float32"), (3.0, "bfloat16")])
def test_angles_are_held_to_the_float32_model_itself(share, name):
    """Catches: the float32 angle model's allowance taken twice: angles off by three
    float32 steps of themselves are then called float32 angles."""
    found = _angles_off(14, share, 2.0**-23)
    assert found is not None
    assert found.cause == "precision"
    assert f"fit angles computed in {name} " in found.message


def _float32_result(seed, off):
    """A float32 rotation at positions 0..1100 written with `off` applied to its values."""
    rng = np.random.default_rng(seed)
    p = np.arange(0.0, 1200.0, 100.0)
    x = rng.uniform(-1.0, 1.0, (p.size, 16)).astype(np.float32)
    y = off(rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16)), rng)
    return diagnose(y.astype(np.float32), x, rr.RopeSpec(16), p)


def test_a_float32_result_rounded_to_bfloat16_is_named():
    """Catches: the search for cos/sin (or the rotation) in a dtype coarser than the result
    skipped, or held to no allowance at all. Angles up to 1100 rad leave no angle model
    informative; only the value model of bfloat16 holds a result rounded to bfloat16."""
    found = _float32_result(17, lambda y, rng: _bf16(y))
    assert found is not None
    assert found.cause == "precision"
    assert found.message == (
        "the errors are of the size of bfloat16 rounding although the result is float32: "
        "cos/sin (or the rotation) were computed in bfloat16."
    )


def test_a_float32_result_off_by_six_bfloat16_steps_is_not_named():
    """Catches: the bfloat16 value model's allowance taken twice: values off by 6 bfloat16
    steps of themselves (up or down at random) are past it, not within."""
    found = _float32_result(
        17, lambda y, rng: y * (1 + 6 * 2.0**-7 * rng.choice([-1.0, 1.0], y.shape))
    )
    assert found is not None
    assert found.cause == "unknown"


GRID = np.stack([np.arange(0, 6000, 500) + 3.0, np.arange(12.0) * 7, np.arange(12.0) * 3], axis=-1)


def test_multi_axis_positions_held_in_bfloat16_are_named():
    """Catches: M-RoPE left out of the rounded-positions check (the result was `unknown`).
    Chunked sections (2, 3, 3): pairs 0-1 turn with axis 0 (rounded to bfloat16 past 256),
    pairs 2-4 with axis 1, pairs 5-7 with axis 2."""
    x = _x((12, 16), 21)
    axis_of_pair = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    y = rotate_pairs(x, _bf16(GRID)[:, axis_of_pair] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        "positions were held in bfloat16, which is exact only up to 256:"
    )


def test_xpos_positions_held_in_bfloat16_are_named():
    """Catches: xPos left out of the rounded-positions check (the result was `unknown`). The
    query's scale zeta_j ** ((p - centre) / scale_base), zeta_j = (2j + 0.4 d) / (1.4 d),
    centre = floor(seq_len / 2) with seq_len = max(p) + 1, taken at the rounded positions."""
    d, scale_base, p = 16, 512.0, GRID[:, 0]
    x = _x((p.size, d), 22)
    zeta = (2 * np.arange(d // 2) + 0.4 * d) / (1.4 * d)
    held = _bf16(p)
    scale = zeta ** ((held[:, None] - np.floor((p.max() + 1) / 2)) / scale_base)
    y = rotate_pairs(x, held[:, None] * _inv(d))
    y = y * np.concatenate([scale, scale], axis=-1)
    spec = rr.RopeSpec(d, xpos=rr.XPos(scale_base=scale_base))
    found = diagnose(y, x, spec, p, role="query")
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        "positions were held in bfloat16, which is exact only up to 256:"
    )


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
