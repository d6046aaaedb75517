"""vLLM in `rope-ref survey`: every rotary class `get_rope` builds, against `RopeSpec.from_hf`.

The disagreement it reports (M-RoPE with YaRN) and the length-dependent rules vLLM computes
from its configured maximum length (dynamic NTK, LongRoPE) are checked here against the
formulas written in float64 NumPy: YaRN's as HF and the YaRN authors compute it, dynamic
NTK's base and LongRoPE's long factors and attention factor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rope_ref.testing import rope_report
from tests._libraries import driver, require, rotate_pairs

D = 64
THETA = 1e6


@pytest.fixture(scope="module")
def vllm():
    require("vllm")
    return driver("vllm")


@pytest.fixture(scope="module")
def found(vllm):
    from rope_ref.cli.survey.run import survey

    return {r.settings: r for r in survey(20000, only=("vllm",))}


def _case(vllm, start: str):
    return next(c for c in vllm.CASES if c.label.startswith(start))


def _cache_angles(module, position: int) -> np.ndarray:
    """The angles of a vLLM cos/sin cache row (cos, sin halves), in float64."""
    row = module.cos_sin_cache[position].double().numpy()
    n = row.size // 2
    return np.arctan2(row[n:], row[:n])


def _yarn_inv_freq(factor: float, original: int, beta_fast=32.0, beta_slow=1.0):
    """YaRN's frequencies in float64, as HF's `_compute_yarn_parameters` writes them."""
    inv = THETA ** -(np.arange(0, D, 2) / D)

    def correction_dim(rotations: float) -> float:
        return D * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(THETA))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), D - 1)
    ramp = np.clip((np.arange(D // 2) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp  # 1 on the fast pairs, which keep their frequency
    return inv / factor * (1.0 - keep) + inv * keep


def test_rows(vllm, found):
    assert len(found) == len(vllm.CASES) == 25
    refused = {
        "DynamicNTKAlpha": "from_hf refuses",
        "NTKScaling": "unknown rope_type 'ntk'",
        "Bailing": "pair-to-axis map",
        "MRotaryEmbeddingInterleaved": "pair-to-axis map",
        "Fourier": "learned",
        "DualChunk": "three position sets",
        "Llama4Vision": "takes no positions",
    }
    for settings, row in found.items():
        why = next((w for k, w in refused.items() if settings.startswith(k)), None)
        if why is not None:
            assert row.verdict == "skipped", row
            assert why in (row.diagnosis or ""), row
        elif settings.startswith("MRotaryEmbedding with YaRN"):
            assert row.verdict == "NOT conformant", row
            assert "original_max_position=131072" in (row.diagnosis or ""), row
        else:
            assert row.verdict == "conformant", row


def test_mrope_yarn_ramps_over_four_times_the_original_length(vllm):
    factor, original = 4.0, 32768
    right = _yarn_inv_freq(factor, original)
    wrong = _yarn_inv_freq(factor, 4 * original)  # M-RoPE's cache length (positions_factor)
    assert np.max(np.abs(right / wrong - 1.0)) > 0.3  # the two differ on the ramp's pairs
    plain = vllm.build(_case(vllm, "YaRNScalingRotaryEmbedding, factor=4, original 32768"))
    mrope = vllm.build(_case(vllm, "MRotaryEmbedding with YaRN"))
    np.testing.assert_allclose(_cache_angles(plain, 1), right, rtol=1e-6)
    np.testing.assert_allclose(_cache_angles(mrope, 1), wrong, rtol=1e-6)
    assert not np.allclose(_cache_angles(mrope, 1), right, rtol=1e-3)
    # built with mrope_positions_factor=1, the M-RoPE module's ramp is YaRN's
    import torch

    from rope_ref.cli.survey.peers import _quiet_import

    rotary = _quiet_import("vllm.model_executor.layers.rotary_embedding")
    params = {"rope_theta": THETA, **_case(vllm, "MRotaryEmbedding with YaRN").params}
    with vllm._context():
        fixed = rotary.get_rope(
            D, vllm.MAX_MODEL_LEN, True, params, torch.float32, mrope_positions_factor=1
        )
    np.testing.assert_allclose(_cache_angles(fixed, 1), right, rtol=1e-6)
    # both scale cos and sin by YaRN's attention factor 0.1 ln(s) + 1
    for module in (plain, mrope):
        row = module.cos_sin_cache[1].double().numpy()
        np.testing.assert_allclose(np.hypot(row[: D // 2], row[D // 2 :]), 0.1 * math.log(4) + 1)


def test_dynamic_ntk_base_is_that_of_the_configured_length(vllm):
    module = vllm.build(_case(vllm, "DynamicNTKScaling"))
    s, length, trained = 4.0, vllm.MAX_MODEL_LEN, 8192
    base = THETA * (s * length / trained - (s - 1)) ** (D / (D - 2))
    np.testing.assert_allclose(_cache_angles(module, 1), base ** -(np.arange(0, D, 2) / D), 1e-6)


def test_longrope_takes_long_factors_below_the_original_length(vllm):
    case = _case(vllm, "Phi3LongRoPE")
    run = vllm.make_runner(case)
    p = np.arange(0, 4000, 97)  # every position below original_max_position_embeddings
    x = np.random.default_rng(0).uniform(-1, 1, (1, 2, p.size, D)).astype(np.float32)
    y = run(x.copy(), p)
    long_factor = np.asarray(case.params["long_factor"])
    angles = p[:, None] * THETA ** -(np.arange(0, D, 2) / D) / long_factor
    mscale = math.sqrt(1 + math.log(vllm.MAX_MODEL_LEN / 4096) / math.log(4096))
    expected = mscale * rotate_pairs(x.astype(np.float64), angles, interleaved=False)
    np.testing.assert_allclose(y, expected, atol=5e-4)  # float32 angles to 4000
    spec = vllm.spec_of(case)
    assert rope_report(y, x, spec, p, seq_len=vllm.MAX_MODEL_LEN).ok
    assert not rope_report(y, x, spec, p).ok  # by the positions alone: the short factors


def test_gptj_rows_follow_the_interleaved_formula(vllm):
    case = _case(vllm, "RotaryEmbedding, is_neox_style=False")
    p = np.array([0, 1, 5, 300, 17000])
    x = np.random.default_rng(1).uniform(-1, 1, (2, 4, p.size, D)).astype(np.float32)
    angles = p[:, None] * THETA ** -(np.arange(0, D, 2) / D)
    expected = rotate_pairs(x.astype(np.float64), angles, interleaved=True)
    np.testing.assert_allclose(vllm.make_runner(case)(x.copy(), p), expected, atol=2e-3)
