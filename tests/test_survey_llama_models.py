"""Meta's llama-models in `rope-ref survey`: both rows agree; `apply_scaling` is rope_ref's
Llama 3 rule (its constants transcribed in float64 here)."""

from __future__ import annotations

import math

import numpy as np

import rope_ref as rr
from rope_ref.scaling import Llama3
from tests._libraries import driver, require, rows

D = 128


def test_rows_agree():
    found = rows("llama-models")
    assert [r.verdict for r in found.values()] == ["conformant", "conformant"]


def test_apply_scaling_is_llama3_with_its_constants():
    require("llama-models")
    import torch

    model = driver("llama_models")._load()
    theta = 500000.0 ** -(np.arange(0, D, 2) / D)
    got = model.apply_scaling(torch.from_numpy(theta)).numpy()  # float64 in, float64 out
    # Llama 3.1: factor 8, low/high frequency factors 1 and 4, 8192 tokens (float64 here)
    wavelength = 2 * math.pi / theta
    smooth = (8192 / wavelength - 1.0) / (4.0 - 1.0)
    expected = np.where(
        wavelength < 8192 / 4,
        theta,
        np.where(wavelength > 8192, theta / 8, (1 - smooth) * theta / 8 + smooth * theta),
    )
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    spec = rr.RopeSpec(D, base=500000.0, scaling=Llama3(8.0, original_max_position=8192))
    np.testing.assert_allclose(rr.inv_freq(spec), expected, rtol=1e-15)
