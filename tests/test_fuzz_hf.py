"""Fuzzing RopeSpec.from_hf: the intended spec, or an error naming a config key.

Configs are a YaRN config with up to three keys set to values drawn from a pool of wrong
and right ones (0, "", None, False, strings of numbers, fractions for integers, lists,
dicts, NaN, infinities, huge numbers) or any float, and wholly random nested dicts and
lists. The oracle reads each key by its documented type and decides validity by rules
written here (HF's reading of the keys, RoPE's need for whole pairs, float64's range), not
by rope_ref's constructors (tests/_fuzzing.py has the verdict): a wrong value must be an
error naming that key, right values must give the spec built from them with HF's
defaults.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rope_ref as rr
from tests._fuzzing import EXAMPLES, Invalid, call, check, invalid, named

BAD = object()  # a key's value that its type refuses
MAX_HEAD_DIM = 65_536  # the documented limit (docs/api.md, Limits)

CONFIG: dict[str, Any] = {
    "head_dim": 64,
    "max_position_embeddings": 16384,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
    },
}
# key: (in rope_parameters?, kind). Kinds: int, base (> 1), positive, real, fraction, flag.
KEYS = {
    "head_dim": (False, "int"),
    "max_position_embeddings": (False, "int"),
    "rope_theta": (True, "base"),
    "factor": (True, "positive"),
    "original_max_position_embeddings": (True, "int"),
    "beta_fast": (True, "positive"),
    "beta_slow": (True, "positive"),
    "mscale": (True, "real"),
    "mscale_all_dim": (True, "real"),
    "attention_factor": (True, "positive"),
    "truncate": (True, "flag"),
    "partial_rotary_factor": (True, "fraction"),
}
VALUES = [
    None, 0, 0.0, -1, 1, 2, 3, 7, 64, 64.0, 96, 128, 4096, 4096.0, 128.7, 0.5, 1.5, 1e308, 131072,
    2**53 + 1, 10**400, math.nan, math.inf, -math.inf, True, False, "", "128", "2", "1e6",
    [1e4], [], {}, {"a": 1}, "yarn", np.float64(2.5), np.int64(32),
]  # fmt: skip


def key_value(kind: str, value: Any) -> Any:
    """The value `kind` reads from `value` (None for absent), or BAD."""
    if value is None:
        return None
    if kind == "flag":
        return value if isinstance(value, bool) else BAD
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return BAD
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if kind == "int":
        if isinstance(value, int | np.integer):
            ok = 1 <= int(value) <= 2**53
        else:
            ok = math.isfinite(number) and number.is_integer() and 1 <= number <= 2**53
        return int(number if not isinstance(value, int | np.integer) else value) if ok else BAD
    low_ok = {
        "base": number > 1, "positive": number > 0, "real": True, "fraction": 0 < number <= 1
    }[kind]  # fmt: skip
    return number if math.isfinite(number) and low_ok else BAD


def yarn_mscale(factor: float, mscale: float) -> float:
    """HF's ``get_mscale``: 0.1 * mscale * ln(factor) + 1 for factor > 1, else 1."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1.0 else 1.0


def intended_spec(values: dict[str, Any]) -> Any:
    """The spec the config means (fields from the values read, HF's defaults), or invalid."""
    read = {k: key_value(KEYS[k][1], v) for k, v in values.items()}
    bad = {k for k, v in read.items() if v is BAD}  # every problem found: any may be named
    get = {**dict.fromkeys(KEYS), **CONFIG, **CONFIG["rope_parameters"], **read}.get
    head_dim, fraction = get("head_dim"), get("partial_rotary_factor") or 1.0
    if head_dim is None:
        bad |= {"config", "head_dim"}  # no head size at all
    elif head_dim is not BAD and head_dim > MAX_HEAD_DIM:
        bad.add("head_dim")
    elif head_dim is not BAD and fraction is not BAD:
        rotary_dim = int(head_dim * fraction)  # HF's rule
        if rotary_dim < 2 or rotary_dim % 2:  # RoPE rotates whole pairs
            bad |= {"partial_rotary_factor", "head_dim"}
    original = get("original_max_position_embeddings") or get("max_position_embeddings")
    if original is None:
        bad |= {"config", "original_max_position_embeddings", "max_position_embeddings"}
    factor = get("factor")
    longest = get("max_position_embeddings")
    if factor is None and isinstance(longest, int) and isinstance(original, int):
        factor = longest / original
    if factor is None:
        bad.add("factor")
    elif factor is not BAD and original is not BAD and not math.isfinite(1.0 / factor):
        bad.add("factor")  # inverse frequencies are divided by it
    mscale, mscale_all_dim = get("mscale"), get("mscale_all_dim")
    if bad:
        return Invalid(bad)
    if get("attention_factor") is None and mscale and mscale_all_dim:
        bottom = yarn_mscale(factor, mscale_all_dim)
        ratio = yarn_mscale(factor, mscale) / bottom if bottom else math.inf
        if not (math.isfinite(ratio) and ratio > 0):  # the attention factor they give
            return invalid("mscale", "mscale_all_dim")
    rule = rr.scaling.YaRN(
        factor,
        original,
        beta_fast=32.0 if get("beta_fast") is None else get("beta_fast"),
        beta_slow=1.0 if get("beta_slow") is None else get("beta_slow"),
        mscale=mscale,
        mscale_all_dim=mscale_all_dim,
        attention_factor=get("attention_factor"),
        truncate=True if get("truncate") is None else get("truncate"),
    )
    base = 10000.0 if get("rope_theta") is None else get("rope_theta")
    return rr.RopeSpec(head_dim, rotary_dim=rotary_dim, base=base, scaling=rule)


@settings(max_examples=2 * EXAMPLES)
@example(entries={"head_dim": 131072})  # past the head_dim limit
@example(entries={"head_dim": 7})  # an odd rotary dimension
@example(entries={"head_dim": 3, "partial_rotary_factor": 0.5})  # one feature: no pair
@example(entries={"mscale": 1e308, "mscale_all_dim": 1.0})  # an infinite attention factor
@given(
    entries=st.dictionaries(
        st.sampled_from(sorted(KEYS)), st.sampled_from(VALUES) | st.floats(), max_size=3
    )
)
def test_from_hf_fuzz(entries):
    config = copy.deepcopy(CONFIG)
    for key, value in entries.items():
        (config["rope_parameters"] if KEYS[key][0] else config)[key] = value
    expected = intended_spec(entries)
    result = call(rr.RopeSpec.from_hf, config)
    check(result, expected)
    if not isinstance(expected, Invalid):
        assert result == expected


WILD_KEYS = {"config", "rope_parameters", "rope_scaling", "text_config", "rope_type", "type"}
WILD_KEYS |= {"layer_type", "hidden_size", "num_attention_heads"}


@settings(max_examples=EXAMPLES)
@given(
    config=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(sorted(set(KEYS) | WILD_KEYS)),
                inner,
                max_size=4,
            )
        ),
        max_leaves=8,
    )
)
@pytest.mark.filterwarnings("ignore:.*has an unknown key:UserWarning")
def test_from_hf_wild_configs(config):
    result = call(rr.RopeSpec.from_hf, config)
    if isinstance(result, Exception):
        assert named(result) & (set(KEYS) | WILD_KEYS), result
    else:
        assert isinstance(result, rr.RopeSpec)
