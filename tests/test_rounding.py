"""`to_grid` against the 16-bit casts of NumPy and ml_dtypes, at powers of two and their edges.

The exponent of each value comes from ``floor(log2|a|)``, which is one off where `log2`
rounds across a power of two: NumPy's rounds up for the float64 neighbours just below
every power, JAX's (``log(a) / log(2)``) rounds down at some powers themselves. The
oracles are NumPy's float64 to float16 cast (one IEEE rounding to nearest even) and
ml_dtypes' bfloat16 cast of values that float32 holds exactly (so its way through float32
rounds once too), over every exponent of both formats, their subnormals, the overflow
threshold and the ties either side of each power.
"""

from __future__ import annotations

import array_api_compat.numpy as xnp
import numpy as np
import pytest

from rope_ref._core.rounding import to_grid

ml_dtypes = pytest.importorskip("ml_dtypes")


def edges(exponents: np.ndarray, fraction_bits: int) -> np.ndarray:
    """Powers of two, their float64 neighbours, and values a grid step or half one away.

    Around ``2**k`` the grid spacing is ``2**(k - fraction_bits)`` above and half that
    below: ``1 + 2**-fraction_bits`` is the next grid value, ``1 + 2**-(fraction_bits+1)``
    the tie between them (to even: down), ``1 - 2**-(fraction_bits+2)`` the tie below
    (to even: up, onto the power), and the others fall just either side of the ties.
    """
    powers = np.ldexp(1.0, exponents)
    t = 2.0**-fraction_bits
    factors = [1.0, 1 + t, 1 + t / 2, 1 + t / 2 + t / 8, 1 + t / 2 - t / 8, 1 - t / 4,
               1 - t / 4 - t / 16, 1 - t / 4 + t / 16, 1 + 3 * t / 2, 1 - t / 2]  # fmt: skip
    values = [powers * f for f in factors]
    values += [np.nextafter(powers, 0.0), np.nextafter(powers, np.inf)]
    values += [np.nextafter(np.nextafter(powers, 0.0), 0.0)]
    everything = np.concatenate(values)
    return np.concatenate([everything, -everything])


def test_to_grid_float16_rounds_as_numpy_casts_once():
    a = edges(np.arange(-30, 17), 10)
    a = np.concatenate([a, [65504.0, 65519.0, 65519.99, 65520.0, 65536.0, 1e300, 5e-324, 0.0]])
    got = to_grid(a, "float16", xp=xnp)
    with np.errstate(over="ignore"):
        want = a.astype(np.float16)
        assert np.array_equal(got.astype(np.float16), want)
        finite = np.isfinite(want)
        assert np.array_equal(got[finite], want[finite].astype(np.float64))  # exactly on the grid
    assert np.all(np.abs(got[~finite]) > 65504.0)


def test_to_grid_bfloat16_rounds_as_ml_dtypes_from_exact_float32():
    a = edges(np.arange(-140, 127), 7)
    a = a[a.astype(np.float32).astype(np.float64) == a]  # float32 holds them: one rounding
    assert a.size > 5000
    big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    got = to_grid(a, "bfloat16", xp=xnp)
    want = a.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.array_equal(got, want)
    top = np.array([big, big * (1 + 2.0**-9), big * (1 + 2.0**-8)])
    assert np.array_equal(to_grid(top, "bfloat16", xp=xnp)[:2], [big, big])
    assert to_grid(top, "bfloat16", xp=xnp)[2] > big  # the tie above the largest: to infinity


def test_to_grid_just_below_powers_of_two_where_log2_rounds_up():
    """float64 values a few ulps below 2**k, whose log2 is k: they round up onto 2**k."""
    k = np.arange(-14, 16)
    below = np.ldexp(1.0, k) * (1 - 8 * 2.0**-53)
    assert np.array_equal(to_grid(below, "float16", xp=xnp), np.ldexp(1.0, k))
    assert np.array_equal(to_grid(below, "bfloat16", xp=xnp), np.ldexp(1.0, k))


def test_to_grid_with_jax_log2_at_powers_of_two():
    """JAX's log2 of some powers of two lies below the exponent: the grid must not refine."""
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        import jax.numpy as jnp
        from array_api_compat import array_namespace

        a = edges(np.arange(-14, 16), 10)
        ja = jnp.asarray(a)
        got = np.asarray(to_grid(ja, "float16", xp=array_namespace(ja)))
        assert np.array_equal(got.astype(np.float16), a.astype(np.float16))
    finally:
        jax.config.update("jax_enable_x64", before)
