"""Diagnoses about numbers and variants where a planted mistake hides: the precision of
positions, angles and tables, the frequencies read off a result, the scaling rules and the
multi-axis sections tried.

Every wrong result is written here in NumPy (a rotation by angles worked out here), and every
number a message is checked for is worked out here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from rope_ref.testing._compare import compare, setup
from tests._independent import rotate_pairs


def _x(shape, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _inv(d, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def _bf16(v):
    return (
        np.asarray(v, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    )


def _f16(v):
    return np.asarray(v, np.float64).astype(np.float16).astype(np.float64)


# -- positions and angles held in a low precision ------------------------------------------------


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


# -- frequencies read off the result: the base fitted to them ------------------------------------


def _base_found(x, p, base, spec=None):
    spec = rr.RopeSpec(x.shape[-1]) if spec is None else spec
    found = diagnose(rotate_pairs(x, p[:, None] * _inv(x.shape[-1], base)), x, spec, p)
    assert found is not None
    assert found.cause == "frequencies"
    return found.message


@pytest.mark.parametrize(
    "p",
    [np.arange(1.0, 5.0), np.full(4, 1.0), np.full(4, -1.0), np.array([0.0, 0.0, 0.0, 5.0])],
    ids=["no-zero", "all-one", "all-minus-one", "one-nonzero-row"],
)
def test_a_base_is_fitted_from_any_rows_off_position_zero(p):
    """Catches: the frequencies read only where some position is zero, or not where every
    position is 1 or -1, or a pair seen in a single row dropped. 12345 is no common base:
    it must be fitted."""
    message = _base_found(_x((4, 16), 5), p, 12345.0)
    assert "follow base 12345 instead of the spec's base 10000" in message


def test_a_base_is_fitted_past_pairs_that_are_zero_in_most_rows():
    """Catches: zero pairs (no angle to read) counted as turning by 0: pair 5 is zero in
    three of the four rows, and its median frequency would be 0."""
    x = _x((4, 16), 6)
    x[:3, [5, 13]] = 0.0
    message = _base_found(x, np.arange(1.0, 5.0), 12345.0)
    assert "follow base 12345 instead of the spec's base 10000" in message


def test_a_base_is_fitted_over_a_batch_axis():
    """Catches: the pairs counted along another axis than the last (the sequence's length
    for a batch of 2 x 4 rows of 8 pairs)."""
    message = _base_found(_x((2, 4, 16), 7), np.arange(1.0, 5.0), 12345.0)
    assert "follow base 12345 instead of the spec's base 10000" in message


def test_a_pair_zero_in_every_row_leaves_the_common_bases():
    """Catches: a pair with nothing to read measured anyway (the median of no values)."""
    x = _x((4, 16), 8)
    x[:, [5, 13]] = 0.0
    message = _base_found(x, np.arange(1.0, 5.0), 500000.0)
    assert "follow base 500000 instead of the spec's base 10000" in message


@pytest.mark.parametrize(
    ("d", "base", "p"), [(4, 12345.0, np.arange(1.0, 5.0)), (16, 1.5, np.arange(4.0))]
)
def test_a_base_is_fitted_for_two_pairs_and_below_two(d, base, p):
    """Catches: two pairs (one ratio to fit from) judged too few, or fitted bases up to 2
    dropped (any base above 1 is valid; small positions keep every angle below pi)."""
    message = _base_found(_x((4, d), 9), p, base)
    assert f"follow base {base:g} instead of the spec's base 10000" in message


def test_a_single_pair_at_half_its_frequency_is_linear_scaling():
    """Catches: a base fitted from the pairs after the first when there are none."""
    x, p = _x((4, 2), 10), np.arange(1.0, 5.0)
    found = diagnose(rotate_pairs(x, p[:, None] * 0.5), x, rr.RopeSpec(2), p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith("the result follows Linear(factor=2.0), but the spec says no")


def test_a_wrong_result_at_position_zero_only_is_unknown():
    """Catches: the base fit tried without frequencies (every position 0: nothing turns)."""
    x = _x((4, 16), 11)
    found = diagnose(x + 0.1, x, rr.RopeSpec(16), np.zeros(4))
    assert found is not None
    assert found.cause == "unknown"


P = np.array([0.0, 1, 2, 3, 5, 8, 13, 100, 1000, 4000])


def test_a_doubled_exponent_states_the_squared_base():
    """Catches: the squared base in the message computed as anything else (10000^2 = 1e8)."""
    x = _x((P.size, 16), 12)
    y = rotate_pairs(x, P[:, None] * 10000.0 ** (-np.arange(8) / 4))
    found = diagnose(y, x, rr.RopeSpec(16), P)
    assert found is not None
    assert "the same as base 10000^2 = 1e+08, but the fix is" in found.message


def test_a_base_squared_to_a_common_one_is_told_as_that_base():
    """Catches: the doubled exponent tried first where the spec's base squared is a common
    base (1000^2 = 10^6): rope_theta 10^6 not passed through is then the likelier mistake."""
    message = _base_found(_x((P.size, 16), 13), P, 1e6, rr.RopeSpec(16, base=1000.0))
    assert "follow base 1e+06 instead of the spec's base 1000 " in message


def test_a_doubled_exponent_under_a_scaling_rule_is_tried_after_the_bases():
    """Catches: the doubled exponent never tried where the base squared is a common base.
    Under LongRoPE (every pair's frequency halved, cos and sin times 1.5) the base 10^6
    candidate halves the frequencies; the result does not: it is 1000^(-4j/16) times 1.5."""
    x = _x((P.size, 16), 14)
    y = rotate_pairs(x, P[:, None] * 1000.0 ** (-np.arange(8) / 4)) * 1.5
    rule = rr.scaling.LongRoPE(
        [2.0] * 8, [2.0] * 8, original_max_position=8192, attention_factor=1.5
    )
    found = diagnose(y, x, rr.RopeSpec(16, base=1000.0, scaling=rule), P)
    assert found is not None
    assert found.cause == "frequencies"
    assert found.message.startswith("theta_j = base^(-2j/8) instead of base^(-2j/16)")


def test_a_result_just_outside_tolerance_is_not_the_spec_s_own_base():
    """Catches: the spec's own base (or one printed the same) offered as "another" base, and
    frequencies that print as the spec's offered as other ones: one element off by 1.5 times
    its tolerance was told "the frequencies follow base 10000 instead of the spec's base
    10000"."""
    x, p, spec = _x((4, 16), 15), np.arange(4.0), rr.RopeSpec(16)
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[3, 0] += 1.5 * compare(y, setup(x, spec, p)).tolerance[3, 0]
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause != "frequencies", found


# -- angles and cos/sin computed in a low precision ----------------------------------------------


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


# -- frequencies read off the result: other inverse frequencies ----------------------------------


def _one_pair_off(p, pair, times, seed=18):
    x = _x((p.size, 16), seed)
    theta = _inv(16)
    theta[pair] *= times
    return diagnose(rotate_pairs(x, p[:, None] * theta), x, rr.RopeSpec(16), p)


@pytest.mark.parametrize(
    ("p", "pair", "times", "got", "want"),
    [
        (np.array([0.0, 1.0, 2.0, 2.0]), 2, 1.5, "0.15", "0.1"),
        (np.arange(4.0), 3, 0.5, f"{0.5 * 10000**-0.375:.6g}", f"{10000**-0.375:.6g}"),
        (np.arange(4.0), 0, 0.0, "0", "1"),
    ],
    ids=["two-positions", "slower-pair", "pair-not-turning"],
)
def test_a_pair_at_another_frequency_is_named_with_both(p, pair, times, got, want):
    """Catches: two distinct positions judged too few to read frequencies off; the pair with
    the largest relative error picked by another measure (a pair turning at half its
    frequency is as far off as one at 1.5 times); a pair that does not turn at all (0 rad
    per position, read exactly at positions 1 to 3) refused as if it turned backwards."""
    found = _one_pair_off(p, pair, times)
    assert found is not None
    assert found.cause == "frequencies"
    assert found.message.startswith(
        f"the result is a rotation with other inverse frequencies: pair {pair} turns by {got} "
        f"rad per position, the spec says {want} (check"
    )


def test_a_pair_off_at_one_position_is_not_a_frequency():
    """Catches: frequencies read off a single distinct position (0 and 3 here), where any
    angle fits some frequency: a pair at 1.5 times its frequency is then no frequency
    mistake but pairs that do not match."""
    found = _one_pair_off(np.array([0.0, 0.0, 3.0, 3.0]), 2, 1.5)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith("pairs 0-1, 3-7 match the given positions and pairs 2 do not")


def test_noise_over_a_pair_that_is_zero_everywhere_is_unknown():
    """Catches: the other-frequencies candidate built when no frequency could be read (a
    pair zero in every row has no angle)."""
    x = _x((4, 16), 19)
    x[:, [5, 13]] = 0.0
    y = x + 0.1 * np.random.default_rng(20).uniform(-1.0, 1.0, x.shape)
    found = diagnose(y, x, rr.RopeSpec(16), np.arange(4.0))
    assert found is not None
    assert found.cause == "unknown"


# -- positions held in a low precision, for multi-axis and xPos specs ---------------------------

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


# -- scaling rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "times", "message"),
    [
        (
            None,
            0.25,
            "the result follows Linear(factor=4.0), but the spec says no scaling rule: a "
            "scaling rule was applied that the spec does not have.",
        ),
        (
            rr.scaling.Linear(2.0),
            1.0,
            "the result follows no scaling rule, but the spec says Linear(factor=2.0): the "
            "scaling rule was not applied (plain RoPE frequencies).",
        ),
        (
            rr.scaling.YaRN(4.0, original_max_position=4096),
            0.25,
            "the result follows Linear(factor=4.0), but the spec says YaRN(factor=4.0, "
            "original_max_position=4096, beta_fast=32.0, beta_slow=1.0, mscale=None, "
            "mscale_all_dim=None, attention_factor=None, truncate=True): Linear used where "
            "YaRN belongs.",
        ),
    ],
    ids=["rule-added", "rule-dropped", "other-family"],
)
def test_a_scaling_mistake_says_which_rule_and_why(rule, times, message):
    """Catches: the reasons of the scaling message given to the wrong case (a rule applied
    that the spec lacks, a rule not applied, a rule of another family). The results are the
    plain frequencies times 1/4 (linear scaling by 4) or times 1."""
    x = _x((P.size, 16), 24)
    found = diagnose(
        rotate_pairs(x, P[:, None] * _inv(16) * times), x, rr.RopeSpec(16, scaling=rule), P
    )
    assert found is not None
    assert found.cause == "scaling"
    assert found.message == message


