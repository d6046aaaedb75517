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
