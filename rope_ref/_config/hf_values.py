"""Small readings shared by both directions of the HF conversion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rope_ref._config.hf_reader import ConfigReader
from rope_ref._core.validation import check_int

__all__ = ["hf_integer", "keys_of", "or_default"]


def or_default(value: Any, default: Any) -> Any:
    """`value`, or `default` when it is None (absent); 0 and False are values."""
    return default if value is None else value


def keys_of(params: ConfigReader) -> list[str]:
    """The keys `params` holds (a mapping's keys or an object's attributes)."""
    config = params.config
    return list(config) if isinstance(config, Mapping) else list(vars(config))


def hf_integer(name: str, value: object, key: str) -> int:
    """`value` as the integer HF's reader accepts for `key` (1 to 2**53), or raise naming `name`.

    Integral floats (rules store integer-valued lengths as ints) are written as ints; a
    fractional length has no HF form, so it is an error rather than a config that
    `RopeSpec.from_hf` would refuse.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        msg = (
            f"`{name}` must be an integer for a HF config ({key} is an integer there); "
            f"got {value!r}."
        )
        raise ValueError(msg)
    result = check_int(name, value, minimum=1)
    if result > 2**53:
        msg = f"`{name}` must be at most 2**53 for a HF config ({key}); got {result}."
        raise ValueError(msg)
    return result