def _llama3(theta, factor, length, low=1.0, high=4.0):
    """Llama 3's frequencies (HF's recipe): wavelengths under length/high keep theta, over
    length/low are divided by the factor, and in between blend smoothly."""
    wavelength = 2 * np.pi / theta
    smooth = (length / wavelength - low) / (high - low)
    blended = (1 - smooth) * theta / factor + smooth * theta
    return np.where(
        wavelength < length / high,
        theta,
        np.where(wavelength > length / low, theta / factor, blended),
    )


@pytest.mark.parametrize("length", [8192, 4096])
def test_llama3_with_a_fitted_factor_is_tried_at_both_common_lengths(length):
    """Catches: the two context lengths tried for a rule without one (8192 and 4096) changed.
    The factor 8 is read off the slowest pair (the others keep or nearly keep theirs)."""
    x = _x((P.size, 16), 25)
    y = rotate_pairs(x, P[:, None] * _llama3(_inv(16), 8.0, length))
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(2.0)), P)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith(
        f"the result follows Llama3(factor=8.0, original_max_position={length}, "
    )
    assert found.message.endswith(": Llama3 used where Linear belongs.")


# -- pairs that match and pairs that do not ------------------------------------------------------


def _pair_at_random_angles(d, pair, seed):
    rng = np.random.default_rng(seed)
    p = np.arange(6.0)
    x = rng.uniform(-1.0, 1.0, (6, d))
    angles = p[:, None] * _inv(d)
    angles[:, pair] = rng.uniform(-3.0, 3.0, 6)  # no frequency turns it like this
    return diagnose(rotate_pairs(x, angles), x, rr.RopeSpec(d), p)


