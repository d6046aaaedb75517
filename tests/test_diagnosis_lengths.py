"""Length-dependent rules at an engine's configured length: the `seq_len` cause.

Every wrong result is RoPE written out here in float64 NumPy from the formulas (LongRoPE's
long factors and vLLM's attention factor from ``max_model_len``, dynamic NTK's base
``b (s L / M - (s - 1))^(d/(d-2))`` at the configured length), never rope_ref's output;
the named fix is then checked to make the result pass. The false alarms: results wrong for
another reason, and rules that say they do not depend on the length, never get this cause.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, diagnose, rope_report
from tests._independent import rotate_pairs

F64 = npt.NDArray[np.float64]
D, THETA = 64, 1e6
LONG = np.array([1.0 + 0.5 * j for j in range(D // 2)])
SHORT = np.array([1.0 + 0.05 * j for j in range(D // 2)])
ORIGINAL, CONFIGURED = 4096, 131072
S, TRAINED = 4.0, 8192


def _inv(base: float = THETA) -> F64:
    return np.asarray(base ** (-np.arange(0, D, 2, dtype=np.float64) / D), dtype=np.float64)


def _x(n: int, seed: int = 0) -> F64:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (2, n, D)).astype(np.float32)


def _longrope_spec() -> rr.RopeSpec:
    rule = rr.scaling.LongRoPE(SHORT, LONG, ORIGINAL, CONFIGURED / ORIGINAL)
    return rr.RopeSpec(D, base=THETA, scaling=rule)


def _longrope(x: F64, p: np.ndarray, factors: F64) -> np.ndarray:
    """LongRoPE with one factor list, cos/sin times vLLM's sqrt(1 + ln(L/L0) / ln L0)."""
    scale = math.sqrt(1.0 + math.log(CONFIGURED / ORIGINAL) / math.log(ORIGINAL))
    y = scale * rotate_pairs(x.astype(np.float64), p[:, None] * _inv() / factors)
    return np.asarray(y, dtype=np.float32)


def _ntk_base(length: float) -> float:
    return THETA * (S * max(length, TRAINED) / TRAINED - (S - 1.0)) ** (D / (D - 2))


def _dynamic_spec() -> rr.RopeSpec:
    return rr.RopeSpec(D, base=THETA, scaling=rr.scaling.DynamicNTK(S, max_position=TRAINED))


def _dynamic(x: F64, p: np.ndarray, length: float) -> np.ndarray:
    y = rotate_pairs(x.astype(np.float64), p[:, None] * _inv(_ntk_base(length)))
    return np.asarray(y, dtype=np.float32)


SMALL = np.array([0, 1, 2, 3, 5, 9, 40, 300, 2000, 3000, 3999])  # all below ORIGINAL
MIDDLE = np.array([0, 1, 2, 3, 5, 9, 40, 300, 2000, 5000, 7000])  # all below TRAINED


def test_longrope_long_factors_at_every_position_name_the_configured_length() -> None:
    """Catches: vLLM's LongRoPE (long factors chosen once, by max_model_len > original)
    checked at the length of the positions, which picks the short factors. The fix named
    makes the same result pass."""
    x = _x(SMALL.size)
    y = _longrope(x, SMALL, LONG)
    spec = _longrope_spec()
    found = diagnose(y, x, spec, SMALL)
    assert found is not None
    assert found.cause == "seq_len"
    assert "the result uses LongRoPE's long factors at every position" in found.message
    assert f"pass seq_len=<the engine's configured length> (e.g. seq_len={CONFIGURED}" in (
        found.message
    )
    assert_rope_close(y, x, spec, SMALL, seq_len=CONFIGURED)


def test_longrope_without_a_factor_names_any_length_above_the_original() -> None:
    """Without `factor` (so no max_position_embeddings to name and attention factor 1),
    twice the original length stands for any length above it."""
    x = _x(SMALL.size, 10)
    y = np.asarray(rotate_pairs(x.astype(np.float64), SMALL[:, None] * _inv() / LONG), np.float32)
    spec = rr.RopeSpec(D, base=THETA, scaling=rr.scaling.LongRoPE(SHORT, LONG, ORIGINAL))
    found = diagnose(y, x, spec, SMALL)
    assert found is not None
    assert found.cause == "seq_len"
    assert f"(e.g. seq_len={2 * ORIGINAL})." in found.message


def test_longrope_short_factors_past_the_original_length_name_it() -> None:
    """Catches: an engine configured with max_model_len <= original (short factors only),
    checked at positions past the original length, where the oracle picks the long ones."""
    p = np.array([0, 1, 2, 7, 300, 4000, 4500, 6000])
    x = _x(p.size, 1)
    y = _longrope(x, p, SHORT)
    spec = _longrope_spec()
    found = diagnose(y, x, spec, p)
    assert found is not None
    assert found.cause == "seq_len"
    assert "the result uses LongRoPE's short factors at every position" in found.message
    assert f"pass seq_len={ORIGINAL}" in found.message
    assert_rope_close(y, x, spec, p, seq_len=ORIGINAL)


