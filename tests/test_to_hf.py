"""Writing HF configs (`RopeSpec.to_hf`): M-RoPE sections and their interleaved flag,
partial rotary factors, lengths up to 2**53 and the longrope factor HF reads back.

Each test asserts what transformers' own code computes from the config written, or HF's
documented arithmetic written here.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import rope_ref as rr


def test_to_hf_writes_three_axis_m_rope_and_refuses_two_axes():
    """Catches: the number of M-RoPE axes HF has (three) changed in `to_hf`'s check."""
    config: Any = rr.RopeSpec(16, sections=(2, 3, 3)).to_hf()
    assert config["rope_parameters"]["mrope_section"] == [2, 3, 3]
    with pytest.raises(ValueError, match=r"sections=\(4, 4\)"):
        rr.RopeSpec(16, sections=(4, 4)).to_hf()
    with pytest.raises(ValueError, match=r"sections=\(2, 2, 2, 2\)"):
        rr.RopeSpec(16, sections=(2, 2, 2, 2)).to_hf()


def test_to_hf_flags_interleaved_m_rope_and_only_it():
    """Catches: ``mrope_interleaved`` written for chunked sections instead of interleaved
    ones (Qwen3-VL's configs carry it; Qwen2-VL's chunked ones do not)."""
    for order in ("chunked", "interleaved"):
        spec = rr.RopeSpec(16, sections=(3, 3, 2), section_order=order)
        params: Any = spec.to_hf()["rope_parameters"]
        assert params.get("mrope_interleaved", False) is (order == "interleaved")
        assert rr.RopeSpec.from_hf(spec.to_hf()) == spec


def test_to_hf_partial_rotary_factor_gives_the_rotary_dim_by_hf_arithmetic():
    """Catches: a factor whose ``int(head_dim * factor)`` falls one short (e.g. 30 of 44)."""
    for head_dim in range(2, 130):
        for rotary_dim in range(2, head_dim, 2):
            config: Any = rr.RopeSpec(head_dim, rotary_dim=rotary_dim).to_hf()
            factor = config["rope_parameters"]["partial_rotary_factor"]
            assert int(head_dim * factor) == rotary_dim


def test_to_hf_writes_lengths_up_to_two_to_the_53():
    """Catches: the largest length a config holds (2**53, exact in float64) refused."""
    config: Any = rr.RopeSpec(16).to_hf(max_position_embeddings=2**53)
    assert config["max_position_embeddings"] == 2**53
    with pytest.raises(ValueError, match="at most 2\\*\\*53"):
        rr.RopeSpec(16).to_hf(max_position_embeddings=2**53 + 1)


def test_to_hf_writes_longrope_factor_which_hf_takes_over_its_own_length_ratio():
    """Catches: a LongRoPE factor left out of the config (HF then takes
    ``max_position_embeddings / original_max_position_embeddings`` instead)."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    short, long = [1.0, 1.5, 2.0, 3.0] * 2, [2.0, 3.0, 5.0, 8.0] * 2
    rule = rr.scaling.LongRoPE(short, long, 64, factor=4.0)
    config: Any = rr.RopeSpec(16, scaling=rule).to_hf()
    params = config["rope_parameters"]
    assert params["factor"] == 4.0  # HF's own ratio here is 128 / 64 = 2
    sizes = {"hidden_size": 64, "num_attention_heads": 4, "original_max_position_embeddings": 64}
    hf = transformers.LlamaConfig(**sizes, max_position_embeddings=128, rope_parameters=params)
    _, attention = ROPE_INIT_FUNCTIONS["longrope"](hf, "cpu", seq_len=200)
    assert attention == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(64)), rel=1e-15)


def test_to_hf_writes_a_length_of_one():
    """Catches: the smallest length a config holds (1) refused by `to_hf`."""
    config: Any = rr.RopeSpec(16).to_hf(max_position_embeddings=1)
    assert config["max_position_embeddings"] == 1
    with pytest.raises(ValueError, match="max_position_embeddings"):
        rr.RopeSpec(16).to_hf(max_position_embeddings=0)
