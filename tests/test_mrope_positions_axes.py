"""`mrope_positions(..., axes=4)`: the position columns of a four-axis pair map (ggml's
IMROPE, whose fourth position e llama.cpp sets to 0 for text and images alike), checked
against ids written by hand and a rotation written out in float64."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._independent import rotate_pairs

#: Text (2 tokens), a 1 x 4 x 6 image merged 2 x 2 (6 tokens), text (2 tokens), with
#: llama.cpp's fourth column e = 0 (mtmd's set_position_mrope_2d / _1d).
BY_HAND = [
    [0, 0, 0, 0],
    [1, 1, 1, 0],
    [2, 2, 2, 0],
    [2, 2, 3, 0],
    [2, 2, 4, 0],
    [2, 3, 2, 0],
    [2, 3, 3, 0],
    [2, 3, 4, 0],
    [5, 5, 5, 0],
    [6, 6, 6, 0],
]
SEGMENTS = [2, (1, 4, 6), 2]


def test_four_columns_are_t_h_w_then_e_zero():
    ids = rr.mrope_positions(SEGMENTS, merge_size=2, axes=4)
    assert ids.dtype == np.int64
    assert ids.tolist() == BY_HAND
    three = rr.mrope_positions(SEGMENTS, merge_size=2)
    assert three.tolist() == [row[:3] for row in BY_HAND]  # the default stays (t, h, w)
    assert rr.mrope_positions([], axes=4).shape == (0, 4)
    assert rr.mrope_positions([1], axes=5).tolist() == [[0, 0, 0, 0, 0]]


def test_a_four_axis_map_rotates_with_the_four_columns():
    """IMROPE's interleave over 8 pairs with the last pair on e: with e = 0 that pair
    stays put, the others turn by their axis's position times theta_j = 10000^(-2j/16)."""
    pair_map = (0, 1, 2, 0, 1, 2, 0, 3)
    spec = rr.RopeSpec(head_dim=16, section_order=pair_map)
    ids = rr.mrope_positions(SEGMENTS, merge_size=2, axes=spec.position_axes)
    x = np.random.default_rng(3).uniform(-1.0, 1.0, (len(BY_HAND), 16))
    theta = 10000.0 ** (-np.arange(0, 16, 2, dtype=np.float64) / 16)
    by_hand = np.asarray(BY_HAND, dtype=np.float64)
    angles = by_hand[:, list(pair_map)] * theta
    np.testing.assert_allclose(rr.apply_rope(x, spec, ids), rotate_pairs(x, angles), atol=1e-12)


@pytest.mark.parametrize(
    ("axes", "error", "message"),
    [
        (2, ValueError, r"`axes` must be at least 3; got 2\."),
        (32769, ValueError, r"`axes` must be at most 32768 \(one per pair\); got 32769\."),
        (4.0, TypeError, r"`axes` must be an integer; got 4\.0\."),
        (True, TypeError, r"`axes` must be an integer; got True\."),
    ],
)
def test_a_bad_axis_count_is_refused_naming_axes(axes, error, message):
    with pytest.raises(error, match=message):
        rr.mrope_positions([2], axes=axes)
