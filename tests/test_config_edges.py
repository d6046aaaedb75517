"""Config edges: values that once were dropped, written unchecked, or reported misleadingly.

Each refused input must raise the stated error type with a message naming the parameter
(and, for configs, where it came from); `RopeSpec.to_hf` must never write a config that
`RopeSpec.from_hf` refuses.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr

# --- from_hf: refused configs, with the key and the cause named ---------------------------

FROM_HF_REFUSED = [
    # "" is a value (an unknown type), never "absent": the factor must not be dropped
    (
        {"head_dim": 64, "rope_parameters": {"rope_type": "", "factor": 4.0}},
        ValueError,
        ["`rope_type`", "unknown rope_type ''", "config.rope_parameters"],
    ),
    (
        {"head_dim": 64, "rope_scaling": {"type": "", "factor": 4.0}},
        ValueError,
        ["`type`", "unknown rope_type ''", "config.rope_scaling"],
    ),
    # an odd head: the cause is head_dim, not an absent partial_rotary_factor
    ({"head_dim": 63}, ValueError, ["`head_dim`", "head_dim=63", "even"]),
    (
        {"hidden_size": 63, "num_attention_heads": 1},
        ValueError,
        ["`head_dim`", "head_dim=63", "hidden_size=63"],
    ),
    # a default mrope_section implied by the model type
    (
        {"model_type": "qwen2_vl", "head_dim": 64},
        ValueError,
        ["`mrope_section`", "model_type 'qwen2_vl'", "[16, 24, 24]", "rotary_dim // 2 = 32"],
    ),
    # YaRN mscale ratios that are not a finite positive attention factor
    (
        {
            "head_dim": 64,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": math.e,
                "original_max_position_embeddings": 4096,
                "mscale": 1.0,
                "mscale_all_dim": -10.0,
            },
        },
        ValueError,
        ["`mscale`", "`mscale_all_dim`", "mscale_all_dim=-10.0"],
    ),
]


@pytest.mark.parametrize(("config", "error", "names"), FROM_HF_REFUSED)
def test_from_hf_refuses_naming_the_cause(config, error, names):
    with pytest.raises(error) as info:
        rr.RopeSpec.from_hf(config)
    assert type(info.value) is error
    for name in names:
        assert name in str(info.value)


# --- to_hf: checked arguments, never a config its own reader refuses ----------------------

TO_HF_REFUSED = [
    (rr.RopeSpec(8), {"max_position_embeddings": 0}, ValueError, "`max_position_embeddings`"),
    (rr.RopeSpec(8), {"max_position_embeddings": -1}, ValueError, "`max_position_embeddings`"),
    (rr.RopeSpec(8), {"max_position_embeddings": True}, TypeError, "`max_position_embeddings`"),
    (rr.RopeSpec(8), {"max_position_embeddings": "4"}, TypeError, "`max_position_embeddings`"),
    (rr.RopeSpec(8), {"max_position_embeddings": 4.5}, ValueError, "`max_position_embeddings`"),
    (rr.RopeSpec(8), {"max_position_embeddings": 2**60}, ValueError, "`max_position_embeddings`"),
    (
        rr.RopeSpec(8, scaling=rr.scaling.YaRN(4, 100.5)),
        {},
        ValueError,
        "`spec.scaling.original_max_position` must be an integer for a HF config",
    ),
    (
        rr.RopeSpec(8, scaling=rr.scaling.Llama3(8, 8192.5)),
        {},
        ValueError,
        "`spec.scaling.original_max_position` must be an integer for a HF config",
    ),
    (
        rr.RopeSpec(8, scaling=rr.scaling.LongRoPE([1.0] * 4, [2.0] * 4, 100.5, factor=2.0)),
        {},
        ValueError,
        "`spec.scaling.original_max_position` must be an integer for a HF config",
    ),
    (
        rr.RopeSpec(8, scaling=rr.scaling.DynamicNTK(2, 1.5)),
        {},
        ValueError,
        "`spec.scaling.max_position` must be an integer for a HF config",
    ),
]


@pytest.mark.parametrize(("spec", "kwargs", "error", "message"), TO_HF_REFUSED)
def test_to_hf_refuses(spec, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        spec.to_hf(**kwargs)


@pytest.mark.parametrize("value", [np.int64(4096), 4096.0])
def test_to_hf_writes_integer_lengths(value):
    config = rr.RopeSpec(8).to_hf(max_position_embeddings=value)
    assert config["max_position_embeddings"] == 4096
    assert type(config["max_position_embeddings"]) is int


lengths = st.integers(2, 10**6) | st.floats(1.5, 1e6, allow_nan=False)
factors = st.floats(0.25, 64.0)
rules = st.one_of(
    st.none(),
    st.builds(rr.scaling.Linear, factors),
    st.builds(rr.scaling.DynamicNTK, factors, lengths),
    st.builds(rr.scaling.Llama3, factors, lengths),
    st.builds(
        rr.scaling.YaRN,
        factors,
        lengths,
        mscale=st.none() | st.floats(0.1, 2.0),
        mscale_all_dim=st.none() | st.floats(0.1, 2.0),
        truncate=st.booleans(),
    ),
    st.builds(
        rr.scaling.LongRoPE,
        st.just([1.0, 2.0, 3.0, 4.0]),
        st.just([2.0, 4.0, 6.0, 8.0]),
        lengths,
        factor=st.none() | factors,
    ),
)


@given(
    rule=rules,
    base=st.floats(1.5, 1e7),
    max_position=st.none() | st.integers(1, 2**60) | st.floats(0.5, 1e6),
)
def test_to_hf_round_trips_or_raises(rule, base, max_position):
    """Whatever `to_hf` writes, `from_hf` reads back to a spec that computes the same.

    (A LongRoPE rule without a factor comes back with its attention factor pinned.)
    """
    spec = rr.RopeSpec(8, base=base, scaling=rule)
    if isinstance(rule, rr.scaling.DynamicNTK):
        max_position = None  # the rule writes its own
    try:
        config, refusal = spec.to_hf(max_position_embeddings=max_position), ""
    except ValueError as err:
        config, refusal = {}, str(err)
    if refusal:
        assert re.search(r"`(max_position_embeddings|spec\.scaling\.\w+)` must", refusal)
        return
    back = rr.RopeSpec.from_hf(config)
    assert back.head_dim == spec.head_dim
    assert back.base == spec.base
    for seq_len in (None, 1.0, 3.0, 1e3, 2e6):
        assert np.array_equal(rr.inv_freq(back, seq_len), rr.inv_freq(spec, seq_len))
        assert rr.attention_factor(back, seq_len) == rr.attention_factor(spec, seq_len)


# --- scaling rules: refused at construction, naming the field ------------------------------

RULES_REFUSED = [
    (lambda: rr.scaling.YaRN(math.e, 100, mscale=1, mscale_all_dim=-10), "mscale_all_dim=-10.0"),
    (lambda: rr.scaling.YaRN(4, 100, mscale=-20, mscale_all_dim=1), "mscale=-20.0"),
    (lambda: rr.scaling.YaRN(4, 100, mscale=-10 / math.log(4), mscale_all_dim=1), "`mscale`"),
    (lambda: rr.scaling.Linear(5e-324), "`factor`"),
    (lambda: rr.scaling.Linear(1e-310), "`factor`"),
    (lambda: rr.scaling.NTKAware(5e-324), "`factor`"),
    (lambda: rr.scaling.Llama3(5e-324, 8192), "`factor`"),
    (lambda: rr.scaling.YaRN(5e-324, 4096), "`factor`"),
    (lambda: rr.scaling.Proportional(0.5, factor=5e-324), "`factor`"),
    (lambda: rr.scaling.LongRoPE([1e-320, 1, 1, 1], [1] * 4, 100), "`short_factor`"),
    (lambda: rr.scaling.LongRoPE([1] * 4, [1, 1, 1, 1e-320], 100), "`long_factor`"),
]


@pytest.mark.parametrize(("build", "name"), RULES_REFUSED)
def test_rules_refuse_values_that_break_the_output(build, name):
    with pytest.raises(ValueError, match=re.escape(name)):
        build()


MSCALES = [(1.0, 1.0), (0.707, 1.0), (1.0, 0.0), (-1.0, -2.0), (1.0, -10.0), (-20.0, 1.0)]


def test_mscale_ratio_is_hf_get_mscale_or_refused():
    """HF's get_mscale ratio (transformers.modeling_rope_utils) where it is finite and > 0."""

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    for factor in (math.e, 40.0):
        for mscale, mscale_all_dim in MSCALES:
            expected = get_mscale(factor)
            if mscale and mscale_all_dim:
                bottom = get_mscale(factor, mscale_all_dim)
                expected = get_mscale(factor, mscale) / bottom if bottom else math.inf
            rule = {"mscale": mscale, "mscale_all_dim": mscale_all_dim}
            if math.isfinite(expected) and expected > 0.0:
                spec = rr.RopeSpec(8, scaling=rr.scaling.YaRN(factor, 4096, **rule))
                assert rr.attention_factor(spec) == expected
            else:
                with pytest.raises(ValueError, match=r"`mscale` and `mscale_all_dim` must"):
                    rr.scaling.YaRN(factor, 4096, **rule)


