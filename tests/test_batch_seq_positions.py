"""HF-style (batch, seq) position ids are read along seq_axis, never against trailing axes.

The expected values come from rotating each batch row with its own 1-D positions.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr


def _rows_one_by_one(x, spec, ids, seq_axis):
    """Each batch row rotated with its own 1-D positions: the meaning of (batch, seq) ids."""
    return np.stack([rr.apply_rope(x[b], spec, ids[b], seq_axis=seq_axis) for b in range(len(x))])


@pytest.mark.parametrize("batch", [1, 3])
def test_batch_seq_ids_with_seq_before_heads_and_seq_equal_to_heads(batch):
    spec = rr.RopeSpec(head_dim=8)
    seq = heads = 4  # the trap: the ids' last axis also fits the heads axis
    x = np.random.default_rng(0).standard_normal((batch, seq, heads, 8))
    ids = np.arange(batch * seq).reshape(batch, seq) * 7 + 3
    got = rr.apply_rope(x, spec, ids, seq_axis=-3)
    np.testing.assert_allclose(got, _rows_one_by_one(x, spec, ids, -3), rtol=0, atol=1e-12)


def test_batch_seq_ids_with_heads_before_seq():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 8))  # (batch, heads, seq, d)
    ids = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 90]])
    got = rr.apply_rope(x, spec, ids)
    np.testing.assert_allclose(got, _rows_one_by_one(x, spec, ids, -2), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got, rr.apply_rope(x, spec, ids[:, None, :]), rtol=0, atol=0)


def test_ids_that_can_be_read_two_ways_raise():
    spec = rr.RopeSpec(head_dim=8)
    x = np.zeros((2, 2, 5, 8))  # batch == heads: (batch, seq) or (heads, seq)?
    with pytest.raises(ValueError, match=r"can be read two ways.*positions\[:, None, :\]"):
        rr.apply_rope(x, spec, np.zeros((2, 5)))
    np.testing.assert_allclose(rr.apply_rope(x + 1, spec, np.zeros((2, 1, 5))), x + 1)


def test_a_full_grid_still_broadcasts():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 8))  # e.g. a 3 x 5 image grid
    grid = np.arange(15).reshape(3, 5)
    expected = np.stack([rr.apply_rope(x[b], spec, grid) for b in range(2)])
    np.testing.assert_allclose(rr.apply_rope(x, spec, grid), expected, rtol=0, atol=0)


def test_testing_kit_reads_ids_the_same_way():
    spec = rr.RopeSpec(head_dim=8)
    x = np.random.default_rng(2).standard_normal((1, 4, 4, 8)).astype(np.float32)
    ids = np.array([[5, 6, 7, 8]])
    correct = _rows_one_by_one(x, spec, ids, -3).astype(np.float32)
    rr.testing.assert_rope_close(correct, x, spec, ids, seq_axis=-3)
