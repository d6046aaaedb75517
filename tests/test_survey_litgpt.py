"""litgpt in `rope-ref survey`: its base, Llama 3, condense_ratio, linear and partial rows agree;
its YaRN disagrees, confirmed against the YaRN formula and litgpt's own formula transcribed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import Chain, Linear, Llama3, YaRN
from tests._libraries import driver, require, rows

D = 64


def _litgpt_yarn(factor: float, orig: int, base: float = 10000.0) -> tuple[np.ndarray, float]:
    """litgpt 0.5.13 ``build_rope_cache`` YaRN branch, transcribed in float64."""
    theta = base ** -(np.arange(0, D, 2) / D)

    def dim(rotations: float) -> float:
        return D * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(dim(32.0)), 0), min(math.ceil(dim(1.0)), D // 2 - 1)
    ramp = np.clip((np.arange(D // 2) - low) / (high - low), 0.0, 1.0)
    return (theta / factor) * (1 - ramp) + theta * ramp, 1.0  # no mscale: factor 1


def _paper_yarn(factor: float, orig: int, base: float = 10000.0) -> tuple[np.ndarray, float]:
    """YaRN (Peng et al. 2023) as its authors' code computes it: pairs below the correction
    dimension of beta_fast = 32 turns keep theta, pairs above that of beta_slow = 1 turn are
    interpolated (theta / s), a linear ramp in the pair index between; sqrt(1/t) = 0.1 ln s + 1."""
    theta = base ** -(np.arange(0, D, 2) / D)

    def dim(rotations: float) -> float:
        return D * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(dim(32.0)), 0), min(math.ceil(dim(1.0)), D // 2 - 1)
    interpolated = np.clip((np.arange(D // 2) - low) / (high - low), 0.0, 1.0)
    return theta / factor * interpolated + theta * (1 - interpolated), 0.1 * math.log(factor) + 1


def test_rows_agree_except_yarn():
    found = rows("litgpt")
    for settings, row in found.items():
        if "yarn" in settings:
            assert row.verdict == "NOT conformant", row
        else:  # apply_rope_interleave included: interleaved pairs read, half order written
            assert row.verdict == "conformant", row
    assert any("condense_ratio=4 with llama3" in s for s in found)
    assert any("rope_interleave=True" in s for s in found)


def test_yarn_disagreement_is_litgpt_inverting_the_ramp_and_dropping_the_factor():
    require("litgpt")
    model = driver("litgpt")._load()
    cos, sin = model.build_rope_cache(
        2,
        D,
        extra_config={
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "original_max_seq_len": 4096,
        },
    )
    theta_litgpt = np.arctan2(sin[1, : D // 2].double().numpy(), cos[1, : D // 2].double().numpy())
    scale_litgpt = math.hypot(float(cos[1, 0]), float(sin[1, 0]))
    mine, my_scale = _litgpt_yarn(4.0, 4096)
    paper, paper_scale = _paper_yarn(4.0, 4096)
    np.testing.assert_allclose(theta_litgpt, mine, rtol=1e-6)  # the transcription is litgpt
    assert scale_litgpt == pytest.approx(my_scale, abs=1e-7)
    # rope_ref's YaRN is the paper's; litgpt divides the fastest pair by 4, the paper keeps it
    spec = rr.RopeSpec(D, scaling=YaRN(4.0, original_max_position=4096))
    np.testing.assert_allclose(rr.inv_freq(spec), paper, rtol=1e-12)
    assert rr.attention_factor(spec) == pytest.approx(paper_scale)
    assert theta_litgpt[0] == pytest.approx(paper[0] / 4, rel=1e-6)
    assert paper[-1] == pytest.approx(mine[-1] / 4, rel=1e-12)
    assert scale_litgpt == pytest.approx(1.0) != pytest.approx(paper_scale)


def test_condense_ratio_with_llama3_is_the_chain_of_the_two_rules():
    require("litgpt")
    model = driver("litgpt")._load()
    config = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    cos, _sin = model.build_rope_cache(
        9, D, base=500000, condense_ratio=4, extra_config={**config, "original_max_seq_len": 8192}
    )
    # positions divided by the ratio, then Llama 3's bands (float64 formula written here)
    theta = 500000.0 ** -(np.arange(0, D, 2) / D)
    wavelength = 2 * math.pi / theta
    smooth = np.clip((8192 / wavelength - 1.0) / (4.0 - 1.0), 0.0, 1.0)
    llama3 = (1 - smooth) * theta / 8.0 + smooth * theta
    angles = (np.arange(9)[:, None] / 4.0) * llama3[None, :]
    np.testing.assert_allclose(cos[:, : D // 2].double().numpy(), np.cos(angles), atol=2e-6)
    spec = rr.RopeSpec(
        D, base=500000.0, scaling=Chain(Llama3(8.0, original_max_position=8192), Linear(4.0))
    )
    np.testing.assert_allclose(rr.rope_angles(spec, np.arange(9)), angles, rtol=1e-13)
    # the other order is a different RoPE: Llama 3 reads the divided wavelengths
    other = rr.RopeSpec(
        D, base=500000.0, scaling=Chain(Linear(4.0), Llama3(8.0, original_max_position=8192))
    )
    assert not np.allclose(rr.inv_freq(other), rr.inv_freq(spec))


def test_the_stand_in_refuses_to_be_called():
    require("litgpt")
    driver("litgpt")._load()
    import litgpt.scripts.convert_hf_checkpoint as stand_in

    with pytest.raises(RuntimeError, match="stand-in"):
        stand_in.qkv_reassemble()
