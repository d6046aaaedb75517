"""`rr.apply_rope_mixed` (RoPE-Mixed): the angle t . f_j written here in float64, axial RoPE
as its one-hot special case, both backends, inverse, and errors naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._libraries import rotate_pairs

BACKENDS = [b for b in ("reference", "numba") if rr.available_backends()[b] is None]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_angles_are_the_mixed_sum(backend, dtype):
    rng = np.random.default_rng(2)
    freqs = rng.normal(size=(3, 2, 4))  # heads, axes, pairs
    positions = rng.uniform(-8, 8, size=(5, 2)).astype(np.float32)
    x = rng.uniform(-1, 1, size=(2, 3, 5, 8)).astype(dtype)
    t = positions.astype(np.float64)
    angles = t[None, :, 0, None] * freqs[:, None, 0, :] + t[None, :, 1, None] * freqs[:, None, 1, :]
    truth = rotate_pairs(x.astype(np.float64), angles, interleaved=True)
    got = rr.apply_rope_mixed(x, freqs, positions, backend=backend)
    assert got.dtype == dtype
    assert got.shape == x.shape
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), truth, atol=tol)
    back = rr.apply_rope_mixed(
        got.astype(np.float64), freqs, positions, inverse=True, backend=backend
    )
    np.testing.assert_allclose(back, x.astype(np.float64), atol=3 * tol)


def test_one_hot_frequencies_are_axial_rope():
    pairs = (2, 2)
    ladder = np.array(rr.axial_freqs(pairs))
    freqs = np.zeros((2, 4))
    freqs[0, :2], freqs[1, 2:] = ladder[:2], ladder[2:]
    grid = rr.patch_positions((3, 4))
    x = np.random.default_rng(3).uniform(-1, 1, (12, 8))
    spec = rr.RopeSpec(8, layout="half", freqs=tuple(ladder), sections=pairs)
    np.testing.assert_allclose(
        rr.apply_rope_mixed(x, freqs, grid, layout="half"), rr.apply_rope(x, spec, grid), atol=1e-15
    )


def test_input_is_not_mutated():
    x = np.ones((2, 4), dtype=np.float32)
    rr.apply_rope_mixed(x, np.ones((2, 2)), [[1.0, 2.0], [3.0, 4.0]], backend=BACKENDS[-1])
    np.testing.assert_array_equal(x, 1.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "name"),
    [
        ((np.ones((2, 4)).tolist(), np.ones((2, 2)), np.ones((2, 2))), {}, TypeError, "`x`"),
        ((np.ones((2, 4), dtype=np.int64), np.ones((2, 2)), np.ones((2, 2))), {}, TypeError, "`x`"),
        ((np.ones((2, 4)), "ab", np.ones((2, 2))), {}, TypeError, "`freqs`"),
        ((np.ones((2, 4)), np.ones(2), np.ones((2, 2))), {}, ValueError, "`freqs`"),
        (
            (np.ones((2, 4)), [[np.inf, 1.0], [1.0, 1.0]], np.ones((2, 2))),
            {},
            ValueError,
            "`freqs`",
        ),
        ((np.ones((2, 4)), np.ones((2, 2)), np.ones((2, 3))), {}, ValueError, "`positions`"),
        (
            (np.ones((2, 4)), np.ones((2, 2)), np.full((2, 2), np.nan)),
            {},
            ValueError,
            "`positions`",
        ),
        ((np.ones((2, 6)), np.ones((2, 2)), np.ones((2, 2))), {}, ValueError, "`x`"),
        ((np.ones((2, 4)), np.ones((3, 2, 2)), np.ones((2, 2))), {}, ValueError, "`x`"),
        (
            (np.ones((2, 4)), np.ones((2, 2)), np.ones((2, 2))),
            {"layout": "pairs"},
            ValueError,
            "`layout`",
        ),
        (
            (np.ones((2, 4)), np.ones((2, 2)), np.ones((2, 2))),
            {"backend": "cuda"},
            ValueError,
            "`backend`",
        ),
        (
            (np.ones((2, 4)), np.ones((2, 2)), np.ones((2, 2))),
            {"inverse": 1},
            TypeError,
            "`inverse`",
        ),
    ],
)
def test_bad_input_names_the_parameter(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        rr.apply_rope_mixed(*args, **kwargs)


@pytest.mark.cuda_host
def test_cuda_kernel_takes_the_mixed_tables_unchanged():
    from tests.cuda_host import emulation

    if emulation.nvcc() is None:
        pytest.skip("nvcc is not on PATH")
    from rope_ref._core.mixed import mixed_angles

    rng = np.random.default_rng(4)
    freqs = rng.normal(size=(3, 2, 8))
    positions = rng.uniform(-5, 5, size=(7, 2))
    x = rng.uniform(-1, 1, size=(2, 3, 7, 16)).astype(np.float32)
    angles = mixed_angles(freqs, positions)  # (heads, seq, pairs): per-head tables
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    (out,) = emulation.shared_harness().rotate([(x, cos, sin, None)], layout="interleaved")
    expected = rr.apply_rope_mixed(x, freqs, positions)
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_rope_mixed_reference_rounds_the_float64_rotation_once():
    """Catches: the reference and Numba branches swapped. The reference rotates in float64
    and rounds once, so every float32 output is within half an ulp (and a float64 hair) of
    the formula; the kernel's float32 tables are off by more somewhere in 4096 values."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    freqs = rng.uniform(0.1, 3.0, size=(2, 8))  # (axes, pairs)
    positions = rng.uniform(0.0, 50.0, size=(256, 2))  # (seq, axes): (t_x, t_y)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    phi = positions @ freqs  # phi_j(t) = t_x f_xj + t_y f_yj
    a, b = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    want = np.empty((256, 16))
    want[:, 0::2] = a * np.cos(phi) - b * np.sin(phi)
    want[:, 1::2] = b * np.cos(phi) + a * np.sin(phi)
    got = rr.apply_rope_mixed(x, freqs, positions)
    assert got.dtype == np.float32
    half_ulp = np.spacing(np.abs(want).astype(np.float32)) / 2
    assert np.all(np.abs(got - want) <= half_ulp * (1 + 1e-6) + 1e-300)


