"""timm in `rope-ref survey`: axial, DINOv3 and M-RoPE rows agree at timm's float32 grids;
RoPE-Mixed (`RotaryEmbeddingMixed`) agrees with `rr.apply_rope_mixed`, whose angles are
checked against the paper's formula t_x f_x + t_y f_y written here, on the reference and Numba."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from tests._libraries import driver, require, rotate_pairs, rows


def test_axial_rows_agree_and_mixed_points_to_its_function():
    found = rows("timm")
    assert len(found) == 10
    for settings, row in found.items():
        if "RoPE-Mixed" in settings:
            assert row.verdict == "skipped"
            assert "apply_rope_mixed" in (row.diagnosis or "")
        else:
            assert row.verdict == "conformant", row


def test_pixel_grid_is_float32_linspace_and_log_bands_follow_the_formula():
    require("timm")
    timm = driver("timm")
    pe = timm._load()
    grid = pe._build_grid([14, 14], grid_type="pixel").numpy()
    assert grid.dtype == np.float32
    exact = np.linspace(-1.0, 1.0, 14)
    assert np.any(grid[:, 0, 0].astype(np.float64) != exact)  # the float32 values differ
    np.testing.assert_allclose(grid[:, 0, 0], exact, atol=1e-7)
    bands = pe.pixel_freq_bands(16, 224.0, linear_bands=False).double().numpy()
    expected = math.pi * 2.0 ** np.linspace(0.0, math.log2(224.0) - 1.0, 16)
    np.testing.assert_allclose(bands, expected, rtol=1e-6)
    np.testing.assert_allclose(timm._log_pixel_bands(16, 224.0), expected, rtol=1e-14)


@pytest.fixture
def mixed():
    require("timm")
    import torch

    pe = driver("timm")._load()
    torch.manual_seed(0)
    module = pe.RotaryEmbeddingMixed(dim=4 * 32, depth=2, num_heads=4, feat_shape=[6, 5])
    return pe, module


@pytest.mark.parametrize("backend", ["reference", "numba"])
def test_rope_mixed_matches_timm(mixed, backend):
    import torch

    pe, module = mixed
    x = np.random.default_rng(0).uniform(-1, 1, (2, 4, 30, 32)).astype(np.float32)
    sin, cos = module.get_embed()[1].detach().chunk(2, dim=-1)  # block 1
    expected = pe.apply_rot_embed(torch.from_numpy(x), sin, cos).numpy()
    freqs = np.moveaxis(module.freqs.detach().numpy()[:, 1], 0, 1)  # (heads, axes, pairs)
    positions = np.stack([module.t_x.numpy(), module.t_y.numpy()], axis=-1)
    got = rr.apply_rope_mixed(x, freqs, positions, backend=backend)
    np.testing.assert_allclose(got, expected, atol=3e-6)
    # the paper's angle, in float64: pair j of head h turns by t_x f_x + t_y f_y
    f = freqs.astype(np.float64)
    angles = positions[:, 0, None] * f[:, None, 0] + positions[:, 1, None] * f[:, None, 1]
    truth = rotate_pairs(x.astype(np.float64), angles[None], interleaved=True)
    np.testing.assert_allclose(got, truth, atol=1e-6 if backend == "numba" else 6e-8)


def test_mrope_sections_are_the_clamped_interleave():
    require("timm")
    pe = driver("timm")._load()
    module = pe.RotaryEmbeddingMRope(64, mrope_section=(8, 12, 12))
    axis = module.axis.numpy()
    # Qwen3-VL's interleave cut at 32 pairs: height at 1, 4, ..., width at 2, 5, ...
    expected = np.zeros(32, dtype=np.int64)
    expected[1:36:3], expected[2:36:3] = 1, 2
    np.testing.assert_array_equal(axis, expected)
    assert np.bincount(axis).tolist() == [11, 11, 10]  # timm's docstring
    assert driver("timm")._clamped((8, 12, 12)) == (11, 11, 10)
    spec = rr.RopeSpec(64, sections=(11, 11, 10), section_order="interleaved")
    assert rr.pair_axes(spec).tolist() == expected.tolist()
