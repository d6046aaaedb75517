"""Size limits: what cannot finish is refused up front, naming the limit and why.

Each refusal is checked to come before any work (the functions that do the work are
replaced by ones that fail the test if called), and the largest sizes allowed to work.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import analysis
from rope_ref._core import frequencies
from rope_ref._core.spec import MAX_HEAD_DIM
from rope_ref.analysis._bound import _BLOCK, _CALL, MAX_DIM, MAX_TERMS, _products, call_shape


@pytest.fixture
def no_work(monkeypatch):
    """The search and the 50-digit frequencies fail the test if they are reached."""

    def started(*args, **kwargs):
        pytest.fail("the work started before the size was refused")

    monkeypatch.setattr(analysis, "smallest_feasible_log_base", started)
    monkeypatch.setattr(frequencies, "_default_inv_freq", started)


def refused_up_front(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rr.RopeSpec(2**40), "`head_dim` must be at most 65536"),
        (lambda: rr.rope_cos_sin(rr.RopeSpec(2**40), [0]), "`head_dim` must be at most 65536"),
        (lambda: rr.RopeSpec.from_hf({"head_dim": 2**20}), "`head_dim` must be at most 65536"),
        (lambda: analysis.decay_bound(2**20, [1.0]), "`dim` must be at most 65536"),
        (lambda: analysis.discrimination(2**40, [1.0]), "`dim` must be at most 65536"),
        (lambda: analysis.base_lower_bound(2**20, 100), "`dim` must be at most 1024"),
        (lambda: analysis.base_lower_bound(2**34, 10), "`dim` must be at most 1024"),
        (
            lambda: analysis.base_lower_bound(128, 10**8),
            "`context_length` must be at most 4,194,304 for dim = 128",
        ),
        (
            lambda: analysis.base_lower_bound(128, 2**62),
            "`context_length` must be at most 4,194,304 for dim = 128",
        ),
        (
            lambda: analysis.base_lower_bound(1024, 2**19 + 1),
            "`context_length` must be at most 524,288 for dim = 1024",
        ),
    ],
)
def test_sizes_that_cannot_finish_are_refused_up_front(no_work, call, message):
    refused_up_front(call, message)


def test_the_limits_are_the_documented_numbers():
    assert MAX_HEAD_DIM == 65536
    assert MAX_DIM == 1024
    assert MAX_TERMS == 2**28
    assert MAX_TERMS // 64 == 4_194_304


def test_the_largest_head_dim_works():
    spec = rr.RopeSpec(MAX_HEAD_DIM, rotary_dim=64)  # the head is large, the rotation small
    x = np.ones((2, MAX_HEAD_DIM))
    y = rr.apply_rope(x, spec)
    np.testing.assert_array_equal(y[:, 64:], x[:, 64:])
    theta = spec.base ** (-np.arange(32) / 32)
    np.testing.assert_allclose(rr.inv_freq(spec), theta, rtol=1e-15)


def test_the_size_limit_is_inclusive():
    # d = 2, L = 2**28 is exactly the limit: accepted, then answered at once (with one pair
    # no base works from L = 2 on); one more token is refused.
    with pytest.raises(ValueError, match="no base works"):
        analysis.base_lower_bound(2, 2**28)
    refused_up_front(
        lambda: analysis.base_lower_bound(2, 2**28 + 1),
        "`context_length` must be at most 268,435,456 for dim = 2",
    )


@pytest.mark.parametrize(
    ("rows", "inner", "width"),
    [(8, 128, 65), (128, 128, 256), (130, 128, 256), (3, 1024, 65), (37, 4096, 65), (5, 6, 7)],
)
def test_products_in_small_calls_equal_one_matrix_product(rows, inner, width):
    rng = np.random.default_rng(rows * width)
    left, right = rng.standard_normal((rows, inner)), rng.standard_normal((inner, width))
    got = _products(left, right)
    assert got.shape == (rows, width)
    # each entry is a dot product of length `inner`: a few ulp of sum |l_k r_k| apart
    bound = 4 * inner * np.finfo(np.float64).eps * (np.abs(left) @ np.abs(right))
    assert np.all(np.abs(got - left @ right) <= bound)


@pytest.mark.parametrize("dim", [2, 64, 128, 256, 1024, MAX_DIM])
@pytest.mark.parametrize("rows", [1, 8, 128, 4096])
def test_every_blas_call_of_the_bound_search_stays_on_one_thread(dim, rows):
    # OpenBLAS runs a product of m * n * k <= 4 * 65536 multiply-adds on the calling thread;
    # the search's products (2 * pairs inner terms, windows of 65 or blocks of 256 columns)
    # are split below that, in matrix products of two rows or more.
    inner = dim  # cos and sin of every pair
    for width in (65, _BLOCK):
        per_call, cols = call_shape(rows, inner, width)
        assert per_call * inner * cols <= _CALL <= 4 * 65536
        assert per_call >= min(2, rows)
        assert 1 <= cols <= width