@pytest.mark.parametrize(("d", "pair", "good"), [(4, 1, "0"), (16, 3, "0-2, 4-7")])
def test_a_pair_turned_by_other_angles_is_named(d, pair, good):
    """Catches: two pairs (the fewest that can have one right and one wrong) judged too few."""
    found = _pair_at_random_angles(d, pair, 26)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith(
        f"pairs {good} match the given positions and pairs {pair} do not, and no frequency"
    )


def test_a_pair_with_other_values_is_not_told_as_turned():
    """Catches: the norm check dropped: pair 3 holds other values (its norm
    changes), which is no rotation by other angles."""
    rng = np.random.default_rng(27)
    p = np.arange(6.0)
    x = rng.uniform(-1.0, 1.0, (6, 16))
    y = rotate_pairs(x, p[:, None] * _inv(16))
    y[:, [3, 11]] = rng.uniform(-1.0, 1.0, (6, 2))
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith("no single known cause explains the mismatch;")
    assert "only pairs 3 (of 8) differ" in found.message


def test_ntk_aware_scaling_is_fitted_from_the_slowest_pair():
    """Catches: the factor read off the slowest pair dropped, or read off another: NTK-aware
    scaling by 6 (base * 6^(d / (d - 2))) slows the last pair by exactly 6 and the median
    pair by less; 6 is no common factor."""
    x = _x((P.size, 16), 28)
    y = rotate_pairs(x, P[:, None] * _inv(16, 10000.0 * 6.0 ** (16 / 14)))
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(2.0)), P)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message.startswith("the result follows NTKAware(factor=6.0")
    assert found.message.endswith(": NTKAware used where Linear belongs.")


