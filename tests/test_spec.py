"""RopeSpec (rope_ref/_core/spec.py): its validation, the default frequencies, the HF
readers' options and the sinusoidal embedding.

Expected values are the documented rules and formulas, written here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pytest

import rope_ref as rr


def _interleaved_fits(sections: tuple[int, ...]) -> bool:
    """The documented interleaved order: axis ``a >= 1`` takes pairs ``a, a + n, a + 2n,
    ...`` (``n`` axes) while it has pairs left, axis 0 the rest; so each of the pairs of
    axes 1 and up must exist."""
    n_pairs, n_axes = sum(sections), len(sections)
    return all(a + n_axes * (size - 1) < n_pairs for a, size in enumerate(sections) if a)


@pytest.mark.parametrize(
    "sections",
    [(1, 2), (2, 1), (1, 1), (2, 2, 2), (1, 1, 4), (2, 2, 3), (3, 2, 2), (24, 20, 20), (4, 2)],
)
def test_interleaved_sections_fit_exactly_when_every_pair_of_each_axis_exists(sections):
    """Catches: the fit check's boundary moved (the last pair of an axis exactly one past
    the end accepted, or a tight fit refused), an axis left out of it, or the check applied
    to the chunked order, which takes any sections."""
    head_dim = 2 * sum(sections)
    if _interleaved_fits(sections):
        spec = rr.RopeSpec(head_dim, sections=sections, section_order="interleaved")
        assert spec.sections == sections
    else:
        with pytest.raises(ValueError, match="`sections` must fit the interleaved order"):
            rr.RopeSpec(head_dim, sections=sections, section_order="interleaved")
    assert rr.RopeSpec(head_dim, sections=sections).sections == sections  # chunked


def test_axis_counts_follow_sections():
    """Catches: a swapped test in `n_axes` or `position_axes` (1 and None without
    sections, the number of sections with them)."""
    plain = rr.RopeSpec(8)
    assert (plain.n_axes, plain.position_axes) == (1, None)
    multi = rr.RopeSpec(12, sections=(2, 2, 2))
    assert (multi.n_axes, multi.position_axes) == (3, 3)


@pytest.mark.parametrize(
    ("layout", "output_layout", "written", "stored"),
    [
        ("half", None, "half", None),
        ("interleaved", None, "interleaved", None),
        ("half", "half", "half", None),  # the same as layout: stored as None
        ("interleaved", "interleaved", "interleaved", None),
        ("interleaved", "half", "half", "half"),
        ("half", "interleaved", "interleaved", "interleaved"),
    ],
)
def test_output_layout_is_kept_only_when_it_differs(layout, output_layout, written, stored):
    """Catches: an output layout equal to the read layout kept (two equal specs would then
    compare and hash differently), a differing one dropped, or `written_layout` not
    falling back to `layout`."""
    spec = rr.RopeSpec(8, layout=layout, output_layout=output_layout)
    assert spec.output_layout == stored
    assert spec.written_layout == written
    if stored is None:
        assert spec == rr.RopeSpec(8, layout=layout)


def test_output_layout_is_checked_like_layout():
    """Catches: the output layout's check skipped."""
    with pytest.raises(ValueError, match=re.escape("`output_layout` must be one of 'half'")):
        rr.RopeSpec(8, output_layout="neox")


def test_freqs_may_be_zero_but_must_be_one_dimensional():
    """Catches: a zero frequency (a pair that never turns) refused, or a 2-D `freqs` of the
    right count accepted (only one of the shape and the count checked)."""
    assert rr.RopeSpec(4, freqs=(1.0, 0.0)).freqs == (1.0, 0.0)
    assert rr.inv_freq(rr.RopeSpec(4, freqs=(0.0, 0.0))).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=re.escape("`freqs` must have one entry per pair (2)")):
        rr.RopeSpec(4, freqs=np.array([[1.0, 0.5]]))


def test_freqs_refuse_a_base_without_a_rule():
    """Catches: a base beside `freqs` accepted where nothing reads it."""
    with pytest.raises(ValueError, match="`freqs` replaces `base`; leave it at its default"):
        rr.RopeSpec(4, freqs=(1.0, 0.5), base=500.0)


def test_freqs_are_the_input_of_a_scaling_rule():
    """Catches: a rule given with `freqs` ignored, or applied to the default frequencies."""
    spec = rr.RopeSpec(4, freqs=(0.75, 0.5), scaling=rr.scaling.Linear(2.0))
    assert rr.inv_freq(spec).tolist() == [0.375, 0.25]  # 0.75 / 2, 0.5 / 2
    bare = rr.RopeSpec(4, freqs=(0.75, 0.5), scaling=rr.scaling.AttentionScale(1.5))
    assert rr.inv_freq(bare).tolist() == [0.75, 0.5]
    assert rr.attention_factor(bare) == 1.5


