"""Llama 3 scaling with low_freq_factor == high_freq_factor (a step), against HF's own rule.

Llama 4's released configs use ``low_freq_factor = high_freq_factor = 1``. HF's
``_compute_llama3_parameters`` then keeps wavelengths below ``L0 / f`` and divides the
others by the factor; rope_ref must give the same inverse frequencies (float32 HF values:
relative tolerance from the float32 exponent, as in test_hf_conformance.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")

U32 = 2.0**-24


def _config(low: float, high: float) -> dict[str, object]:
    return {
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "max_position_embeddings": 10485760,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 16.0,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": 8192,
        },
    }


def _hf_inv_freq(config: dict[str, object]) -> np.ndarray:
    hf = transformers.LlamaConfig(**config)
    inv, _ = rope_utils.ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
    return inv.double().numpy()


@pytest.mark.parametrize("low", [1.0, 2.0, 0.5])
def test_step_matches_hf(low: float) -> None:
    config = _config(low, low)
    spec = rr.RopeSpec.from_hf(config)
    ours = rr.inv_freq(spec)
    theirs = _hf_inv_freq(config)
    assert np.isfinite(theirs).all()
    tolerance = (np.abs(np.log(ours)) + 8.0) * U32
    np.testing.assert_allclose(ours, theirs, rtol=float(tolerance.max()))
    # Independently: the step, written here.
    plain = 1.0 / 500000.0 ** (np.arange(0, 128, 2) / 128)
    wavelength = 2.0 * math.pi / plain
    expected = np.where(wavelength > 8192 / low, plain / 16.0, plain)
    np.testing.assert_allclose(ours, expected, rtol=1e-12)
    assert (ours < 0.5 * plain).any()  # both sides of the step occur
    assert np.isclose(ours, plain, rtol=1e-12).any()


def test_step_is_the_limit_of_a_narrowing_band() -> None:
    step = rr.scaling.Llama3(16.0, 8192, low_freq_factor=1.0, high_freq_factor=1.0)
    narrow = rr.scaling.Llama3(16.0, 8192, low_freq_factor=1.0, high_freq_factor=1.0 + 1e-9)
    a = rr.inv_freq(rr.RopeSpec(128, base=500000.0, scaling=step))
    b = rr.inv_freq(rr.RopeSpec(128, base=500000.0, scaling=narrow))
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_band_order_still_refused() -> None:
    with pytest.raises(ValueError, match=r"`low_freq_factor` must be at most high_freq_factor"):
        rr.RopeSpec.from_hf(_config(2.0, 1.0))
