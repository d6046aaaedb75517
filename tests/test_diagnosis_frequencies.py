"""Frequencies read off a wrong result: bases fitted from any rows, doubled exponents, a pair
at another frequency, linear, NTK-aware and Llama 3 factors, and multi-axis pair axes.

Every wrong result is written here in NumPy (a rotation by angles worked out here), and
every number a message is checked for is worked out here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from rope_ref.testing._compare import compare, setup
from tests._helpers import inv_freq64 as _inv
from tests._helpers import uniform as _x
from tests._independent import rotate_pairs


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