@dataclass(frozen=True)
class _XPos:
    """An xPos rule with a chosen scale_base (rope_ref's own `XPos` refuses bad ones)."""

    scale_base: float

    def zeta(self, rotary_dim: int) -> np.ndarray:
        return np.ones(rotary_dim // 2)

    def center(self, seq_len: float) -> float:
        return 0.0


@pytest.mark.parametrize("scale_base", [0.0, -1.0])
def test_an_xpos_rule_needs_a_positive_scale_base(scale_base):
    """Catches: a scale_base of 0 accepted (the exponent (p - c) / scale_base divides by it)."""
    with pytest.raises(ValueError, match=re.escape("`xpos.scale_base` must be positive")):
        rr.RopeSpec(8, xpos=_XPos(scale_base))
    assert rr.RopeSpec(8, xpos=_XPos(1e-300)).xpos == _XPos(1e-300)


def test_the_smallest_rotation_and_head():
    """Catches: the smallest rotary_dim (2) or head_dim (1, refused as odd) moved: one pair
    rotates by p, and a head of 1 or a rotary_dim of 1 is refused with the documented
    minimum."""
    spec = rr.RopeSpec(8, rotary_dim=2)
    assert (spec.n_pairs, spec.rotary_stop) == (1, 2)
    assert rr.inv_freq(spec).tolist() == [1.0]
    with pytest.raises(ValueError, match=re.escape("`rotary_dim` must be at least 2; got 1.")):
        rr.RopeSpec(8, rotary_dim=1)
    with pytest.raises(ValueError, match=re.escape("`head_dim` must be at least 1; got 0.")):
        rr.RopeSpec(0)


def test_rotary_stop_is_start_plus_width():
    """Catches: `rotary_stop` computed as start minus width."""
    assert rr.RopeSpec(16, rotary_start=4, rotary_dim=8).rotary_stop == 12


def test_the_default_rotary_dim_is_what_follows_the_start():
    """Catches: the default rotary_dim computed as head_dim plus rotary_start (past the
    head, and not checked against it)."""
    spec = rr.RopeSpec(8, rotary_start=2)
    assert (spec.rotary_dim, spec.rotary_stop, spec.n_pairs) == (6, 8, 3)


@pytest.mark.parametrize("freqs", [0.5, "ab", {0.5}])
def test_freqs_that_are_no_sequence_are_a_type_error(freqs):
    """Catches: the sequence check's ``or`` made ``and`` (a single number or a string then
    read as a one-entry sequence)."""
    with pytest.raises(TypeError, match=re.escape("`freqs` must be a sequence of 1 real")):
        rr.RopeSpec(2, freqs=freqs)


# --- sinusoidal embedding -------------------------------------------------------------


def _sinusoidal(p: float, dim: int, base: float) -> list[float]:
    """Vaswani et al.'s PE(p): sin and cos of p b^(-2i/d), interleaved."""
    out: list[float] = []
    for i in range(dim // 2):
        angle = p * base ** (-2 * i / dim)
        out += [math.sin(angle), math.cos(angle)]
    return out


def test_sinusoidal_embedding_of_the_smallest_width_and_any_shape():
    """Catches: the smallest width (2) refused, or the output's leading shape lost for
    positions of more than one axis."""
    assert rr.sinusoidal_embedding([3.0], 2).tolist() == [[math.sin(3.0), math.cos(3.0)]]
    positions = np.arange(6.0).reshape(2, 3)
    got = rr.sinusoidal_embedding(positions, 6, base=100.0)
    assert got.shape == (2, 3, 6)
    want = [[_sinusoidal(p, 6, 100.0) for p in row] for row in positions.tolist()]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("base", [1.0 + 2.0**-52, 1.5, 2.0])
def test_sinusoidal_embedding_takes_any_base_above_one(base):
    """Catches: the smallest base moved above 1 (a base of 2 or less refused)."""
    got = rr.sinusoidal_embedding([5.0], 4, base=base)
    np.testing.assert_allclose(got, [_sinusoidal(5.0, 4, base)], rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rr.sinusoidal_embedding([1.0], 4, base=1.0), "`base` must be greater than 1"),
        (lambda: rr.sinusoidal_embedding([1.0], 1), "`dim` must be at least 2; got 1."),
        (lambda: rr.sinusoidal_embedding([1.0, 2.0], 2**62), "`positions` and `dim` too large"),
    ],
)
def test_sinusoidal_embedding_refusals(call, message):
    """Catches: a base of 1 accepted (every pair would turn at the same rate), the minimum
    width moved, or the size check skipped (2 x 2**62 values exceed the 2**28 limit)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- frequencies and tables -----------------------------------------------------------


def test_seq_len_must_be_positive():
    """Catches: a seq_len of 0 accepted (the boundary of the positive check)."""
    spec = rr.RopeSpec(8, scaling=rr.scaling.DynamicNTK(2.0, max_position=16))
    with pytest.raises(ValueError, match=re.escape("`seq_len` must be positive; got 0.0.")):
        rr.inv_freq(spec, 0)
    assert rr.inv_freq(spec, 1e-300).tolist() == rr.inv_freq(rr.RopeSpec(8)).tolist()


def test_inferred_seq_len_is_max_position_plus_one_and_positive():
    """Catches: seq_len inferred for a spec without scaling (negative positions would then
    be refused), or inferred other than as max(positions) + 1, or an inferred seq_len of
    0 let through, or the refusal quoting the wrong largest position."""
    plain = rr.RopeSpec(8)
    cos, _ = rr.rope_cos_sin(plain, [-5.0, -3.0])
    np.testing.assert_allclose(cos[:, 1], np.cos([-5.0 / 10, -3.0 / 10]), rtol=1e-15)
    rule = rr.scaling.DynamicNTK(2.0, max_position=16)
    spec = rr.RopeSpec(8, scaling=rule)
    angles = rr.rope_angles(spec, np.arange(32.0))  # seq_len 32: ratio 1 + 2 (32 - 16) / 16 = 3
    j = np.arange(4)
    want = 1e4 ** (-j / 4) * 3.0 ** (-2.0 * j / 6)
    np.testing.assert_allclose(angles[31], 31.0 * want, rtol=1e-14)
    with pytest.raises(ValueError, match=re.escape("got `positions` up to -1.0")):
        rr.rope_angles(spec, [-2.0, -1.0])
    assert rr.rope_angles(spec, [-0.5]).shape == (1, 4)  # seq_len 0.5 is positive


def test_empty_positions_with_a_scaling_rule_give_empty_tables():
    """Catches: the seq_len inferred from no positions made 0 (refused) or read from an
    empty array."""
    spec = rr.RopeSpec(8, scaling=rr.scaling.DynamicNTK(2.0, max_position=16))
    cos, sin = rr.rope_cos_sin(spec, np.zeros(0))
    assert cos.shape == sin.shape == (0, 4)


def test_role_is_checked_without_xpos_too():
    """Catches: `role` left unchecked when the spec has no xPos rule."""
    with pytest.raises(ValueError, match="`role` must be one of"):
        rr.rope_cos_sin(rr.RopeSpec(8), [0.0], role="keys")
    cos, _ = rr.rope_cos_sin(rr.RopeSpec(8), [0.0], role="key")
    assert cos.tolist() == [[1.0] * 4]


class _Zeta(_XPos):
    """An xPos rule with zeta 2 for every pair, centred at 0."""

    def zeta(self, rotary_dim: int) -> np.ndarray:
        return np.full(rotary_dim // 2, 2.0)


def test_xpos_with_sections_scales_by_the_first_position_axis():
    """Catches: the xPos scale of a multi-axis spec taken from another position axis:
    with zeta 2, centre 0 and scale_base 1, a query at axes (3, 5, 7) is scaled by 2**3."""
    spec = rr.RopeSpec(12, sections=(2, 2, 2), xpos=_Zeta(1.0))
    cos, _ = rr.rope_cos_sin(spec, np.zeros((1, 3)), role="query")
    assert cos.tolist() == [[1.0] * 6]
    cos, _ = rr.rope_cos_sin(spec, np.array([[3.0, 5.0, 7.0]]), role="query")
    theta = 1e4 ** (-np.arange(6) / 6)
    angles = np.array([3.0, 3.0, 5.0, 5.0, 7.0, 7.0]) * theta
    np.testing.assert_allclose(cos[0], np.cos(angles) * 2.0**3, rtol=1e-14)


@pytest.mark.parametrize("dtype", ["float99", (np.float64, -1), "f8,(", "int32"])
def test_a_dtype_that_is_no_real_floating_dtype_is_refused_naming_it(dtype):
    """Catches: one of the errors of reading a dtype let through unnamed: NumPy raises
    TypeError for an unknown name, ValueError for a bad shape, and SyntaxError for a
    malformed structured dtype string (which it parses as Python)."""
    with pytest.raises(TypeError, match="`dtype` must be a real floating dtype"):
        rr.rope_cos_sin(rr.RopeSpec(4), [0.0], dtype=dtype)


def test_a_dtype_of_another_namespace_is_refused_naming_it():
    """Catches: the AttributeError of PyTorch's dtype test on a foreign dtype let through."""
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="`dtype` must be a real floating dtype"):
        rr.rope_cos_sin(rr.RopeSpec(4), torch.zeros(1), dtype="float32")


