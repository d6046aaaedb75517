"""Errors that involve the sequence length name `seq_axis` and the axis that fits."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr

X_BSHD = np.zeros((2, 16, 8, 64))  # (batch, seq, heads, head_dim): needs seq_axis=-3


@pytest.mark.parametrize(
    "positions", [np.arange(16), np.zeros((2, 16), dtype=np.int64)], ids=["1-D", "ids"]
)
def test_positions_that_fit_another_axis_suggest_it(positions):
    with pytest.raises(ValueError, match=r"seq_axis=-2 has length 8") as info:
        rr.apply_rope(X_BSHD, None, positions)
    assert "axis -3 has the positions' length 16: pass seq_axis=-3." in str(info.value)
    rr.apply_rope(X_BSHD, None, positions, seq_axis=-3)  # and that is the fix


def test_the_suggested_axis_is_counted_from_the_end_for_any_rank():
    x = np.zeros((3, 10, 2, 4, 32))  # (batch, seq, groups, heads, head_dim)
    with pytest.raises(ValueError, match=r"pass seq_axis=-4\.$"):
        rr.apply_rope(x, None, np.arange(10))


def test_no_axis_is_suggested_when_none_fits():
    with pytest.raises(ValueError, match=r"got a position grid of shape \(5,\)\.$"):
        rr.apply_rope(X_BSHD, None, np.arange(5))


def test_ids_never_suggest_the_batch_axis():
    x = np.zeros((4, 3, 8, 64))  # ids of shape (batch, 4): 4 is the batch size, not a seq
    with pytest.raises(ValueError, match="must broadcast") as info:
        rr.apply_rope(x, None, np.zeros((4, 4), dtype=np.int64))
    assert "pass seq_axis" not in str(info.value)


def test_too_many_query_tokens_names_seq_axis():
    with pytest.raises(ValueError, match=r"tokens along `seq_axis`"):
        rr.apply_rope_qk(np.zeros((1, 8, 5, 64)), np.zeros((1, 8, 3, 64)), None)


def test_a_4d_x_without_seq_axis_is_no_warning():
    # filterwarnings = error: a warning here would fail the test
    y = rr.apply_rope(X_BSHD, None)
    assert y.shape == X_BSHD.shape
