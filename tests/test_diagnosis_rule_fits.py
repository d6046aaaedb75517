"""Scaling rules, factors and M-RoPE sections fitted to a wrong result: each common context
length, factor and section split tried, the frequency ladder the factors are read off, and
the norms failing pairs keep.

Every wrong result is RoPE written out here in NumPy (Llama 3's frequencies as transformers
computes them, chunked M-RoPE, linear position interpolation), never rope_ref's output.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from tests._independent import rotate_pairs

F64 = npt.NDArray[np.float64]


def _x(shape: tuple[int, ...], seed: int) -> F64:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _inv(d: int, base: float = 10000.0) -> F64:
    return np.asarray(base ** (-np.arange(0, d, 2, dtype=np.float64) / d), dtype=np.float64)


def _llama3_freqs(inv: F64, factor: float, original: int) -> F64:
    """Llama 3.1's inverse frequencies as transformers writes them (low 1, high 4)."""
    low, high = 1.0, 4.0
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return np.asarray(np.where(medium, smoothed, scaled), dtype=np.float64)


@pytest.mark.parametrize("length", [2048, 4096, 8192, 16384, 32768, 131072])
def test_each_common_context_length_is_tried_with_the_specs_factor(length: int) -> None:
    """Catches: a common pre-training context length (2048, 4096, 8192, 16384, 32768,
    131072) mistyped. The result is Llama 3 scaling by the spec's factor 8 at that length,
    the spec's own length is 1024; base 5e5 and d = 32 put wavelengths from 6 to 1.4e6, so
    each length smooths other pairs."""
    d, base = 32, 5e5
    p = np.array([0, 1, 2, 3, 5, 9, 40, 300, 2000, 9000])
    x = _x((p.size, d), 1)
    y = rotate_pairs(x, p[:, None] * _llama3_freqs(_inv(d, base), 8.0, length))
    spec = rr.RopeSpec(d, base=base, scaling=rr.scaling.Llama3(8.0, original_max_position=1024))
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "scaling"
    rest = "low_freq_factor=1.0, high_freq_factor=4.0)"
    assert found.message == (
        f"the result follows Llama3(factor=8.0, original_max_position={length}, {rest}, but "
        f"the spec says Llama3(factor=8.0, original_max_position=1024, {rest}: the original "
        "(pre-training) context length differs."
    )


@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0, 16.0, 32.0, 40.0])
def test_each_common_factor_is_tried_where_no_factor_can_be_fitted(factor: float) -> None:
    """Catches: a common factor (2, 4, 8, 16, 32, 40) mistyped. The result is linear
    position interpolation by that factor, the spec says 3; the slowest pair is zero in `x`,
    so no factor can be read off the result and only the common ones can name it."""
    p = np.array([0, 1, 2, 3, 5, 9, 40, 300, 2000, 9000])
    x = _x((p.size, 16), 2)
    x[:, [7, 15]] = 0.0
    y = rotate_pairs(x, p[:, None] * _inv(16) / factor)
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(3.0)), p)
    assert found is not None
    assert found.cause == "scaling"
    assert found.message == (
        f"the result follows Linear(factor={factor}), but the spec says Linear(factor=3.0): "
        f"the factor is {factor:g}, not 3."
    )


GRID = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [12, 8, 11], [3, 3, 6]])


def _mrope(x: F64, grid: npt.NDArray[np.int64], sections: tuple[int, ...]) -> F64:
    """Chunked M-RoPE written out: pair j turns with the axis whose section holds it."""
    axis = np.repeat(np.arange(len(sections)), sections)
    return rotate_pairs(x, grid[:, axis] * _inv(x.shape[-1]))


