"""RopeSpec.from_hf reads every config value typed: an error naming the key, never a default.

The values that must be refused are listed by hand below (the reported reproducers, falsy
values, strings of numbers, fractional integers, lists, NaN); the values that must be read
are compared with the fields they are meant to set. Random configs are in test_fuzz.py.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import rope_ref as rr

YARN = {
    "head_dim": 64,
    "max_position_embeddings": 16384,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
    },
}


def with_entry(config, path, value):
    """A deep copy of `config` with ``config[path[0]][path[1]]... = value``."""
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


P = ("rope_parameters",)
REAL = "a finite real number"
POSITIVE = f"{REAL} greater than 0"
BASE = f"{REAL} greater than 1"
FRACTION = f"{REAL} greater than 0 and at most 1"
INT = "an integer from 1 to 2**53"
BOOL = "true or false"
NAN, INF = math.nan, math.inf

# (path, value, error, requirement): the message is "`key` must be <requirement>; got <value>".
REFUSED = [
    # the reported reproducers
    ((*P, "rope_theta"), 0, ValueError, BASE),
    ((*P, "rope_theta"), 0.0, ValueError, BASE),
    ((*P, "rope_theta"), "", TypeError, BASE),
    ((*P, "rope_theta"), "1e6", TypeError, BASE),
    ((*P, "rope_theta"), [1e4], TypeError, BASE),
    (("rope_theta",), 0, ValueError, BASE),  # checked although the parameters' value wins
    (("head_dim",), 128.7, ValueError, INT),
    (("head_dim",), "128", TypeError, INT),
    (("head_dim",), "abc", TypeError, INT),
    (("head_dim",), 0, ValueError, INT),
    (("head_dim",), False, TypeError, INT),
    (("head_dim",), NAN, ValueError, INT),
    (("max_position_embeddings",), "4096", TypeError, INT),
    (("max_position_embeddings",), 0, ValueError, INT),
    ((*P, "original_max_position_embeddings"), "4096", TypeError, INT),
    ((*P, "original_max_position_embeddings"), 0, ValueError, INT),
    ((*P, "original_max_position_embeddings"), 10**400, ValueError, INT),
    ((*P, "factor"), "2", TypeError, POSITIVE),
    ((*P, "factor"), 0, ValueError, POSITIVE),
    ((*P, "factor"), INF, ValueError, POSITIVE),
    ((*P, "factor"), True, TypeError, POSITIVE),
    ((*P, "beta_fast"), 0, ValueError, POSITIVE),
    ((*P, "beta_slow"), "", TypeError, POSITIVE),
    ((*P, "mscale"), "1", TypeError, REAL),
    ((*P, "attention_factor"), 0.0, ValueError, POSITIVE),
    ((*P, "truncate"), 0, TypeError, BOOL),
    ((*P, "truncate"), "false", TypeError, BOOL),
    ((*P, "rope_type"), 3, TypeError, "a string"),
    ((*P, "partial_rotary_factor"), "0.5", TypeError, FRACTION),
    ((*P, "partial_rotary_factor"), "2", TypeError, FRACTION),
    ((*P, "partial_rotary_factor"), NAN, ValueError, FRACTION),
    ((*P, "partial_rotary_factor"), INF, ValueError, FRACTION),
    ((*P, "partial_rotary_factor"), 0, ValueError, FRACTION),
    ((*P, "partial_rotary_factor"), 1.5, ValueError, FRACTION),
    (("partial_rotary_factor",), "0.5", TypeError, FRACTION),
    ((*P, "mrope_section"), [], ValueError, "a non-empty list of positive integers"),
    ((*P, "mrope_section"), [16, "8", 8], TypeError, "a non-empty list of positive integers"),
    ((*P, "mrope_interleaved"), 1, TypeError, BOOL),
    (("model_type",), 5, TypeError, "a string"),
    (("rope_parameters",), [1, 2], TypeError, "a mapping"),
    (("rope_scaling",), "yarn", TypeError, "a mapping"),
    (("text_config",), 5, TypeError, "a mapping"),
]


@pytest.mark.parametrize(("path", "value", "error", "requirement"), REFUSED)
def test_a_wrong_config_value_is_an_error_naming_its_key(path, value, error, requirement):
    where = "config" if len(path) == 1 else "config." + ".".join(path[:-1])
    message = f"`{path[-1]}` must be {requirement}; got {value!r} ({where})."
    with pytest.raises(error, match=re.escape(message)):
        rr.RopeSpec.from_hf(with_entry(YARN, path, value))


EVEN = "`partial_rotary_factor` must give an even rotary dimension of at least 2 from `head_dim`"
# (path, value, error, message): errors of a combination of values, naming the keys.
COMBINED = [
    ((*P, "partial_rotary_factor"), 0.01, ValueError, f"{EVEN} (HF's int(head_dim"),
    (("head_dim",), 7, ValueError, "`head_dim` must be even (RoPE rotates pairs of features)"),
    ((*P, "mrope_section"), [8, 8], ValueError, "`mrope_section` must be pair counts summing to "),
    ((*P, "rope_type"), "fancy", ValueError, "`rope_type` must be one of 'default', 'linear'"),
]


@pytest.mark.parametrize(("path", "value", "error", "message"), COMBINED)
def test_inconsistent_config_values_name_their_keys(path, value, error, message):
    with pytest.raises(error, match=re.escape(message)):
        rr.RopeSpec.from_hf(with_entry(YARN, path, value))


LINEAR = {"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factor": 2.0}}
LLAMA3 = {
    "head_dim": 64,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
    },
}
LONGROPE = {
    "head_dim": 8,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"type": "su", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4},
}
S = ("rope_scaling",)
FACTORS = "a non-empty list of finite positive real numbers"
# (config, error, message): the other rope types' keys, and keys that are missing.
ELSEWHERE = [
    (
        with_entry(LINEAR, (*P, "factor"), None),
        ValueError,
        "`factor` must be given for rope_type 'linear'; got None (config.rope_parameters).",
    ),
    (
        with_entry(LINEAR, (*P, "rope_type"), "dynamic"),
        ValueError,
        "`max_position_embeddings` must be given for rope_type 'dynamic'; got None (config).",
    ),
    (
        with_entry(LLAMA3, (*P, "low_freq_factor"), "1"),
        TypeError,
        f"`low_freq_factor` must be {POSITIVE}",
    ),
    (
        with_entry(LLAMA3, (*P, "high_freq_factor"), 0),
        ValueError,
        f"`high_freq_factor` must be {POSITIVE}",
    ),
    (
        with_entry(LLAMA3, (*P, "high_freq_factor"), 0.5),
        ValueError,
        "`low_freq_factor` must be at most high_freq_factor",
    ),
    (
        with_entry(LONGROPE, (*S, "short_factor"), [1, "2", 1, 1]),
        TypeError,
        f"`short_factor` must be {FACTORS}",
    ),
    (
        with_entry(LONGROPE, (*S, "long_factor"), [1, 0, 1, 1]),
        ValueError,
        f"`long_factor` must be {FACTORS}",
    ),
    (
        with_entry(LONGROPE, (*S, "long_factor"), None),
        ValueError,
        "`long_factor` must be given for rope_type 'longrope'; got None (config.rope_scaling).",
    ),
    (
        with_entry(LONGROPE, (*S, "long_factor"), [2.0] * 3),
        ValueError,
        "`long_factor` must have as many entries as short_factor (4); got 3.",
    ),
    (
        with_entry(LONGROPE, S, {"type": "su", "short_factor": [1] * 2, "long_factor": [2] * 2}),
        ValueError,
        "`short_factor` must have one entry per pair (rotary_dim // 2 = 4); got 2.",
    ),
    (
        with_entry(LONGROPE, ("original_max_position_embeddings",), 4096.5),
        ValueError,
        f"`original_max_position_embeddings` must be {INT}; got 4096.5 (config).",
    ),
    (
        {"hidden_size": 100, "num_attention_heads": 3},
        ValueError,
        "`hidden_size` must be a multiple of num_attention_heads (3) when head_dim is absent",
    ),
    (
        {"hidden_size": 96, "num_attention_heads": "3"},
        TypeError,
        f"`num_attention_heads` must be {INT}; got '3' (config).",
    ),
    (
        {"head_dim": 64, "rope_parameters": {"rope_type": "yarn", "factor": 2.0}},
        ValueError,
        "`config` must give original_max_position_embeddings or max_position_embeddings",
    ),
    (
        {"head_dim": 64, "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 64}},
        ValueError,
        "`factor` must be given for rope_type 'yarn' (or max_position_embeddings)",
    ),
    (
        {"text_config": {"head_dim": "64"}},
        TypeError,
        f"`head_dim` must be {INT}; got '64' (config.text_config).",
    ),
    (
        {"head_dim": 64, "layer_types": ["full"], "rope_parameters": {"full": {"rope_theta": 0}}},
        ValueError,
        f"`rope_theta` must be {BASE}; got 0 (config.rope_parameters.full).",
    ),
]


ELSEWHERE += [
    (  # a reported reproducer: a ZeroDivisionError in YaRN's default factor
        {"head_dim": 128, "max_position_embeddings": 0, "rope_scaling": {"rope_type": "yarn"}},
        ValueError,
        f"`max_position_embeddings` must be {INT}; got 0 (config).",
    ),
    (  # a mapping is a layer's parameters only under a declared layer type, as in HF
        with_entry(YARN, (*P, "attention_factor"), {}),
        TypeError,
        f"`attention_factor` must be {POSITIVE}; got {{}} (config.rope_parameters).",
    ),
    (with_entry(YARN, ("layer_types",), "full"), TypeError, "`layer_types` must be a list of"),
]


@pytest.mark.parametrize(("config", "error", "message"), ELSEWHERE)
def test_other_keys_and_missing_keys(config, error, message):
    layer = "full" if "layer_types" in config else None
    with pytest.raises(error, match=re.escape(message)):
        rr.RopeSpec.from_hf(config, layer_type=layer)


def test_a_config_that_is_not_a_mapping_is_a_type_error():
    # a str or os.PathLike is a path (tests/test_from_hf_path.py); bytes are not
    for config in (None, b"{}", b"config.json", 5, [("head_dim", 64)]):
        with pytest.raises(TypeError, match=re.escape("`config` must be a config mapping")):
            rr.RopeSpec.from_hf(config)


# (path, value, field getter, expected field value): values that must be read as written.
READ = [
    (("head_dim",), 128.0, lambda s: (s.head_dim, type(s.head_dim)), (128, int)),
    (("max_position_embeddings",), 8192.0, lambda s: s.scaling.factor, 4.0),
    (
        (*P, "original_max_position_embeddings"),
        2048.0,
        lambda s: s.scaling.original_max_position,
        2048,
    ),
    ((*P, "rope_theta"), 500000, lambda s: s.base, 500000.0),
    ((*P, "rope_theta"), None, lambda s: s.base, 10000.0),  # None (JSON null) is absent
    ((*P, "factor"), None, lambda s: s.scaling.factor, 16384 / 4096),  # HF's default factor
    ((*P, "beta_fast"), None, lambda s: s.scaling.beta_fast, 32.0),
    ((*P, "beta_fast"), 8, lambda s: s.scaling.beta_fast, 8.0),
    ((*P, "mscale"), 0, lambda s: s.scaling.mscale, 0.0),  # 0 is a value, not "absent"
    ((*P, "truncate"), False, lambda s: s.scaling.truncate, False),
    ((*P, "partial_rotary_factor"), 0.5, lambda s: s.rotary_dim, 32),
    ((*P, "partial_rotary_factor"), 1, lambda s: s.rotary_dim, 64),
    ((*P, "mrope_section"), [8, 12, 12], lambda s: s.sections, (8, 12, 12)),
]


@pytest.mark.parametrize(("path", "value", "field", "expected"), READ)
def test_a_right_config_value_sets_its_field(path, value, field, expected):
    assert field(rr.RopeSpec.from_hf(with_entry(YARN, path, value))) == expected


def test_top_level_rope_theta_is_read_when_the_parameters_have_none():
    config = with_entry(YARN, (*P, "rope_theta"), None)
    config["rope_theta"] = 1e6
    assert rr.RopeSpec.from_hf(config).base == 1e6
    config["rope_theta"] = 1  # not greater than 1: refused, not replaced by a default
    with pytest.raises(ValueError, match=re.escape("`rope_theta` must be a finite real number")):
        rr.RopeSpec.from_hf(config)


# --- the rope_type table: a new type is its rule class plus one row ----------------------


@dataclass(frozen=True)
class _Halving:
    """A toy rule, written as docs/variants/index.md ("Adding a rule") says: theta_j / s."""

    divisor: float
    length_dependent: ClassVar[bool] = False

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return np.asarray(inv_freq, dtype=np.float64) / self.divisor

    def attention_factor(self, *, seq_len):
        return 1.0


def _read_halving(inputs):
    return _Halving(inputs.given("toy_divisor", inputs.params.real("toy_divisor", above=0.0)))


def _write_halving(rule, spec):
    return {"rope_type": "toy_halving", "toy_divisor": rule.divisor}


@pytest.fixture
def toy_row():
    from rope_ref._config.hf_rules import HF_RULES, HfRule, register_rule

    row = HfRule(
        "toy_halving",
        _Halving,
        _read_halving,
        _write_halving,
        aliases=("toy_legacy",),
        keys=("toy_divisor",),
    )
    register_rule(row)
    try:
        yield row
    finally:
        del HF_RULES["toy_halving"]


def test_a_rule_registered_as_documented_round_trips_through_from_hf_and_to_hf(toy_row):
    params = {"rope_type": "toy_halving", "rope_theta": 100.0, "toy_divisor": 3.0}
    spec = rr.RopeSpec.from_hf({"head_dim": 8, "rope_parameters": params}, strict=True)
    assert spec.scaling == _Halving(3.0)
    expected = [100.0 ** (-2 * j / 8) / 3.0 for j in range(4)]
    np.testing.assert_allclose(rr.inv_freq(spec), expected, rtol=4 * 2.0**-52)
    written = spec.to_hf()
    assert written["rope_parameters"] == params
    assert rr.RopeSpec.from_hf(written, strict=True) == spec
    legacy_params = {k: v for k, v in params.items() if k != "rope_type"}
    legacy = {"head_dim": 8, "rope_scaling": {**legacy_params, "type": "toy_legacy"}}
    assert rr.RopeSpec.from_hf(legacy, strict=True) == spec


def test_a_registered_rule_reads_its_missing_key_as_an_error_naming_it(toy_row):
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "toy_halving"}}
    with pytest.raises(ValueError, match="toy_divisor"):
        rr.RopeSpec.from_hf(config)


def test_a_type_cannot_be_registered_twice(toy_row):
    from rope_ref._config.hf_rules import HfRule, register_rule

    with pytest.raises(ValueError, match="'toy_legacy'"):
        register_rule(HfRule("toy_other", None, _read_halving, aliases=("toy_legacy",)))


def test_rows_that_take_the_original_length_write_it():
    from rope_ref._config.hf_rules import HF_RULES

    rules = {
        "linear": rr.scaling.Linear(2.0),
        "dynamic": rr.scaling.DynamicNTK(2.0, max_position=64),
        "yarn": rr.scaling.YaRN(4.0, original_max_position=64),
        "longrope": rr.scaling.LongRoPE([1.0] * 4, [2.0] * 4, 64, factor=4.0),
        "llama3": rr.scaling.Llama3(8.0, 64),
    }
    for rope_type, rule in rules.items():
        row = HF_RULES[rope_type]
        written = rr.RopeSpec(head_dim=8, scaling=rule).to_hf()["rope_parameters"]
        assert isinstance(written, dict)
        assert written["rope_type"] == rope_type
        assert ("original_max_position_embeddings" in written) == row.needs_original, rope_type


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8}


@pytest.mark.parametrize("strict", ["yes", 1, None])
def test_from_hf_strict_must_be_a_bool(strict: object) -> None:
    """`strict` is True or False; "yes" used to be read as True without a word."""
    with pytest.raises(TypeError, match="`strict` must be True or False"):
        rr.RopeSpec.from_hf(LLAMA, strict=strict)
    with pytest.raises(TypeError, match="`strict` must be True or False"):
        rr.RopeSpec.from_hf_layers(LLAMA | {"num_hidden_layers": 2}, strict=strict)


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text"])
def test_a_layer_count_past_the_limit_is_refused(model_type: str) -> None:
    """``num_hidden_layers`` above 2**20 is a ValueError, not a MemoryError or a hang."""
    config = LLAMA | {"model_type": model_type, "head_dim": 8, "num_hidden_layers": 2**40}
    for read in (rr.RopeSpec.from_hf, rr.RopeSpec.from_hf_layers):
        with pytest.raises(ValueError, match=r"`num_hidden_layers` must be at most 2\*\*20"):
            read(config)
    layers = rr.RopeSpec.from_hf_layers(config | {"num_hidden_layers": 3})
    assert [spec.head_dim if spec else None for spec in layers] == [8, 8, 8]
