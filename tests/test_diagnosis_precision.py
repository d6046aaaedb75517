"""Precision causes named only where the recipe's own error matches, element by element:
inverse frequencies computed in float16, a cos/sin table rounded once to float16 (never
"1 x the oracle" nor "angles in float16"), and no precision cause for pairs that turn at a
steady other rate (a rule's band edges) at any positions checked. Planted in plain NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling
from rope_ref.testing import assert_rope_close, diagnose
from rope_ref.testing._compare import compare, setup
from rope_ref.testing._diagnosis.multi_axis import partly_right_pairs
from rope_ref.testing._diagnosis.precision import angle_precision

D = 64
F16, F32 = np.float16, np.float32


def _x(rows, seed=0, d=D):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (rows, d)).astype(F32)


def _inv(d=D, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def _rotate(x, angles, cos=None, sin=None):
    """rotate_half RoPE in float64 with the given (or exact) cos/sin, rounded to float32."""
    n = angles.shape[-1]
    xr = x.astype(np.float64)
    a, b = xr[..., :n], xr[..., n:]
    cos = np.cos(angles) if cos is None else cos.astype(np.float64)
    sin = np.sin(angles) if sin is None else sin.astype(np.float64)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(F32)


def test_inverse_frequencies_computed_in_float16_are_named_so():
    """``1 / base ** (arange(0, d, 2, dtype=float16) / d)`` with every step in float16."""
    p = np.arange(0, 4096, 37)
    j = np.arange(0, D, 2, dtype=F16)
    exponent = j / F16(D)
    power = (10000.0 ** exponent.astype(np.float64)).astype(F16)
    inv16 = (F16(1.0) / power).astype(F16)
    angles = (p.astype(F32)[:, None] * inv16.astype(F32)).astype(np.float64)
    x = _x(p.size, 1)
    found = diagnose(_rotate(x, angles), x, rr.RopeSpec(D), p)
    assert found is not None
    assert found.cause == "precision", found
    assert found.message.startswith("the inverse frequencies were computed in float16"), found


@pytest.mark.parametrize(("d", "start"), [(64, 1000), (128, 1000), (128, 1200)])
def test_a_float16_cos_sin_table_is_a_table_rounded_once(d, start):
    """Angles in float32, cos/sin stored in float16, the rotation in float32 (issue: named
    "attention_factor: 1 x the oracle" or "angles computed in float16/bfloat16")."""
    p = np.arange(start, start + 64)
    angles = (p.astype(F32)[:, None] * _inv(d).astype(F32)).astype(np.float64)
    cos, sin = np.cos(angles).astype(F16), np.sin(angles).astype(F16)
    x = _x(p.size, 2, d)
    found = diagnose(_rotate(x, angles, cos, sin), x, rr.RopeSpec(d), p)
    assert found is not None
    assert found.cause == "precision", found
    assert found.message.startswith("the cos/sin table was rounded once to float16"), found
    assert "angles computed in float16" not in found.message
    with pytest.raises(AssertionError, match="cos/sin table was rounded once to float16"):
        assert_rope_close(_rotate(x, angles, cos, sin), x, rr.RopeSpec(d), p)


def _llama3_swapped(theta, factor, context, low, high):
    """transformers' Llama 3 rule written out, called with low and high swapped."""
    wavelen = 2 * math.pi / theta
    out = np.where(wavelen > context / high, theta / factor, theta)  # low <-> high
    smooth = (context / wavelen - high) / (low - high)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < context / low) & ~(wavelen > context / high)
    return np.where(medium, smoothed, out)


@pytest.mark.parametrize(
    "p", [np.array([1]), np.arange(9), np.arange(0, 8192, 61), np.arange(0, 32769, 257)]
)
def test_a_steady_band_of_slower_pairs_is_no_precision_cause_at_any_positions(p):
    """The same bug gets the same account at one position, a few and many: never
    "angles computed in bfloat16", and the pairs and the direction are said."""
    d = 128
    spec = rr.RopeSpec(d, base=500000.0, scaling=scaling.Llama3(8.0, original_max_position=8192))
    theta = _llama3_swapped(_inv(d, 500000.0), 8.0, 8192, 1.0, 4.0)
    x = _x(p.size, 3, d)
    c = compare(_rotate(x, p[:, None] * theta), setup(x, spec, p))
    assert not c.ok
    assert angle_precision(c) is None
    known = partly_right_pairs(c)
    assert known is not None
    assert "pairs 29-34 turn slower than the spec's by" in known.message, known
    assert "band edges" in known.message
    assert "M-RoPE" not in known.message


def test_random_angle_errors_of_bfloat16_size_are_still_named_precision():
    """The guard above leaves rounding-like errors (random row to row) to the size model."""
    rng = np.random.default_rng(4)
    p = np.arange(15.0)
    x = rng.uniform(-1.0, 1.0, (p.size, 16))
    angles = p[:, None] * _inv(16)
    angles = angles * (1.0 + 0.5 * 2.0**-7 * rng.choice([-1.0, 1.0], angles.shape))
    found = diagnose(_rotate(x, angles).astype(np.float64), x, rr.RopeSpec(16), p)
    assert found is not None
    assert found.cause == "precision", found


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_torch_inverse_frequencies_in_16_bits_are_named_with_the_dtype(dtype, base):
    """HF's recipe run by torch with a 16-bit arange (the base then held in 16 bits too:
    bfloat16 holds 10000 as 9984, float16 overflows 500000 and stills every pair but one)."""
    torch = pytest.importorskip("torch")
    d = 64
    low = getattr(torch, dtype)
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=low) / d))
    p = torch.arange(0, 4096, 37)
    freqs = torch.outer(p.float(), inv.float())
    emb = torch.cat((freqs, freqs), -1)
    x = torch.from_numpy(_x(p.numel(), 6, d))
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    y = x * emb.cos() + torch.cat((-x2, x1), -1) * emb.sin()
    found = diagnose(y.numpy(), x.numpy(), rr.RopeSpec(d, base=base), p.numpy())
    assert found is not None
    assert found.cause == "precision", found
    assert found.message.startswith(f"the inverse frequencies were computed in {dtype}"), found
