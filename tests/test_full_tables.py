"""Cos/sin tables: rope_cos_sin(..., full=True) at HF width (one value per rotated feature),
batched positions, the attention factor, the seq_len a scaling rule is given and traced
positions."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import numpy as np
import pytest
from numpy.typing import NDArray

import rope_ref as rr
from rope_ref._core import validation
from rope_ref.testing import RopeOracle


def _pair_angles(head_dim: int, base: float, positions: np.ndarray) -> np.ndarray:
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return positions[:, None].astype(np.float64) * inv


def test_half_layout_repeats_the_pairs_after_each_other():
    positions = np.array([0, 1, 7, 1000])
    angles = _pair_angles(8, 10000.0, positions)
    cos, sin = rr.rope_cos_sin(rr.RopeSpec(head_dim=8), positions, full=True)
    np.testing.assert_allclose(cos, np.cos(np.concatenate([angles, angles], -1)), rtol=1e-15)
    np.testing.assert_allclose(sin, np.sin(np.concatenate([angles, angles], -1)), rtol=1e-15)


def test_interleaved_layout_repeats_each_pair_in_place():
    positions = np.array([3, 50])
    angles = _pair_angles(8, 10000.0, positions)
    spec = rr.RopeSpec(head_dim=8, layout="interleaved")
    cos, sin = rr.rope_cos_sin(spec, positions, full=True, dtype="float32")
    assert cos.dtype == np.float32
    np.testing.assert_array_equal(cos, np.cos(np.repeat(angles, 2, axis=-1)).astype(np.float32))
    np.testing.assert_array_equal(sin, np.sin(np.repeat(angles, 2, axis=-1)).astype(np.float32))


def test_partial_rotary_is_rotary_dim_wide_and_grids_keep_their_shape():
    spec = rr.RopeSpec(head_dim=64, rotary_dim=16)
    cos, _ = rr.rope_cos_sin(spec, np.zeros((2, 5), dtype=np.int64), full=True)
    assert cos.shape == (2, 5, 16)


def test_full_must_be_a_bool():
    with pytest.raises(TypeError, match="`full` must be True or False; got 1"):
        rr.rope_cos_sin(rr.RopeSpec(head_dim=8), [0], full=1)


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
    reason="needs transformers and torch",
)
def test_the_tables_are_hfs_own():
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(
        hidden_size=512,
        num_attention_heads=4,
        head_dim=128,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    )
    positions = torch.tensor([[0, 1, 17, 4000]])
    x = torch.zeros(1, 4, 4, 128, dtype=torch.float64)
    hf_cos, hf_sin = LlamaRotaryEmbedding(config)(x, positions)
    cos, sin = rr.rope_cos_sin(rr.RopeSpec.from_hf(config), positions, full=True)
    assert cos.shape == hf_cos.shape
    # HF builds its angles in float32: agreement to float32's angle error at 4000
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=4000 * 2.0**-22)
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=4000 * 2.0**-22)


def test_tables_built_on_the_host_round_once_to_bfloat16():
    """Catches: host tables cast without rounding them onto the 16-bit grid first (JAX
    without x64 builds them in NumPy float64, then casts through float32: twice)."""
    jax = pytest.importorskip("jax")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import jax.numpy as jnp

    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        factor = 1 + 2.0**-8 + 2.0**-30  # above the bfloat16 tie 1 + 2**-8, float32 lands on it
        spec = rr.RopeSpec(2, scaling=rr.scaling.AttentionScale(factor))
        cos, _ = rr.rope_cos_sin(spec, jnp.asarray([0, 1]), dtype=jnp.bfloat16)
        assert cos.dtype == jnp.bfloat16
        one = float(np.float64(factor * np.cos(1.0)).astype(ml_dtypes.bfloat16))
        assert cos.astype(jnp.float32).tolist() == [[1 + 2.0**-7], [one]]
        cos32, _ = rr.rope_cos_sin(spec, jnp.asarray([0, 1]))
        assert cos32.dtype == jnp.float32
        assert cos32.tolist() == [
            [float(np.float32(factor))],
            [float(np.float32(factor * np.cos(1.0)))],
        ]
    finally:
        jax.config.update("jax_enable_x64", before)


def _plain_angles(positions: NDArray[np.float64], head_dim: int) -> NDArray[np.float64]:
    """``p * 10000 ** (-2j / head_dim)`` for every pair ``j``, on a new last axis."""
    theta = 10000.0 ** (-2.0 * np.arange(head_dim // 2) / head_dim)
    return np.asarray(positions[..., None] * theta, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class _Factor:
    """A scaling rule that keeps every frequency and states `factor` as its attention factor."""

    factor: float

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        return inv_freq

    def attention_factor(self, *, seq_len: float | None) -> float:
        return self.factor


@dataclasses.dataclass(frozen=True)
class _SeqLenSpy:
    """A scaling rule that keeps every frequency and writes down each seq_len it is given."""

    seen: list[float | None] = dataclasses.field(default_factory=list, hash=False, compare=False)

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        self.seen.append(seq_len)
        return inv_freq

    def attention_factor(self, *, seq_len: float | None) -> float:
        return 1.0


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_full_width_tables_of_batched_positions_keep_every_leading_axis(layout: str) -> None:
    """Catches: the widened table reshaped to the first axis only, or to twice the size of
    the second axis instead of the last (the same for (seq,) positions, not for (batch,
    seq))."""
    spec = rr.RopeSpec(8, layout=layout)  # 4 pairs, against 3 positions per row
    positions = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    angles = _plain_angles(positions, 8)
    cos, sin = rr.rope_cos_sin(spec, positions, full=True)
    assert cos.shape == sin.shape == (2, 3, 8)
    for j in range(4):  # pair j sits at features (j, j + 4) ("half") or (2j, 2j + 1)
        features = (j, j + 4) if layout == "half" else (2 * j, 2 * j + 1)
        for f in features:
            np.testing.assert_allclose(cos[..., f], np.cos(angles[..., j]), rtol=0, atol=1e-15)
            np.testing.assert_allclose(sin[..., f], np.sin(angles[..., j]), rtol=0, atol=1e-15)


def test_the_oracle_tables_take_dtype_and_seq_len_by_name_and_are_half_width() -> None:
    """Catches: `dtype` and `seq_len` of RopeOracle.cos_sin made positional-only (the GPU
    benchmark names `dtype` too), or its tables full width unless asked for."""
    oracle = RopeOracle()
    spec = rr.RopeSpec(4, layout="interleaved")
    positions = np.array([0.0, 1.0, 2.0])
    angles = _plain_angles(positions, 4)
    cos, sin = oracle.cos_sin(spec, positions, dtype=np.float32, seq_len=3.0)
    assert cos.dtype == sin.dtype == np.float32
    assert cos.shape == sin.shape == (3, 2)
    np.testing.assert_allclose(cos, np.cos(angles), rtol=2.0**-24, atol=0)
    np.testing.assert_allclose(sin, np.sin(angles), rtol=2.0**-24, atol=2.0**-150)
    assert oracle.cos_sin(spec, positions)[0].shape == (3, 2)
    assert oracle.cos_sin(spec, positions, full=True)[0].shape == (3, 4)


@pytest.mark.parametrize(
    ("rule", "factor"),
    [
        (rr.scaling.AttentionScale(2.0), 2.0),
        (rr.scaling.AttentionScale(0.5), 0.5),
        (_Factor(1e-300), 1e-300),
    ],
)
def test_the_attention_factor_multiplies_cos_and_sin_whatever_its_value(
    rule: rr.ScalingRule, factor: float
) -> None:
    """Catches: the factor skipped when it equals some constant other than 1 (2.0 here),
    where multiplying changes the tables; a tiny factor is multiplied in as given."""
    spec = rr.RopeSpec(4, scaling=rule)
    positions = np.array([0.0, 1.0, 2.0])
    angles = _plain_angles(positions, 4)
    cos, sin = rr.rope_cos_sin(spec, positions, seq_len=3.0)
    np.testing.assert_allclose(cos, factor * np.cos(angles), rtol=1e-15, atol=0)
    np.testing.assert_allclose(sin, factor * np.sin(angles), rtol=1e-15, atol=0)
    assert cos[0].tolist() == [factor, factor]  # position 0: cos 1, exactly the factor


@pytest.mark.parametrize(
    "rule",
    [
        _Factor(0.0),
        _Factor(-1.0),
        rr.scaling.Chain(rr.scaling.AttentionScale(1e-200), rr.scaling.AttentionScale(1e-200)),
    ],
    ids=["zero", "negative", "underflowing-chain"],
)
def test_an_attention_factor_that_is_not_positive_is_refused(rule: rr.ScalingRule) -> None:
    """A factor of 0 would erase the rotated features and a negative one turn them by pi:
    refused, naming the rule's attention factor, by every function that applies it."""
    spec = rr.RopeSpec(4, scaling=rule)
    named = re.escape("`spec.scaling.attention_factor()` must be positive")
    with pytest.raises(ValueError, match=named):
        rr.attention_factor(spec)
    with pytest.raises(ValueError, match=named):
        rr.rope_cos_sin(spec, np.arange(3))
    with pytest.raises(ValueError, match=named):
        rr.apply_rope(np.ones((3, 4)), spec, backend="reference")