def test_scaling_class_is_refused():
    with pytest.raises(TypeError, match=r"`scaling` must be an instance .*got the class Linear"):
        rr.RopeSpec(8, scaling=rr.scaling.Linear)


class _InfRule:
    """A user rule whose inverse frequencies overflow."""

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return inv_freq * 1e308 * 10.0  # inf for the first pair only

    def attention_factor(self, *, seq_len):
        return 1.0


def test_non_finite_inverse_frequencies_are_shown():
    spec = rr.RopeSpec(8, scaling=_InfRule())
    with (
        np.errstate(over="ignore"),
        pytest.raises(ValueError, match=r"`spec.scaling` .*got \[inf\] at pairs \[0\]"),
    ):
        rr.inv_freq(spec)


# --- a seq_len inferred from the positions -----------------------------------------------


@pytest.mark.parametrize(
    "rule",
    [
        rr.scaling.DynamicNTK(2, 4),
        rr.scaling.Linear(2.0),
        rr.scaling.LongRoPE([1.0] * 4, [2.0] * 4, 4),
    ],
)
def test_inferred_seq_len_is_explained(rule):
    spec = rr.RopeSpec(8, scaling=rule)
    explained = r"`seq_len` is inferred as max\(positions\) \+ 1 .* `positions` up to -5"
    with pytest.raises(ValueError, match=explained):
        rr.rope_angles(spec, [-10, -5])
    q = np.ones((2, 8))
    with pytest.raises(ValueError, match=explained):  # q and k share the inferred seq_len
        rr.apply_rope_qk(q, q, spec, np.array([-10, -5]))
    assert rr.rope_angles(spec, [-10, -5], seq_len=8).shape == (2, 4)