@pytest.mark.parametrize(
    ("used", "told"),
    [
        ((16, 24, 24), (24, 20, 20)),  # Qwen2-VL's split, head_dim 128
        ((24, 20, 20), (16, 24, 24)),  # Qwen3-VL's split, head_dim 128
        ((8, 12, 12), (16, 8, 8)),  # head_dim 64
        ((2, 3, 3), (4, 2, 2)),  # head_dim 16
    ],
)
def test_each_common_section_split_is_tried(
    used: tuple[int, int, int], told: tuple[int, int, int]
) -> None:
    """Catches: a common M-RoPE split (16, 24, 24), (24, 20, 20), (8, 12, 12) or (2, 3, 3)
    mistyped: a result with that split, checked against a spec with another split of the
    same pairs that is no permutation of it, is named with the split used."""
    d = 2 * sum(used)
    x = _x((GRID.shape[0], d), 3)
    found = diagnose(_mrope(x, GRID, used), x, rr.RopeSpec(d, sections=told), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message == f"the sections are {list(used)}, not the spec's {list(told)}."


def _linear_without_rule(p: F64, factor: float, seed: int) -> str | None:
    """The diagnosis of linear interpolation by `factor`, checked without a rule (d = 16)."""
    x = _x((p.size, 16), seed)
    y = rotate_pairs(x, p[:, None] * _inv(16) / factor)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    return None if found is None else str(found)


NO_RULE = (
    "but the spec says no scaling rule: a scaling rule was applied that the spec does not have."
)


def test_the_first_estimate_is_read_at_position_1() -> None:
    """Catches: the ladder started above position 1. The factor 2.5 turns the fastest pair
    by 0.4 rad per position: 3.6 rad at position 9, the next, which has wrapped past pi."""
    found = _linear_without_rule(np.array([0.0, 1.0, 9.0, 40.0, 300.0, 2000.0]), 2.5, 4)
    assert found == f"scaling: the result follows Linear(factor=2.5), {NO_RULE}"


@pytest.mark.parametrize("factor", [math.e, math.sqrt(3.0), 5.4321])
def test_a_factor_of_more_digits_is_refined_up_the_position_ladder(factor: float) -> None:
    """Catches: the estimate kept at position 1 or 2 (the ladder stopped, stopped where a
    predicted angle passes 1 rad, or each step's correction applied with the wrong sign). A
    factor of more than three significant digits is only found to the precision the largest
    position (9000) gives; below 2 the fastest pair passes 1 rad at position 2."""
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0, 9000.0])
    found = _linear_without_rule(p, factor, 5)
    assert found is not None
    head, _, tail = found.partition("), ")
    assert head.startswith("scaling: the result follows Linear(factor=")
    assert float(head.removeprefix("scaling: the result follows Linear(factor=")) == pytest.approx(
        factor, rel=1e-12
    )
    assert tail == NO_RULE


def test_the_ladder_reads_each_pair_off_the_rows_where_it_is_non_zero() -> None:
    """Catches: zero pairs of `x` counted in a step's median, or a step kept where a pair is
    zero in every row (checked over rows of another length than the pairs). In a batch of
    three, the four slow pairs are zero in all rows at position 1 and in two of the three
    rows at every other position; they are read off the third row from position 2 on (were
    they read as 0, half the pairs would have no ratio and the median none either)."""
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0, 9000.0])
    slow = [4, 5, 6, 7, 12, 13, 14, 15]
    x = _x((3, p.size, 16), 6)
    x[:2, :, slow] = 0.0
    x[2, 1, slow] = 0.0
    y = rotate_pairs(x, p[:, None] * _inv(16) / 3.0)
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert str(found) == f"scaling: the result follows Linear(factor=3.0), {NO_RULE}"


def test_a_factor_is_read_off_a_single_non_zero_position() -> None:
    """Catches: no estimate made from one non-zero position (a ladder of one step)."""
    found = _linear_without_rule(np.array([0.0, 1.0]), 3.0, 7)
    assert found == f"scaling: the result follows Linear(factor=3.0), {NO_RULE}"


def test_a_pair_too_slow_to_turn_measurably_does_not_stop_the_fit() -> None:
    """A factor is still fitted where the slowest pair reads 0 rad per position: with base
    1e24 it turns by 1e-21 / 3 rad per position, which leaves it exactly unrotated in
    float64 up to position 2000 (the result equals `x` there), under either rule."""
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0])
    x = _x((p.size, 16), 8)
    y = rotate_pairs(x, p[:, None] * _inv(16, 1e24) / 3.0)
    assert np.array_equal(y[:, [7, 15]], x[:, [7, 15]])
    found = diagnose(y, x, rr.RopeSpec(16, base=1e24), p)
    assert found is not None
    assert str(found) == f"scaling: the result follows Linear(factor=3.0), {NO_RULE}"