def test_batched_multi_axis_tables_count_every_token_against_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catches: the table size of (batch, seq, axes) positions counted from the batch axis
    alone (the same as every leading axis for (seq, axes) positions)."""
    monkeypatch.setattr(validation, "MAX_ELEMENTS", 64)
    spec = rr.RopeSpec(16, sections=(4, 2, 2))  # 8 pairs, three position axes
    assert rr.rope_cos_sin(spec, np.zeros((2, 4, 3)))[0].shape == (2, 4, 8)  # 64: the limit
    with pytest.raises(ValueError, match=re.escape("cos/sin tables of 3 x 3 x 8 = 72 values")):
        rr.rope_cos_sin(spec, np.zeros((3, 3, 3)))
    with pytest.raises(ValueError, match=re.escape("angles of 3 x 3 x 8 = 72 values")):
        rr.rope_angles(spec, np.zeros((3, 3, 3)))


def test_a_scaling_rule_is_given_max_positions_plus_one_and_one_for_no_positions() -> None:
    """Catches: the seq_len inferred for no positions changed from 1.0 (max(positions) + 1
    of none, as apply_rope_qk's joint seq_len of none)."""
    spy = _SeqLenSpy()
    spec = rr.RopeSpec(4, scaling=spy)
    cos, _ = rr.rope_cos_sin(spec, np.zeros((0,)))
    assert cos.shape == (0, 2)
    assert spy.seen == [1.0]
    rr.rope_cos_sin(spec, np.array([0.0, 4.0, 2.0]))
    assert spy.seen == [1.0, 5.0]


def test_traced_positions_need_an_explicit_seq_len() -> None:
    """Catches: the failure to read traced (jit) positions let through instead of the
    error asking for `seq_len`."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    spec = rr.RopeSpec(8, scaling=rr.scaling.Linear(2.0))
    with jax.enable_x64(True):  # float64 on the device: the tables are built in JAX itself
        traced = jax.jit(lambda p: rr.rope_cos_sin(spec, p))
        with pytest.raises(ValueError, match=r"`seq_len` must be given explicitly when "):
            traced(jnp.arange(4.0))
        cos, _ = jax.jit(lambda p: rr.rope_cos_sin(spec, p, seq_len=4.0))(jnp.arange(4.0))
    assert cos.shape == (4, 4)
