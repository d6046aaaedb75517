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
from tests.test_multiaxis_map import ernie_axes, openpangu_axes, rotated

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
    assert len(found) == len(vllm.CASES) == 26
    refused = {
        "Fourier": "`use_fope` is true",
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


def _vllm_ntk(mixed_b):
    """vLLM's NTKScalingRotaryEmbedding._compute_inv_freq with factor 4, in float64."""
    inv = THETA ** -(np.arange(0, D, 2) / D)
    if mixed_b is None:
        return (4.0 * THETA) ** -(np.arange(0, D, 2) / D) / 4.0 ** (2 / D)
    a = math.log(4.0) / (D / 2) ** mixed_b
    return inv / np.exp(a * np.arange(1, D // 2 + 1) ** mixed_b)


NTK_ROWS = {
    "NTKScalingRotaryEmbedding (rope_type=ntk), factor=4": _vllm_ntk(None),
    "NTKScalingRotaryEmbedding (rope_type=ntk), factor=4, mixed_b=0.5": _vllm_ntk(0.5),
    "DynamicNTKAlphaRotaryEmbedding": (THETA * 1000.0 ** (D / (D - 2)))
    ** -(np.arange(0, D, 2) / D),
}


@pytest.mark.parametrize("start", sorted(NTK_ROWS))
def test_ntk_rows_specs_are_vllms_formulas(start):
    """The rows' specs (from_hf of the configs vLLM reads) follow vLLM's formulas."""
    import rope_ref as rr

    module = driver("vllm")
    spec = module.spec_of(_case(module, start))
    assert not isinstance(spec, str), spec
    np.testing.assert_allclose(rr.inv_freq(spec), NTK_ROWS[start], rtol=1e-13, atol=0)


@pytest.mark.parametrize("start", sorted(NTK_ROWS))
def test_ntk_rows_caches_are_vllms_formulas(vllm, start):
    """vLLM's own caches follow the same formulas, to float32 accuracy."""
    module = vllm.build(_case(vllm, start))
    np.testing.assert_allclose(_cache_angles(module, 1), NTK_ROWS[start], rtol=2e-6)


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


@pytest.mark.parametrize(
    ("start", "axes", "layout"),
    [
        (
            "BailingMRotaryEmbedding",
            ernie_axes(12, 12, 8),
            "interleaved",
        ),  # [t, h, w] = [8, 12, 12]
        ("MRotaryEmbeddingInterleaved", openpangu_axes([8, 12, 12]), "half"),
        ("Ernie4_5_VLRotaryEmbedding", ernie_axes(12, 12, 8), "interleaved"),
    ],
)
def test_pair_map_rows_follow_the_engine_order(vllm, start, axes, layout):
    # Each pair at the position of its axis, written from the engines' code (the maps of
    # tests.test_multiaxis_map), at (t, h, w) positions that differ on every axis.
    case = _case(vllm, start)
    rng = np.random.default_rng(2)
    p = np.stack([rng.integers(0, 3000, 7), rng.integers(0, 60, 7), rng.integers(0, 90, 7)], -1)
    x = rng.uniform(-1, 1, (1, 4, 7, D)).astype(np.float32)
    got = vllm.make_runner(case)(x.copy(), p)
    want = rotated(x.astype(np.float64), p[None, None], axes, THETA, layout)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-3)  # float32 angles to 3000 rad
    spec = vllm.spec_of(case)
    np.testing.assert_array_equal(spec.section_order, axes)


def test_openpangu_forward_native_is_not_what_vllm_runs(vllm):
    # MRotaryEmbeddingInterleaved overrides forward (called by vLLM) but inherits
    # MRotaryEmbedding's forward_native, which ignores the interleaving: the row calls
    # forward, and forward_native would be chunked.
    module = vllm.build(_case(vllm, "MRotaryEmbeddingInterleaved"))
    assert "forward" in vars(type(module))
    assert "forward_native" not in vars(type(module))
    order = type(module).get_mrope_interleaved_id_list(8, 12, 12, force_last=True)
    assert tuple(order) == tuple(openpangu_axes([8, 12, 12]))