def test_a_common_factor_is_tried_where_most_pairs_are_too_slow_to_read() -> None:
    """Catches: an infinite ratio taken for a factor (a rule of infinite factor is no rule,
    and building one stops the search). With d = 8 and base 1e48 the two slow pairs turn by
    at most 5e-22 rad up to position 2000 and read 0, so the median and the slowest pair's
    ratio are infinite; the factor 4 is found among the common ones."""
    d, base = 8, 1e48
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0])
    x = _x((p.size, d), 9)
    y = rotate_pairs(x, p[:, None] * _inv(d, base) / 4.0)
    assert np.array_equal(y[:, [2, 3, 6, 7]], x[:, [2, 3, 6, 7]])
    found = diagnose(y, x, rr.RopeSpec(d, base=base), p)
    assert found is not None
    assert str(found) == f"scaling: the result follows Linear(factor=4.0), {NO_RULE}"


def test_a_factor_below_one_is_fitted() -> None:
    """A rule's factor multiplied into the positions instead of divided: the result turns
    2 x as fast as unscaled RoPE, not 2 x as slow, and follows a factor of 1/2 (the fastest
    pair turns 2 rad per position, below pi: its frequency is read at position 1)."""
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0])
    x = _x((p.size, 16), 10)
    y = rotate_pairs(x, (2.0 * p)[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, scaling=rr.scaling.Linear(2.0)), p)
    assert found is not None
    assert found.message == (
        "the result follows Linear(factor=0.5), but the spec says Linear(factor=2.0): "
        "the factor is 0.5, not 2."
    )


@pytest.mark.parametrize(
    ("factor", "fitted"), [(1.002, True), (0.998, True), (1.0005, False), (0.9995, False)]
)
def test_factors_within_a_thousandth_of_one_are_not_fitted(factor: float, fitted: bool) -> None:
    """Catches: the band of factors left out around 1 (no rule, within 1e-3) moved or
    widened; 1 +- 0.002 is outside it and named."""
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0])
    found = _linear_without_rule(p, factor, 11)
    assert found is not None
    want = f"scaling: the result follows Linear(factor={factor}), {NO_RULE}"
    assert (found == want) == fitted
    assert found.startswith("scaling") == fitted


def test_no_factor_is_read_off_frequencies_that_came_out_negative() -> None:
    """Catches: negative frequencies taken for a factor (a rule of negative factor cannot
    be built, and building one stops the search). With d = 4 both pairs have wrapped past
    pi at position 700 (350 and 3.5 rad), the only non-zero one, and read negative; the
    factor 2 is found among the common ones."""
    p = np.array([0.0, 700.0])
    x = _x((p.size, 4), 15)
    y = rotate_pairs(x, p[:, None] * _inv(4) / 2.0)
    found = diagnose(y, x, rr.RopeSpec(4), p)
    assert found is not None
    assert str(found) == f"scaling: the result follows Linear(factor=2.0), {NO_RULE}"


def test_an_m_rope_spec_with_another_factor_is_a_scaling_mistake() -> None:
    """Chunked M-RoPE (2, 3, 3) under linear interpolation by 4 where the spec says 2: each
    axis's positions are divided by the factor."""
    grid = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [40, 30, 20], [300, 200, 100]])
    x = _x((grid.shape[0], 16), 12)
    axis = np.repeat(np.arange(3), (2, 3, 3))
    y = rotate_pairs(x, grid[:, axis] * _inv(16) / 4.0)
    spec = rr.RopeSpec(16, sections=(2, 3, 3), scaling=rr.scaling.Linear(2.0))
    found = diagnose(y, x, spec, grid)
    assert found is not None
    assert str(found) == (
        "scaling: the result follows Linear(factor=4.0), but the spec says "
        "Linear(factor=2.0): the factor is 4, not 2."
    )


