"""Multi-axis mistakes planted in plain NumPy: per-axis ladders (``freqs=``, axial RoPE as
timm and Flux build it) with a wrong base, refitted axis by axis; a chunked M-RoPE spec
whose code interleaves the pairs as Qwen3-VL's apply_interleaved_mrope does on sections
that overrun the pairs (16, 24, 24 over 64 pairs): named with the sections that express it."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from tests._helpers import GRID_3_AXES as GRID
from tests._helpers import chunked_mrope as _mrope
from tests._helpers import inv_freq64 as _inv
from tests._helpers import uniform as _x
from tests._independent import rotate_pairs


def _rotate_half(x, angles):
    n = angles.shape[-1]
    xr = x.astype(np.float64)
    a, b = xr[..., :n], xr[..., n:]
    cos, sin = np.cos(angles), np.sin(angles)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1).astype(x.dtype)


def _ladder(n, base):
    return base ** (-np.arange(n, dtype=np.float64) / n)


@pytest.mark.parametrize(
    ("bases", "named"),
    [
        ((100.0, 100.0), "every axis's frequency ladder follows base 100, the spec's freqs= "),
        ((1234.0, 1234.0), "every axis's frequency ladder follows base 1234, "),
        ((10000.0, 100.0), "the frequency ladder of axis 1 (pairs 16-31) follows base 100, "),
    ],
)
def test_per_axis_ladders_with_a_wrong_base_are_refitted(bases, named):
    d, sections = 64, (16, 16)
    rows, cols = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    grid = np.stack([rows.ravel(), cols.ravel()], -1)  # (row, column) per patch
    x = np.random.default_rng(0).standard_normal((grid.shape[0], d)).astype(np.float32)
    theta = np.concatenate([_ladder(16, bases[0]), _ladder(16, bases[1])])
    axis_of_pair = np.repeat([0, 1], 16)
    y = _rotate_half(x, grid[:, axis_of_pair] * theta)
    spec = rr.RopeSpec(d, freqs=rr.axial_freqs(sections), sections=sections)
    found = diagnose(y, x, spec, grid)
    assert found is not None
    assert found.cause == "frequencies", found
    assert found.message.startswith(named), found


def _apply_interleaved_mrope(freqs, mrope_section):
    """transformers' Qwen3-VL apply_interleaved_mrope, in NumPy: freqs (3, rows, pairs)."""
    freqs_t = freqs[0].copy()
    for dim, offset in enumerate((1, 2), start=1):
        length = mrope_section[dim] * 3
        idx = slice(offset, length, 3)
        freqs_t[..., idx] = freqs[dim, ..., idx]
    return freqs_t


def test_interleaved_code_on_sections_that_overrun_the_pairs_is_named_with_its_sections():
    d, mrope_section = 128, (16, 24, 24)
    rng = np.random.default_rng(1)
    rows = 40
    grid = np.stack([np.arange(rows), rng.integers(0, 20, rows), rng.integers(0, 30, rows)], -1)
    inv = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    freqs = grid.T[:, :, None] * inv  # (3, rows, 64)
    x = rng.standard_normal((rows, d)).astype(np.float32)
    y = _rotate_half(x, _apply_interleaved_mrope(freqs, mrope_section))
    found = diagnose(y, x, rr.RopeSpec(d, sections=mrope_section), grid)
    assert found is not None
    assert found.cause == "sections", found
    assert "apply_interleaved_mrope" in found.message
    assert "the axes get [22, 21, 21] pairs" in found.message
    assert "sections=(22, 21, 21), section_order='interleaved'" in found.message
    # and that spec is the code's: it passes
    spec = rr.RopeSpec(d, sections=(22, 21, 21), section_order="interleaved")
    assert diagnose(y, x, spec, grid) is None


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


def test_multi_axis_positions_read_in_another_axis_order_are_named():
    x = _x((GRID.shape[0], 16), 35)
    y = _mrope(x, GRID[:, [1, 0, 2]], (2, 3, 3))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message.startswith("the position axes are read in the order [1, 0, 2] ")


@pytest.mark.parametrize("axis", [0, 2])
def test_multi_axis_positions_collapsed_to_one_axis_name_that_axis(axis):
    x = _x((GRID.shape[0], 16), 36)
    y = rotate_pairs(x, GRID[:, axis : axis + 1] * _inv(16))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message.startswith(f"the result is 1-D RoPE at the positions of axis {axis} ")


def test_multi_axis_result_with_a_common_split_of_the_pairs_names_it():
    """Catches: the common section splits not tried (they are not a permutation of the
    spec's)."""
    x = _x((GRID.shape[0], 16), 40)
    y = _mrope(x, GRID, (2, 3, 3))
    found = diagnose(y, x, rr.RopeSpec(16, sections=(4, 2, 2)), GRID)
    assert found is not None
    assert found.cause == "sections"
    assert found.message == "the sections are [2, 3, 3], not the spec's [4, 2, 2]."