@pytest.mark.parametrize(
    ("length", "fitted"),
    [(CONFIGURED, False), (4 * TRAINED, False), (100000, True), (50001, True), (12345, True)],
)
def test_dynamic_ntk_at_a_configured_length_is_named(length: int, fitted: bool) -> None:
    """Catches: dynamic NTK computed once from a configured length (vLLM's max_model_len),
    checked at the positions' length. Powers of two and multiples of max_position are
    tried as they are; any other length is fitted from the result's frequencies."""
    x = _x(MIDDLE.size, 2)
    y = _dynamic(x, MIDDLE, length)
    spec = _dynamic_spec()
    found = diagnose(y, x, spec, MIDDLE)
    assert found is not None
    assert found.cause == "seq_len"
    assert f"the result follows dynamic NTK at the length {length}" in found.message
    assert ("(fitted from the result)" in found.message) is fitted
    assert f"pass seq_len={length} " in found.message
    assert rope_report(y, x, spec, MIDDLE, seq_len=length).ok


def test_transformers_dynamic_ntk_after_a_longer_call_is_named() -> None:
    """HF's own LlamaRotaryEmbedding: after a call at positions up to 50000, a shorter call
    (20000, above max_position) keeps the base of length 50001 (the cache only grows until
    a call falls below max_position). The diagnosis fits that length from the result."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    parameters = {"rope_type": "dynamic", "factor": S, "rope_theta": THETA}
    config = LlamaConfig(
        hidden_size=4 * D,
        num_attention_heads=4,
        head_dim=D,
        max_position_embeddings=TRAINED,
        rope_parameters=parameters,
    )
    rotary = modeling_llama.LlamaRotaryEmbedding(config)
    probe = torch.zeros(1, 1, D, dtype=torch.float64)
    rotary(probe, torch.tensor([[0, 50000]]))  # the longer call first
    p = np.array([0, 1, 2, 9, 300, 9000, 20000])
    cos, sin = rotary(probe, torch.from_numpy(p)[None])
    x = _x(p.size, 9)[None]
    q = torch.from_numpy(x)
    y, _ = modeling_llama.apply_rotary_pos_emb(q, q, cos.float(), sin.float())
    spec = rr.RopeSpec.from_hf(config)
    found = diagnose(y.numpy(), x, spec, p)
    assert found is not None
    assert found.cause == "seq_len"
    assert "at the length 50001 (fitted from the result), not at the oracle's 20001" in (
        found.message
    )
    assert rope_report(y.numpy(), x, spec, p, seq_len=50001).ok


def test_dynamic_ntk_left_unscaled_past_max_position_is_named() -> None:
    """Catches: an engine configured for at most max_position (the unscaled base) checked at
    positions past it, where the oracle's base grows."""
    p = np.array([0, 1, 3, 40, 900, 9000, 12000])
    x = _x(p.size, 3)
    y = _dynamic(x, p, TRAINED)
    found = diagnose(y, x, _dynamic_spec(), p)
    assert found is not None
    assert found.cause == "seq_len"
    assert "keeps dynamic NTK's unscaled base" in found.message
    assert f"pass seq_len={TRAINED}" in found.message


def test_dynamic_ntk_off_by_one_keeps_its_own_cause() -> None:
    """The largest position used for the length (not + 1) is the parameter fit's, which
    names the off-by-one: this check does not take it over."""
    p = np.array([0, 1, 2, 9, 300, 9000, 20000])
    x = _x(p.size, 4)
    y = _dynamic(x, p, float(p.max()))
    found = diagnose(y, x, _dynamic_spec(), p)
    assert found is not None
    assert found.cause == "scaling"
    assert "off by -1" in found.message


class _Stretched:
    """A rule of the test's own: frequencies divided by seq_len / 1024 past 1024."""

    length_dependent: ClassVar[bool] = True

    def inv_freq(self, inv_freq: F64, *, base: float, rotary_dim: int, seq_len: float | None):
        stretch = 1.0 if seq_len is None else max(seq_len / 1024.0, 1.0)
        return np.asarray(inv_freq, dtype=np.float64) / stretch

    def attention_factor(self, *, seq_len: float | None) -> float:
        return 1.0


class _StretchedFixed(_Stretched):
    """The same rule, saying it does not depend on the length (so no length is tried)."""

    length_dependent: ClassVar[bool] = False


def test_any_rule_that_says_it_depends_on_the_length_gets_the_lengths_tried() -> None:
    """The check asks the rule (`length_dependent`), not a list of rule types: a rule of
    the user's own at a configured 65536 is named; told it is not length-dependent, the
    same rule is never given this cause."""
    p = np.array([0, 1, 2, 5, 40, 300, 2000])
    x = _x(p.size, 5)
    y = np.asarray(rotate_pairs(x.astype(np.float64), p[:, None] * _inv() / 64.0), np.float32)
    found = diagnose(y, x, rr.RopeSpec(D, base=THETA, scaling=_Stretched()), p)
    assert found is not None
    assert found.cause == "seq_len"
    assert "pass seq_len=65536 " in found.message
    fixed = diagnose(y, x, rr.RopeSpec(D, base=THETA, scaling=_StretchedFixed()), p)
    assert fixed is not None
    assert fixed.cause != "seq_len"