@pytest.mark.parametrize("dtype", [complex, bool, str])
def test_mixed_frequencies_must_be_real_numbers(dtype):
    """Catches: complex (or string) frequencies let through when not boolean."""
    from rope_ref._core.mixed import check_mixed_freqs

    with pytest.raises(TypeError, match="`freqs` must hold real numbers"):
        check_mixed_freqs(np.ones((2, 2)).astype(dtype))
    assert check_mixed_freqs(np.ones((2, 2), dtype=np.int32)).dtype == np.float64


def test_mixed_angles_of_one_axis_and_of_several_heads():
    """Catches: a one-axis frequency array ``(1, pairs)`` refused as empty, and the sum taken
    over another axis than the axes one (per head too)."""
    from rope_ref._core.mixed import mixed_angles

    t = np.array([[2.0], [-3.0], [0.5]])  # (seq, 1 axis)
    f = np.array([[1.0, 0.25, 4.0]])  # (1 axis, 3 pairs)
    np.testing.assert_array_equal(mixed_angles(f, t), t * f)
    rng = np.random.default_rng(5)
    freqs = rng.normal(size=(2, 3, 4))  # (heads, axes, pairs)
    positions = rng.normal(size=(5, 3))  # (seq, axes)
    want = np.zeros((2, 5, 4))
    for h in range(2):
        for a in range(3):
            want[h] += positions[:, a, None] * freqs[h, a]
    np.testing.assert_allclose(mixed_angles(freqs, positions), want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize(
    ("freqs", "positions", "error", "message"),
    [
        (3.0, [[1.0]], TypeError, "`freqs` must be an array"),
        (np.ones((2, 0)), [[1.0, 2.0]], ValueError, "`freqs` must have shape"),
        (np.ones((2, 2, 2, 2)), [[1.0, 2.0]], ValueError, "`freqs` must have shape"),
        (np.ones((2, 2)), np.ones((3, 2), dtype=bool), TypeError, "`positions` must hold real"),
        (np.ones((2, 2)), np.ones((3, 2), dtype=complex), TypeError, "`positions` must hold real"),
        (np.ones((2, 2)), [1.0, 2.0], ValueError, r"`positions` must have shape \(seq, 2\)"),
        (np.ones((2, 2)), np.ones((1, 3, 2)), ValueError, r"`positions` must have shape"),
    ],
)
def test_mixed_angles_refuse_what_they_cannot_read(freqs, positions, error, message):
    """Catches: a scalar, empty or 4-D frequency array, boolean or complex positions, or
    positions of the wrong shape let through (or refused with another error)."""
    from rope_ref._core.mixed import mixed_angles

    with pytest.raises(error, match=message):
        mixed_angles(freqs, positions)
