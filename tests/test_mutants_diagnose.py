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
