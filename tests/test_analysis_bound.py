"""base_lower_bound: the true smallest feasible base, checked by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_ref import analysis


def worst(dim, length, base):
    """min over m = 0..length of sum_i cos(m base^(-2i/dim)), by direct evaluation."""
    theta = base ** (-2.0 * np.arange(dim // 2) / dim)
    m = np.arange(length + 1, dtype=np.float64)
    return float(np.cos(np.multiply.outer(m, theta)).sum(axis=1).min())


def brute_force(dim, length, bases):
    """The feasible grid points among `bases` (the scan a person would write)."""
    return np.array([worst(dim, length, b) >= 0 for b in bases])


@pytest.mark.parametrize(("dim", "length"), [(8, 20), (16, 100), (32, 300), (128, 1024)])
def test_no_base_below_the_answer_works_and_the_answer_does(dim, length):
    found = analysis.base_lower_bound(dim, length)
    assert worst(dim, length, found) >= -1e-9
    grid = np.geomspace(1.0 + 1e-9, found * 3, 4000)
    feasible = brute_force(dim, length, grid)
    below = grid < found
    assert not feasible[below].any(), grid[below][feasible[below]]
    assert worst(dim, length, found * (1 - 1e-6)) < 0  # it is a boundary, not an interior


def test_feasible_set_is_not_an_interval_and_bisection_is_wrong():
    dim, length = 128, 4096
    found = analysis.base_lower_bound(dim, length)
    grid = np.geomspace(found, 2e5, 600)
    feasible = brute_force(dim, length, grid)
    assert feasible[0]
    assert not feasible.all()
    low, high = 2.0, 1e9
    for _ in range(60):
        mid = float(np.sqrt(low * high))
        low, high = (low, mid) if worst(dim, length, mid) >= 0 else (mid, high)
    assert abs(high - found) > 0.01 * found  # bisection lands on another boundary


@settings(max_examples=25)
@given(dim=st.sampled_from([4, 6, 8, 12, 16]), length=st.integers(2, 60))
def test_properties_against_brute_force(dim, length):
    found = analysis.base_lower_bound(dim, length)
    assert found > 1.0
    assert worst(dim, length, found) >= -1e-9
    grid = np.geomspace(1.0 + 1e-9, found, 600)[:-1]
    assert not brute_force(dim, length, grid).any()


def test_monotone_in_context_length():
    # a base that fails some distance up to n fails for n + 7 too; equal to rounding
    bounds = [analysis.base_lower_bound(64, n) for n in range(2, 200, 7)]
    assert all(a <= b * (1 + 1e-10) for a, b in itertools.pairwise(bounds))
    assert bounds[-1] > 10 * bounds[0]


def test_every_base_works_for_distances_up_to_one():
    assert analysis.base_lower_bound(128, 0) == 1.0
    assert analysis.base_lower_bound(128, 1) == 1.0


def test_one_pair_has_no_feasible_base():
    with pytest.raises(ValueError, match="no base works for `dim` = 2"):
        analysis.base_lower_bound(2, 2)
    assert analysis.base_lower_bound(2, 1) == 1.0


def test_progress_reports_growing_proven_bases():
    seen: list[float] = []
    found = analysis.base_lower_bound(48, 3000, progress=seen.append)
    assert seen
    assert all(a <= b for a, b in itertools.pairwise(seen))
    assert seen[-1] <= found * (1 + 1e-12)


def test_long_context_is_fast_and_right():
    found = analysis.base_lower_bound(128, 65536)
    assert worst(128, 65536, found) >= -1e-7
    assert worst(128, 65536, found * (1 - 1e-5)) < 0


@pytest.mark.parametrize("t", [3.0, 11.5, 18.0])
def test_the_matrix_product_sums_equal_direct_evaluation(t):
    from rope_ref.analysis._bound import _Sums

    dim, length = 128, 2**20
    sums = _Sums(dim, length)
    theta = np.exp(-sums.g * t)

    def direct(m):
        return np.cos(np.multiply.outer(np.asarray(m, dtype=np.float64), theta)).sum(axis=-1)

    start, stop = length - 70_000, length + 1  # several rows, a ragged last one
    np.testing.assert_allclose(
        sums.block(t, start, stop), direct(np.arange(start, stop)), rtol=0, atol=sums.tol
    )
    centres = np.array([5.0, 1000.0, 777_777.0, length - 3.0])
    near = centres[:, None] + np.arange(-4, 5)
    np.testing.assert_allclose(sums.windows(centres, 4, t), direct(near), rtol=0, atol=sums.tol)
