"""apply_rope semantics on every namespace: positions, layouts of the grid, dtypes, devices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from array_api_compat import device, is_dask_array

import rope_ref as rr
from tests._helpers import exact_round, host, max_abs


def rotate_pairs_by_formula(x, positions, spec: rr.RopeSpec, *, inverse=False):
    """Independent NumPy loop: rotate each pair by p * base**(-2j/d), math.cos/math.sin."""
    x = np.array(x, dtype=np.float64)
    out = x.copy()
    n, start = spec.n_pairs, spec.rotary_start
    for index in np.ndindex(x.shape[:-1]):
        p = float(np.broadcast_to(positions, x.shape[:-1])[index])
        for j in range(n):
            angle = p * spec.base ** (-2.0 * j / (2 * n))
            angle = -angle if inverse else angle
            a_i, b_i = (
                (start + 2 * j, start + 2 * j + 1)
                if spec.layout == "interleaved"
                else (
                    start + j,
                    start + j + n,
                )
            )
            a, b = x[index][a_i], x[index][b_i]
            out[index][a_i] = a * math.cos(angle) - b * math.sin(angle)
            out[index][b_i] = b * math.cos(angle) + a * math.sin(angle)
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_output_keeps_namespace_device_dtype_shape(xp, np_rng, layout, dtype_name):
    x_np = np_rng.standard_normal((2, 5, 3, 8))
    x = xp.asarray(x_np, dtype=getattr(xp, dtype_name))
    spec = rr.RopeSpec(head_dim=8, layout=layout)
    y = rr.apply_rope(x, spec, seq_axis=-3)
    assert type(y) is type(x)
    assert y.dtype == x.dtype
    assert tuple(y.shape) == tuple(x.shape)
    assert device(y) == device(x)
    positions = np.arange(5)[:, None]  # along seq_axis=-3, shared by the 3 heads
    expected = rotate_pairs_by_formula(host(x), positions, spec)
    tol = 1e-13 if dtype_name == "float64" else 4e-7 * 4  # one rounding of an O(1) value
    assert max_abs(y, expected) <= tol


def test_dask_stays_lazy():
    da = pytest.importorskip("dask.array")
    x = da.ones((4, 6, 8), chunks=(2, 3, 8))
    y = rr.apply_rope(x, positions=da.arange(6) + 3)
    assert is_dask_array(y)
    assert (
        max_abs(
            y,
            rotate_pairs_by_formula(np.ones((4, 6, 8)), np.arange(6) + 3, rr.RopeSpec(head_dim=8)),
        )
        <= 1e-13
    )


def test_positions_forms_agree(xp, np_rng):
    x = xp.asarray(np_rng.standard_normal((2, 4, 6)))
    spec = rr.RopeSpec(head_dim=6)
    implicit = rr.apply_rope(x, spec, offset=7)
    one_d = rr.apply_rope(x, spec, xp.asarray([7, 8, 9, 10]))
    grid = rr.apply_rope(x, spec, xp.asarray([[7, 8, 9, 10], [7, 8, 9, 10]]))
    shifted = rr.apply_rope(x, spec, xp.asarray([0, 1, 2, 3]), offset=7)
    floats = rr.apply_rope(x, spec, xp.asarray([7.0, 8.0, 9.0, 10.0]))
    for other in (one_d, grid, shifted, floats):
        assert max_abs(implicit, other) == 0.0


def test_per_batch_positions_left_padding(xp, np_rng):
    # Left padding: the second row starts two tokens later, so its positions are shifted.
    x_np = np_rng.standard_normal((2, 5, 4))
    position_ids = np.array([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])
    y = rr.apply_rope(xp.asarray(x_np), None, xp.asarray(position_ids))
    expected = rotate_pairs_by_formula(x_np, position_ids, rr.RopeSpec(head_dim=4))
    assert max_abs(y, expected) <= 1e-13


def test_heads_axis_broadcasts_positions(np_rng):
    # (batch, heads, seq, dim) with HF-style position_ids (batch, 1, seq).
    x = np_rng.standard_normal((2, 3, 4, 8))
    pos = np.array([[3, 4, 5, 6], [0, 1, 2, 3]])[:, None, :]
    y = rr.apply_rope(x, rr.RopeSpec(head_dim=8), pos)
    assert max_abs(y, rotate_pairs_by_formula(x, pos, rr.RopeSpec(head_dim=8))) <= 1e-13


def test_real_valued_positions(np_rng):
    x = np_rng.standard_normal((3, 4))
    pos = np.array([0.25, 1.5, 1e5 + 0.125])
    y = rr.apply_rope(x, positions=pos)
    assert max_abs(y, rotate_pairs_by_formula(x, pos, rr.RopeSpec(head_dim=4))) <= 1e-10


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_partial_rotary_is_bit_identical_outside_the_slice(xp, np_rng, layout):
    x = xp.asarray(np_rng.standard_normal((3, 5, 12)), dtype=xp.float32)
    spec = rr.RopeSpec(head_dim=12, rotary_start=2, rotary_dim=6, layout=layout)
    y = rr.apply_rope(x, spec, offset=1000)
    assert np.array_equal(host(y)[..., :2], host(x)[..., :2])
    assert np.array_equal(host(y)[..., 8:], host(x)[..., 8:])
    expected = rotate_pairs_by_formula(host(x), np.arange(5) + 1000, spec)
    assert max_abs(y, expected) <= 1e-5


def test_input_is_not_mutated(xp, np_rng):
    x_np = np_rng.standard_normal((4, 8))
    x = xp.asarray(x_np)
    pos = xp.asarray([1, 2, 3, 4])
    rr.apply_rope(x, None, pos, offset=3, inverse=True)
    rr.apply_rope(x, None, pos, form="matrix")
    assert np.array_equal(host(x), x_np)
    assert np.array_equal(host(pos), [1, 2, 3, 4])


def test_empty_arrays(xp):
    x = xp.zeros((0, 8), dtype=xp.float64)
    assert tuple(rr.apply_rope(x).shape) == (0, 8)
    x = xp.zeros((2, 0, 3, 8), dtype=xp.float32)
    assert tuple(rr.apply_rope(x, seq_axis=1).shape) == (2, 0, 3, 8)


def test_torch_low_precision_dtypes_round_once(np_rng):
    torch = pytest.importorskip("torch")
    x64 = np_rng.standard_normal((6, 16))
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.tensor(x64, dtype=dtype)
        y = rr.apply_rope(x, offset=12345)
        exact = rotate_pairs_by_formula(
            x.double().numpy(), np.arange(6) + 12345, rr.RopeSpec(head_dim=16)
        )
        # Rounded once from float64: equal to the exact result rounded to the dtype (by
        # rational arithmetic: torch's own float64 -> 16-bit cast goes through float32).
        name = str(dtype).removeprefix("torch.")
        want = np.vectorize(exact_round, excluded={1})(exact, name)
        assert np.array_equal(y.double().numpy(), want)


@pytest.mark.parametrize("order", ["chunked", "interleaved"])
def test_multi_axis_with_equal_axes_is_1d_rope(xp, np_rng, order):
    x = xp.asarray(np_rng.standard_normal((2, 7, 24)))
    spec3 = rr.RopeSpec(head_dim=24, sections=(4, 4, 4), section_order=order)
    pos = np.arange(7) * 3 + 11
    pos3 = xp.asarray(np.stack([pos, pos, pos], axis=-1))
    y3 = rr.apply_rope(x, spec3, pos3)
    y1 = rr.apply_rope(x, rr.RopeSpec(head_dim=24), xp.asarray(pos))
    assert max_abs(y3, y1) == 0.0
    assert max_abs(rr.apply_rope(x, spec3), rr.apply_rope(x)) == 0.0


def test_multi_axis_pairs_follow_their_axis(np_rng):
    # Chunked: pairs 0-1 follow axis 0, 2-4 axis 1, 5 axis 2; frequencies over the global index.
    spec = rr.RopeSpec(head_dim=12, sections=(2, 3, 1))
    pos = np.array([[5.0, 7.0, 11.0]])
    cos, _ = rr.rope_cos_sin(spec, pos)
    axis_of_pair = [0, 0, 1, 1, 1, 2]
    expected = [math.cos(pos[0, a] * 10000.0 ** (-2 * j / 12)) for j, a in enumerate(axis_of_pair)]
    np.testing.assert_allclose(cos[0], expected, rtol=0, atol=1e-15)


def test_qwen3_vl_interleaved_sections():
    spec = rr.RopeSpec(head_dim=128, sections=(24, 20, 20), section_order="interleaved")
    axes = rr.pair_axes(spec)
    # HF Qwen3-VL: H on j % 3 == 1, W on j % 3 == 2, for j < 3 * 20; T elsewhere.
    expected = [
        1 if j % 3 == 1 and j < 60 else 2 if j % 3 == 2 and j < 60 else 0 for j in range(64)
    ]
    assert axes.tolist() == expected
    assert np.bincount(axes).tolist() == [24, 20, 20]


def test_apply_rope_qk_decode_positions(xp, np_rng):
    q = xp.asarray(np_rng.standard_normal((2, 1, 8)))
    k = xp.asarray(np_rng.standard_normal((2, 6, 8)))
    q2, k2 = rr.apply_rope_qk(q, k, offset=10)
    assert max_abs(q2, rr.apply_rope(q, positions=xp.asarray([15]))) == 0.0
    assert max_abs(k2, rr.apply_rope(k, offset=10)) == 0.0
    q3, k3 = rr.apply_rope_qk(q, k, None, xp.asarray([3]), k_positions=xp.asarray(range(6)))
    assert max_abs(q3, rr.apply_rope(q, positions=xp.asarray([3]))) == 0.0
    assert max_abs(k3, rr.apply_rope(k)) == 0.0


@pytest.mark.parametrize("form", ["rotate_half", "complex", "matrix"])
@pytest.mark.parametrize("inverse", [False, True])
def test_every_form_rotates_by_the_formula_and_writes_the_output_layout(form, inverse):
    """Catches: the complex form turning the other way (``sin / 1j``), or the pairs not
    rewritten in `output_layout`."""
    x = np.random.default_rng(1).standard_normal((3, 8))
    spec = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    phi = np.arange(3)[:, None] * rr.inv_freq(spec) * (-1.0 if inverse else 1.0)
    if inverse:  # the inverse reads the pairs from the written (half) layout
        a, b = x[:, :4], x[:, 4:]
    else:
        a, b = x[:, 0::2], x[:, 1::2]
    first, second = a * np.cos(phi) - b * np.sin(phi), b * np.cos(phi) + a * np.sin(phi)
    if inverse:  # and writes them back in the interleaved layout
        want = np.stack([first, second], axis=-1).reshape(3, 8)
    else:
        want = np.concatenate([first, second], axis=-1)
    got = rr.apply_rope(x, spec, form=form, inverse=inverse)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_the_default_form_is_the_real_formula_to_the_last_bit(layout):
    """Catches: the forms' dispatch inverted (the default ``rotate_half`` form computed as a
    complex product, which rounds differently). With power-of-two frequencies and integer
    positions the angles are exact, so ``a cos - b sin`` and ``b cos + a sin``, each rounded
    once per operation, are the result bit for bit."""
    freqs = [1.0, 0.5, 0.25, 0.125]
    spec = rr.RopeSpec(8, freqs=freqs, layout=layout)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 8)) * rng.choice([1e-3, 1.0, 1e3], size=(300, 8))
    p = rng.integers(0, 10**6, size=300)
    phi = p[:, None] * np.array(freqs)
    c, s = np.cos(phi), np.sin(phi)
    a, b = (x[:, :4], x[:, 4:]) if layout == "half" else (x[:, 0::2], x[:, 1::2])
    first, second = a * c - b * s, b * c + a * s
    if layout == "half":
        want = np.concatenate([first, second], axis=-1)
    else:
        want = np.stack([first, second], axis=-1).reshape(300, 8)
    np.testing.assert_array_equal(rr.apply_rope(x, spec, p), want)
    np.testing.assert_array_equal(rr.apply_rope(x, spec, p, form="rotate_half"), want)


@pytest.mark.parametrize(("rotary_dim", "rotary_start"), [(4, 0), (4, 1), (2, 1), (2, 2)])
def test_single_pass_through_features_are_kept(rotary_dim, rotary_start):
    """Catches: a pass-through part of one feature dropped from the output (head_dim 5 with
    4 rotated: one feature is left before or after the rotated slice)."""
    spec = rr.RopeSpec(5, rotary_dim=rotary_dim, rotary_start=rotary_start)
    x = np.random.default_rng(8).standard_normal((3, 5))
    n = rotary_dim // 2
    phi = np.arange(3)[:, None] * 10000.0 ** (-np.arange(n) * 2.0 / rotary_dim)
    stop = rotary_start + rotary_dim
    a, b = x[:, rotary_start : rotary_start + n], x[:, rotary_start + n : stop]
    c, s = np.cos(phi), np.sin(phi)
    rotated = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    want = np.concatenate([x[:, :rotary_start], rotated, x[:, stop:]], axis=-1)
    got = rr.apply_rope(x, spec)
    assert got.shape == (3, 5)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


def test_interleaved_features_map_to_half_features_by_non_negative_indices():
    """Catches: the half index of the second member of a pair written ``j - n`` (NumPy's
    take wraps it round to ``j + n``, PyTorch's refuses it). Interleaved feature ``2j`` is
    half feature ``j``; ``2j + 1`` is half feature ``j + n``."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.reference import half_index_of_interleaved

    for n in (1, 2, 5):
        order = [h for j in range(n) for h in (j, j + n)]
        assert half_index_of_interleaved(n) == order
    spec = rr.RopeSpec(4, freqs=[1.0, 0.5], layout="interleaved")
    x = np.random.default_rng(9).standard_normal((3, 4))
    phi = np.arange(3)[:, None] * np.array([1.0, 0.5])
    a, b, c, s = x[:, 0::2], x[:, 1::2], np.cos(phi), np.sin(phi)
    want = np.stack([a * c - b * s, b * c + a * s], axis=-1).reshape(3, 4)
    got = rr.apply_rope(torch.as_tensor(x), spec, form="matrix").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