def _offset(x: F64, p: np.ndarray) -> np.ndarray:
    return _dynamic(x, p + 1, float(p.max()) + 1.0)


def _base(x: F64, p: np.ndarray) -> np.ndarray:
    return np.asarray(rotate_pairs(x.astype(np.float64), p[:, None] * _inv(16 * THETA)), np.float32)


def _ntk_dropped_exponent(x: F64, p: np.ndarray) -> np.ndarray:
    ratio = S * CONFIGURED / TRAINED - (S - 1.0)
    inv = _inv() * ratio ** (-np.arange(0, D, 2) / D)  # base * r, not base * r^(d/(d-2))
    return np.asarray(rotate_pairs(x.astype(np.float64), p[:, None] * inv), np.float32)


def _other_max_position(x: F64, p: np.ndarray) -> np.ndarray:
    """Dynamic NTK at the positions' own length with max_position 4096, not 8192."""
    length = float(p.max()) + 1.0
    base = THETA * (S * length / 4096 - (S - 1.0)) ** (D / (D - 2))
    return np.asarray(rotate_pairs(x.astype(np.float64), p[:, None] * _inv(base)), np.float32)


@pytest.mark.parametrize(
    ("make", "spec"),
    [
        (_offset, _dynamic_spec()),
        (_base, _dynamic_spec()),
        (_ntk_dropped_exponent, _dynamic_spec()),
        (_other_max_position, _dynamic_spec()),
    ],
    ids=["offset", "base", "exponent", "max_position"],
)
def test_results_wrong_for_another_reason_never_get_this_cause(make, spec) -> None:
    """False alarms: a dynamic-NTK spec and results with the positions shifted, another
    base, the base's factor without its exponent d/(d-2), or another max_position (whose
    base is that of the length M S / 4096, a length the fit must leave to `scaling`):
    none is named a configured length."""
    x = _x(MIDDLE.size, 6)
    found = diagnose(make(x, MIDDLE), x, spec, MIDDLE)
    assert found is not None
    assert found.cause != "seq_len", found


def test_longrope_without_its_attention_factor_is_not_a_length() -> None:
    """False alarm: vLLM's long factors with the attention factor dropped match no length
    (the factor does not change with it)."""
    x = _x(SMALL.size, 7)
    scale = math.sqrt(1.0 + math.log(CONFIGURED / ORIGINAL) / math.log(ORIGINAL))
    y = np.asarray(_longrope(x, SMALL, LONG) / np.float32(scale), np.float32)
    found = diagnose(y, x, _longrope_spec(), SMALL)
    assert found is None or found.cause != "seq_len", found


@pytest.mark.parametrize("p", [SMALL, MIDDLE, np.array([0, 5, 9000, 70000, 131071])])
def test_correct_results_are_never_flagged(p: np.ndarray) -> None:
    """Results right at the positions' own length pass: no cause at all."""
    x = _x(p.size, 8)
    longrope = _longrope(x, p, LONG if p.max() + 1 > ORIGINAL else SHORT)
    assert diagnose(longrope, x, _longrope_spec(), p) is None
    assert diagnose(_dynamic(x, p, float(p.max()) + 1.0), x, _dynamic_spec(), p) is None


def test_every_entry_point_takes_the_configured_length() -> None:
    """apply_rope, assert_rope_close, rope_report, diagnose and the RopeOracle fixture's
    methods all take seq_len, and at the configured length agree with the formula."""
    from rope_ref.testing import RopeOracle

    x = _x(MIDDLE.size, 11).astype(np.float64)
    want = rotate_pairs(x, MIDDLE[:, None] * _inv(_ntk_base(CONFIGURED)))
    spec = _dynamic_spec()
    oracle = RopeOracle()
    for apply in (rr.apply_rope, oracle.apply):
        got = np.asarray(apply(x, spec, MIDDLE, seq_len=CONFIGURED))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    y = np.asarray(want, dtype=np.float32)
    x32 = x.astype(np.float32)
    for check in (assert_rope_close, oracle.assert_close):
        check(y, x32, spec, MIDDLE, seq_len=CONFIGURED)
    for report in (rope_report, oracle.report):
        assert report(y, x32, spec, MIDDLE, seq_len=CONFIGURED).ok
        assert not report(y, x32, spec, MIDDLE).ok
    for find in (diagnose, oracle.diagnose):
        assert find(y, x32, spec, MIDDLE, seq_len=CONFIGURED) is None
        assert find(y, x32, spec, MIDDLE).cause == "seq_len"  # type: ignore[union-attr]
