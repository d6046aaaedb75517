"""Positions, offsets, `seq_len` and `seq_axis` (rope_ref/_core/positions.py): exact integer
shifts at the ends of int64, float positions shifted in float64, and the refusals that name
the parameter and the value received.

Expected values are worked out here with Python integers or NumPy float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32])
@pytest.mark.parametrize("offset", [2**53 + 1, -(2**53) - 1, 2**62 + 2**9 - 1])
def test_small_integer_positions_shift_exactly_by_a_huge_offset(dtype, offset):
    """Catches: the integer shift done as ``float(p) + float(offset)`` (two roundings).

    2**53 + 1 is a tie in float64: alone it rounds to 2**53, but 1 + (2**53 + 1) = 2**53 + 2
    is exact. The sum is formed with Python integers here and rounded once.
    """
    p = np.array([1, 3, 5], dtype=dtype)
    spec = rr.RopeSpec(2, freqs=(1.0,))  # angle = position
    x = np.array([[1.0, 0.0]] * 3)
    want_positions = np.array([float(int(v) + offset) for v in p])
    got = rr.apply_rope(x, spec, p, offset=offset)
    np.testing.assert_array_equal(got, rr.apply_rope(x, spec, want_positions))
    twice = np.array([float(v) + float(offset) for v in p])  # two roundings, not one
    assert not np.array_equal(rr.apply_rope(x, spec, twice), got)


def test_offset_past_float64_is_refused_naming_it():
    """Catches: an integer offset beyond float64's range let through (OverflowError)."""
    for offset in (10**400, -(10**400)):
        with pytest.raises(ValueError, match="`offset` must be finite"):
            rr.apply_rope(np.ones((2, 4)), offset=offset)


def test_an_inferred_seq_len_error_names_the_largest_position():
    """Catches: the largest position misreported in the message (max + 1 - 1)."""
    spec = rr.RopeSpec(4, scaling=rr.scaling.Linear(2.0))
    with pytest.raises(ValueError, match=r"got `positions` up to -5\.0\. Pass `seq_len`"):
        rr.apply_rope(np.ones((2, 4)), spec, np.array([-7, -5]))


def test_seq_axis_hint_only_for_one_or_two_dimensional_grids():
    """Catches: a hint made for a 3-D grid, or without a seq_axis."""
    from rope_ref._core.positions import seq_axis_hint

    assert seq_axis_hint((16,), (2, 16, 8), 2) != ""
    assert seq_axis_hint((2, 4, 16), (2, 16, 8), 2) == ""
    assert seq_axis_hint((16,), (2, 16, 8), None) == ""


def test_a_negative_offset_shifts_large_int64_positions_exactly():
    """Catches: the fit test of a negative offset reversed, which sends sums that fit
    through float64: 2**62 + 513 - 2 = 2**62 + 511 rounds once to 2**62, but rounding
    2**62 + 513 first (to 2**62 + 1024) then subtracting 2 gives 2**62 + 1024."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    x = np.array([[1.0, 0.0]])
    got = rr.apply_rope(x, spec, np.array([2**62 + 513]), offset=-2)
    phi = float(2**62 + 511)  # the exact sum, rounded once
    assert phi == 2.0**62
    np.testing.assert_allclose(got, [[np.cos(phi), np.sin(phi)]], rtol=1e-15, atol=1e-16)


def test_shifted_float_positions_are_computed_in_float64():
    """Catches: the compute dtype chosen the other way round (float32 where float64 exists):
    position 1e8 + 0.5 shifted by 0.25 is 100000000.75 in float64, 1e8 in float32."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    got = rr.apply_rope(np.array([[1.0, 0.0]]), spec, np.array([1e8 + 0.5]), offset=0.25)
    phi = 100_000_000.75  # exact in float64
    np.testing.assert_allclose(got, [[np.cos(phi), np.sin(phi)]], rtol=1e-15, atol=1e-16)


def test_default_positions_ending_at_int64_max_are_added_exactly():
    """Catches: the int64 fit of default positions tested with ``<`` at its top, which sends
    ``offset + arange(n)`` ending exactly at 2**63 - 1 through float64: the offset is then
    rounded first (2**63 - 1537 to 2**63 - 1024) and each sum rounded again, which moves
    1022 of these 1537 positions to another float64 than their exact value's."""
    n = 1537
    offset = 2**63 - n  # the last position is 2**63 - 1
    phi = np.array([float(offset + k) for k in range(n)])  # each exact sum, rounded once
    x = np.tile([[1.0, 0.0]], (n, 1))
    got = rr.apply_rope(x, rr.RopeSpec(2, freqs=[1.0]), offset=offset)
    np.testing.assert_array_equal(got, np.stack([np.cos(phi), np.sin(phi)], axis=-1))