def test_an_xpos_spec_with_another_factor_is_a_scaling_mistake() -> None:
    """An xPos query (scale zeta_j ** ((p - c) / 512), c = floor((max p + 1) / 2), zeta_j =
    (2j + 0.4 d) / (1.4 d)) under linear interpolation by 4 where the spec says 2."""
    d, scale_base = 16, 512.0
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0])
    x = _x((p.size, d), 13)
    zeta = (2 * np.arange(d // 2) + 0.4 * d) / (1.4 * d)
    power = (p[:, None] - math.floor((p.max() + 1) / 2)) / scale_base
    angles = p[:, None] * _inv(d) / 4.0
    y = rotate_pairs(x, angles) * np.tile(zeta**power, 2)
    spec = rr.RopeSpec(d, xpos=rr.XPos(scale_base=scale_base), scaling=rr.scaling.Linear(2.0))
    found = diagnose(y, x, spec, p, role="query")
    assert found is not None
    assert str(found) == (
        "scaling: the result follows Linear(factor=4.0), but the spec says "
        "Linear(factor=2.0): the factor is 4, not 2."
    )


def test_a_candidate_the_oracle_rejects_is_skipped_not_the_end_of_the_search() -> None:
    """Catches: the search stopped at the first candidate whose angles overflow. The result
    is Llama 3 scaling by a factor of 1/4 at length 8192 (slow pairs turn 4 x faster), at
    positions up to 1e308: the slowest pair gives the factor 0.25, and Linear(0.25) turns
    the fastest pair by 4e308 rad there, past float64, before Llama3(0.25) is tried."""
    d, base = 16, 5e5
    p = np.array([0.0, 1.0, 2.0, 3.0, 5.0, 9.0, 40.0, 300.0, 2000.0, 9000.0, 1e308])
    x = _x((p.size, d), 14)
    y = rotate_pairs(x, p[:, None] * _llama3_freqs(_inv(d, base), 0.25, 8192))
    assert np.all(np.isfinite(y))
    found = diagnose(y, x, rr.RopeSpec(d, base=base), p)
    assert found is not None
    assert str(found) == (
        "scaling: the result follows Llama3(factor=0.25, original_max_position=8192, "
        f"low_freq_factor=1.0, high_freq_factor=4.0), {NO_RULE}"
    )


@pytest.mark.parametrize(("share", "named"), [(1.5, True), (2.5, False)])
def test_failing_pairs_keep_their_norm_within_twice_the_tolerance(
    share: float, named: bool
) -> None:
    """Catches: the norm a rotation by other angles keeps judged within another multiple
    of the tolerance than 2. Pair 3 turns by random angles, and its norm is moved by
    `share` times the float64 bound |pair| (2 eps (|angle| + 1) + 4 eps), where the row's
    largest angle is its position p (the first pair turns 1 rad per position)."""
    eps = 2.0**-52
    rng = np.random.default_rng(26)
    p = np.arange(6.0) * 20
    x = rng.uniform(-1.0, 1.0, (6, 16))
    angles = p[:, None] * _inv(16)
    angles[:, 3] = rng.uniform(-3.0, 3.0, 6)  # no frequency turns it like this
    y = rotate_pairs(x, angles)
    y[:, [3, 11]] *= 1.0 + share * (2 * eps * (p + 1) + 4 * eps)[:, None]
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "unknown"
    named_pairs = "pairs 0-2, 4-7 match the given positions and pairs 3 do not, and no "
    assert found.message.startswith(named_pairs) == named


GRID_2D = np.array([[0, 0], [1, 2], [4, 1], [9, 5], [12, 8], [3, 3]])


@pytest.mark.parametrize(
    ("angles_of", "want"),
    [
        (
            lambda g: g[:, [1, 1, 1, 1, 0, 0, 0, 0]],
            "the position axes are read in the order [1, 0] (e.g. (h, t, w) for (t, h, w)): "
            "the position ids' axes are permuted.",
        ),
        (
            lambda g: g[:, [1] * 8],
            "the result is 1-D RoPE at the positions of axis 1 on every pair: the multi-axis "
            "positions were collapsed to one axis (M-RoPE sections ignored).",
        ),
    ],
)
def test_a_two_axis_spec_is_not_given_the_three_axis_splits(
    angles_of: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]], want: str
) -> None:
    """Catches: a common split of three sections tried for a spec of two ((4, 4): eight
    pairs, as many as (2, 3, 3)), whose oracle cannot read the two-axis positions and so
    stops the diagnosis before the axis order and the collapse to 1-D are tried."""
    x = _x((GRID_2D.shape[0], 16), 16)
    y = rotate_pairs(x, angles_of(GRID_2D) * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(4, 4)), GRID_2D)
    assert found is not None
    assert str(found) == f"sections: {want}"


