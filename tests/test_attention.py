"""rope_ref.attention against explicit formulas written here (RoFormer eqs. 2 and 19)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import attention
from tests._helpers import host


def rotate(x, positions, base, layout):
    """R_p x for every row, pairs as complex numbers (independent of rope_ref's code)."""
    n = x.shape[-1] // 2
    theta = base ** (-2.0 * np.arange(n) / x.shape[-1])
    z = x[..., :n] + 1j * x[..., n:] if layout == "half" else x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.multiply.outer(np.asarray(positions, float), theta))
    out = np.empty_like(x)
    if layout == "half":
        out[..., :n], out[..., n:] = z.real, z.imag
    else:
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def elu1(x):
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def mask(q_len, k_len):
    return np.arange(k_len)[None, :] <= np.arange(q_len)[:, None] + (k_len - q_len)


def softmax_explicit(q, k, v, qpos, kpos, base, layout, causal):
    scores = rotate(q, qpos, base, layout) @ np.swapaxes(rotate(k, kpos, base, layout), -1, -2)
    scores = scores / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(mask(q.shape[-2], k.shape[-2]), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


def linear_explicit(q, k, v, qpos, kpos, base, layout, causal):
    """Eq. (19) term by term: an O(S^2) matrix of rotated and unrotated similarities."""
    fq, fk = elu1(q), elu1(k)
    num = rotate(fq, qpos, base, layout) @ np.swapaxes(rotate(fk, kpos, base, layout), -1, -2)
    den = fq @ np.swapaxes(fk, -1, -2)
    if causal:
        keep = mask(q.shape[-2], k.shape[-2])
        num, den = np.where(keep, num, 0.0), np.where(keep, den, 0.0)
    return (num @ v) / den.sum(axis=-1, keepdims=True)


CASES = [
    # (q_len, k_len, causal, layout, positions)
    (6, 6, False, "half", None),
    (6, 6, True, "interleaved", None),
    (3, 7, True, "half", None),
    (5, 5, True, "half", [3.0, 10.0, 11.0, 40.0, 41.5]),
]


@pytest.mark.parametrize(("q_len", "k_len", "causal", "layout", "positions"), CASES)
@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_matches_explicit_formula(xp, np_rng, kind, q_len, k_len, causal, layout, positions):
    q = np_rng.standard_normal((2, q_len, 8))
    k = np_rng.standard_normal((2, k_len, 8))
    v = np_rng.standard_normal((2, k_len, 3))
    spec = rr.RopeSpec(head_dim=8, base=100.0, layout=layout)
    kpos = np.arange(k_len) if positions is None else np.asarray(positions)
    qpos = kpos[k_len - q_len :]
    explicit = {"softmax": softmax_explicit, "linear": linear_explicit}[kind]
    expected = explicit(q, k, v, qpos, kpos, 100.0, layout, causal)
    func = {"softmax": attention.softmax_attention, "linear": attention.linear_attention}[kind]
    pos = None if positions is None else xp.asarray(positions, dtype=xp.float64)
    got = func(xp.asarray(q), xp.asarray(k), xp.asarray(v), spec, pos, causal=causal)
    assert got.shape == (2, q_len, 3)
    np.testing.assert_allclose(host(got), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_float32_in_float32_out(xp, np_rng, kind):
    func = {"softmax": attention.softmax_attention, "linear": attention.linear_attention}[kind]
    q = xp.asarray(np_rng.standard_normal((4, 8)), dtype=xp.float32)
    out = func(q, q, q, rr.RopeSpec(head_dim=8), causal=True)
    assert out.dtype == xp.float32
    expected = {"softmax": softmax_explicit, "linear": linear_explicit}[kind](
        host(q).astype(float),
        host(q).astype(float),
        host(q).astype(float),
        np.arange(4),
        np.arange(4),
        10000.0,
        "half",
        True,
    )
    np.testing.assert_allclose(host(out), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_shifting_every_position_changes_nothing(np_rng, kind):
    func = {"softmax": attention.softmax_attention, "linear": attention.linear_attention}[kind]
    q, k, v = (np_rng.standard_normal((5, 8)) for _ in range(3))
    spec = rr.RopeSpec(head_dim=8)
    positions = np.array([0.0, 1.0, 2.0, 5.0, 9.0])
    a = func(q, k, v, spec, positions, causal=True)
    b = func(q, k, v, spec, positions + 1000.0, causal=True)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_linear_attention_at_one_position_is_plain_linear_attention(np_rng):
    # all tokens at one position: the rotations cancel, eq. (19) becomes eq. (18)
    q, k, v = (np_rng.standard_normal((6, 8)) for _ in range(3))
    out = attention.linear_attention(q, k, v, rr.RopeSpec(head_dim=8), np.full(6, 7.0))
    weights = elu1(q) @ elu1(k).T
    np.testing.assert_allclose(out, (weights @ v) / weights.sum(-1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_is_linear_in_memory(np_rng, causal):
    s = 40_000  # an (s, s) float64 matrix would need 12.8 GB
    q = np_rng.standard_normal((s, 4))
    v = np_rng.standard_normal((s, 2))
    tracemalloc.start()
    try:
        out = attention.linear_attention(q, q, v, rr.RopeSpec(head_dim=4), causal=causal)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (s, 2)
    assert peak < 64 * s * 4 * 2 * 8  # a few (s, d, v_dim) float64 arrays, nothing quadratic


def test_custom_feature_map_and_relu(np_rng):
    q, k, v = (np_rng.standard_normal((4, 8)) for _ in range(3))
    spec = rr.RopeSpec(head_dim=8)
    a = attention.linear_attention(q, k, v, spec, feature_map=np.exp)
    fq, fk = np.exp(q), np.exp(k)
    num = rotate(fq, np.arange(4), 10000.0, "half") @ rotate(fk, np.arange(4), 10000.0, "half").T
    np.testing.assert_allclose(a, (num @ v) / (fq @ fk.T).sum(-1, keepdims=True), rtol=1e-12)
    b = attention.linear_attention(np.abs(q), np.abs(k), v, spec, feature_map="relu")
    num = (
        rotate(np.abs(q), np.arange(4), 1e4, "half")
        @ rotate(np.abs(k), np.arange(4), 1e4, "half").T
    )
    den = (np.abs(q) @ np.abs(k).T).sum(-1, keepdims=True)
    np.testing.assert_allclose(b, (num @ v) / den, rtol=1e-12)


def test_inputs_are_not_mutated(np_rng):
    q, k, v = (np_rng.standard_normal((4, 8)) for _ in range(3))
    copies = [a.copy() for a in (q, k, v)]
    attention.softmax_attention(q, k, v, causal=True)
    attention.linear_attention(q, k, v, causal=True)
    for a, c in zip((q, k, v), copies, strict=True):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (((4, 8), (4, 8), (4, 2)), {"feature_map": "softplus"}, ValueError, "`feature_map` must"),
        (((4, 8), (4, 6), (4, 2)), {}, ValueError, "`q` and `k` must have head_dim = 8"),
        (((4, 8), (4, 8), (3, 2)), {}, ValueError, "`v` must have one row per key"),
        (((5, 8), (4, 8), (4, 2)), {"causal": True}, ValueError, "more tokens than `k`"),
        (((8,), (4, 8), (4, 2)), {}, ValueError, "`q` must have at least 2 axes"),
    ],
)
def test_bad_input_names_the_parameter(args, kwargs, error, match):
    q, k, v = (np.ones(shape) for shape in args)
    with pytest.raises(error, match=match):
        attention.linear_attention(q, k, v, **kwargs)


def test_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="`q` must have a real floating dtype"):
        attention.softmax_attention(np.ones((2, 4), int), np.ones((2, 4)), np.ones((2, 1)))


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_attention_of_no_tokens_is_empty(causal: bool) -> None:
    """No queries and no keys: an empty result, as linear_attention gives (it was NumPy's
    "zero-size array to reduction operation maximum")."""
    q, v = np.ones((2, 0, 8)), np.ones((2, 0, 3))
    for attend in (rr.attention.softmax_attention, rr.attention.linear_attention):
        out = attend(q, q, v, causal=causal)
        assert out.shape == (2, 0, 3)
        assert out.dtype == np.float64