def test_an_integer_sum_of_exactly_int64_max_is_added_exactly():
    """Catches: the elementwise fit of ``p + offset`` tested with ``<`` at int64's top. The
    sum 2**63 - 1 rounds once to 2**63; rounding the position and the offset first gives
    another float64 (the pairs below were found by searching for such a double rounding)."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    for q in (1_560_980_764_159, 3_494_775_225_855):
        offset = 2**63 - 1 - q
        assert float(np.float64(q) + np.float64(offset)) != 2.0**63  # the trap is real
        got = rr.apply_rope(np.array([[1.0, 0.0]]), spec, np.array([q]), offset=offset)
        phi = float(2**63 - 1)  # the exact sum, rounded once: 2**63
        np.testing.assert_array_equal(got, [[np.cos(phi), np.sin(phi)]])


def test_an_offset_of_int64_max_still_adds_exactly():
    """Catches: an offset of exactly 2**63 - 1 taken as beyond int64. Position -512 plus it
    is 2**63 - 513, which rounds once to 2**63 - 1024; rounding the offset first (to 2**63)
    gives 2**63 - 512, a tie that rounds to 2**63."""
    offset = 2**63 - 1
    got = rr.apply_rope(np.array([[1.0, 0.0]]), rr.RopeSpec(2, freqs=[1.0]), [-512], offset=offset)
    phi = float(offset - 512)
    assert phi == 2.0**63 - 1024
    np.testing.assert_array_equal(got, [[np.cos(phi), np.sin(phi)]])


def test_seq_axis_names_an_axis_of_x_other_than_the_last():
    """Catches: the range of `seq_axis` off by one at either end (``-ndim - 1`` or ``ndim``
    accepted, ``-ndim`` refused), or the feature axis accepted under another name."""
    from rope_ref._core.positions import normalize_seq_axis

    for axis, want in ((-3, 0), (-2, 1), (0, 0), (1, 1)):
        assert normalize_seq_axis(axis, 3) == want
    for axis in (-4, -1, 2, 3):
        with pytest.raises(ValueError, match=r"`seq_axis` must name an axis of x other than"):
            normalize_seq_axis(axis, 3)
    with pytest.raises(ValueError, match=r"`x` must have a sequence axis before the feature"):
        normalize_seq_axis(0, 1)
    assert normalize_seq_axis(0, 2) == 0


@pytest.mark.parametrize(
    "positions",
    [
        [None, None],
        ["a", "b"],
        [1 + 2j, 3.0],
        [True, False],
        [2**64, "a"],
        [2**64, True],
        np.zeros(2, dtype=[("t", "f8")]),  # a structured (void) dtype
    ],
    ids=repr,
)
def test_positions_that_are_not_real_numbers_are_a_type_error_naming_them(positions):
    """Catches: Python objects other than real numbers (None, strings, complex, bools,
    alone or beside an int past int64) or a structured dtype converted, or failing in
    another error than a TypeError naming `positions`."""
    with pytest.raises(TypeError, match=r"`positions` must (hold|have) (integer|an integer)"):
        rr.apply_rope(np.ones((2, 4)), rr.RopeSpec(4), positions)


def _rotated_by(phi):
    """[1, 0] rotated by each angle of `phi`: the rows [cos, sin]."""
    phi = np.asarray(phi, dtype=np.float64)
    return np.stack([np.cos(phi), np.sin(phi)], axis=-1)


ONE_PAIR = rr.RopeSpec(2, freqs=[1.0])


def test_default_positions_below_int64_are_rounded_not_wrapped():
    """Catches: INT64_MIN written ``~(2**63)`` (an offset of -2**63 - 1 then added in int64)
    or ``-(2**62)`` (offsets from -2**63 to -2**62 then rounded before the sum), and the top
    fit test moved one past 2**63 - 1 (the last position then wraps) or off empty x."""
    n = 1537
    for offset in (-(2**63) - 1, -(2**62) - n, 2**63 - n + 1):
        if -(2**63) <= offset <= 2**63 - n:  # every sum fits int64: exact, rounded once
            phi = np.array([float(offset + k) for k in range(n)])
        else:  # documented: float(offset) + arange(n) in float64
            phi = float(offset) + np.arange(n, dtype=np.float64)
        got = rr.apply_rope(np.tile([[1.0, 0.0]], (n, 1)), ONE_PAIR, offset=offset)
        np.testing.assert_array_equal(got, _rotated_by(phi))
    assert rr.apply_rope(np.ones((0, 2)), ONE_PAIR, offset=2**63).shape == (0, 2)


def test_integer_shifts_at_the_ends_of_int64_are_exact_or_rounded_once():
    """Catches: the fast int64 path taken for a dtype whose range plus the offset leaves
    int64 (int32 -2**31 plus -2**63 + 2**30 wraps round), an offset of exactly -2**63 sent
    through float64 (2**62 + 513 rounds up first), and negative int64 positions taken as
    not fitting (rounded before the sum)."""
    cases = [
        (np.array([-(2**31), 0], dtype=np.int32), -(2**63) + 2**30),
        (np.array([2**62 + 513]), -(2**63)),
        (np.array([-(2**62) - 513]), 2),
    ]
    for p, offset in cases:
        phi = [float(int(v) + offset) for v in p]  # exact, rounded once
        got = rr.apply_rope(np.tile([[1.0, 0.0]], (len(p), 1)), ONE_PAIR, p, offset=offset)
        np.testing.assert_array_equal(got, _rotated_by(phi))


def test_python_int_positions_stay_integers():
    """Catches: every Python list of positions turned into float64 before the shift (the
    object-array test widened): 2**62 + 513 - 2 is exact in int64, but rounding 2**62 + 513
    first lands 1024 away."""
    got = rr.apply_rope(np.array([[1.0, 0.0]]), ONE_PAIR, [2**62 + 513], offset=-2)
    np.testing.assert_array_equal(got, _rotated_by([float(2**62 + 511)]))


def test_positions_of_another_namespace_than_x():
    """Catches: the NumPy exception for positions reversed (NumPy positions refused for a
    PyTorch x, PyTorch positions silently converted for a NumPy x)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((3, 2))
    want = rr.apply_rope(x, ONE_PAIR, np.array([0, 5, 9]))
    got = rr.apply_rope(torch.as_tensor(x), ONE_PAIR, np.array([0, 5, 9]))
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match=r"`positions` must be in the namespace of `x`"):
        rr.apply_rope(x, ONE_PAIR, torch.tensor([0, 5, 9]))


