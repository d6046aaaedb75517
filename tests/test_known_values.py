"""Known values computed independently: mpmath at 50 digits, explicit formulas, seed 002."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rope_ref as rr

mpmath = pytest.importorskip("mpmath")


@pytest.fixture(autouse=True)
def _fifty_digits() -> Iterator[None]:
    with mpmath.workdps(50):
        yield


EPS = 2.0**-52  # float64 machine epsilon (1 ulp of 1.0)


def _exact_inv(base: float, j: int, d: int) -> Any:
    # base ** (-2j/d) with the exponent as an exact rational, at 50 digits.
    return mpmath.mpf(base) ** (mpmath.mpf(-2 * j) / d)


def _ulps(got: float, exact: Any) -> float:
    return float(abs(mpmath.mpf(got) - exact)) / float(np.spacing(float(exact)))


# --- inverse frequencies -------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 4, 6, 12, 16, 20, 64, 96, 128, 160, 256])
@pytest.mark.parametrize("base", [1.5, 10.0, 10000.0, 500000.0, 1e6, 1234567.891])
def test_inv_freq_is_correctly_rounded(d, base):
    # The exponent -2j/d is taken as an exact rational (in float64 it would be rounded when d
    # is not a power of two, costing up to ~6 ulp), so every frequency is the float64 nearest
    # to the 50-digit value.
    got = rr.inv_freq(rr.RopeSpec(head_dim=d, base=base))
    assert got.dtype == np.float64
    assert got.shape == (d // 2,)
    for j, g in enumerate(got):
        assert float(g) == float(_exact_inv(base, j, d)), (
            j,
            g,
            _ulps(float(g), _exact_inv(base, j, d)),
        )


def test_inv_freq_partial_rotary_uses_rotary_dim():
    spec = rr.RopeSpec(head_dim=96, rotary_dim=32, rotary_start=8, base=10000.0)
    got = rr.inv_freq(spec)
    assert got.shape == (16,)
    for j, g in enumerate(got):
        assert float(g) == float(_exact_inv(10000.0, j, 32))


# --- angles and cos/sin at large positions --------------------------------------------------

# Error model for phi = p * inv_freq in float64: inv_freq is correctly rounded (<= 1 ulp)
# (relative 2^-52), the product rounds once (relative 2^-53), so |dphi| <= 1.5 * 2^-52 |phi|.
# cos/sin are 1-Lipschitz and libm adds <= 1 ulp (<= 2^-52 since |cos| <= 1), so
# |dcos| <= 1.5 * 2^-52 |phi| + 2^-52. We assert the rounder 2^-51 (|phi| + 1).
LARGE_POSITIONS = [0.0, 1.0, 1000.0, 4095.5, 2.0**20 + 0.5, 2.0**24 - 1, 2.0**24]


@pytest.mark.parametrize(("d", "base"), [(128, 10000.0), (128, 500000.0), (64, 1e6), (16, 1e4)])
def test_angles_and_cos_sin_at_large_positions_vs_mpmath(d, base):
    spec = rr.RopeSpec(head_dim=d, base=base)
    pos = np.asarray(LARGE_POSITIONS)
    angles = np.asarray(rr.rope_angles(spec, pos))
    cos, sin = (np.asarray(t) for t in rr.rope_cos_sin(spec, pos))
    assert cos.dtype == sin.dtype == angles.dtype == np.float64
    assert angles.shape == cos.shape == (len(pos), d // 2)
    for i, p in enumerate(LARGE_POSITIONS):
        for j in range(d // 2):
            phi = mpmath.mpf(p) * _exact_inv(base, j, d)
            assert abs(angles[i, j] - float(phi)) <= 2.0**-51 * float(phi), (p, j)
            tol = 2.0**-51 * (float(phi) + 1.0)
            assert abs(cos[i, j] - float(mpmath.cos(phi))) <= tol, (p, j)
            assert abs(sin[i, j] - float(mpmath.sin(phi))) <= tol, (p, j)


def test_cos_sin_at_2_pow_24_beats_float32():
    # Sanity of the test above: at p = 2^24 a float32 angle is off by O(1) radians, the
    # float64 tables are off by <= 2^-51 (2^24 + 1) ~ 7.5e-9.
    spec = rr.RopeSpec(head_dim=128, base=500000.0)
    cos, _ = rr.rope_cos_sin(spec, np.asarray([2.0**24]))
    exact = float(mpmath.cos(mpmath.mpf(2) ** 24 * _exact_inv(500000.0, 1, 128)))
    assert abs(float(np.asarray(cos)[0, 1]) - exact) < 1e-8


# --- apply_rope vs explicit 2x2 rotations in mpmath ----------------------------------------


def _pairs(spec: rr.RopeSpec) -> list[tuple[int, int]]:
    n, s = spec.n_pairs, spec.rotary_start
    if spec.layout == "half":
        return [(s + j, s + j + n) for j in range(n)]
    return [(s + 2 * j, s + 2 * j + 1) for j in range(n)]


def _mp_rope(
    x: np.ndarray, positions: Any, spec: rr.RopeSpec, base: float, inverse: bool
) -> list[list[Any]]:
    d = spec.n_pairs * 2
    out = [[mpmath.mpf(float(v)) for v in row] for row in x]
    for row, p in zip(out, positions, strict=True):
        for j, (a, b) in enumerate(_pairs(spec)):
            phi = mpmath.mpf(float(p)) * _exact_inv(base, j, d) * (-1 if inverse else 1)
            xa, xb = row[a], row[b]
            row[a] = xa * mpmath.cos(phi) - xb * mpmath.sin(phi)
            row[b] = xb * mpmath.cos(phi) + xa * mpmath.sin(phi)
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("head_dim", "rotary_dim", "rotary_start"), [(8, 8, 0), (12, 4, 4)])
@pytest.mark.parametrize("inverse", [False, True])
def test_apply_rope_vs_mpmath_rotation(layout, head_dim, rotary_dim, rotary_start, inverse):
    rng = np.random.default_rng(7)
    spec = rr.RopeSpec(
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        rotary_start=rotary_start,
        base=10000.0,
        layout=layout,
    )
    positions = np.asarray([0.0, 1.0, 3.0, 17.0, 1000.25])
    x = rng.standard_normal((len(positions), head_dim))
    got = np.asarray(rr.apply_rope(x, spec, positions, inverse=inverse))
    want = _mp_rope(x, positions, spec, 10000.0, inverse)
    # Per output: angle error 2^-51 (|phi| + 1) times |x| (two terms), plus rounding.
    tol = 2.0**-50 * (1000.25 + 2.0) * float(np.max(np.abs(x)))
    for i in range(len(positions)):
        for f in range(head_dim):
            assert abs(got[i, f] - float(want[i][f])) <= tol, (i, f)
    passthrough = [f for f in range(head_dim) if not rotary_start <= f < rotary_start + rotary_dim]
    np.testing.assert_array_equal(got[:, passthrough], x[:, passthrough])


# --- rotation_matrix -------------------------------------------------------------------------


def _formula_matrix(spec: rr.RopeSpec, p: float) -> np.ndarray:
    R = np.eye(spec.head_dim)
    d = spec.n_pairs * 2
    for j, (a, b) in enumerate(_pairs(spec)):
        phi = p * spec.base ** (-2.0 * j / d)
        R[a, a], R[a, b], R[b, a], R[b, b] = (
            math.cos(phi),
            -math.sin(phi),
            math.sin(phi),
            math.cos(phi),
        )
    return R


SPECS = [
    rr.RopeSpec(head_dim=8),
    rr.RopeSpec(head_dim=8, layout="interleaved"),
    rr.RopeSpec(head_dim=10, rotary_dim=4, rotary_start=2, layout="half"),
    rr.RopeSpec(head_dim=10, rotary_dim=6, rotary_start=3, layout="interleaved", base=500.0),
]


@pytest.mark.parametrize("spec", SPECS)
def test_rotation_matrix_formula_and_group_properties(spec):
    eye = np.eye(spec.head_dim)
    for p in (0.0, 1.0, 5.0, 37.5):
        R = rr.rotation_matrix(spec, p)
        np.testing.assert_allclose(R, _formula_matrix(spec, p), rtol=0, atol=1e-14)
        np.testing.assert_allclose(R.T @ R, eye, rtol=0, atol=1e-15)
        assert abs(np.linalg.det(R) - 1.0) <= 1e-14
    # Relative property: R_m^T R_n = R_{n-m}; each entry carries ~|phi| eps of angle error.
    for m, n in [(3, 11), (20, 7), (0, 40), (33, 33)]:
        lhs = rr.rotation_matrix(spec, m).T @ rr.rotation_matrix(spec, n)
        np.testing.assert_allclose(lhs, rr.rotation_matrix(spec, n - m), rtol=0, atol=1e-12)


def test_rotation_matrix_is_what_apply_rope_multiplies_by():
    spec = rr.RopeSpec(head_dim=6, layout="interleaved")
    x = np.asarray([[0.3, -1.2, 2.0, 0.5, -0.7, 1.1]])
    got = np.asarray(rr.apply_rope(x, spec, np.asarray([4.0])))
    np.testing.assert_allclose(got[0], _formula_matrix(spec, 4.0) @ x[0], rtol=0, atol=1e-14)


# --- seed 002: 4 tokens, d = 4 (its table has arithmetic mistakes; these follow the math) ----

SEED_X = np.asarray(
    [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
)


def _seed_rope_row(x: np.ndarray, pos: int) -> list[float]:
    # theta_0 = pos, theta_1 = pos / 10000^(2/4) = pos / 100 (the seed wrongly writes pos/10000).
    out = []
    for (a, b), phi in zip([(x[0], x[1]), (x[2], x[3])], [pos, pos / 100], strict=True):
        c, s = math.cos(phi), math.sin(phi)
        out += [a * c - b * s, b * c + a * s]
    return out


def test_seed_002_rope_rows_from_the_formula():
    got = np.asarray(rr.apply_rope(SEED_X, rr.RopeSpec(head_dim=4, layout="interleaved")))
    want = np.asarray([_seed_rope_row(SEED_X[p], p) for p in range(4)])
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-16)
    c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(2), math.sin(2)
    np.testing.assert_allclose(got[0], [1.0, 0.0, 1.0, 0.0], rtol=0, atol=0)
    np.testing.assert_allclose(got[1], [-s1, c1, -math.sin(0.01), math.cos(0.01)], atol=4e-16)
    np.testing.assert_allclose(got[2, :2], [c2 - s2, s2 + c2], rtol=0, atol=4e-16)
    # The seed's row 2 gives x0' = -1.3254, x1' = 0.4932; the true values are:
    assert got[2, 0] == pytest.approx(-1.3254442633728241, abs=1e-15)
    assert got[2, 1] == pytest.approx(0.4931505902785393, abs=1e-15)


def test_seed_002_sinusoidal_embedding():
    got = np.asarray(rr.sinusoidal_embedding(np.arange(4), 4))
    want = [[math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)] for p in range(4)]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-16)
    # PE(3) = [sin 3, cos 3, sin 0.03, cos 0.03]; the seed's table says 0.0298 for sin 0.03,
    # which is wrong: sin(0.03) = 0.0299955002024956...
    assert abs(got[3, 2] - 0.029995500202495664) <= 1e-15
    assert abs(got[3, 2] - float(mpmath.sin(mpmath.mpf(3) / 100))) <= 1e-15


@pytest.mark.parametrize(
    ("base", "d", "first"),
    [(10000.0, 4096, 17), (500000.0, 1000, 17), (1000000.5, 96, 17), (10000.0, 8192, 15)],
)
def test_inv_freq_settles_every_frequency_when_the_first_digits_do_not(monkeypatch, base, d, first):
    # Started at 17 or 15 digits, too few to round many of these frequencies, the retries
    # with more digits still give each one rounded once from the exact power (mpmath at 400
    # bits, rounded by Fraction's exact conversion). At 15 digits the error bound's `+ 1`
    # matters: the frequencies near 1 (|x| small) are off by up to half a unit of the 15th
    # digit, which a bound of |x| units alone lets through.
    from fractions import Fraction

    from rope_ref._core import frequencies

    monkeypatch.setattr(frequencies, "FIRST_DIGITS", first)
    got = frequencies._default_inv_freq.__wrapped__(base, d)
    with mpmath.workprec(400):
        for j, g in enumerate(got):
            man, exp = _exact_inv(base, j, d).man_exp
            assert g == float(Fraction(man) * Fraction(2) ** exp), (j, g)
