"""Hypothesis properties of the scaling rules.

- Each rule reduces to plain RoPE at factor 1 (Linear, NTKAware, NTKScaling fixed and
  mixed, YaRN and its partial form, Proportional at p = 1); DynamicNTK does at any factor
  up to its length (not beyond it, even at factor 1);
  Llama3 reduces to plain RoPE or to Linear at its extremes; LongRoPE with unit factors is
  plain RoPE.
- Static rules keep relative-position invariance: scores depend on m - n only, whatever
  seq_len is.
- Length-dependent rules (DynamicNTK, LongRoPE) break it when seq_len changes between the
  cached keys and the queries, and `rr.rerotate` repairs the cache exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref.scaling import (
    DynamicNTK,
    Linear,
    Llama3,
    LongRoPE,
    NTKAware,
    NTKScaling,
    Proportional,
    YaRN,
)

EPS = 2.0**-52

rotary_dims = st.integers(min_value=2, max_value=64).map(lambda n: 2 * n)
bases = st.floats(min_value=2.0, max_value=1e7)
factors = st.floats(min_value=1.0, max_value=128.0)
lengths = st.integers(min_value=1, max_value=1_000_000)


def plain(d: int, base: float) -> np.ndarray:
    return rr.inv_freq(rr.RopeSpec(d, base=base))


@given(
    d=rotary_dims,
    base=bases,
    original=lengths,
    seq_len=st.none() | lengths,
    beta_fast=st.floats(1.0, 128.0),
    beta_slow=st.floats(0.01, 8.0),
    truncate=st.booleans(),
    mscale=st.none() | st.floats(0.1, 2.0),
)
def test_factor_one_is_plain_rope(
    d, base, original, seq_len, beta_fast, beta_slow, truncate, mscale
):
    theta = plain(d, base)
    rules = [
        Linear(1.0),
        NTKAware(1.0),
        YaRN(
            1.0,
            original,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            truncate=truncate,
            mscale=mscale,
            mscale_all_dim=mscale,
        ),
        Llama3(1.0, original),
        Proportional(1.0),
        LongRoPE([1.0] * (d // 2), [1.0] * (d // 2), original + 1),
        NTKScaling(1.0),
        NTKScaling(1.0, mixed_b=mscale or 1.0),
        YaRN(1.0, original, beta_fast=beta_fast, beta_slow=beta_slow, ext_factor=0.5),
    ]
    for rule in rules:
        spec = rr.RopeSpec(d, base=base, scaling=rule)
        np.testing.assert_allclose(
            rr.inv_freq(spec, seq_len), theta, rtol=4 * EPS, atol=0, err_msg=repr(rule)
        )
        assert rr.attention_factor(spec, seq_len) == 1.0, rule


@given(
    d=rotary_dims, base=bases, factor=factors, max_position=lengths, fraction=st.floats(0.0, 1.0)
)
def test_dynamic_ntk_is_plain_up_to_its_length(d, base, factor, max_position, fraction):
    spec = rr.RopeSpec(d, base=base, scaling=DynamicNTK(factor, max_position))
    seq_len = max(1.0, fraction * max_position)
    np.testing.assert_array_equal(rr.inv_freq(spec, seq_len), plain(d, base))


@given(
    d=rotary_dims, base=bases, factor=factors, low=st.floats(0.1, 4.0), width=st.floats(0.1, 8.0)
)
def test_llama3_extremes_are_plain_rope_and_linear(d, base, factor, low, width):
    theta = plain(d, base)
    wavelengths = 2 * math.pi / theta
    high = low + width
    # Every wavelength below L0 / high: nothing is interpolated.
    huge = math.ceil(float(np.max(wavelengths)) * high) + 1
    spec = rr.RopeSpec(d, base=base, scaling=Llama3(factor, huge, low, high))
    np.testing.assert_array_equal(rr.inv_freq(spec), theta)
    # Every wavelength above L0 / low: position interpolation.
    tiny = float(np.min(wavelengths)) * low * 0.999
    assume(tiny > 0)
    spec = rr.RopeSpec(d, base=base, scaling=Llama3(factor, tiny, low, high))
    linear = rr.RopeSpec(d, base=base, scaling=Linear(factor))
    np.testing.assert_array_equal(rr.inv_freq(spec), rr.inv_freq(linear))


@given(d=rotary_dims, base=bases, factor=factors, original=st.integers(16, 100_000))
def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones(d, base, factor, original):
    rule = YaRN(factor, original)
    spec = rr.RopeSpec(d, base=base, scaling=rule)
    theta, ours = plain(d, base), rr.inv_freq(spec)
    lo, hi = rule.correction_range(base=base, rotary_dim=d)
    assume(lo < hi)  # HF clamps hi to d - 1 (not d/2 - 1), which can put it below lo
    j = np.arange(d // 2)
    np.testing.assert_allclose(ours[j <= lo], theta[j <= lo], rtol=2 * EPS)
    np.testing.assert_allclose(ours[j >= hi], theta[j >= hi] / factor, rtol=2 * EPS)
    assert np.all(ours <= theta * (1 + 2 * EPS))
    assert np.all(ours >= theta / factor * (1 - 2 * EPS))


def static_rules(d: int) -> st.SearchStrategy:
    return st.one_of(
        factors.map(Linear),
        factors.map(NTKAware),
        st.builds(YaRN, factors, lengths, truncate=st.booleans()),
        st.builds(Llama3, factors, lengths),
        st.builds(Proportional, st.floats(0.0, 1.0), factors),
        st.builds(NTKScaling, factors, mixed_b=st.none() | st.floats(0.1, 4.0)),
        st.builds(YaRN, factors, lengths, ext_factor=st.floats(0.01, 1.0)),
    )


@st.composite
def scores_cases(draw):
    d = draw(st.integers(2, 16).map(lambda n: 2 * n))
    rule = draw(static_rules(d))
    base = draw(bases)
    shift = draw(st.integers(-10_000, 10_000))
    seq_lens = draw(st.lists(st.none() | lengths, min_size=2, max_size=2))
    return d, rule, base, shift, seq_lens


@given(case=scores_cases())
def test_static_rules_keep_relative_position_invariance(case):
    d, rule, base, shift, (len_a, len_b) = case
    spec = rr.RopeSpec(d, base=base, scaling=rule)
    rng = np.random.default_rng(abs(shift))
    q, k = rng.standard_normal((5, d)), rng.standard_normal((5, d))
    pos = np.array([0, 3, 7, 20, 21]) + 10_000
    q0, k0 = rr.apply_rope_qk(q, k, spec, pos, seq_len=len_a)
    q1, k1 = rr.apply_rope_qk(q, k, spec, pos + shift, seq_len=len_b)
    # Angles up to ~20000 rad carry ~20000 * 2 eps of rounding; scores sum d such terms.
    tol = 64 * EPS * 20_000 * d * float(np.max(np.abs(q)) * np.max(np.abs(k)))
    np.testing.assert_allclose(q1 @ k1.T, q0 @ k0.T, rtol=0, atol=tol)


def _score(spec, q, k, m, n, *, q_len, k_len):
    q_rot = rr.apply_rope(q, spec, [m], seq_len=q_len)
    k_rot = rr.apply_rope(k, spec, [n], seq_len=k_len)
    return float((q_rot @ k_rot.T)[0, 0])


def test_dynamic_ntk_breaks_invariance_when_seq_len_changes_and_rerotate_repairs_it():
    spec = rr.RopeSpec(64, scaling=DynamicNTK(8.0, max_position=512))
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 64)), rng.standard_normal((1, 64))
    # A key cached at seq_len 600, a query at 5000: one shifted copy of the pair (m, n).
    before = _score(spec, q, k, 4000, 590, q_len=5000, k_len=600)
    after = _score(spec, q, k, 4100, 690, q_len=5000, k_len=700)
    fresh = _score(spec, q, k, 4000, 590, q_len=5000, k_len=5000)
    assert abs(before - after) > 0.1
    assert abs(before - fresh) > 0.1
    cached = rr.apply_rope(k, spec, [590], seq_len=600)
    moved = rr.rerotate(cached, spec, [590], from_seq_len=600, to_seq_len=5000)
    q_rot = rr.apply_rope(q, spec, [4000], seq_len=5000)
    assert float((q_rot @ moved.T)[0, 0]) == pytest.approx(fresh, abs=1e-10)


@given(
    d=st.integers(2, 16).map(lambda n: 2 * n),
    factor=st.floats(1.5, 64.0),
    max_position=st.integers(16, 4096),
    grow=st.floats(1.01, 100.0),
)
def test_dynamic_ntk_frequencies_move_with_seq_len(d, factor, max_position, grow):
    assume(d > 2)  # with one pair there is nothing to rescale
    spec = rr.RopeSpec(d, scaling=DynamicNTK(factor, max_position))
    short = rr.inv_freq(spec, seq_len=max_position)
    long = rr.inv_freq(spec, seq_len=grow * max_position)
    assert short[0] == long[0]
    assert np.all(long[1:] < short[1:])  # keys cached at the short length rotate faster


@st.composite
def rerotation_cases(draw):
    d = draw(st.integers(2, 12).map(lambda n: 2 * n))
    kind = draw(st.sampled_from(["dynamic", "longrope", "xpos"]))
    if kind == "dynamic":
        spec = rr.RopeSpec(d, scaling=DynamicNTK(draw(factors), draw(st.integers(8, 4096))))
        role = None
    elif kind == "longrope":
        ext = st.lists(st.floats(1.0, 64.0), min_size=d // 2, max_size=d // 2)
        rule = LongRoPE(draw(ext), draw(ext), draw(st.integers(8, 4096)), factor=draw(factors))
        spec, role = rr.RopeSpec(d, scaling=rule), None
    else:
        spec = rr.RopeSpec(d, xpos=rr.XPos(draw(st.floats(64.0, 4096.0))))
        role = draw(st.sampled_from(["query", "key"]))
    lens = draw(st.lists(st.integers(1, 20_000), min_size=2, max_size=2))
    return spec, role, lens


def _xpos_exponent(spec, p, seq_len, role):
    """xPos's exponent (p - floor(L/2)) / s * ln(zeta_j) by the paper's formula, per pair."""
    d = spec.rotary_dim
    zeta = (2.0 * np.arange(d // 2) + 0.4 * d) / (1.4 * d)
    sign = 1.0 if role == "query" else -1.0
    return sign * (p - math.floor(seq_len / 2)) / spec.xpos.scale_base * np.log(zeta)


def rerotation_tolerance(spec, role, positions, k, lens):
    """Per-element bound on |rerotate - fresh|: each pair's own angles, scales and size.

    Both sides build angles p * theta_j in float64 (error ~ eps * |angle| each) and xPos
    scales exp(e_j) with e_j = (p - c) / s * ln(zeta_j) (error ~ eps * |e_j|); the cached
    keys and the quotient of rotations add a few roundings. Every error is relative to the
    size of the pair in the fresh result, a * (|k_a| + |k_b|) with a the attention factor
    times the xPos scale at `to_seq_len`.
    """
    p = positions[..., None].astype(np.float64)
    n = spec.n_pairs
    len_to = lens[1]
    terms = 1.0 + sum(np.abs(p * rr.inv_freq(spec, seq_len)) for seq_len in lens)
    size = rr.attention_factor(spec, len_to) * (np.abs(k[..., :n]) + np.abs(k[..., n:]))
    if spec.xpos is not None:
        terms = terms + sum(np.abs(_xpos_exponent(spec, p, L, role)) for L in lens)
        size = size * np.exp(_xpos_exponent(spec, p, len_to, role))
    pair = 16 * EPS * terms * size
    return np.concatenate([pair, pair], axis=-1)


@given(case=rerotation_cases(), seed=st.integers(0, 2**32 - 1))
def test_rerotate_moves_rotated_keys_to_another_seq_len(case, seed):
    spec, role, (len_from, len_to) = case
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((2, 6, spec.head_dim))
    positions = rng.integers(0, 20_000, size=(2, 6))
    cached = rr.apply_rope(k, spec, positions, seq_len=len_from, role=role)
    moved = rr.rerotate(
        cached, spec, positions, from_seq_len=len_from, to_seq_len=len_to, role=role
    )
    fresh = rr.apply_rope(k, spec, positions, seq_len=len_to, role=role)
    tol = rerotation_tolerance(spec, role, positions, k, (len_from, len_to))
    excess = np.abs(moved - fresh) - tol
    assert np.all(excess <= 0), (spec, role, np.max(excess / tol))
