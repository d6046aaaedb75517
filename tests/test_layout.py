"""Feature layouts (rope_ref/_engine/layout.py): `convert_layout`, `permute_weights` as HF
permutes a projection, and the output layout the kernel writes.

Expected values are HF's permutation and the layouts' definitions written here.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import rope_rotate_half as _rotate_half


def test_feature_order_between_equal_layouts_is_the_identity():
    """Catches: the identity order of src == dst broken (only the crossings were read)."""
    for spec in (rr.RopeSpec(6), rr.RopeSpec(10, rotary_dim=4, rotary_start=2)):
        for layout in ("half", "interleaved"):
            assert rr.feature_order(spec, layout, layout) == list(range(spec.head_dim))


def _half_from_interleaved(n: int) -> list[int]:
    """Half-layout feature h is interleaved feature 2h (first halves) or 2(h - n) + 1."""
    return [2 * h if h < n else 2 * (h - n) + 1 for h in range(2 * n)]


def _hf_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """HF's ``convert_llama_weights_to_hf`` permute: (heads, d/2, 2, in) -> (heads, 2, d/2, in)."""
    rows = w.shape[0]
    flat = w.reshape(n_heads, rows // n_heads // 2, 2, -1)
    return np.swapaxes(flat, 1, 2).reshape(w.shape)


def test_convert_layout_moves_the_feature_axis_of_every_token():
    """Catches: the permutation taken along another axis than the last (tokens reordered)."""
    x = np.arange(3 * 6, dtype=np.float64).reshape(3, 6)
    got = rr.convert_layout(x, rr.RopeSpec(6), src="interleaved", dst="half")
    np.testing.assert_array_equal(got, x[:, _half_from_interleaved(3)])
    back = rr.convert_layout(got, rr.RopeSpec(6), src="half", dst="interleaved")
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize(("n_heads", "in_features"), [(1, 3), (2, 3), (3, 5), (2, 16)])
def test_permute_weights_permutes_rows_of_a_projection_as_hf_does(n_heads, in_features):
    """Catches: 2-D weights refused, head_dim or divisibility read from the input features
    (the last axis), columns permuted instead of rows, and a single head refused."""
    head_dim = 8
    w = np.random.default_rng(n_heads).standard_normal((n_heads * head_dim, in_features))
    got = rr.permute_weights(w, n_heads=n_heads)
    np.testing.assert_array_equal(got, _hf_permute(w, n_heads))
    bias = w[:, 0].copy()
    np.testing.assert_array_equal(rr.permute_weights(bias, n_heads=n_heads), got[:, 0])


@pytest.mark.parametrize(
    ("shape", "n_heads", "match"),
    [
        ((2, 8, 3), 2, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # 3-D
        ((2, 4, 2, 3), 2, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # 4-D
        ((12,), 5, r"`w` must be \(n_heads \* head_dim, in_features\)"),  # rows not divisible
        ((12, 4), 0, r"`n_heads` must be at least 1; got 0"),
    ],
)
def test_permute_weights_refuses_shapes_it_cannot_split_into_heads(shape, n_heads, match):
    """Catches: weights of more than two axes accepted, the divisibility check dropped when
    the weight has one or two axes, and zero heads reaching a division."""
    with pytest.raises(ValueError, match=match):
        rr.permute_weights(np.ones(shape), n_heads=n_heads)


def test_the_kernel_writes_pairs_in_the_spec_s_output_layout():
    """Catches: the spec's `output_layout` not handed to the kernel (pairs read interleaved
    written interleaved) or handed on when it is not set."""
    pytest.importorskip("numba")
    x = np.random.default_rng(10).standard_normal((3, 8))
    spec = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    positions = np.arange(3) + 2
    got = rr.apply_rope(x, spec, positions, backend="numba")
    order = _half_from_interleaved(4)  # interleaved feature order[h] is written at h
    want = _rotate_half(x[:, order], positions)  # the interleaved rotation, laid out as half
    np.testing.assert_allclose(got, want, atol=1e-13)
    plain = rr.apply_rope(x, rr.RopeSpec(8), positions, backend="numba")
    np.testing.assert_allclose(plain, _rotate_half(x, positions), atol=1e-13)