def test_ragged_positions_are_named():
    """Catches: NumPy's own ValueError for a ragged list let through."""
    with pytest.raises(ValueError, match=r"`positions` must be a real number or a rectangular"):
        rr.apply_rope(np.ones((2, 2, 2)), ONE_PAIR, [[0, 1], [2]])


def test_seq_axis_error_gives_the_valid_range():
    """Catches: a wrong range in the message (its ends from -ndim to ndim - 2)."""
    from rope_ref._core.positions import normalize_seq_axis

    with pytest.raises(ValueError, match=r"\(from -4 to 2, excluding -1\); got 7\.$"):
        normalize_seq_axis(7, 4)


def test_seq_axis_hints_name_the_first_other_axis_of_that_length():
    """Catches: hints for 2-D ids dropped, the ids' batch axis offered as the sequence,
    the length read from the batch, a 1-D grid's axis 0 skipped, or the last match named."""
    from rope_ref._core.positions import seq_axis_hint

    def hint(bad, ndim, good, length, axis_length):
        return (
            f" seq_axis={bad - ndim} has length {axis_length}, but axis {good - ndim} has "
            f"the positions' length {length}: pass seq_axis={good - ndim}."
        )

    assert seq_axis_hint((2, 16), (2, 16, 8), 2) == hint(2, 4, 1, 16, 8)  # (batch, seq) ids
    assert seq_axis_hint((16, 16), (16, 4, 8), 1) == ""  # axis 0 is the ids' batch
    assert seq_axis_hint((16,), (16, 4, 8), 1) == hint(1, 4, 0, 16, 4)  # 1-D: axis 0 counts
    assert seq_axis_hint((8,), (2, 16, 8), 1) == hint(1, 4, 2, 8, 16)
    assert seq_axis_hint((16,), (16, 16, 4, 8), 2) == hint(2, 5, 0, 16, 4)  # the first


def test_batch_seq_ids_are_recognised_by_shape():
    """Catches: ids with a batch of 1 not read as (batch, seq) ids when x has a batch,
    ids of 5-D x missed, and ids tried along axis 0 when seq_axis is 0."""
    from rope_ref._core.positions import grid_axes

    assert grid_axes((1, 4), (2, 4, 4), 1) == (0, 1)
    assert grid_axes((2, 4), (2, 3, 4, 5), 2) == (0, 2)
    assert grid_axes((1, 4), (4, 3, 4), 0) == (1, 2)  # right-aligned, as a full grid