def test_an_m_rope_xpos_spec_with_another_factor_is_a_scaling_mistake() -> None:
    """Both at once: chunked M-RoPE (2, 3, 3) with an xPos query scale (its power read at
    the first axis, centred on floor((largest position + 1) / 2)), under linear
    interpolation by 4 where the spec says 2."""
    d, scale_base = 16, 512.0
    grid = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [40, 30, 20], [300, 200, 100]])
    x = _x((grid.shape[0], d), 17)
    zeta = (2 * np.arange(d // 2) + 0.4 * d) / (1.4 * d)
    power = (grid[:, :1] - math.floor((grid.max() + 1) / 2)) / scale_base
    axis = np.repeat(np.arange(3), (2, 3, 3))
    y = rotate_pairs(x, grid[:, axis] * _inv(d) / 4.0) * np.tile(zeta**power, 2)
    spec = rr.RopeSpec(
        d,
        sections=(2, 3, 3),
        xpos=rr.XPos(scale_base=scale_base),
        scaling=rr.scaling.Linear(2.0),
    )
    found = diagnose(y, x, spec, grid, role="query")
    assert found is not None
    assert str(found) == (
        "scaling: the result follows Linear(factor=4.0), but the spec says "
        "Linear(factor=2.0): the factor is 4, not 2."
    )


def test_a_norm_off_by_exactly_twice_the_tolerance_is_kept() -> None:
    """Catches: "within twice the tolerance" read as strictly less. At position 0 pair 3 of
    `x` is (1, 0), with float64 tolerance 1 * (2 eps (0 + 1) + 4 eps) = 6 eps; the result
    there is (1 + 12 eps, 0), a norm off by exactly twice that. Elsewhere pair 3 turns by
    random angles."""
    eps = 2.0**-52
    rng = np.random.default_rng(26)
    p = np.arange(6.0) * 20
    x = rng.uniform(-1.0, 1.0, (6, 16))
    x[0, [3, 11]] = [1.0, 0.0]
    angles = p[:, None] * _inv(16)
    angles[1:, 3] = rng.uniform(-3.0, 3.0, 5)
    y = rotate_pairs(x, angles)
    y[0, 3] = 1.0 + 12 * eps
    found = diagnose(y, x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.message.startswith(
        "pairs 0-2, 4-7 match the given positions and pairs 3 do not, and no "
    )


def test_an_m_rope_spec_with_pairs_at_other_angles_is_not_told_to_give_sections() -> None:
    """Catches: the 1-D message (pairs that match the given positions, and the advice to
    give M-RoPE its sections) given for a spec that has them. Pair 3 of chunked M-RoPE
    (2, 3, 3) turns by random angles."""
    grid = np.array([[0, 0, 0], [1, 2, 3], [4, 1, 7], [9, 5, 2], [12, 8, 11], [3, 3, 6]])
    rng = np.random.default_rng(18)
    x = rng.uniform(-1.0, 1.0, (grid.shape[0], 16))
    angles = grid[:, np.repeat(np.arange(3), (2, 3, 3))] * _inv(16)
    angles[:, 3] = rng.uniform(-3.0, 3.0, grid.shape[0])
    found = diagnose(rotate_pairs(x, angles), x, rr.RopeSpec(16, sections=(2, 3, 3)), grid)
    assert found is not None
    assert str(found) == (
        "unknown: no single known cause explains the mismatch; only pairs 3 (of 8) differ."
    )


def test_the_ladder_stops_where_the_prediction_is_off_by_more_than_1_rad() -> None:
    """Catches: the ladder carried on past a step whose angles are off the prediction by
    more than 1 rad (the step skipped, or the limit loosened). The ladder steps along the
    first axis (t) of chunked M-RoPE (2, 3, 3), here under linear interpolation by 3 the
    spec lacks, as Qwen2-VL lays out text and images: text at t = h = w = 0..5 reads every
    pair right; an image at t = 6 with h, w of 6 and 106 turns the h pairs by up to 1.5
    rad off the prediction, and one at t = 107 with h, w of 107 and 110 by less than 1 rad
    but 1.4 % off in frequency; either taken in loses the factor 3."""
    text = [[p, p, p] for p in range(6)]
    image_a = [[6, h, w] for h in (6, 106) for w in (6, 106)]
    image_b = [[107, h, w] for h in (107, 110) for w in (107, 110)]
    grid = np.array(text + image_a + image_b)
    x = _x((grid.shape[0], 16), 19)
    y = rotate_pairs(x, grid[:, np.repeat(np.arange(3), (2, 3, 3))] * _inv(16) / 3.0)
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), grid)
    assert found is not None
    assert str(found) == f"scaling: the result follows Linear(factor=3.0), {NO_RULE}"
