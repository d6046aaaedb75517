"""The HF ``rope_type`` table: one row per type, as transformers' ``ROPE_INIT_FUNCTIONS``.

Each row gives the rule class a type reads into, its reader (HF parameters -> rule), its
writer (rule -> HF parameters), the legacy names HF maps to it and whether it takes
``original_max_position_embeddings``. `RopeSpec.from_hf` and ``to_hf`` read this table and
nothing else about rope types; a new type is its rule class plus one row (`register_rule`;
docs/variants/index.md, "Adding a rule"). A row also says how to draw its rules in
property tests (`draw`), so that `rope_ref.testing.strategies.scaling_rules` draws every
type in the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_values import hf_integer, or_default
from rope_ref._core.spec import RopeSpec, ScalingRule
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

__all__ = [
    "HF_RULES",
    "HfRule",
    "RuleDraws",
    "RuleInputs",
    "register_rule",
    "row_of_rule",
    "row_of_type",
    "rule_keys",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RuleInputs:
    """What a reader reads a rule from: the layer's parameters, the config, read values.

    `factor` and `max_position` are read (and checked) for every type but ``"default"``,
    before the reader runs, so that every value is checked before any is found missing.
    """

    rope_type: str
    #: The parameters of the layer's RoPE (``rope_parameters``, or its layer type's entry).
    params: ConfigReader
    #: The top-level parameters (HF reads YaRN's ``truncate`` there).
    top: ConfigReader
    #: The (text) config.
    cfg: ConfigReader
    #: ``partial_rotary_factor`` as read.
    fraction: float
    factor: float | None
    max_position: int | None

    def given(self, key: str, value: T | None) -> T:
        """`value`, or ValueError naming `key` when it is absent (None)."""
        if value is None:
            self.params.fail(key, f"given for rope_type {self.rope_type!r}", None, ValueError)
        return value

    def original(self) -> int:
        """HF: a top-level value wins, then the rope parameters, then max_position_embeddings."""
        for value in (
            self.cfg.integer("original_max_position_embeddings"),
            self.params.integer("original_max_position_embeddings"),
            self.cfg.integer("max_position_embeddings"),
        ):
            if value is not None:
                return int(value)
        msg = (
            "`config` must give original_max_position_embeddings or max_position_embeddings "
            f"({self.cfg.where})."
        )
        raise ValueError(msg)


@dataclass(frozen=True)
class RuleDraws:
    """What a row's `draw` builds its strategy from (Hypothesis is imported by the caller).

    `draw` returns a strategy of rules, or of functions of the number of pairs that
    return a rule (for a rule whose lists have one entry per pair, as LongRoPE's).
    """

    #: ``hypothesis.strategies``.
    st: Any
    #: Scaling factors (at least 1).
    factors: Any
    #: Context lengths (an original or maximum length).
    lengths: Any


#: Reads a rule (None: no scaling) from a config.
Reader = Callable[[RuleInputs], ScalingRule | None]
#: Writes a rule's HF parameters (``rope_type`` included) for a spec.
Writer = Callable[[Any, RopeSpec], dict[str, Any]]
#: A Hypothesis strategy of the type's rules, built from `RuleDraws`.
Drawer = Callable[[RuleDraws], Any]


@dataclass(frozen=True)
class HfRule:
    """One HF ``rope_type``: its rule class, reader, writer and facts."""

    rope_type: str
    #: The class `write` takes (None: the type has no rule, as ``"default"``).
    rule: type | None
    read: Reader
    write: Writer | None = None
    #: Legacy type names HF maps to this one.
    aliases: tuple[str, ...] = ()
    #: Whether the type takes ``original_max_position_embeddings`` (HF's standardize step).
    needs_original: bool = False
    #: Parameter keys of its own, beyond HF's common ones (`hf_keys.PARAMETER_KEYS`), so
    #: that from_hf does not warn of them as unknown.
    keys: tuple[str, ...] = ()
    #: How property tests draw its rules (None: not drawn).
    draw: Drawer | None = None


def original_of(rule: Llama3 | YaRN | LongRoPE) -> int:
    """The rule's original length as HF's integer ``original_max_position_embeddings``."""
    return hf_integer(
        "spec.scaling.original_max_position",
        rule.original_max_position,
        "original_max_position_embeddings",
    )


def _no_rule(inputs: RuleInputs) -> None:
    return None


def _read_linear(inputs: RuleInputs) -> Linear:
    return Linear(inputs.given("factor", inputs.factor))


def _write_linear(rule: Linear, spec: RopeSpec) -> dict[str, Any]:
    return {"rope_type": "linear", "factor": rule.factor}


def _draw_linear(d: RuleDraws) -> Any:
    return d.st.builds(Linear, d.factors)


def _read_dynamic(inputs: RuleInputs) -> DynamicNTK | NTKAware:
    alpha = inputs.params.real("alpha", above=0.0)
    if alpha is not None:  # Hunyuan's NTK alpha (vLLM reads it before factor)
        return NTKAware(alpha)
    if inputs.max_position is None:
        requirement = "given for rope_type 'dynamic'"
        inputs.cfg.fail("max_position_embeddings", requirement, None, ValueError)
    factor = inputs.given("factor", inputs.factor)
    return DynamicNTK(factor, max_position=inputs.max_position)


def _write_dynamic(rule: DynamicNTK, spec: RopeSpec) -> dict[str, Any]:
    return {"rope_type": "dynamic", "factor": rule.factor}


def _draw_dynamic(d: RuleDraws) -> Any:
    return d.st.one_of(
        d.st.builds(DynamicNTK, d.factors, max_position=d.lengths),
        d.st.builds(NTKAware, d.factors),  # what the type reads with Hunyuan's `alpha`
    )


def _read_ntk(inputs: RuleInputs) -> NTKScaling:
    mixed_b = inputs.params.real("mixed_b", above=0.0)
    return NTKScaling(inputs.given("factor", inputs.factor), mixed_b=mixed_b)


def _write_ntk(rule: NTKScaling, spec: RopeSpec) -> dict[str, Any]:
    params: dict[str, Any] = {"rope_type": "ntk", "factor": rule.factor}
    if rule.mixed_b is not None:
        params["mixed_b"] = rule.mixed_b
    return params


def _draw_ntk(d: RuleDraws) -> Any:
    mixed_b = d.st.one_of(d.st.none(), d.st.sampled_from([0.5, 1.0, 2.0]), d.st.floats(0.1, 4.0))
    return d.st.builds(NTKScaling, d.factors, mixed_b=mixed_b)


def _read_yarn(inputs: RuleInputs) -> YaRN:
    params = inputs.params
    attention_factor = params.real("attention_factor", above=0.0)
    fields = {
        "beta_fast": or_default(params.real("beta_fast", above=0.0), 32.0),
        "beta_slow": or_default(params.real("beta_slow", above=0.0), 1.0),
        "mscale": params.real("mscale"),
        "mscale_all_dim": params.real("mscale_all_dim"),
        "truncate": or_default(inputs.top.flag("truncate"), True),  # HF reads the top level
    }
    original = inputs.original()
    factor = inputs.factor
    if factor is None and inputs.max_position is not None:
        factor = inputs.max_position / original  # HF's default
    if factor is None:
        requirement = "given for rope_type 'yarn' (or max_position_embeddings)"
        params.fail("factor", requirement, None, ValueError)
    return YaRN(factor, original, attention_factor=attention_factor, **fields)


def _write_yarn(rule: YaRN, spec: RopeSpec) -> dict[str, Any]:
    if rule.ext_factor != 1.0:
        msg = (
            "`spec.scaling` must be HF's YaRN, with ext_factor=1 (HF has no partial YaRN, "
            f"ggml's ext_factor); got ext_factor={rule.ext_factor!r}."
        )
        raise ValueError(msg)
    params: dict[str, Any] = {
        "rope_type": "yarn",
        "factor": rule.factor,
        "original_max_position_embeddings": original_of(rule),
        "beta_fast": rule.beta_fast,
        "beta_slow": rule.beta_slow,
        "truncate": rule.truncate,
    }
    optional = {
        "mscale": rule.mscale,
        "mscale_all_dim": rule.mscale_all_dim,
        "attention_factor": rule.attention_factor_value,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return params


def _draw_yarn(d: RuleDraws) -> Any:
    partial = d.st.one_of(d.st.just(1.0), d.st.sampled_from([0.5]), d.st.floats(0.01, 1.0))
    return d.st.builds(
        YaRN,
        d.factors,
        original_max_position=d.lengths,
        truncate=d.st.booleans(),
        ext_factor=partial,  # ggml's partial YaRN below 1
    )


def _read_longrope(inputs: RuleInputs) -> LongRoPE:
    params = inputs.params
    attention_factor = params.real("attention_factor", above=0.0)
    short, long = params.reals("short_factor"), params.reals("long_factor")
    original = inputs.original()
    max_position = inputs.max_position
    factor = or_default(inputs.factor, None if max_position is None else max_position / original)
    return LongRoPE(
        inputs.given("short_factor", short),
        inputs.given("long_factor", long),
        original,
        factor=factor,
        attention_factor=attention_factor,
    )


def _write_longrope(rule: LongRoPE, spec: RopeSpec) -> dict[str, Any]:
    params: dict[str, Any] = {
        "rope_type": "longrope",
        "short_factor": list(rule.short_factor),
        "long_factor": list(rule.long_factor),
        "original_max_position_embeddings": original_of(rule),
    }
    if rule.factor is not None:
        params["factor"] = rule.factor
    if rule.attention_factor_value is not None or rule.factor is None:
        # Without a factor HF would derive one from max_position_embeddings: pin the value.
        params["attention_factor"] = rule.attention_factor(seq_len=None)
    return params


def _draw_longrope(d: RuleDraws) -> Any:
    def lists(original: int, seed: int) -> Callable[[int], LongRoPE]:
        def build(n_pairs: int) -> LongRoPE:
            rng = np.random.default_rng(seed)
            short = rng.uniform(1.0, 4.0, n_pairs).tolist()
            long = rng.uniform(1.0, 64.0, n_pairs).tolist()
            return LongRoPE(short, long, original_max_position=original)

        return build

    return d.st.builds(lists, d.lengths, d.st.integers(0, 2**32 - 1))


def _read_llama3(inputs: RuleInputs) -> Llama3:
    params = inputs.params
    low = or_default(params.real("low_freq_factor", above=0.0), 1.0)
    high = or_default(params.real("high_freq_factor", above=0.0), 4.0)
    original = inputs.original()
    factor = inputs.given("factor", inputs.factor)
    return Llama3(factor, original, low_freq_factor=low, high_freq_factor=high)


def _write_llama3(rule: Llama3, spec: RopeSpec) -> dict[str, Any]:
    return {
        "rope_type": "llama3",
        "factor": rule.factor,
        "original_max_position_embeddings": original_of(rule),
        "low_freq_factor": rule.low_freq_factor,
        "high_freq_factor": rule.high_freq_factor,
    }


def _draw_llama3(d: RuleDraws) -> Any:
    def build(factor: float, original: int, low: float, width: float) -> Llama3:
        return Llama3(factor, original, low_freq_factor=low, high_freq_factor=low + width)

    return d.st.builds(build, d.factors, d.lengths, d.st.floats(0.5, 2.0), d.st.floats(0.5, 6.0))


def _read_proportional(inputs: RuleInputs) -> Proportional:
    return Proportional(inputs.fraction, factor=or_default(inputs.factor, 1.0))


def _write_proportional(rule: Proportional, spec: RopeSpec) -> dict[str, Any]:
    if spec._rotary_dim != spec.head_dim:
        msg = f"`spec` must rotate the whole head with Proportional; got {spec!r}."
        raise ValueError(msg)
    return {
        "rope_type": "proportional",
        "factor": rule.factor,
        "partial_rotary_factor": rule.partial_rotary_factor,
    }


def _draw_proportional(d: RuleDraws) -> Any:
    return d.st.builds(Proportional, d.st.sampled_from([0.25, 0.5, 0.75, 1.0]), d.factors)


#: Every HF rope_type, in the order error messages list them.
HF_RULES: dict[str, HfRule] = {
    row.rope_type: row
    for row in (
        HfRule("default", None, _no_rule, aliases=("mrope",)),
        HfRule("linear", Linear, _read_linear, _write_linear, draw=_draw_linear),
        HfRule(
            "dynamic",
            DynamicNTK,
            _read_dynamic,
            _write_dynamic,
            keys=("alpha",),
            draw=_draw_dynamic,
        ),
        HfRule("yarn", YaRN, _read_yarn, _write_yarn, needs_original=True, draw=_draw_yarn),
        HfRule(
            "longrope",
            LongRoPE,
            _read_longrope,
            _write_longrope,
            ("su",),
            needs_original=True,
            draw=_draw_longrope,
        ),
        HfRule(
            "llama3", Llama3, _read_llama3, _write_llama3, needs_original=True, draw=_draw_llama3
        ),
        HfRule(
            "proportional",
            Proportional,
            _read_proportional,
            _write_proportional,
            draw=_draw_proportional,
        ),
        # vLLM's own type (not in HF): get_rope reads it, as from_hf does.
        HfRule("ntk", NTKScaling, _read_ntk, _write_ntk, keys=("mixed_b",), draw=_draw_ntk),
        # Qwen-VL vision towers: a whole spec of their own, built by the reader of configs.
        HfRule("axial", None, _no_rule),
        # vLLM's openPangu and Bailing M-RoPE: plain frequencies, their own pair orders
        # (rope_ref._config.hf_mrope).
        HfRule("openpangu", None, _no_rule),
        HfRule("bailing_mrope", None, _no_rule),
    )
}


def register_rule(row: HfRule) -> None:
    """Add `row` to `HF_RULES` (ValueError if its type or an alias is taken).

    Examples
    --------
    >>> from rope_ref.scaling import Linear
    >>> register_rule(HfRule("linear", Linear, lambda inputs: None))
    Traceback (most recent call last):
    ...
    ValueError: `row.rope_type` must be a new HF rope_type; got 'linear'.
    """
    taken = {*HF_RULES, *(alias for known in HF_RULES.values() for alias in known.aliases)}
    for name, value in (("rope_type", row.rope_type), *(("aliases", a) for a in row.aliases)):
        if value in taken:
            msg = f"`row.{name}` must be a new HF rope_type; got {value!r}."
            raise ValueError(msg)
    HF_RULES[row.rope_type] = row


def row_of_type(rope_type: str) -> HfRule | None:
    """The row of `rope_type` or of a legacy alias of it, else None."""
    if rope_type in HF_RULES:
        return HF_RULES[rope_type]
    return next((row for row in HF_RULES.values() if rope_type in row.aliases), None)


def row_of_rule(rule: object) -> HfRule | None:
    """The first row whose class `rule` is an instance of and that has a writer, else None."""
    return next(
        (
            row
            for row in HF_RULES.values()
            if row.rule is not None and row.write is not None and isinstance(rule, row.rule)
        ),
        None,
    )


def rule_keys() -> frozenset[str]:
    """The parameter keys the rows add to HF's common ones."""
    return frozenset(key for row in HF_RULES.values() for key in row.keys)