# --- RopeSpec's public signature ------------------------------------------------------

_UNKNOWN_KEY = {
    "head_dim": 8,
    "num_hidden_layers": 2,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "rope_thata": 5.0},
}


def test_hf_readers_warn_on_an_unknown_key_by_default():
    """Catches: `strict` on by default in `from_hf` or `from_hf_layers` (documented: an
    unknown RoPE key is a UserWarning unless strict=True)."""
    with pytest.warns(UserWarning, match="rope_thata"):
        assert rr.RopeSpec.from_hf(_UNKNOWN_KEY) == rr.RopeSpec(8)
    with pytest.warns(UserWarning, match="rope_thata"):
        assert rr.RopeSpec.from_hf_layers(_UNKNOWN_KEY) == (rr.RopeSpec(8), rr.RopeSpec(8))
    with pytest.raises(ValueError, match="rope_thata"):
        rr.RopeSpec.from_hf_layers(_UNKNOWN_KEY, strict=True)


def test_hf_options_are_keyword_only():
    """Catches: `layer_type`, `strict` or `max_position_embeddings` made positional (a
    positional value would then be read as that option)."""
    with pytest.raises(TypeError):
        rr.RopeSpec.from_hf(_UNKNOWN_KEY, "full_attention")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        rr.RopeSpec.from_hf_layers(_UNKNOWN_KEY, True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        rr.RopeSpec(8).to_hf(4096)  # type: ignore[call-arg]


@dataclass(eq=True)
class _MutableRule:
    """A scaling rule that is not frozen, so not hashable."""

    factor: float = 2.0

    def inv_freq(
        self, inv_freq: np.ndarray, *, base: float, rotary_dim: int, seq_len: float | None
    ) -> np.ndarray:
        return inv_freq

    def attention_factor(self, *, seq_len: float | None) -> float:
        return 1.0


def test_an_unhashable_rule_is_refused_naming_the_field():
    """Catches: hash()'s own TypeError let through instead of the one naming `scaling`."""
    with pytest.raises(TypeError, match=re.escape("`scaling` must be hashable (a frozen value)")):
        rr.RopeSpec(8, scaling=_MutableRule())


def test_tables_for_a_namespace_without_float64_round_once():
    """Catches: tables moved to a namespace without float64 (JAX without x64) in the wrong
    dtype, or rounded to bfloat16 through float32: the attention factor 1 + 2**-8 + 2**-30
    lies above the bfloat16 tie 1 + 2**-8 and rounds up to 1 + 2**-7, where through
    float32 it would land on the tie and round to even, 1."""
    jax = pytest.importorskip("jax")
    factor = 1 + 2.0**-8 + 2.0**-30
    spec = rr.RopeSpec(2, scaling=rr.scaling.AttentionScale(factor))
    with jax.enable_x64(False):
        cos, sin = rr.rope_cos_sin(spec, jax.numpy.asarray([0, 1]))
        assert cos.dtype == sin.dtype == jax.numpy.float32
        want = np.float32(np.cos([[0.0], [1.0]]) * factor)
        np.testing.assert_array_equal(np.asarray(cos), want)
        cos, _ = rr.rope_cos_sin(spec, jax.numpy.asarray([0]), dtype=jax.numpy.bfloat16)
        assert cos.dtype == jax.numpy.bfloat16
        assert float(cos[0, 0]) == 1 + 2.0**-7


def test_output_layout_is_kept_only_when_it_differs_from_layout():
    """Catches: the normalisation of ``output_layout`` inverted, or `written_layout` made a
    method."""
    crossed = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    assert crossed.output_layout == "half"
    assert crossed.written_layout == "half"
    same = rr.RopeSpec(8, layout="interleaved", output_layout="interleaved")
    assert same.output_layout is None
    assert same.written_layout == "interleaved"
    assert rr.RopeSpec(8).written_layout == "half"
