"""Multi-axis RoPE: M-RoPE reductions, axial frequencies, position grids and ids."""

from __future__ import annotations

import re

import array_api_compat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rope_ref as rr
from tests._helpers import host


@st.composite
def sectioned_specs(draw):
    n_axes = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 6), min_size=n_axes, max_size=n_axes))
    order = draw(st.sampled_from(["chunked", "interleaved"]))
    n_pairs = sum(sizes)
    if order == "interleaved":  # axis a needs pair a + n_axes * (size - 1) to exist
        sizes[0] += max(0, max(a + n_axes * (s - 1) + 1 for a, s in enumerate(sizes)) - n_pairs)
    layout = draw(st.sampled_from(["half", "interleaved"]))
    base = draw(st.floats(2.0, 1e6))
    return rr.RopeSpec(
        2 * sum(sizes), base=base, layout=layout, sections=tuple(sizes), section_order=order
    )


#: JAX compiles each operation once per shape: its draws use 6 pairs and these sections
#: (bases, layouts and positions still vary), so the compile cache stays warm.
JAX_SECTIONS = {
    "chunked": [(6,), (3, 3), (2, 2, 2), (1, 2, 3), (2, 1, 1, 2)],
    "interleaved": [(6,), (3, 3), (2, 2, 2)],
}


@st.composite
def bucketed_sectioned_specs(draw):
    order = draw(st.sampled_from(sorted(JAX_SECTIONS)))
    sections = draw(st.sampled_from(JAX_SECTIONS[order]))
    layout = draw(st.sampled_from(["half", "interleaved"]))
    base = draw(st.floats(2.0, 1e6))
    return rr.RopeSpec(12, base=base, layout=layout, sections=sections, section_order=order)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # xp is stateless
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_equal_axis_mrope_is_one_dimensional_rope(xp, data, seed):
    jax = array_api_compat.is_jax_namespace(xp)
    spec = data.draw(bucketed_sectioned_specs() if jax else sectioned_specs(), label="spec")
    rng = np.random.default_rng(seed)
    x = xp.asarray(rng.standard_normal((2, 5, spec.head_dim)))
    p = rng.integers(-1000, 100_000, size=(2, 5))
    plain = rr.RopeSpec(spec.head_dim, base=spec.base, layout=spec.layout)
    expected = rr.apply_rope(x, plain, xp.asarray(p))
    same = xp.asarray(np.repeat(p[..., None], spec.n_axes, axis=-1))
    np.testing.assert_array_equal(host(rr.apply_rope(x, spec, same)), host(expected))


@given(spec=sectioned_specs(), seed=st.integers(0, 2**32 - 1))
def test_each_pair_follows_its_axis(spec, seed):
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 1000, size=(3, spec.n_axes))
    angles = rr.rope_angles(spec, p)
    theta = rr.inv_freq(spec)
    axes = rr.pair_axes(spec)
    np.testing.assert_array_equal(angles, p[:, axes] * theta)
    assert np.bincount(axes, minlength=spec.n_axes).tolist() == list(spec.sections)


def test_axial_freqs_restart_per_axis():
    freqs = rr.axial_freqs((3, 2), base=10000.0)
    np.testing.assert_allclose(
        freqs[:3], [1.0, 10000.0 ** (-1 / 3), 10000.0 ** (-2 / 3)], rtol=2**-52
    )
    np.testing.assert_allclose(freqs[3:], [1.0, 0.01], rtol=2**-52)
    pixel = rr.axial_freqs((3,), kind="pixel", max_freq=10.0)
    np.testing.assert_allclose(pixel, np.pi * np.array([1.0, 3.0, 5.0]), rtol=2**-52)


def test_axial_rope_of_a_grid_is_two_independent_1d_ropes():
    d = 16
    spec = rr.RopeSpec(d, freqs=rr.axial_freqs((4, 4)), sections=(4, 4))
    rows, cols = 3, 5
    grid = rr.patch_positions((rows, cols))
    x = np.random.default_rng(1).standard_normal((rows * cols, d))
    y = rr.apply_rope(x, spec, grid)
    # Half layout over 8 pairs: pairs 0-3 (features 0-3 with 8-11) follow the row with the
    # 8-feature RoPE ladder; pairs 4-7 (features 4-7 with 12-15) follow the column.
    row_part = np.concatenate([x[:, 0:4], x[:, 8:12]], axis=-1)
    col_part = np.concatenate([x[:, 4:8], x[:, 12:16]], axis=-1)
    rope8 = rr.RopeSpec(8)
    rows_rot = rr.apply_rope(row_part, rope8, grid[:, 0])
    cols_rot = rr.apply_rope(col_part, rope8, grid[:, 1])
    expected = np.concatenate(
        [rows_rot[:, :4], cols_rot[:, :4], rows_rot[:, 4:], cols_rot[:, 4:]], axis=-1
    )
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-14)


