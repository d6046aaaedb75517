"""Which of several keys giving one RoPE value wins, as HF's config classes decide.

``rope_theta`` and ``partial_rotary_factor`` may each be given in more than one place: the
RoPE parameters, the top level of the config, a family's legacy key (GPT-NeoX's
``rotary_emb_base`` and ``rotary_pct``). HF takes the RoPE parameters' value first. Most
config classes then read the top-level key; a class with legacy keys reads its legacy key
instead and never the top-level one (``GPTNeoXConfig.convert_rope_params_to_dict``), with
its own default when the legacy key is absent (``rotary_pct`` 0.25). A value given in a
config.json but never read by HF, or a ``partial_rotary_factor`` given twice with two
values, is warned about (an error under ``strict=True``), naming the value taken: a config
never silently means something other than what it says. (Two ``rope_theta`` values are
not: Gemma 3's sliding layers take their own base beside the config's.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from rope_ref._config.families import Family
from rope_ref._config.hf_reader import ConfigReader

__all__ = ["base_of", "fraction_of"]

#: Labels of a `default_theta` mapping by layer type (Gemma 3's "global" and "local").
_DEFAULT_THETA_LABELS = {"full_attention": "global", "sliding_attention": "local"}


def base_of(
    params: ConfigReader,
    cfg: ConfigReader,
    family: Family,
    layer_type: str | None,
    *,
    strict: bool,
) -> float:
    """``rope_theta`` of the parameters, the config or a legacy key, else the class default.

    The class default is read by layer type where a class keeps one per type (Gemma 3).
    """
    keys = _keys_in_order(params, cfg, "rope_theta", family.base_keys)
    default = cfg.raw("default_theta")
    default_reader = cfg
    if isinstance(default, Mapping):
        label = _DEFAULT_THETA_LABELS.get(layer_type or "", layer_type or "")
        default = default.get(layer_type) or default.get(label)
        default_reader = ConfigReader({"default_theta": default}, f"{cfg.where}.default_theta")
    fallback = default_reader.real("default_theta", above=1.0)
    default = 10000.0 if fallback is None else fallback
    value, _ = _taken(keys, lambda r, k: r.real(k, above=1.0), default, strict, every=False)
    return float(value)


def fraction_of(
    params: ConfigReader,
    cfg: ConfigReader,
    family: Family,
    *,
    zero_allowed: bool,
    strict: bool,
) -> tuple[float, ConfigReader | None]:
    """``partial_rotary_factor`` (parameters first, as HF), else a legacy key of the family.

    Returns the value and where it was read (None: absent, the whole head rotates).
    """
    bounds = {"at_least": 0.0} if zero_allowed else {"above": 0.0}
    keys = _keys_in_order(params, cfg, "partial_rotary_factor", family.fraction_keys)

    def read(reader: ConfigReader, key: str) -> float | None:
        return reader.real(key, at_most=1.0, **bounds)

    value, source = _taken(keys, read, family.fraction_default, strict, every=True)
    if source is None and family.fraction_default != 1.0:
        source = cfg  # the family's default is a partial rotation
    return value, source


def _keys_in_order(
    params: ConfigReader, cfg: ConfigReader, key: str, legacy: tuple[str, ...]
) -> list[tuple[ConfigReader, str, bool]]:
    """(reader, key, read by HF) in HF's order; keys HF never reads come last."""
    keys = [(params, key, True)]
    keys += [(cfg, name, True) for name in legacy]
    keys.append((cfg, key, not legacy))  # a class with legacy keys never reads this one
    return sorted(keys, key=lambda item: not item[2])  # stable: HF's order kept


def _taken(
    keys: list[tuple[ConfigReader, str, bool]],
    read: Callable[[ConfigReader, str], Any],
    default: Any,
    strict: bool,
    *,
    every: bool,
) -> tuple[Any, ConfigReader | None]:
    """The first value HF reads (else `default`); every given value is read and checked.

    A value of a config.json that is not taken is warned about when HF never reads its key,
    or, if `every`, whenever it differs from the value taken.
    """
    given = [(reader, key, used, read(reader, key)) for reader, key, used in keys]
    given = [item for item in given if item[3] is not None]
    taken = next((item for item in given if item[2]), None)
    value = default if taken is None else taken[3]
    for reader, key, used, other in given:
        if (
            _is(taken, reader, key)
            or other == value
            or (used and not every)
            or not isinstance(reader.config, Mapping)
        ):
            continue
        if taken is None:
            taken_text = f"absent here, so the default {value!r} applies"
        else:
            taken_text = f"it takes `{taken[1]}` = {value!r} ({taken[0].where})"
        if used:
            why = f"HF reads the RoPE parameters first: {taken_text}"
        else:
            legacy = " or ".join(f"`{k}`" for r, k, u in keys if u and r is not keys[0][0])
            why = f"HF reads {legacy} in its place for this model type; {taken_text}"
        problem = f"`{key}` = {other!r} ({reader.where}) is ignored: {why}."
        if strict:
            raise ValueError(problem)
        warnings.warn(problem, UserWarning, stacklevel=5)
    return value, None if taken is None else taken[0]


def _is(taken: tuple[Any, ...] | None, reader: ConfigReader, key: str) -> bool:
    """Whether `taken` was read from `key` of `reader`."""
    return taken is not None and taken[0] is reader and taken[1] == key
