"""Cos/sin tables and the multi-axis helpers (axial frequencies, patch grids, M-RoPE ids):
rules where a planted mistake hides.

Expected values are the documented rules and formulas, written here.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import sys

import numpy as np
import pytest
from numpy.typing import NDArray

import rope_ref as rr
from rope_ref._core import validation
from rope_ref.testing import RopeOracle


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


# --- cos/sin tables ----------------------------------------------------------------------


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


# --- multi-axis helpers ------------------------------------------------------------------


def test_multi_axis_helpers_take_their_options_by_name_only() -> None:
    """Catches: a `/` in place of the `*` of axial_freqs, patch_positions or
    mrope_positions (the design contract: arrays positional, options keyword-only)."""
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    for function, first, options in [
        (rr.axial_freqs, "sections", ["base", "kind", "max_freq"]),
        (rr.patch_positions, "shape", ["kind", "merge_size"]),
        (rr.mrope_positions, "segments", ["merge_size"]),
    ]:
        params = inspect.signature(function).parameters
        assert params[first].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, function
        assert [n for n, p in params.items() if p.kind is keyword_only] == options, function
    assert rr.axial_freqs(sections=(1,)) == (1.0,)
    with pytest.raises(TypeError):
        rr.axial_freqs((2,), 100.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        rr.mrope_positions([(1, 2, 2)], 2)  # type: ignore[call-arg]


def _pixel_ladder(size: int, max_freq: float) -> list[float]:
    """rotary-embedding-torch's pixel frequencies: pi times `size` evenly spaced values
    from 1 to max_freq / 2."""
    top = max_freq / 2.0
    if size == 1:
        return [math.pi]
    return [math.pi * (1.0 + k * (top - 1.0) / (size - 1)) for k in range(size)]


def test_pixel_max_freq_defaults_to_ten() -> None:
    """Catches: a changed default `max_freq` (documented 10.0)."""
    default = inspect.signature(rr.axial_freqs).parameters["max_freq"].default
    assert default == 10.0
    np.testing.assert_allclose(
        rr.axial_freqs((5, 3), kind="pixel"),
        _pixel_ladder(5, 10.0) + _pixel_ladder(3, 10.0),
        rtol=1e-15,
        atol=0,
    )


def test_pixel_max_freq_default_is_rotary_embedding_torch_own() -> None:
    """Catches: a default `max_freq` other than rotary-embedding-torch's."""
    ret = pytest.importorskip("rotary_embedding_torch")
    theirs = inspect.signature(ret.RotaryEmbedding).parameters["max_freq"].default
    assert inspect.signature(rr.axial_freqs).parameters["max_freq"].default == theirs == 10


@pytest.mark.parametrize("max_freq", [7.0, 1.0, 0.5, 2.5])
def test_pixel_ladders_end_at_half_of_any_positive_max_freq(max_freq: float) -> None:
    """Catches: max_freq / 2 floored (7 -> 3 instead of 3.5), or a max_freq up to 1
    refused (it must only be positive)."""
    np.testing.assert_allclose(
        rr.axial_freqs((4, 2), kind="pixel", max_freq=max_freq),
        _pixel_ladder(4, max_freq) + _pixel_ladder(2, max_freq),
        rtol=1e-15,
        atol=0,
    )


def test_a_pixel_max_freq_past_the_largest_names_the_largest() -> None:
    """Catches: a wrong largest max_freq in the message (the highest frequency, pi *
    max_freq / 2, reaches the largest float64 at max_freq = 2 * float_max / pi)."""
    largest = sys.float_info.max / math.pi * 2.0
    assert math.isfinite(largest / 2.0 * math.pi)
    assert math.isinf(largest * 1.0000001 / 2.0 * math.pi)
    with pytest.raises(ValueError, match=re.escape(f"(at most {largest:.6g}); got 1.5e+308.")):
        rr.axial_freqs((2,), kind="pixel", max_freq=1.5e308)
    assert f"{largest:.6g}" == "1.14445e+308"


def test_a_merge_size_of_zero_is_refused() -> None:
    """Catches: merge_size 0 let through (patch_positions: plain order; mrope_positions of
    text alone: no error at all)."""
    for call in (
        lambda: rr.patch_positions((2, 2), merge_size=0),
        lambda: rr.mrope_positions([3], merge_size=0),
        lambda: rr.mrope_positions([(1, 2, 2)], merge_size=0),
    ):
        with pytest.raises(ValueError, match=re.escape("`merge_size` must be at least 1; got 0.")):
            call()


@pytest.mark.parametrize(
    ("shape", "merge"), [((4,), 2), ((2, 4, 3), 2), ((4, 6, 8), 3), ((6, 4, 2), 4)]
)
def test_merge_size_must_divide_the_last_two_sizes(shape: tuple[int, ...], merge: int) -> None:
    """Catches: a single axis let through to the block check (IndexError), or the second
    axis checked in place of the last one (the same for (H, W), not for (T, H, W))."""
    message = f"`merge_size` must divide the last two sizes of shape {shape}; got {merge}."
    with pytest.raises(ValueError, match=re.escape(message)):
        rr.patch_positions(shape, merge_size=merge)


def test_merged_video_patches_go_block_by_block_within_each_frame() -> None:
    """A (T, H, W) grid with T not a multiple of merge_size, order built by a loop."""
    t, h, w, m = 3, 4, 6, 2
    want = [
        [f, bh * m + i, bw * m + j]
        for f in range(t)
        for bh in range(h // m)
        for bw in range(w // m)
        for i in range(m)
        for j in range(m)
    ]
    assert rr.patch_positions((t, h, w), merge_size=m).tolist() == want


@pytest.mark.parametrize("segments", ["abc", b"ab", {3}, 4, (n for n in [2, 3])])
def test_segments_must_be_a_sequence(segments: object) -> None:
    """Catches: a string, a set, a generator or an int taken as segments (iterated, or
    failing with another error)."""
    message = "`segments` must be a sequence of ints (text runs) and (T, H, W) triples; got "
    with pytest.raises(TypeError, match=re.escape(message)):
        rr.mrope_positions(segments)


@pytest.mark.parametrize("shape", ["ab", {2, 3}, 4, (n for n in [2, 3])])
def test_shapes_and_sections_must_be_sequences(shape: object) -> None:
    """Catches: a string, a set, a generator or an int taken as sizes (iterated, or failing
    with another error)."""
    with pytest.raises(TypeError, match=re.escape("`shape` must be a sequence of positive")):
        rr.patch_positions(shape)
    with pytest.raises(TypeError, match=re.escape("`sections` must be a sequence of positive")):
        rr.axial_freqs(shape)


def test_the_token_count_of_a_huge_grid_is_exact() -> None:
    """Catches: the tokens of a (T, H, W) segment counted in floats (H / m instead of
    H // m): past 2**53 the refusal then misstates them."""
    n = 2**30 + 1
    tokens = n * n  # 2**60 + 2**31 + 1: not a float64
    assert float(tokens) != tokens
    message = f"`segments` too large: positions of {tokens:,} x 3 = {3 * tokens:,} values"
    for merge in (1, 2):
        side = n * merge
        with pytest.raises(ValueError, match=re.escape(message)):
            rr.mrope_positions([(1, side, side)], merge_size=merge)
