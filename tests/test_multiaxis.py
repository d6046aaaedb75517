"""Multi-axis RoPE: M-RoPE reductions, axial frequencies, position grids and ids, patch grids
and their merge sizes, and the rotation matrix of a multi-axis spec."""

from __future__ import annotations

import inspect
import math
import re
import sys

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


def test_rotation_matrix_of_a_multi_axis_spec():
    """Catches: the number of values a multi-axis position must have."""
    spec = rr.RopeSpec(8, sections=(1, 1, 2))  # pairs 0, 1, 2-3 follow axes t, h, w
    position = (3.0, 5.0, 7.0)
    theta = rr.inv_freq(spec)
    angles = np.array(position)[[0, 1, 2, 2]] * theta
    R = rr.rotation_matrix(spec, position)
    for j, angle in enumerate(angles):  # half layout: pair (j, j + 4)
        block = R[np.ix_([j, j + 4], [j, j + 4])]
        c, s = np.cos(angle), np.sin(angle)
        np.testing.assert_allclose(block, [[c, -s], [s, c]], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="`position` must be a single position"):
        rr.rotation_matrix(spec, [position, position])


def test_multi_axis_positions_that_read_two_ways_raise() -> None:
    """Positions of shape (3,) for 3 tokens and 3 axes: per token, or one (t, h, w)? Raises."""
    spec = rr.RopeSpec(head_dim=8, sections=(2, 1, 1))
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    with pytest.raises(ValueError, match=r"`positions` of shape \(3,\) can be read two ways"):
        rr.apply_rope(x, spec, np.arange(3))
    # Explicit: one (t, h, w) = (5, 5, 5) for every token is plain RoPE at position 5.
    y = rr.apply_rope(x, spec, np.array([[5, 5, 5]]))
    theta = 10000.0 ** (-np.arange(4) / 4.0)
    c, s = np.cos(5 * theta), np.sin(5 * theta)
    a, b = x[..., :4], x[..., 4:]
    want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-14)
    # Four tokens: the shape can only mean one (t, h, w) for all of them, as before.
    four = rr.apply_rope(np.ones((1, 4, 8)), spec, np.array([0, 0, 0]))
    np.testing.assert_array_equal(four, np.ones((1, 4, 8)))


def test_multi_axis_angles_of_batched_positions_read_the_last_axis():
    """Catches: the axis of each pair's coordinate taken as 1 instead of -1 (the same for
    (seq, 3) positions, not for (batch, seq, 3))."""
    spec = rr.RopeSpec(16, sections=(2, 3, 3))  # chunked: pairs 0-1 axis 0, 2-4 axis 1, ...
    positions = np.random.default_rng(0).integers(0, 50, size=(2, 4, 3))
    axis_of_pair = [0, 0, 1, 1, 1, 2, 2, 2]
    want = positions[..., axis_of_pair] * rr.inv_freq(spec)
    np.testing.assert_array_equal(rr.rope_angles(spec, positions), want)