# -- multi-axis sections -------------------------------------------------------------------------

SMALL_GRID = np.stack(
    [np.arange(12.0) * 5 + 1, np.arange(12.0) * 3, (np.arange(12.0) * 7) % 11], -1
)


@pytest.mark.parametrize(
    ("axis_of_pair", "message"),
    [
        (
            [0, 1, 2, 0, 1, 2, 0, 0],
            "the pairs are assigned to axes interleaved (interleaved M-RoPE), but the spec's "
            "order is 'chunked' (Qwen2/2.5-VL chunk, Qwen3-VL interleaves).",
        ),
        (
            [0, 0, 1, 1, 1, 1, 2, 2],
            "the sections are [2, 4, 2], not the spec's [4, 2, 2] (mrope_section read in "
            "another order).",
        ),
    ],
    ids=["interleaved", "sections-permuted"],
)
def test_a_multi_axis_result_with_other_pair_axes_names_them(axis_of_pair, message):
    """Catches: the section-order and permuted-sections candidates dropped or their messages
    swapped. Sections (4, 2, 2) interleaved (Qwen3-VL): pair j turns with axis 1 where
    j % 3 == 1 and j < 6, axis 2 where j % 3 == 2 and j < 6, else axis 0."""
    x = _x((12, 16), 29)
    y = rotate_pairs(x, SMALL_GRID[:, axis_of_pair] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(4, 2, 2)), SMALL_GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message == message


# -- scaling factors read off the result, up a ladder of positions -------------------------------


@pytest.mark.parametrize("zero_at", [None, 1], ids=["every-row", "pair-zero-at-position-1"])
def test_a_linear_factor_is_read_up_the_positions(zero_at):
    """Catches: the ladder of positions stopped (or never started) at a step where some pair
    has nothing to read (pair 7 zero in the row at position 1: the estimate starts at 2);
    the factor 5 (no common one) must be read off the result, sharpened up to 4000."""
    x = _x((P.size, 16), 30)
    if zero_at is not None:
        x[np.equal(P, zero_at), 7] = x[np.equal(P, zero_at), 15] = 0.0
    y = rotate_pairs(x, P[:, None] * _inv(16) / 5.0)
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(2.0)), P)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message == (
        "the result follows Linear(factor=5.0), but the spec says Linear(factor=2.0): "
        "the factor is 5, not 2."
    )


def test_a_linear_factor_below_two_is_fitted():
    """Catches: fitted factors just above 1 (here 1.5, no common one) dropped by a threshold
    set too high; only factors within 1e-3 of 1 are too close to tell from no scaling."""
    x = _x((P.size, 16), 31)
    y = rotate_pairs(x, P[:, None] * _inv(16) / 1.5)
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(4.0)), P)
    assert found is not None
    assert found.message == (
        "the result follows Linear(factor=1.5), but the spec says Linear(factor=4.0): "
        "the factor is 1.5, not 4."
    )
