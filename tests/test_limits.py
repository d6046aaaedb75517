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
from rope_ref._core import frequencies, validation
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
    assert validation.MAX_ELEMENTS == 2**28
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


# --- arrays sized by the arguments: one limit on the values of any array built ----------

TOO_MANY = "values would exceed the limit of 268,435,456 values (2 GiB in float64) per array"


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: rr.rotation_matrix(rr.RopeSpec(MAX_HEAD_DIM), 3), "`spec.head_dim` too large"),
        (lambda: rr.rotation_matrix(rr.RopeSpec(16386, rotary_dim=2), 0), "`spec.head_dim`"),
        (
            lambda: rr.rope_cos_sin(rr.RopeSpec(MAX_HEAD_DIM), np.arange(10**6)),
            "`positions` and `spec.head_dim` too large: cos/sin tables of 1,000,000 x 32,768",
        ),
        (
            lambda: rr.rope_angles(rr.RopeSpec(MAX_HEAD_DIM), np.arange(10**6)),
            "`positions` and `spec.head_dim` too large: angles of 1,000,000 x 32,768",
        ),
        (
            # a read-only view that repeats one row: the input takes 128 KiB, its tables not
            lambda: rr.apply_rope(
                np.broadcast_to(np.ones(2**14), (2**15 + 1, 2**14)), rr.RopeSpec(2**14)
            ),
            "`positions` and `spec.head_dim` too large: cos/sin tables of 32,769 x 8,192",
        ),
        (
            lambda: rr.sinusoidal_embedding(np.arange(10), 2**40),
            "`positions` and `dim` too large: an embedding of 10 x 1,099,511,627,776",
        ),
        (lambda: rr.patch_positions((10**5, 10**5)), "`shape` too large"),
        (lambda: rr.patch_positions((2**62, 2**62)), "`shape` too large"),
        (
            lambda: rr.mrope_positions([5, 10**9]),
            "`segments` too large: positions of 1,000,000,005",
        ),
        (lambda: rr.mrope_positions([(100, 10**4, 10**4)]), "`segments` too large"),
    ],
)
def test_arrays_sized_by_the_arguments_are_refused_up_front(no_work, call, names):
    with pytest.raises(ValueError, match=re.escape(names)) as caught:
        call()
    assert TOO_MANY in str(caught.value)


def test_axial_frequencies_stay_within_the_head_dim_limit(no_work):
    refused_up_front(
        lambda: rr.axial_freqs((10**9,)), "`sections` must hold at most 32,768 pairs in all"
    )
    assert len(rr.axial_freqs((2**14, 2**14), kind="pixel")) == 2**15  # the limit itself


@pytest.fixture
def limit_64(monkeypatch):
    """The element limit lowered to 64, so that its edge is reached with small arrays."""
    monkeypatch.setattr(validation, "MAX_ELEMENTS", 64)


def test_the_table_limit_counts_positions_times_pairs(limit_64):
    spec = rr.RopeSpec(16)  # 8 pairs
    cos, _ = rr.rope_cos_sin(spec, np.arange(8))  # 64 values: the limit itself
    assert cos.shape == (8, 8)
    assert rr.rope_angles(spec, np.zeros((2, 4))).shape == (2, 4, 8)
    with pytest.raises(ValueError, match=re.escape("cos/sin tables of 9 x 8 = 72 values")):
        rr.rope_cos_sin(spec, np.arange(9))
    with pytest.raises(ValueError, match=re.escape("angles of 3 x 3 x 8 = 72 values")):
        rr.rope_angles(spec, np.zeros((3, 3)))


def test_the_table_limit_counts_tokens_not_axes_for_multi_axis_specs(limit_64):
    spec = rr.RopeSpec(16, sections=(4, 2, 2))  # 8 pairs, three position axes
    assert rr.rope_cos_sin(spec, np.zeros((8, 3)))[0].shape == (8, 8)
    with pytest.raises(ValueError, match=re.escape("of 9 x 8 = 72 values")):
        rr.rope_cos_sin(spec, np.zeros((9, 3)))


def test_the_other_limits_are_inclusive(limit_64):
    assert rr.rotation_matrix(rr.RopeSpec(8), 1.0).shape == (8, 8)
    assert rr.sinusoidal_embedding(np.arange(8), 8).shape == (8, 8)
    assert rr.patch_positions((4, 8)).shape == (32, 2)
    assert rr.mrope_positions([10, (1, 2, 2), 7]).shape == (21, 3)  # 63 values
    for call in (
        lambda: rr.rotation_matrix(rr.RopeSpec(10), 1.0),
        lambda: rr.sinusoidal_embedding(np.arange(9), 8),
        lambda: rr.patch_positions((4, 9)),
        lambda: rr.patch_positions((65,)),  # 65 x 1
        lambda: rr.mrope_positions([10, (1, 2, 2), 8]),
        lambda: rr.mrope_positions([(1, 4, 6), (1, 2, 2)]),
    ):
        with pytest.raises(ValueError, match="values would exceed the limit of 64 values"):
            call()
