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


def _x(shape, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _inv(d, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def _rotate(x, angles):
    """Rotate the pairs (j, j + n) of `x` by `angles` (shape ``x.shape[:-1] + (n,)``)."""
    n = angles.shape[-1]
    a, b = x[..., :n], x[..., n : 2 * n]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., 2 * n :]], axis=-1)


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
    y = _rotate(x, _bf16(p[:, None] * _inv(16))) * 1.5
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
    found = diagnose(_rotate(x, (p + delta)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "position_precision"
    assert found.message.startswith(f"the errors fit positions rounded to {name} by")


@pytest.mark.parametrize(
    ("rounded", "name", "exact"), [(_f16, "float16", 2**11), (_bf16, "bfloat16", 2**8)]
)
def test_positions_held_in_a_half_precision_name_where_it_stops_being_exact(rounded, name, exact):
    """Catches: the largest exact integer of float16 (2**11) or bfloat16 (2**8) misstated."""
    x, p = _x((12, 16), 3), np.arange(0, 6000, 500) + 3.0
    found = diagnose(_rotate(x, rounded(p)[:, None] * _inv(16)), x, rr.RopeSpec(16), p)
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
    y = _rotate(x, twice[:, None] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16), p, seq_axis=seq_axis)
    assert found is not None
    assert found.cause == "precision"
    assert found.message.startswith(
        "positions were held in bfloat16, which is exact only up to 256:"
    )