def test_patch_positions_orders_and_kinds():
    grid = rr.patch_positions((2, 3, 4))
    assert grid.shape == (24, 3)
    assert grid.dtype == np.int64
    np.testing.assert_array_equal(grid.reshape(2, 3, 4, 3)[1, 2, 3], [1, 2, 3])
    merged = rr.patch_positions((4, 4), merge_size=2)
    assert merged[:4].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert merged[4:8].tolist() == [[0, 2], [0, 3], [1, 2], [1, 3]]
    assert sorted(map(tuple, merged.tolist())) == sorted(
        map(tuple, rr.patch_positions((4, 4)).tolist())
    )
    pixel = rr.patch_positions((2, 5), kind="pixel")
    assert pixel.dtype == np.float64
    np.testing.assert_array_equal(np.unique(pixel[:, 1]), [-1.0, -0.5, 0.0, 0.5, 1.0])


def test_patch_positions_errors():
    with pytest.raises(ValueError, match=r"`shape` must be at least 1"):
        rr.patch_positions((0, 3))
    with pytest.raises(
        ValueError,
        match=re.escape("`merge_size` must divide the last two sizes of shape (3, 4); got 2."),
    ):
        rr.patch_positions((3, 4), merge_size=2)
    with pytest.raises(ValueError, match=r"`kind` must be one of 'index', 'pixel'"):
        rr.patch_positions((3, 4), kind="lang")
    with pytest.raises(ValueError, match=r"`shape` must have at least one size"):
        rr.patch_positions(())


def test_mrope_positions_text_then_image_then_text():
    ids = rr.mrope_positions([3, (1, 4, 6), 2], merge_size=2)
    assert ids.shape == (3 + 2 * 3 + 2, 3)
    assert ids.dtype == np.int64
    np.testing.assert_array_equal(ids[:3], [[0, 0, 0], [1, 1, 1], [2, 2, 2]])
    image = ids[3:9]
    assert image[:, 0].tolist() == [3] * 6  # one frame
    assert image[:, 1].tolist() == [3, 3, 3, 4, 4, 4]  # rows
    assert image[:, 2].tolist() == [3, 4, 5, 3, 4, 5]  # columns
    np.testing.assert_array_equal(ids[9:], [[6, 6, 6], [7, 7, 7]])  # max(previous) + 1
    assert rr.mrope_positions([]).shape == (0, 3)
    assert rr.mrope_positions([0, 2]).tolist() == [[0, 0, 0], [1, 1, 1]]


def test_mrope_positions_errors():
    with pytest.raises(ValueError, match=r"`segments` must be at least 0"):
        rr.mrope_positions([-1])
    with pytest.raises(ValueError, match=r"`segments` must have 3 sizes"):
        rr.mrope_positions([(2, 2)])
    with pytest.raises(ValueError, match=r"`merge_size` must divide the grid's H and W"):
        rr.mrope_positions([(1, 3, 4)], merge_size=2)
    with pytest.raises(TypeError, match=r"`segments` must hold ints"):
        rr.mrope_positions(["text"])  # type: ignore[list-item]


def test_text_only_mrope_ids_give_one_dimensional_rope():
    spec = rr.RopeSpec(16, sections=(2, 3, 3))
    ids = rr.mrope_positions([7])
    x = np.random.default_rng(2).standard_normal((7, 16))
    np.testing.assert_array_equal(rr.apply_rope(x, spec, ids), rr.apply_rope(x, rr.RopeSpec(16)))


def test_axial_freqs_errors():
    with pytest.raises(ValueError, match=r"`base` must be greater than 1"):
        rr.axial_freqs((2, 2), base=1.0)
    with pytest.raises(ValueError, match=r"`max_freq` must be positive"):
        rr.axial_freqs((2, 2), kind="pixel", max_freq=0.0)
    with pytest.raises(ValueError, match=r"`kind` must be one of 'lang', 'pixel'"):
        rr.axial_freqs((2, 2), kind="index")
    with pytest.raises(ValueError, match=r"`sections` must be at least 1"):
        rr.axial_freqs((2, 0))
