"""ONNX Runtime in `rope-ref survey`: both RotaryEmbedding ops agree in every configuration.

The caches the driver builds and each op's output are checked here against the textbook
formula written in float64 NumPy: angles ``t * base ** (-2j / rotary_dim)``, pairs rotated
as the ``interleaved`` attribute says, features past ``rotary_embedding_dim`` untouched.
"""

from __future__ import annotations

import numpy as np
import pytest

from rope_ref.cli.survey.run import survey
from tests._libraries import MAX_POSITION, driver, require, rotate_pairs

D = 64


def _textbook(x: np.ndarray, p: np.ndarray, rot: int, base: float, interleaved: bool):
    """float64 RoPE of x (batch, heads, seq, D) at positions p (batch, seq)."""
    x = x.astype(np.float64)
    angles = p[:, None, :, None] * base ** (-np.arange(0, rot, 2) / rot)
    out = x.copy()
    out[..., :rot] = rotate_pairs(x[..., :rot], angles, interleaved=interleaved)
    return out


def test_rows_agree():
    require("onnxruntime")
    found = survey(MAX_POSITION, only=("onnxruntime",))
    assert len({(r.peer, r.settings) for r in found}) == len(found) == 15
    assert {r.peer for r in found} == {
        "ONNX Runtime RotaryEmbedding (opset 23)",
        "ONNX Runtime com.microsoft.RotaryEmbedding",
    }
    for row in found:
        assert row.verdict == "conformant", row


@pytest.mark.parametrize("rot", [64, 32])
def test_caches_follow_the_float64_formula(rot):
    ort = driver("onnxruntime")
    t = np.arange(4097, dtype=np.float64)
    cos, sin = ort.build_caches(rot, 500000.0, t.size, "float32")
    assert cos.shape == sin.shape == (t.size, rot // 2)
    assert cos.dtype == np.float32
    angles = t[:, None] * 500000.0 ** (-np.arange(0, rot, 2) / rot)
    # float32 angles: off by a few ulps of t * inv_freq, at most 4096 * 2**-22 here
    np.testing.assert_allclose(cos, np.cos(angles), rtol=0, atol=2e-3)
    np.testing.assert_allclose(sin, np.sin(angles), rtol=0, atol=2e-3)
    np.testing.assert_allclose(cos[:8], np.cos(angles[:8]), rtol=0, atol=1e-6)
    half, _ = ort.build_caches(rot, 500000.0, 8, "float16")
    assert half.dtype == np.float16


@pytest.mark.parametrize("index", range(15))
def test_op_follows_the_textbook_formula(index):
    require("onnxruntime")
    ort = driver("onnxruntime")
    config = ort.CONFIGS[index]
    run = ort.make_runner(config)
    rng = np.random.default_rng(index)
    x = rng.uniform(-1, 1, (2, ort.HEADS, 6, D)).astype(config.dtype)
    if config.ids == "offset":
        p = np.broadcast_to(np.arange(37, 43), (2, 6))
    else:  # each sequence of the batch at its own positions
        p = np.array([[0, 1, 2, 3, 250, 7], [90, 5, 300, 41, 0, 12]])
    y = run(x.copy(), p)
    assert y.dtype == np.dtype(config.dtype)
    assert y.shape == x.shape
    expected = _textbook(x, p, config.rotated, config.base, config.interleaved)
    atol = 5e-3 if config.dtype == "float16" else 2e-5
    np.testing.assert_allclose(y.astype(np.float64), expected, rtol=0, atol=atol)
    np.testing.assert_array_equal(y[..., config.rotated :], x[..., config.rotated :])
