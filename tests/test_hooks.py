"""The `scaling` and `xpos` fields drive the tables through their protocols."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

import rope_ref as rr
from tests._rules import CentredXPos, LengthDependent

EPS = float(np.finfo(np.float64).eps)


@dataclasses.dataclass(frozen=True)
class PositionInterpolation:
    """Linear scaling written out here, independently of rope_ref.scaling."""

    factor: float

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return inv_freq / self.factor

    def attention_factor(self, *, seq_len):
        return 1.0


def test_scaling_rule_rescales_inverse_frequencies():
    spec = rr.RopeSpec(head_dim=16, scaling=PositionInterpolation(4.0))
    expected = [10000.0 ** (-2 * j / 16) / 4.0 for j in range(8)]
    np.testing.assert_allclose(rr.inv_freq(spec), expected, rtol=2 * EPS, atol=0)
    x = np.random.default_rng(1).standard_normal((6, 16))
    scaled = rr.apply_rope(x, spec, np.arange(6) * 4)
    plain = rr.apply_rope(x, rr.RopeSpec(head_dim=16), np.arange(6))
    np.testing.assert_allclose(scaled, plain, rtol=0, atol=64 * EPS)


def test_attention_factor_multiplies_cos_and_sin():
    spec = rr.RopeSpec(head_dim=8, scaling=LengthDependent())
    assert rr.attention_factor(spec, seq_len=16 * math.e**5) == pytest.approx(1.5, rel=1e-15)
    cos, sin = rr.rope_cos_sin(spec, [3.0], seq_len=16 * math.e**5)
    inv = np.array([10000.0 ** (-2 * j / 8) for j in range(4)]) / math.e**5
    np.testing.assert_allclose(cos[0], 1.5 * np.cos(3 * inv), rtol=1e-14)
    np.testing.assert_allclose(sin[0], 1.5 * np.sin(3 * inv), rtol=1e-14)


def test_seq_len_defaults_to_max_position_plus_one():
    spec = rr.RopeSpec(head_dim=8, scaling=LengthDependent())
    positions = np.arange(100)
    np.testing.assert_array_equal(
        rr.rope_angles(spec, positions), rr.rope_angles(spec, positions, seq_len=100)
    )


def test_apply_rope_qk_shares_seq_len_between_queries_and_keys():
    # One query at position 99 against 100 cached keys: both must use seq_len = 100.
    spec = rr.RopeSpec(head_dim=8, scaling=LengthDependent())
    q, k = np.ones((1, 8)), np.ones((100, 8))
    q_rot, k_rot = rr.apply_rope_qk(q, k, spec)
    np.testing.assert_array_equal(q_rot, k_rot[99:])
    alone = rr.apply_rope(q, spec, [99])  # seq_len 100 as well: max(positions) + 1
    np.testing.assert_array_equal(q_rot, alone)
    assert not np.array_equal(rr.apply_rope(q, spec, [99], seq_len=200), q_rot)


def test_xpos_needs_a_role():
    spec = rr.RopeSpec(head_dim=8, xpos=CentredXPos())
    with pytest.raises(
        ValueError, match=re.escape("`role` must be 'query' or 'key' when spec.xpos is set")
    ):
        rr.apply_rope(np.ones((4, 8)), spec)


def test_xpos_scales_queries_and_keys_oppositely():
    spec = rr.RopeSpec(head_dim=8, xpos=CentredXPos(scale_base=64.0))
    x = np.random.default_rng(2).standard_normal((10, 8))
    q = rr.apply_rope(x, spec, role="query", seq_len=10)
    k = rr.apply_rope(x, spec, role="key", seq_len=10)
    plain = rr.apply_rope(x, rr.RopeSpec(head_dim=8))
    zeta = (np.arange(0, 8, 2) + 3.2) / 11.2
    power = (np.arange(10)[:, None] - 5) / 64.0
    scale = np.concatenate([zeta**power] * 2, axis=-1)  # half layout: pair j at j and j + 4
    np.testing.assert_allclose(q, plain * scale, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(k, plain / scale, rtol=1e-14, atol=1e-15)


def test_xpos_scores_depend_only_on_relative_position():
    # q scaled by zeta^((m - c)/s), k by zeta^-((n - c)/s): the centre cancels in q.k.
    spec = rr.RopeSpec(head_dim=8, xpos=CentredXPos(scale_base=64.0))
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((6, 8)), rng.standard_normal((6, 8))
    scores = []
    for shift in (0, 37):
        q_rot, k_rot = rr.apply_rope_qk(q, k, spec, np.arange(6) + shift, seq_len=64)
        scores.append(q_rot @ k_rot.T)
    np.testing.assert_allclose(scores[0], scores[1], rtol=0, atol=1e-12)
