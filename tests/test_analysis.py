"""rope_ref.analysis: decay curve, discrimination sum, wavelengths (values from formulas)."""

from __future__ import annotations

import cmath
import itertools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref import analysis


def _theta(dim, base):
    return [base ** (-2.0 * i / dim) for i in range(dim // 2)]


def _decay_by_hand(dim, m, base):
    """Mean over j = 1..d/2 of |sum_{i<j} e^{i m theta_i}|, with Python complex numbers."""
    partial, total = 0j, 0.0
    for theta in _theta(dim, base):
        partial += cmath.exp(1j * m * theta)
        total += abs(partial)
    return total / (dim // 2)


@pytest.mark.parametrize(("dim", "base"), [(128, 10000.0), (64, 500000.0), (8, 10.0)])
def test_decay_bound_matches_the_abel_sum(dim, base):
    m = [0.0, 1.0, 7.5, 100.0, 3000.0]
    raw = analysis.decay_bound(dim, m, base=base, normalize=False)
    expected = [_decay_by_hand(dim, x, base) for x in m]
    np.testing.assert_allclose(raw, expected, rtol=1e-12, atol=1e-12)
    scaled = analysis.decay_bound(dim, m, base=base)
    np.testing.assert_allclose(scaled, np.array(expected) / ((dim // 2 + 1) / 2), rtol=1e-12)


def test_decay_bound_is_one_at_zero_and_at_most_one():
    assert float(analysis.decay_bound(128, 0)) == 1.0
    assert float(analysis.decay_bound(128, 0, normalize=False)) == 32.5  # (64 + 1) / 2
    curve = analysis.decay_bound(128, np.arange(5000))
    assert curve.max() <= 1.0 + 1e-12


def test_decay_bound_decays_on_average():
    curve = analysis.decay_bound(128, np.arange(8192))
    windows = [curve[a:b].mean() for a, b in [(0, 16), (16, 128), (128, 1024), (1024, 8192)]]
    assert all(x > y for x, y in itertools.pairwise(windows)), windows
    assert not np.all(np.diff(curve) <= 0)  # ... but not monotonically: it oscillates


def test_decay_bound_is_even_and_keeps_shape():
    m = np.array([[1.0, 20.0], [300.0, 4000.0]])
    np.testing.assert_allclose(analysis.decay_bound(64, m), analysis.decay_bound(64, -m))
    assert analysis.decay_bound(64, m).shape == (2, 2)


@pytest.mark.parametrize("dim", [2, 8, 128])
def test_discrimination_at_zero_is_half_dim(dim):
    assert float(analysis.discrimination(dim, 0)) == dim / 2


@given(
    dim=st.sampled_from([2, 4, 16, 128]),
    m=st.integers(0, 10**6),
    base=st.floats(1.5, 1e7),
)
def test_discrimination_matches_mpmath(dim, m, base):
    with mpmath.workdps(40):
        expected = sum(
            mpmath.cos(m * mpmath.mpf(base) ** (mpmath.mpf(-2 * i) / dim)) for i in range(dim // 2)
        )
    got = float(analysis.discrimination(dim, m, base=base))
    assert abs(got - float(expected)) <= 1e-9 * max(1, m) ** 0.5 + 1e-12
    assert abs(got) <= dim / 2


def test_discrimination_accepts_arrays_of_any_namespace(xp):
    m = xp.asarray([0.0, 10.0, 1000.0])
    np.testing.assert_allclose(
        analysis.discrimination(16, m),
        [sum(math.cos(x * t) for t in _theta(16, 10000.0)) for x in (0.0, 10.0, 1000.0)],
        rtol=1e-13,
    )


def test_wavelengths_are_two_pi_over_inv_freq():
    spec = rr.RopeSpec(head_dim=128, base=500000.0)
    expected = [2 * math.pi / t for t in _theta(128, 500000.0)]
    np.testing.assert_allclose(analysis.wavelengths(spec), expected, rtol=1e-14)


def test_wavelengths_use_the_frequencies_after_scaling():
    freqs = (1.0, 0.25, 1e-3)
    spec = rr.RopeSpec(head_dim=6, freqs=freqs)
    np.testing.assert_allclose(analysis.wavelengths(spec), [2 * math.pi / f for f in freqs])


def test_full_turn_pairs_boundary():
    # wavelengths 2 pi, 8 pi and 2000 pi: a full turn needs (L - 1) theta >= 2 pi
    spec = rr.RopeSpec(head_dim=6, freqs=(1.0, 0.25, 1e-3))
    assert analysis.full_turn_pairs(spec, 7).tolist() == [False, False, False]  # 6 < 2 pi
    assert analysis.full_turn_pairs(spec, 8).tolist() == [True, False, False]  # 7 >= 2 pi
    assert analysis.full_turn_pairs(spec, 27).tolist() == [True, True, False]  # 26 >= 8 pi
    assert analysis.full_turn_pairs(spec, 10**5).tolist() == [True, True, True]


def test_llama_pairs_that_turn_within_4096():
    lam = [2 * math.pi / t for t in _theta(128, 10000.0)]
    expected = sum(x <= 4095 for x in lam)
    assert int(analysis.full_turn_pairs(rr.RopeSpec(head_dim=128), 4096).sum()) == expected


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: analysis.decay_bound(7, [1]), ValueError, r"`dim` must be even; got 7\."),
        (lambda: analysis.decay_bound(0, [1]), ValueError, r"`dim` must be at least 2"),
        (lambda: analysis.discrimination(8.0, [1]), TypeError, r"`dim` must be an integer"),
        (lambda: analysis.discrimination(8, [1], base=1.0), ValueError, r"`base` must be greater"),
        (lambda: analysis.discrimination(8, [np.nan]), ValueError, r"`distances` must be finite"),
        (lambda: analysis.discrimination(8, ["a"]), TypeError, r"`distances` must be real"),
        (lambda: analysis.discrimination(8, [True]), TypeError, r"`distances` must be real"),
        (lambda: analysis.base_lower_bound(8, -1), ValueError, r"`context_length` must be at"),
        (lambda: analysis.base_lower_bound(8, 2.0), TypeError, r"`context_length` must be an"),
        (lambda: analysis.wavelengths("spec"), TypeError, r"spec"),
        (
            lambda: analysis.full_turn_pairs(rr.RopeSpec(head_dim=8), 0),
            ValueError,
            r"`context_length` must be at least 1; got 0\.",
        ),
    ],
)
def test_bad_input_names_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_inputs_are_not_mutated():
    m = np.array([1.0, 2.0, 3.0])
    analysis.decay_bound(8, m)
    analysis.discrimination(8, m)
    assert m.tolist() == [1.0, 2.0, 3.0]
