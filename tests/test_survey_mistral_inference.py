"""mistral-inference in `rope-ref survey`: 1-D and Pixtral 2-D rows agree; the 2-D table is
the even frequencies on rows and the odd ones on columns (written in float64 here)."""

from __future__ import annotations

import numpy as np

import rope_ref as rr
from rope_ref.cli.survey._shims import import_alone
from tests._libraries import driver, require, rows

D = 64


def test_rows_agree():
    found = rows("mistral-inference")
    assert len(found) == 2
    for row in found.values():
        assert row.verdict == "conformant", row


def test_pixtral_table_and_spec_follow_the_formula():
    require("mistral-inference")
    rope = driver("mistral_inference")
    module = import_alone("mistral_inference.rope")
    table = module.precompute_freqs_cis_2d(D, 8, 8, 10000.0)
    theta = 10000.0 ** -(np.arange(0, D, 2) / D)
    rows_, cols = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    expected = np.concatenate(
        [rows_[..., None] * theta[::2], cols[..., None] * theta[1::2]], axis=-1
    )
    np.testing.assert_allclose(table.real.numpy(), np.cos(expected), atol=1e-6)
    np.testing.assert_allclose(table.imag.numpy(), np.sin(expected), atol=1e-6)
    grid = np.stack([rows_.ravel(), cols.ravel()], axis=-1)
    spec = rope._pixtral_spec(D, 10000.0)
    np.testing.assert_allclose(rr.rope_angles(spec, grid), expected.reshape(-1, D // 2), rtol=1e-15)
