"""The cheap first test of many candidates: a comparison cut down to its worst failing rows
and evenly spread passing ones, which never rejects an alternative the whole result fits."""

from __future__ import annotations

import numpy as np

import rope_ref as rr
from rope_ref.testing._compare import compare, setup
from rope_ref.testing._diagnosis.focus import FOCUS_ROWS, explains_by, focus, with_spec
from rope_ref.testing._diagnosis.shared import explains
from tests._independent import rotate_pairs


def _inv(d, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def test_a_small_comparison_is_its_own_focus():
    x = np.random.default_rng(0).standard_normal((8, 16))
    p = np.arange(8)
    c = compare(rotate_pairs(x, (p + 1)[:, None] * _inv(16)), setup(x, rr.RopeSpec(16), p))
    assert focus(c) is c


def test_the_focus_keeps_the_worst_row_and_judges_like_the_whole():
    d, heads, rows = 16, 4, 300
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, rows, heads, d))
    p = np.arange(rows)
    want = rotate_pairs(x, p[None, :, None, None] * _inv(d))
    y = want.copy()
    y[0, 7, 2, 3] += 0.5  # the worst element
    y[0, 100:, :, :] = rotate_pairs(x[0, 100:], (p[100:] + 1)[:, None, None] * _inv(d))
    c = compare(y, setup(x, rr.RopeSpec(d), p, seq_axis=1))
    cut = focus(c)
    assert cut is not c
    assert cut.actual.shape[0] <= 2 * FOCUS_ROWS
    assert np.any(np.all(cut.actual == y[0, 7, 2], axis=-1))  # the worst row is kept
    assert np.any(~np.any(cut.failed, axis=-1))  # and passing rows with it
    assert focus(c) is cut  # built once per comparison


def test_the_focus_rejects_only_what_the_whole_rejects():
    d, rows = 16, 300
    x = np.random.default_rng(2).standard_normal((rows, d))
    p = np.arange(rows)
    y = rotate_pairs(x, p[:, None] * _inv(d, 500.0))  # the code used base 500
    c = compare(y, setup(x, rr.RopeSpec(d), p))
    assert focus(c) is not c
    for spec, fits in ((rr.RopeSpec(d, base=500.0), True), (rr.RopeSpec(d, base=499.0), False)):
        assert explains(c, c.setup.oracle(spec=spec), spec=spec) == fits
        assert explains_by(c, with_spec(spec), spec=spec) == fits
