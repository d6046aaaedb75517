"""Reading and writing HF configs where a planted mistake in rope_ref/_config/hf.py hides.

Each test asserts what transformers' own code computes (its config classes and RoPE
initialisers) or HF's documented arithmetic (``int(head_dim * partial_rotary_factor)``)
written here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rope_ref as rr


def test_glm4_moe_odd_rotary_dim_one_below_head_dim_is_hf_own():
    """Catches: an odd rotary size refused already when it is one below head_dim."""
    pytest.importorskip("transformers")
    from transformers import Glm4MoeConfig
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeRotaryEmbedding

    given = {"model_type": "glm4_moe", "hidden_size": 32, "num_attention_heads": 4,
             "head_dim": 8, "partial_rotary_factor": 0.875, "rope_theta": 10000.0}  # fmt: skip
    hf = Glm4MoeConfig(**{k: v for k, v in given.items() if k != "model_type"})
    inv, _ = Glm4MoeRotaryEmbedding.compute_default_rope_parameters(hf)
    spec = rr.RopeSpec.from_hf(given)
    assert spec.head_dim == 8
    assert spec.rotary_dim == 8  # int(8 * 0.875) = 7, rotated as 4 pairs
    want = [1.0 / 10000.0 ** (2 * j / 7) for j in range(4)]  # arange(0, 7, 2) / 7
    np.testing.assert_allclose(rr.inv_freq(spec), want, rtol=1e-15)
    np.testing.assert_allclose(rr.inv_freq(spec), inv.double().numpy(), rtol=1e-6)


def test_a_family_size_key_pair_half_given_falls_back_to_hidden_size():
    """Catches: the first (hidden, heads) key pair taken when only one of the two is there."""
    pytest.importorskip("transformers")
    from transformers import GPTJConfig

    given = {"n_embd": 64, "hidden_size": 128, "num_attention_heads": 4, "rotary_dim": 8}
    hf = GPTJConfig(**given)  # hidden_size and num_attention_heads are its aliases
    spec = rr.RopeSpec.from_hf({"model_type": "gptj", **given})
    assert spec.head_dim == hf.n_embd // hf.n_head == 32
    assert spec.rotary_dim == hf.rotary_dim == 8


def test_to_hf_writes_three_axis_m_rope_and_refuses_two_axes():
    """Catches: the number of M-RoPE axes HF has (three) changed in `to_hf`'s check."""
    config: Any = rr.RopeSpec(16, sections=(2, 3, 3)).to_hf()
    assert config["rope_parameters"]["mrope_section"] == [2, 3, 3]
    with pytest.raises(ValueError, match=r"sections=\(4, 4\)"):
        rr.RopeSpec(16, sections=(4, 4)).to_hf()
    with pytest.raises(ValueError, match=r"sections=\(2, 2, 2, 2\)"):
        rr.RopeSpec(16, sections=(2, 2, 2, 2)).to_hf()


def test_to_hf_partial_rotary_factor_gives_the_rotary_dim_by_hf_arithmetic():
    """Catches: a factor whose ``int(head_dim * factor)`` falls one short (e.g. 30 of 44)."""
    for head_dim in range(2, 130):
        for rotary_dim in range(2, head_dim, 2):
            config: Any = rr.RopeSpec(head_dim, rotary_dim=rotary_dim).to_hf()
            factor = config["rope_parameters"]["partial_rotary_factor"]
            assert int(head_dim * factor) == rotary_dim


def test_phi3_reads_yarn_as_longrope_and_only_yarn():
    """Catches: Phi-3's old name for LongRoPE ("yarn") applied to its other rope types."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    factors = {"short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 3.0, 5.0, 8.0]}
    old = {"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 4,
           "max_position_embeddings": 256, "original_max_position_embeddings": 64,
           "rope_scaling": {"type": "yarn", **factors}}  # fmt: skip
    hf = transformers.Phi3Config(**{k: v for k, v in old.items() if k != "model_type"})
    inv, factor = ROPE_INIT_FUNCTIONS[hf.rope_parameters["rope_type"]](hf, "cpu", seq_len=200)
    spec = rr.RopeSpec.from_hf(old)
    assert isinstance(spec.scaling, rr.scaling.LongRoPE)
    np.testing.assert_allclose(rr.inv_freq(spec, seq_len=200), inv.double().numpy(), rtol=1e-6)
    assert rr.attention_factor(spec, seq_len=200) == pytest.approx(float(factor), rel=1e-12)
    plain = rr.RopeSpec.from_hf({"model_type": "phi3", "hidden_size": 32, "num_attention_heads": 4})
    assert plain.scaling is None
    np.testing.assert_allclose(rr.inv_freq(plain), [1e4 ** (-j / 4) for j in range(4)], rtol=1e-15)
