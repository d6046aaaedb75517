"""Layout mistakes planted in plain NumPy are named whatever the data: a cos/sin table of one
layout applied with the other rotation (either one differing from the spec), over random
inputs in every float dtype; pairs read in one layout and written in another (DeepSeek MLA's
interleaved-in/half-out) and the spec's own MLA convention dropped."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import diagnose
from tests._helpers import GRID_3_AXES as GRID
from tests._helpers import SPARSE_POSITIONS as P
from tests._helpers import uniform as _x
from tests._independent import rotate_pairs

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


def test_layout_and_direction_together_are_reported_as_layout():
    """Catches: the third branch of the layout check labelled "direction"."""
    spec = rr.RopeSpec(16, layout="half")
    x = np.random.default_rng(3).uniform(-1.0, 1.0, (6, 16))
    p = np.arange(6) * 37 + 5
    other = dataclasses.replace(spec, layout="interleaved")
    wrong = rr.apply_rope(x, other, p, inverse=True)  # other pairs and the other way
    found = diagnose(wrong, x, spec, p)
    assert found is not None
    assert found.cause == "layout"
    assert "also rotates the other way" in found.message
    only_inverse = diagnose(rr.apply_rope(x, spec, p, inverse=True), x, spec, p)
    assert only_inverse is not None
    assert only_inverse.cause == "direction"


def test_an_inverse_rotation_with_a_table_of_the_other_layout_is_named():
    """Catches: the sign of the inverse dropped from the table-layout candidate (it then
    rotates forwards, and the inverse rotation's mistake goes unnamed)."""
    d = 16
    x = np.random.default_rng(20).uniform(-1.0, 1.0, (2, P.size, d))
    angles = P[:, None] * _inv(d)
    cos, sin = np.repeat(np.cos(angles), 2, -1), np.repeat(np.sin(angles), 2, -1)
    partner = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)  # rotate_half
    y = x * cos - partner * sin  # sin negated: the inverse
    found = diagnose(y, x, rr.RopeSpec(d), P, inverse=True)
    assert found is not None
    assert found.cause == "table_layout"
    assert "built for the 'interleaved' layout" in found.message


