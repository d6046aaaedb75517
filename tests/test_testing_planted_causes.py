"""Each diagnosis against a mistake planted in RoPE written out in plain NumPy: a doubled
exponent, an xPos key scaled like a query, a cos/sin table of the other layout, an inverted
YaRN ramp, positions ignored under float32 angles, a wrong base in a 2-D axial spec, and a
float32 position grid; a 1-D spec never gets a multi-axis cause."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling
from rope_ref.testing import diagnose

F32 = np.float32


def _x(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def _rotate(x, angles, layout="half", scale=None):
    """Rotate the pairs of x by `angles` (..., n) in float64; optional per-pair scale."""
    n = angles.shape[-1]
    xr = x.astype(np.float64)
    a, b = (xr[..., :n], xr[..., n:]) if layout == "half" else (xr[..., 0::2], xr[..., 1::2])
    cos, sin = np.cos(angles), np.sin(angles)
    if scale is not None:
        cos, sin = cos * scale, sin * scale
    a2, b2 = a * cos - b * sin, b * cos + a * sin
    if layout == "half":
        return np.concatenate([a2, b2], axis=-1)
    return np.stack([a2, b2], axis=-1).reshape(xr.shape)


def _inv(d, base=10000.0):
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


P = np.array([0, 1, 2, 3, 5, 8, 13, 100, 1000, 4000])


def test_doubled_exponent_is_a_frequency_mistake_not_sections_or_a_base():
    d = 16
    x = _x((2, len(P), d))
    inv = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / (d // 2))  # / half, not / d
    y = _rotate(x, P[:, None] * inv)
    found = diagnose(y, x, rr.RopeSpec(d), P)
    assert found is not None
    assert found.cause == "frequencies", found
    assert "divided by the pair count 8, not the rotary dim 16" in found.message
    assert "not rope_theta" in found.message


def test_xpos_key_scaled_like_a_query():
    d, scale_base = 8, 512.0
    p = np.arange(6)
    x = _x((p.size, d), seed=1)
    j = np.arange(d // 2)
    zeta = (2 * j + 0.4 * d) / (1.4 * d)
    centre = math.floor((p.max() + 1) / 2)
    power = (p[:, None] - centre) / scale_base
    as_query = _rotate(x, p[:, None] * _inv(d), "interleaved", scale=zeta**power)
    spec = rr.RopeSpec(d, layout="interleaved", xpos=rr.XPos(scale_base=scale_base))
    found = diagnose(as_query, x, spec, p, role="key")
    assert found is not None
    assert found.cause == "xpos_role", found
    assert "the key was scaled like a query" in found.message
    as_key = _rotate(x, p[:, None] * _inv(d), "interleaved", scale=zeta**-power)
    assert diagnose(as_key, x, spec, p, role="key") is None


@pytest.mark.parametrize(("table", "rotation"), [("interleaved", "half"), ("half", "interleaved")])
def test_a_cos_sin_table_of_the_other_layout(table, rotation):
    d = 16
    x = _x((2, len(P), d), seed=2)
    angles = P[:, None] * _inv(d)
    full = (
        (lambda t: np.concatenate([t, t], -1))
        if table == "half"
        else (lambda t: np.repeat(t, 2, -1))
    )
    cos, sin = full(np.cos(angles)), full(np.sin(angles))
    if rotation == "half":
        partner = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
    else:
        partner = np.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)
    y = x * cos + partner * sin
    found = diagnose(y, x, rr.RopeSpec(d, layout=rotation), P)
    assert found is not None
    assert found.cause == "table_layout", found
    assert f"built for the {table!r} layout" in found.message
    assert f"applied with the {rotation!r} rotation" in found.message


def _yarn_freqs(d, base, factor, original, beta_fast=32.0, beta_slow=1.0, inverted=False):
    """YaRN's inverse frequencies as the paper and transformers write them."""
    inv = _inv(d, base)

    def dim(rotations):
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(dim(beta_fast)), 0), min(math.ceil(dim(beta_slow)), d - 1)
    ramp = np.clip((np.arange(d // 2) - low) / max(high - low, 1e-3), 0.0, 1.0)
    extrapolation = 1.0 - ramp  # 1: fast pairs keep their frequency
    if inverted:
        extrapolation = ramp
    return inv / factor * (1 - extrapolation) + inv * extrapolation


def test_an_inverted_yarn_ramp():
    d, factor, original = 32, 4.0, 256
    p = np.array([0, 1, 2, 3, 7, 50, 300, 1000])
    x = _x((p.size, d), seed=3)
    mscale = 0.1 * math.log(factor) + 1.0
    rule = scaling.YaRN(factor, original_max_position=original)
    spec = rr.RopeSpec(d, scaling=rule)
    right = _rotate(x, p[:, None] * _yarn_freqs(d, 10000.0, factor, original), scale=mscale)
    assert diagnose(right, x, spec, p) is None
    wrong = _yarn_freqs(d, 10000.0, factor, original, inverted=True)
    found = diagnose(_rotate(x, p[:, None] * wrong, scale=mscale), x, spec, p)
    assert found is not None
    assert found.cause == "scaling", found
    assert "YaRN's ramp is inverted: the result slows the fast pairs 0-" in found.message


def test_positions_ignored_under_float32_angles():
    d, seq = 8, 4096
    given = np.arange(seq) % 64  # packed documents: positions restart (cu_doc_lens)
    x = _x((1, seq, d), seed=4, dtype=F32)
    inv32 = _inv(d).astype(F32)
    angles = (np.arange(seq, dtype=F32)[:, None] * inv32).astype(np.float64)  # arange instead
    y = _rotate(x, angles).astype(F32)
    found = diagnose(y, x, rr.RopeSpec(d), given)
    assert found is not None
    assert found.cause == "positions", found
    assert "given positions were ignored" in found.message


def test_a_float32_position_grid_is_named_and_can_be_stated():
    torch = pytest.importorskip("torch")  # timm's pixel grid: torch.linspace in float32
    d, n = 16, 15
    freqs = np.linspace(1.0, 64.0, d // 2) * np.pi  # a vision RoPE's pixel frequencies
    exact = np.linspace(-1.0, 1.0, n)
    grid32 = torch.linspace(-1.0, 1.0, n, dtype=torch.float32).double().numpy()
    assert np.any((exact == 0) & (grid32 != 0))  # 0 is meant, a few 1e-8 is held
    x = _x((n, d), seed=5)
    y = _rotate(x, grid32[:, None] * freqs)
    spec = rr.RopeSpec(d, freqs=freqs)
    found = diagnose(y, x, spec, exact)
    assert found is not None
    assert found.cause == "position_precision", found
    assert "state position_dtype='float32'" in found.message
    assert diagnose(y, x, spec, exact, position_dtype="float32") is None
    report = rr.testing.rope_report(y, x, spec, exact, position_dtype="float32")
    assert report.ok


def test_a_wrong_base_in_a_two_axis_spec():
    d = 16
    grid = np.stack([np.arange(8), (np.arange(8) * 5) % 7], axis=-1)  # (t, h) per token
    x = _x((8, d), seed=6)
    inv = _inv(d, base=7.0)  # the pairs of axis 0 are 0-3, of axis 1 are 4-7 (chunked)
    angles = np.concatenate([grid[:, :1] * inv[:4], grid[:, 1:] * inv[4:]], axis=-1)
    found = diagnose(_rotate(x, angles), x, rr.RopeSpec(d, sections=(4, 4), base=100.0), grid)
    assert found is not None
    assert found.cause == "frequencies", found
    assert "follow base 7 instead of the spec's base 100" in found.message
