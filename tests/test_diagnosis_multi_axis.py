"""Multi-axis mistakes planted in plain NumPy: per-axis ladders (``freqs=``, axial RoPE as
timm and Flux build it) with a wrong base, refitted axis by axis; a chunked M-RoPE spec
whose code interleaves the pairs as Qwen3-VL's apply_interleaved_mrope does on sections
that overrun the pairs (16, 24, 24 over 64 pairs): named with the sections that express it."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose


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
