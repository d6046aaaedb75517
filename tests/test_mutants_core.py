"""Core rules where a planted mistake in rope_ref/_core hides."""

from __future__ import annotations

import inspect

import pytest

import rope_ref as rr


def test_xpos_default_scale_base_is_rotary_embedding_torch_own():
    """Catches: a changed default ``scale_base`` (rotary-embedding-torch's is 512)."""
    ret = pytest.importorskip("rotary_embedding_torch")
    default = inspect.signature(ret.RotaryEmbedding).parameters["xpos_scale_base"].default
    assert rr.XPos().scale_base == default == 512


@pytest.mark.parametrize("phi", [0.0, 0.5, -3.0, 1e4])
def test_angle_error_and_tolerance_are_their_documented_formulas(phi):
    """Catches: a changed constant in the error model's bounds (2 eps (|phi| + 1), and
    magnitude (roundings eps + 2 angle_error))."""
    from rope_ref._core.error_model import angle_error, tolerance

    eps64, eps32 = 2.0**-52, 2.0**-23
    assert angle_error(phi) == 2.0 * eps64 * (abs(phi) + 1.0)
    assert angle_error(phi, angle_eps=eps32) == 2.0 * eps32 * (abs(phi) + 1.0)
    for roundings in (1, 2, 3):
        want = 3.0 * (roundings * eps32 + 4.0 * eps64 * (abs(phi) + 1.0))
        got = tolerance(eps32, max_angle=phi, magnitude=3.0, roundings=roundings)
        assert got == pytest.approx(want, rel=1e-15)
    default = tolerance(eps32, max_angle=phi, magnitude=3.0)  # two roundings by default
    assert default == pytest.approx(3.0 * (2 * eps32 + 4.0 * eps64 * (abs(phi) + 1.0)), rel=1e-15)
    with pytest.raises(ValueError, match="`roundings`"):
        tolerance(eps32, max_angle=phi, magnitude=3.0, roundings=0)