def test_a_rotation_over_the_whole_head_for_a_partial_spec_names_both_ranges():
    """Catches: the range tried, or the range named, off by a pair or at the wrong start."""
    x, p = _x((6, 16), 30), np.arange(6) * 7
    y = rotate_pairs(x, p[:, None] * _inv(16))  # all 16 features, where the spec rotates 8
    found = diagnose(y, x, rr.RopeSpec(16, rotary_dim=8), p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message == (
        "the result rotates features [0, 16) (rotary_dim=16, rotary_start=0), but the spec "
        "rotates [0, 8) (rotary_dim=8, rotary_start=0); partial rotary was ignored or misplaced."
    )


def test_changed_pass_through_features_are_listed_first_eight():
    """Catches: the pass-through check skipped or inverted, or the list cut elsewhere."""
    x, p = _x((6, 32), 31), np.arange(6) * 7
    y = x.copy()
    y[:, :8] = rotate_pairs(x[:, :8], p[:, None] * _inv(8))
    y[:, 8:] *= 2.0  # the pass-through features doubled
    found = diagnose(y, x, rr.RopeSpec(32, rotary_dim=8), p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message.startswith(
        "features [8, 9, 10, 11, 12, 13, 14, 15] changed although the spec rotates only [0, 8)"
    )


def test_an_inverse_read_in_half_order_names_a_wrong_pair_by_its_index():
    """Catches: the layouts of an inverse taken the forward way round (it reads the
    written layout and writes the read one): the failing pair is then misnamed. The target
    undoes an interleaved-in, half-out rotation: it reads [a | b], turns pair j back by
    its angle, and writes pairs (2j, 2j + 1); pair 5 turns at 0.5 rad per position."""
    d, p = 64, np.arange(16) * 37.0
    x = _x((2, 16, d), 45)
    inv = _inv(d)
    inv[5] = 0.5
    angle = p[:, None] * inv
    a, b = x[..., : d // 2], x[..., d // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = np.stack([a * cos + b * sin, b * cos - a * sin], axis=-1).reshape(x.shape)
    spec = rr.RopeSpec(d, layout="interleaved", output_layout="half")
    found = diagnose(y, x, spec, p, inverse=True)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.startswith("pairs 0-4, 6-31 match the given positions and pairs 5 do")


def test_a_right_inverse_read_in_half_order_passes_in_float64():
    """Catches: the tolerance of an inverse result built from pairs in the forward written
    layout (pairing features that the inverse never pairs): a right result, rounded as
    float64 rounds, then fails where a mis-paired norm is small."""
    d, p = 64, np.arange(16) * 37.0
    x = _x((2, 16, d), 45)
    angle = p[:, None] * _inv(d)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    y = np.stack([a * cos + b * sin, b * cos - a * sin], axis=-1).reshape(x.shape)
    spec = rr.RopeSpec(d, layout="interleaved", output_layout="half")
    assert diagnose(y, x, spec, p, inverse=True) is None


def _other_table(x, angles, table, rotation):
    """x cos + partner(x) sin with full-width tables built for `table`, rotated as `rotation`."""
    d = x.shape[-1]
    if table == "half":
        cos, sin = (np.concatenate([t, t], -1) for t in (np.cos(angles), np.sin(angles)))
    else:
        cos, sin = np.repeat(np.cos(angles), 2, -1), np.repeat(np.sin(angles), 2, -1)
    if rotation == "half":
        partner = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    else:
        partner = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    return x * cos + partner * sin


def test_a_table_of_the_other_layout_is_named_for_two_pairs():
    """Catches: the table-layout check skipped for two pairs (the fewest it can tell)."""
    x, p = _x((P.size, 4), 46), P
    y = _other_table(x, p[:, None] * _inv(4), "interleaved", "half")
    found = diagnose(y, x, rr.RopeSpec(4), p)
    assert found is not None
    assert found.cause == "table_layout"


def test_a_multi_axis_table_of_the_other_layout_is_named():
    """Catches: M-RoPE left out of the table-layout check (the result was `unknown`): a
    chunked M-RoPE cos/sin table built as repeat_interleave and rotated with rotate_half."""
    x = _x((GRID.shape[0], 16), 47)
    axis = np.repeat(np.arange(3), (2, 3, 3))
    y = _other_table(x, GRID[:, axis] * _inv(16), "interleaved", "half")
    found = diagnose(y, x, rr.RopeSpec(16, sections=(2, 3, 3)), GRID)
    assert found is not None
    assert found.cause == "table_layout"
    assert "built for the 'interleaved' layout" in found.message


# A zero first pair in `x` stays zero: the first changed feature is then past the start.
@pytest.mark.parametrize(
    ("spec", "start", "width", "zero", "want"),
    [
        (
            rr.RopeSpec(16, rotary_dim=8, rotary_start=4),
            0,
            8,
            (),
            "[4, 12) (rotary_dim=8, rotary_start=4)",
        ),
        (rr.RopeSpec(16, rotary_dim=8), 2, 8, (), "[0, 8) (rotary_dim=8, rotary_start=0)"),
        (
            rr.RopeSpec(16, rotary_dim=6, rotary_start=2),
            2,
            10,
            (),
            "[2, 8) (rotary_dim=6, rotary_start=2)",
        ),
        (
            rr.RopeSpec(16, rotary_dim=6, rotary_start=2),
            2,
            10,
            (2, 7),
            "[2, 8) (rotary_dim=6, rotary_start=2)",
        ),
        (
            rr.RopeSpec(16, rotary_dim=8, rotary_start=4),
            0,
            8,
            (0, 4),
            "[4, 12) (rotary_dim=8, rotary_start=4)",
        ),
    ],
)
def test_a_rotated_range_at_another_start_or_width_is_named(spec, start, width, zero, want):
    """Catches: the starts tried (the first changed feature, the spec's start, 0) or the
    widths tried (from the changed span rounded up to whole pairs) cut short."""
    x, p = _x((6, 16), 56), np.arange(6) * 7 + 1
    x[:, list(zero)] = 0.0
    y = x.copy()
    y[:, start : start + width] = rotate_pairs(
        x[:, start : start + width], p[:, None] * _inv(width)
    )
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "rotary_dim"
    assert found.message == (
        f"the result rotates features [{start}, {start + width}) (rotary_dim={width}, "
        f"rotary_start={start}), but the spec rotates {want}; partial rotary was ignored or "
        "misplaced."
    )
