"""A (batch, seq, heads, head_dim) result checked without ``seq_axis``: the positions ran
along axis -3, and the diagnosis says to pass ``seq_axis=-3`` (planted in plain NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, diagnose


def _bshd_rotation(x, p):
    """rotate_half RoPE of x (batch, seq, heads, d) with positions p along seq."""
    d = x.shape[-1]
    inv = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = p[None, :, None, None] * inv
    xr = x.astype(np.float64)
    a, b = xr[..., : d // 2], xr[..., d // 2 :]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(x.dtype)


@pytest.mark.parametrize(("seq", "heads", "given"), [(10, 4, False), (8, 8, True)])
def test_positions_along_axis_minus_3_are_named_with_seq_axis(seq, heads, given):
    x = np.random.default_rng(0).standard_normal((2, seq, heads, 16)).astype(np.float32)
    p = np.arange(seq) * 3 if given else np.arange(seq)
    y = _bshd_rotation(x, p)
    found = diagnose(y, x, rr.RopeSpec(16), p if given else None)
    assert found is not None
    assert found.cause == "positions", found
    assert "pass seq_axis=-3" in found.message
    with pytest.raises(AssertionError, match="pass seq_axis=-3"):
        assert_rope_close(y, x, rr.RopeSpec(16), p if given else None)
    assert diagnose(y, x, rr.RopeSpec(16), p if given else None, seq_axis=-3) is None