# --- from_hf: each refusal names the key the user gave and its value -----------------------


@pytest.mark.parametrize("model_type", ["deepseek_v3", "llama"])
def test_odd_qk_rope_head_dim_is_refused_naming_it(model_type):
    config = {
        "model_type": model_type, "hidden_size": 256, "num_attention_heads": 4,
        "qk_rope_head_dim": 63,
    }  # fmt: skip
    with pytest.raises(ValueError, match=r"`qk_rope_head_dim` must be even") as info:
        rr.RopeSpec.from_hf(config)
    assert "qk_rope_head_dim=63 (config)" in str(info.value)
    assert "hidden_size" not in str(info.value)  # not the key from_hf did not read


def test_odd_head_size_from_aliases_names_the_aliases():
    # DBRX's attribute_map: hidden_size -> d_model, num_attention_heads -> n_heads
    config = {"model_type": "dbrx", "d_model": 126, "n_heads": 2}
    with pytest.raises(
        ValueError,
        match=r"`head_dim` must be even.*got head_dim=63 \(d_model=126 // n_heads=2 in config\)",
    ):
        rr.RopeSpec.from_hf(config)


@pytest.mark.parametrize("layers", [{}, {"num_hidden_layers": 6}, {"num_hidden_layers": 1}])
@pytest.mark.parametrize("value", [0, 1, -5.0, math.inf])
def test_bad_local_base_is_refused_naming_it_whatever_the_layers(layers, value):
    config = {
        "model_type": "gemma3_text", "hidden_size": 256, "num_attention_heads": 4,
        "head_dim": 64, "rope_local_base_freq": value, **layers,
    }  # fmt: skip
    expected = rf"`rope_local_base_freq` must be .* greater than 1; got {re.escape(repr(value))}"
    for layer_type in (None, "full_attention", "sliding_attention"):
        with pytest.raises(ValueError, match=expected + r" \(config\)"):
            rr.RopeSpec.from_hf(config, layer_type=layer_type)
    if layers:
        with pytest.raises(ValueError, match=expected):
            rr.RopeSpec.from_hf_layers(config)
