"""The HF ``rope_type`` table: one row per type, as transformers' ``ROPE_INIT_FUNCTIONS``.

Each row gives the rule class a type reads into, its reader (HF parameters -> rule), its
writer (rule -> HF parameters), the legacy names HF maps to it and whether it takes
``original_max_position_embeddings``. `RopeSpec.from_hf` and ``to_hf`` read this table and
nothing else about rope types; a new type is its rule class plus one row (`register_rule`;
docs/variants/index.md, "Adding a rule").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_values import hf_integer, or_default
from rope_ref._core.spec import RopeSpec, ScalingRule
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, Proportional, YaRN

__all__ = [
    "HF_RULES",
    "HfRule",
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


#: Reads a rule (None: no scaling) from a config.
Reader = Callable[[RuleInputs], ScalingRule | None]
#: Writes a rule's HF parameters (``rope_type`` included) for a spec.
Writer = Callable[[Any, RopeSpec], dict[str, Any]]


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


def _read_dynamic(inputs: RuleInputs) -> DynamicNTK:
    if inputs.max_position is None:
        requirement = "given for rope_type 'dynamic'"
        inputs.cfg.fail("max_position_embeddings", requirement, None, ValueError)
    factor = inputs.given("factor", inputs.factor)
    return DynamicNTK(factor, max_position=inputs.max_position)


def _write_dynamic(rule: DynamicNTK, spec: RopeSpec) -> dict[str, Any]:
    return {"rope_type": "dynamic", "factor": rule.factor}


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


#: Every HF rope_type, in the order error messages list them.
HF_RULES: dict[str, HfRule] = {
    row.rope_type: row
    for row in (
        HfRule("default", None, _no_rule, aliases=("mrope",)),
        HfRule("linear", Linear, _read_linear, _write_linear),
        HfRule("dynamic", DynamicNTK, _read_dynamic, _write_dynamic),
        HfRule("yarn", YaRN, _read_yarn, _write_yarn, needs_original=True),
        HfRule("longrope", LongRoPE, _read_longrope, _write_longrope, ("su",), needs_original=True),
        HfRule("llama3", Llama3, _read_llama3, _write_llama3, needs_original=True),
        HfRule("proportional", Proportional, _read_proportional, _write_proportional),
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
