"""x-transformers in `rope-ref survey`: rows agree, xPos on queries and keys included; its xPos
matches the xPos formula written here; its stand-ins refuse to be called."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from tests._libraries import driver, require, rows

D = 64


def test_rows_agree():
    found = rows("x-transformers")
    assert len(found) == 6
    assert sum("use_xpos=True" in s for s in found) == 2
    for row in found.values():
        assert row.verdict == "conformant", row


def test_xpos_queries_match_the_xpos_formula():
    require("x-transformers")
    import torch

    xt = driver("x_transformers")._load()
    module = xt.RotaryEmbedding(D, use_xpos=True, scale_base=512)
    p = np.arange(300)
    freqs, scale = module(torch.from_numpy(p))
    x = np.random.default_rng(1).uniform(-1, 1, (1, 2, p.size, D))
    got = xt.apply_rotary_pos_emb(torch.from_numpy(x).float(), freqs, scale).double().numpy()
    # xPos (Sun et al. 2022): zeta_j = (2j + 0.4 d) / (1.4 d), power (p - L // 2) / scale_base
    zeta = (np.arange(0, D, 2) + 0.4 * D) / (1.4 * D)
    power = (p - p.size // 2)[:, None] / 512.0
    theta = 10000.0 ** -(np.arange(0, D, 2) / D)
    angles = p[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    factor = zeta**power
    expected = np.empty_like(x)
    expected[..., 0::2] = (a * np.cos(angles) - b * np.sin(angles)) * factor
    expected[..., 1::2] = (b * np.cos(angles) + a * np.sin(angles)) * factor
    np.testing.assert_allclose(got, expected, atol=2e-5)
    spec = rr.RopeSpec(D, layout="interleaved", xpos=rr.XPos(512.0))
    np.testing.assert_allclose(rr.apply_rope(x, spec, p, role="query"), expected, atol=1e-12)


def test_stand_ins_refuse_to_be_called():
    require("x-transformers")
    driver("x_transformers")._load()
    import einx

    if type(einx).__name__ != "_FakeModule":
        pytest.skip("einx is installed here: no stand-in")
    with pytest.raises(RuntimeError, match="stand-in of `rope-ref survey`"):
        einx.rearrange("a -> a")
