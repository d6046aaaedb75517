"""Diagnoses where a planted mistake in rope_ref/testing/_diagnose.py hides."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose


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