def test_xpos_of_a_multi_axis_spec_scales_by_the_first_coordinate():
    """Catches: the xPos scale read from another coordinate than the first (temporal) one."""
    spec = rr.RopeSpec(8, sections=(2, 2), xpos=rr.XPos(4.0))  # pairs 0-1 axis 0, 2-3 axis 1
    p = np.array([[0, 5], [1, 7], [2, 3]])
    theta = rr.inv_freq(spec)
    angles = p[:, [0, 0, 1, 1]] * theta
    zeta = (2.0 * np.arange(4) + 0.4 * 8) / (1.4 * 8)
    scale = zeta ** ((p[:, :1] - 10 // 2) / 4.0)  # queries: zeta ** ((p0 - floor(L / 2)) / s)
    a = b = np.ones((3, 4))
    c, s = scale * np.cos(angles), scale * np.sin(angles)
    want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    got = rr.apply_rope(np.ones((3, 8)), spec, p, role="query", seq_len=10)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_default_positions_of_a_multi_axis_spec_repeat_the_token_index_per_axis():
    """Catches: the default (seq, n_axes) positions stacked the other way round."""
    spec = rr.RopeSpec(16, sections=(2, 3, 3))
    for seq in (3, 5):
        x = np.random.default_rng(seq).standard_normal((seq, 16))
        angles = np.arange(seq)[:, None] * rr.inv_freq(spec)  # every coordinate = index
        c, s = np.cos(angles), np.sin(angles)
        a, b = x[:, :8], x[:, 8:]
        want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
        np.testing.assert_allclose(rr.apply_rope(x, spec), want, rtol=1e-14, atol=1e-15)


def test_interleaved_sections_fit_when_each_axis_last_pair_index_is_below_n_pairs():
    """Axis k >= 1 takes pairs k + n_axes * m (axis 0 every other pair, as HF's Qwen3-VL
    interleaves them); the last of them must be below n_pairs.

    Catches: the boundary (last index == n_pairs) accepted, or the test inverted.
    """
    for sections in [(4, 2, 2), (2, 2, 2), (1, 1, 1), (3, 2, 2)]:
        n_pairs, n_axes = sum(sections), len(sections)
        fits = all(k + n_axes * (size - 1) < n_pairs for k, size in enumerate(sections) if k)
        assert fits
        rr.RopeSpec(2 * n_pairs, sections=sections, section_order="interleaved")
    for sections in [(1, 2, 2), (1, 1, 2), (2, 3, 3)]:  # axis 2's last pair index >= n_pairs
        with pytest.raises(ValueError, match="`sections` must fit the interleaved order"):
            rr.RopeSpec(2 * sum(sections), sections=sections, section_order="interleaved")


def test_patch_positions_merge_size_must_divide_both_last_sizes():
    """Catches: only the height checked (a width of 3 with merge 2 cannot be blocked)."""
    with pytest.raises(ValueError, match="`merge_size` must divide the last two sizes"):
        rr.patch_positions((4, 3), merge_size=2)
    with pytest.raises(ValueError, match="`merge_size` must divide the last two sizes"):
        rr.patch_positions((3, 4), merge_size=2)
    blocked = rr.patch_positions((2, 4), merge_size=2).tolist()  # 2x2 blocks, row-major
    assert blocked == [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3]]


def test_multi_axis_builders_refuse_at_their_documented_limits():
    """Catches: changed constants in the limits of axial_freqs and mrope_positions."""
    with pytest.raises(ValueError, match=r"at most 32,768 pairs in all"):
        rr.axial_freqs((2**14, 2**14 + 1))  # head_dim at most 2**16: 2**15 pairs
    assert len(rr.axial_freqs((2, 2), base=1.5)) == 4  # any base above 1
    with pytest.raises(ValueError, match="`base` must be greater than 1"):
        rr.axial_freqs((2, 2), base=1.0)
    # pixel frequencies reach pi * max_freq / 2, which must stay finite
    assert max(rr.axial_freqs((2, 2), kind="pixel", max_freq=1e308)) == 1e308 / 2.0 * np.pi
    with pytest.raises(ValueError, match="`max_freq` must keep the highest frequency"):
        rr.axial_freqs((2, 2), kind="pixel", max_freq=1.5e308)
    for segments in ([10**12], [5, (1, 10**6, 10**6)]):  # three coordinates per token
        with pytest.raises(ValueError, match=r"x 3 = 3,000,000,000,0(00|15) values"):
            rr.mrope_positions(segments)


def test_mrope_text_runs_are_ints_not_bools():
    """Catches: the text-run test widened to bools or narrowed from NumPy integers: a NumPy
    int is a run of text tokens, True is refused rather than read as one token."""
    want = [[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [2, 3, 3], [4, 4, 4]]
    assert rr.mrope_positions([np.int64(2), (1, 2, 2), np.int32(1)]).tolist() == want  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"`segments` must hold ints .* got True"):
        rr.mrope_positions([True])


def test_video_patches_are_ordered_block_by_block_per_frame():
    """Catches: a changed axis order of the merge blocks of a video (T, H, W): tokens go
    frame by frame, then block row, block column, row and column within the block."""
    t, h, w, m = 2, 4, 6, 2
    want = [
        [f, bi * m + r, bj * m + c]
        for f in range(t)
        for bi in range(h // m)
        for bj in range(w // m)
        for r in range(m)
        for c in range(m)
    ]
    assert rr.patch_positions((t, h, w), merge_size=m).tolist() == want


def test_multi_axis_positions_need_one_trailing_coordinate_per_section():
    """Catches: a scalar or a wrong trailing length let through (or an IndexError)."""
    spec = rr.RopeSpec(8, sections=(2, 2))
    for bad in (np.int64(3), np.zeros((5, 3), dtype=np.int64)):
        with pytest.raises(ValueError, match=r"`positions` must have a trailing axis of length 2"):
            rr.apply_rope(np.ones((5, 8)), spec, bad)


def test_multi_axis_helpers_take_their_options_by_name_only() -> None:
    """Catches: a `/` in place of the `*` of axial_freqs, patch_positions or
    mrope_positions (the design contract: arrays positional, options keyword-only)."""
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    for function, first, options in [
        (rr.axial_freqs, "sections", ["base", "kind", "max_freq"]),
        (rr.patch_positions, "shape", ["kind", "merge_size"]),
        (rr.mrope_positions, "segments", ["merge_size", "axes"]),
    ]:
        params = inspect.signature(function).parameters
        assert params[first].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, function
        assert [n for n, p in params.items() if p.kind is keyword_only] == options, function
    assert rr.axial_freqs(sections=(1,)) == (1.0,)
    with pytest.raises(TypeError):
        rr.axial_freqs((2,), 100.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        rr.mrope_positions([(1, 2, 2)], 2)  # type: ignore[call-arg]


def _pixel_ladder(size: int, max_freq: float) -> list[float]:
    """rotary-embedding-torch's pixel frequencies: pi times `size` evenly spaced values
    from 1 to max_freq / 2."""
    top = max_freq / 2.0
    if size == 1:
        return [math.pi]
    return [math.pi * (1.0 + k * (top - 1.0) / (size - 1)) for k in range(size)]


def test_pixel_max_freq_defaults_to_ten() -> None:
    """Catches: a changed default `max_freq` (documented 10.0)."""
    default = inspect.signature(rr.axial_freqs).parameters["max_freq"].default
    assert default == 10.0
    np.testing.assert_allclose(
        rr.axial_freqs((5, 3), kind="pixel"),
        _pixel_ladder(5, 10.0) + _pixel_ladder(3, 10.0),
        rtol=1e-15,
        atol=0,
    )


def test_pixel_max_freq_default_is_rotary_embedding_torch_own() -> None:
    """Catches: a default `max_freq` other than rotary-embedding-torch's."""
    ret = pytest.importorskip("rotary_embedding_torch")
    theirs = inspect.signature(ret.RotaryEmbedding).parameters["max_freq"].default
    assert inspect.signature(rr.axial_freqs).parameters["max_freq"].default == theirs == 10


@pytest.mark.parametrize("max_freq", [7.0, 1.0, 0.5, 2.5])
def test_pixel_ladders_end_at_half_of_any_positive_max_freq(max_freq: float) -> None:
    """Catches: max_freq / 2 floored (7 -> 3 instead of 3.5), or a max_freq up to 1
    refused (it must only be positive)."""
    np.testing.assert_allclose(
        rr.axial_freqs((4, 2), kind="pixel", max_freq=max_freq),
        _pixel_ladder(4, max_freq) + _pixel_ladder(2, max_freq),
        rtol=1e-15,
        atol=0,
    )


def test_a_pixel_max_freq_past_the_largest_names_the_largest() -> None:
    """Catches: a wrong largest max_freq in the message (the highest frequency, pi *
    max_freq / 2, reaches the largest float64 at max_freq = 2 * float_max / pi)."""
    largest = sys.float_info.max / math.pi * 2.0
    assert math.isfinite(largest / 2.0 * math.pi)
    assert math.isinf(largest * 1.0000001 / 2.0 * math.pi)
    with pytest.raises(ValueError, match=re.escape(f"(at most {largest:.6g}); got 1.5e+308.")):
        rr.axial_freqs((2,), kind="pixel", max_freq=1.5e308)
    assert f"{largest:.6g}" == "1.14445e+308"


def test_a_merge_size_of_zero_is_refused() -> None:
    """Catches: merge_size 0 let through (patch_positions: plain order; mrope_positions of
    text alone: no error at all)."""
    for call in (
        lambda: rr.patch_positions((2, 2), merge_size=0),
        lambda: rr.mrope_positions([3], merge_size=0),
        lambda: rr.mrope_positions([(1, 2, 2)], merge_size=0),
    ):
        with pytest.raises(ValueError, match=re.escape("`merge_size` must be at least 1; got 0.")):
            call()


@pytest.mark.parametrize(
    ("shape", "merge"), [((4,), 2), ((2, 4, 3), 2), ((4, 6, 8), 3), ((6, 4, 2), 4)]
)
def test_merge_size_must_divide_the_last_two_sizes(shape: tuple[int, ...], merge: int) -> None:
    """Catches: a single axis let through to the block check (IndexError), or the second
    axis checked in place of the last one (the same for (H, W), not for (T, H, W))."""
    message = f"`merge_size` must divide the last two sizes of shape {shape}; got {merge}."
    with pytest.raises(ValueError, match=re.escape(message)):
        rr.patch_positions(shape, merge_size=merge)


def test_merged_video_patches_go_block_by_block_within_each_frame() -> None:
    """A (T, H, W) grid with T not a multiple of merge_size, order built by a loop."""
    t, h, w, m = 3, 4, 6, 2
    want = [
        [f, bh * m + i, bw * m + j]
        for f in range(t)
        for bh in range(h // m)
        for bw in range(w // m)
        for i in range(m)
        for j in range(m)
    ]
    assert rr.patch_positions((t, h, w), merge_size=m).tolist() == want


@pytest.mark.parametrize("segments", ["abc", b"ab", {3}, 4, (n for n in [2, 3])])
def test_segments_must_be_a_sequence(segments: object) -> None:
    """Catches: a string, a set, a generator or an int taken as segments (iterated, or
    failing with another error)."""
    message = "`segments` must be a sequence of ints (text runs) and (T, H, W) triples; got "
    with pytest.raises(TypeError, match=re.escape(message)):
        rr.mrope_positions(segments)


@pytest.mark.parametrize("shape", ["ab", {2, 3}, 4, (n for n in [2, 3])])
def test_shapes_and_sections_must_be_sequences(shape: object) -> None:
    """Catches: a string, a set, a generator or an int taken as sizes (iterated, or failing
    with another error)."""
    with pytest.raises(TypeError, match=re.escape("`shape` must be a sequence of positive")):
        rr.patch_positions(shape)
    with pytest.raises(TypeError, match=re.escape("`sections` must be a sequence of positive")):
        rr.axial_freqs(shape)


def test_the_token_count_of_a_huge_grid_is_exact() -> None:
    """Catches: the tokens of a (T, H, W) segment counted in floats (H / m instead of
    H // m): past 2**53 the refusal then misstates them."""
    n = 2**30 + 1
    tokens = n * n  # 2**60 + 2**31 + 1: not a float64
    assert float(tokens) != tokens
    message = f"`segments` too large: positions of {tokens:,} x 3 = {3 * tokens:,} values"
    for merge in (1, 2):
        side = n * merge
        with pytest.raises(ValueError, match=re.escape(message)):
            rr.mrope_positions([(1, side, side)], merge_size=merge)
