"""Megatron-core's CPU path in `rope-ref survey`: rows agree, MLA as interleaved-in, half-out;
the current-device patch is undone; YaRN's concentration factor transcribed in float64."""

from __future__ import annotations

import math

import pytest

import rope_ref as rr
from rope_ref.scaling import YaRN
from tests._libraries import driver, require, rows


def test_rows_agree_and_mla_reads_interleaved_and_writes_half():
    require("megatron-core")
    import torch

    before = torch.cuda.current_device
    found = rows("megatron-core")
    assert torch.cuda.current_device is before  # the patch is scoped to the calls
    for settings, row in found.items():
        if "rotary_interleaved=True" in settings and "mrope" in settings:
            assert row.verdict == "error", row
            assert "view size is not compatible" in (row.diagnosis or "")
        else:  # multi_latent_attention=True included
            assert row.verdict == "conformant", row
    assert any("multi_latent_attention=True" in s for s in found)


@pytest.mark.parametrize(
    ("factor", "mscale", "all_dim"), [(4.0, 1.0, 0.0), (40.0, 1.0, 1.0), (40.0, 0.707, 0.707)]
)
def test_yarn_concentration_factor(factor, mscale, all_dim):
    require("megatron-core")
    yarn = driver("megatron_core")._load()[1]
    got = yarn._yarn_get_concentration_factor(factor, mscale, all_dim)

    def m(s: float, k: float) -> float:  # YaRN's sqrt(1/t), DeepSeek's mscale
        return 1.0 if s <= 1 else 0.1 * k * math.log(s) + 1.0

    assert got == pytest.approx(m(factor, mscale) / m(factor, all_dim), rel=1e-15)
    rule = YaRN(factor, original_max_position=4096, mscale=mscale, mscale_all_dim=all_dim)
    assert rr.attention_factor(rr.RopeSpec(64, scaling=rule)) == pytest.approx(got, rel=1e-15)


def test_interleaved_mrope_cannot_build_its_table():
    require("megatron-core")
    import numpy as np
    import torch

    from rope_ref.cli.survey._shims import patched

    rotary = driver("megatron_core")._load()[0]
    with patched(torch.cuda, "current_device", lambda: "cpu"):
        module = rotary.MultimodalRotaryEmbedding(64, 1.0, rotary_interleaved=True)
        ids = torch.from_numpy(np.zeros((3, 1, 5), dtype=np.int64))
        with pytest.raises(RuntimeError, match="view size"):
            module(ids, [8, 12, 12])  # a view of a transposed tensor, sized by the 3 axes
        plain = rotary.MultimodalRotaryEmbedding(64, 1.0, rotary_interleaved=False)
        assert tuple(plain(ids, [8, 12, 12]).shape) == (5, 1, 1, 64)
