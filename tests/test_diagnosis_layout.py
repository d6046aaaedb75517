"""Layout mistakes planted in plain NumPy are named whatever the data: a cos/sin table of one
layout applied with the other rotation (either one differing from the spec), over random
inputs in every float dtype; pairs read in one layout and written in another (DeepSeek MLA's
interleaved-in/half-out) and the spec's own MLA convention dropped."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose

D = 32


def _inv(d=D):
    return 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def _full(table, layout):
    return np.concatenate([table, table], -1) if layout == "half" else np.repeat(table, 2, -1)


def _partner(x, layout):
    """rotate_half(x) for "half"; (-x1, x0, -x3, x2, ...) for "interleaved"."""
    if layout == "half":
        n = x.shape[-1] // 2
        return np.concatenate([-x[..., n:], x[..., :n]], -1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return out


def _draw(seed):
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(2, 40))
    p = np.arange(rows) if seed % 2 else np.sort(rng.choice(100000, rows, replace=False))
    dtype = (np.float32, np.float16, np.float64)[seed % 3]
    return p, rng.standard_normal((2, rows, D)).astype(dtype)


@pytest.mark.parametrize(
    ("spec_layout", "table", "rotation"),
    [
        ("half", "half", "interleaved"),  # the rotation differs from the spec
        ("interleaved", "interleaved", "half"),
        ("half", "interleaved", "half"),  # the table differs from the spec
        ("interleaved", "half", "interleaved"),
    ],
)
def test_a_table_of_one_layout_rotated_in_the_other_is_named_on_every_draw(
    spec_layout, table, rotation
):
    for seed in range(12):
        p, x = _draw(seed)
        angles = p[:, None] * _inv()
        xr = x.astype(np.float64)
        y = xr * _full(np.cos(angles), table) + _partner(xr, rotation) * _full(
            np.sin(angles), table
        )
        found = diagnose(y.astype(x.dtype), x, rr.RopeSpec(D, layout=spec_layout), p)
        assert found is not None
        assert found.cause == "table_layout", (seed, x.dtype, found)


def _interleaved_rotation(x, p):
    """Pairs (2j, 2j + 1) rotated, in float64, written back interleaved."""
    xr = x.astype(np.float64)
    a, b = xr[..., 0::2], xr[..., 1::2]
    angles = p[:, None] * _inv()
    cos, sin = np.cos(angles), np.sin(angles)
    return a * cos - b * sin, b * cos + a * sin


def test_mla_interleaved_in_half_out_against_a_plain_spec_is_named_a_layout():
    p = np.arange(0, 3000, 97)
    x = np.random.default_rng(1).standard_normal((p.size, D)).astype(np.float32)
    first, second = _interleaved_rotation(x, p)
    y = np.concatenate([first, second], -1).astype(np.float32)  # written half
    found = diagnose(y, x, rr.RopeSpec(D, layout="interleaved"), p)
    assert found is not None
    assert found.cause == "layout", found
    assert "reads pairs in the 'interleaved' layout and writes them in the 'half'" in found.message
    assert "DeepSeek MLA" in found.message


def test_an_mla_spec_whose_output_permutation_was_dropped_is_named_a_layout():
    p = np.arange(0, 3000, 97)
    x = np.random.default_rng(2).standard_normal((p.size, D)).astype(np.float32)
    first, second = _interleaved_rotation(x, p)
    y = np.stack([first, second], -1).reshape(x.shape).astype(np.float32)  # written interleaved
    spec = rr.RopeSpec(D, layout="interleaved", output_layout="half")
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "layout", found
    assert (
        "writes them in the 'interleaved' layout; the spec reads 'interleaved' and writes 'half'"
        in (found.message)
    )
