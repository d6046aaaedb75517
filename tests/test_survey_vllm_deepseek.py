"""vLLM's DeepSeek rows beyond DeepSeek V3's: V4's class and the deepseek_llama_scaling type.

``DeepseekV4ScalingRotaryEmbedding`` (``is_deepseek_v4``) rotates the *last* rotary_dim
features with DeepSeek's YaRN and negates sin when called with ``inverse=True``. Its
result is checked here against YaRN written in float64 NumPy (the YaRN paper's ramp
between the correction dimensions, as HF and vLLM compute it), and a spec that rotates
the first features instead, or the forward rotation, is shown to fail, so the rows test
where the rotated features sit and which way they turn.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rope_ref.testing import rope_report
from tests._libraries import driver, require, rotate_pairs

D, ROTARY, THETA = 64, 32, 1e6
FACTOR, ORIGINAL = 40.0, 4096


@pytest.fixture(scope="module")
def vllm():
    require("vllm")
    return driver("vllm")


def _case(vllm, start: str):
    return next(c for c in vllm.CASES if c.label.startswith(start))


def _yarn_inv_freq(d: int) -> np.ndarray:
    """YaRN's frequencies over `d` rotated features (beta_fast 32, beta_slow 1), float64."""
    inv = THETA ** -(np.arange(0, d, 2) / d)

    def correction_dim(rotations: float) -> float:
        return d * math.log(ORIGINAL / (rotations * 2 * math.pi)) / (2 * math.log(THETA))

    low = max(math.floor(correction_dim(32.0)), 0)
    high = min(math.ceil(correction_dim(1.0)), d - 1)
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0.0, 1.0)
    return inv / FACTOR * ramp + inv * (1.0 - ramp)


def _expected(x: np.ndarray, p: np.ndarray, sign: float) -> np.ndarray:
    """The last ROTARY features of x rotated as GPT-J pairs by sign * p * theta_j."""
    out = x.astype(np.float64).copy()
    angles = sign * p[:, None] * _yarn_inv_freq(ROTARY)
    out[..., D - ROTARY :] = rotate_pairs(out[..., D - ROTARY :], angles, interleaved=True)
    return out


def test_v4_rotates_the_last_features_with_deepseeks_yarn(vllm) -> None:
    """Both V4 rows (forward and inverse=True): the formula, the spec, and two wrong specs
    (the first features rotated, the other direction) that must fail."""
    p = np.array([0, 1, 2, 9, 300, 4000, 9000])
    x = np.random.default_rng(0).uniform(-1, 1, (1, 2, p.size, D)).astype(np.float32)
    cases = [c for c in vllm.CASES if c.label.startswith("DeepseekV4")]
    assert [c.inverse for c in cases] == [False, True]
    for case in cases:
        runner = vllm.inverse_runner if case.inverse else vllm.make_runner
        y = runner(case)(x.copy(), p)
        np.testing.assert_allclose(y, _expected(x, p, -1.0 if case.inverse else 1.0), atol=2e-3)
        spec = vllm.spec_of(case)
        assert spec.rotary_start == D - ROTARY
        assert rope_report(y, x, spec, p, inverse=case.inverse).ok
        first = dataclasses.replace(spec, rotary_start=0)  # the features V3's class rotates
        assert not rope_report(y, x, first, p, inverse=case.inverse).ok
        assert not rope_report(y, x, spec, p, inverse=not case.inverse).ok
    # the inverse row binds its keyword on vLLM's shared module for its call only
    again = vllm.make_runner(cases[0])(x.copy(), p)
    np.testing.assert_allclose(again, _expected(x, p, 1.0), atol=2e-3)


def test_deepseek_llama_scaling_is_deepseeks_yarn(vllm) -> None:
    """The rope_type deepseek_llama_scaling builds the same class as deepseek_yarn."""
    module = vllm.build(_case(vllm, "DeepseekScalingRotaryEmbedding (rope_type=deepseek_llama"))
    assert type(module).__name__ == "DeepseekScalingRotaryEmbedding"
    row = module.cos_sin_cache[1].double().numpy()
    angles = np.arctan2(row[D // 2 :], row[: D // 2])
    np.testing.assert_allclose(angles, _yarn_inv_freq(D), rtol=1e-6)
