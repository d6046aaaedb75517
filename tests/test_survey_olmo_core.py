"""OLMo-core in `rope-ref survey`: every row agrees, ABF through `AttentionScale` and PI with
an attention factor through `Chain`; OLMo's own HF export drops that attention factor
(confirmed against OLMo's tables here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import AttentionScale
from tests._libraries import driver, require, rows

D = 64


def test_rows_agree():
    found = rows("ai2-olmo-core")
    assert len(found) == 8
    for row in found.values():
        assert row.verdict == "conformant", row


def _olmo_table(scaling: object, theta: int = 500_000) -> tuple[np.ndarray, np.ndarray]:
    import torch

    rope = driver("olmo_core")._load()
    module = rope.RotaryEmbedding(head_size=D, theta=theta, scaling=scaling)
    sin, cos = module._get_rotary_embedding(5, torch.device("cpu"))
    return sin.double().numpy(), cos.double().numpy()


def test_abf_is_a_new_base_with_a_bare_attention_factor():
    require("ai2-olmo-core")
    rope = driver("olmo_core")._load()
    sin, cos = _olmo_table(
        rope.ABFRoPEScalingConfig(new_theta=8_000_000, attention_rescale_factor=1.25)
    )
    theta = 8e6 ** -(np.arange(0, D, 2) / D)
    angles = np.arange(5)[:, None] * theta  # ABF: base 8e6, cos and sin times 1.25
    np.testing.assert_allclose(cos[:, : D // 2], 1.25 * np.cos(angles), atol=1e-6)
    np.testing.assert_allclose(sin[:, : D // 2], 1.25 * np.sin(angles), atol=1e-6)
    spec = rr.RopeSpec(D, base=8e6, scaling=AttentionScale(1.25))
    c, _s = rr.rope_cos_sin(spec, np.arange(5))
    np.testing.assert_allclose(c, 1.25 * np.cos(angles), rtol=1e-13)
    with pytest.raises(NotImplementedError):
        rope.ABFRoPEScalingConfig().to_hf_config()  # no HF form: the survey states it itself


def test_the_hf_export_of_pi_drops_the_attention_factor():
    require("ai2-olmo-core")
    olmo = driver("olmo_core")
    rope = olmo._load()
    pi = rope.PIRoPEScalingConfig(factor=4.0, attention_rescale_factor=1.25)
    sin, cos = _olmo_table(pi)
    assert math.hypot(cos[3, 0], sin[3, 0]) == pytest.approx(1.25, rel=1e-6)  # OLMo scales
    exported = olmo._hf_spec(pi)  # RopeSpec.from_hf(OLMo's to_hf_config())
    assert rr.attention_factor(exported) == 1.0
    assert pi.to_hf_config() == {"rope_type": "linear", "factor": 4.0}
