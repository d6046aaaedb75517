"""Typed reading of Hugging Face configs: every value checked, every error naming its key.

A config value is absent when its key is missing or holds None (JSON ``null``); then the
caller's default applies. Any other value must have the documented type: 0, ``""``,
``False`` and strings of numbers are errors naming the key and where it was read
(``config``, ``config.rope_parameters``, ...), never a reason to fall back to a default
or to convert. Integers may be written as integral floats (``4096.0``: JSON does not
distinguish them); a fractional value for an integer key is an error, never truncated.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

__all__ = ["ConfigReader"]


def _as_float(value: numbers.Real) -> float:
    """`value` as a float; infinity for an integer beyond the float range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


class ConfigReader:
    """Checked read access to a config.json mapping or a transformers config object.

    Parameters
    ----------
    config : mapping or object
        A dict (config.json) or an object whose attributes are the keys.
    where : str
        How error messages name the config, e.g. ``"config.rope_parameters"``.
    """

    def __init__(self, config: object, where: str = "config") -> None:
        if not isinstance(config, Mapping) and (
            config is None
            or isinstance(config, str | bytes | numbers.Number | Sequence)
            or not hasattr(config, "__dict__")
        ):
            msg = f"`{where}` must be a config mapping or a transformers config; got {config!r}."
            raise TypeError(msg)
        self.config = config
        self.where = where

    def raw(self, key: str) -> Any:
        """The value of `key` as stored (None when absent)."""
        if isinstance(self.config, Mapping):
            return self.config.get(key)
        return getattr(self.config, key, None)

    def has(self, key: str) -> bool:
        """Whether `key` holds a value (not absent, not None)."""
        return self.raw(key) is not None

    def fail(self, key: str, requirement: str, value: object, error: type[Exception]) -> NoReturn:
        """Raise `error`: "`key` must be <requirement>; got <value> (<where>)."."""
        msg = f"`{key}` must be {requirement}; got {value!r} ({self.where})."
        raise error(msg)

    def integer(self, key: str, *, minimum: int = 1) -> int | None:
        """An integer from `minimum` to 2**53 (an integral float is accepted), or None.

        Lengths and sizes are used as float64 too, exact up to 2**53.
        """
        value = self.raw(key)
        if value is None:
            return None
        requirement = f"an integer from {minimum} to 2**53"
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.fail(key, requirement, value, TypeError)
        if isinstance(value, numbers.Integral):
            result = int(value)
        else:
            number = _as_float(value)
            if not (math.isfinite(number) and number.is_integer()):
                self.fail(key, requirement, value, ValueError)
            result = int(number)
        if not minimum <= result <= 2**53:
            self.fail(key, requirement, value, ValueError)
        return result

    def real(
        self,
        key: str,
        *,
        above: float | None = None,
        at_least: float | None = None,
        at_most: float | None = None,
    ) -> float | None:
        """A finite real number within the bounds given, or None."""
        value = self.raw(key)
        if value is None:
            return None
        bounds = [
            f"{words} {bound:g}"
            for words, bound in (
                ("greater than", above),
                ("at least", at_least),
                ("at most", at_most),
            )
            if bound is not None
        ]
        requirement = " ".join(["a finite real number", " and ".join(bounds)]).strip()
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.fail(key, requirement, value, TypeError)
        number = _as_float(value)
        if (
            not math.isfinite(number)
            or (above is not None and number <= above)
            or (at_least is not None and number < at_least)
            or (at_most is not None and number > at_most)
        ):
            self.fail(key, requirement, value, ValueError)
        return number

    def flag(self, key: str) -> bool | None:
        """True or False (not 0/1, not a string), or None."""
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy.bool_ too
            self.fail(key, "true or false", value, TypeError)
        return bool(value)

    def string(self, key: str) -> str | None:
        """A string, or None."""
        value = self.raw(key)
        if value is not None and not isinstance(value, str):
            self.fail(key, "a string", value, TypeError)
        return value

    def strings(self, key: str) -> tuple[str, ...] | None:
        """A list of strings (possibly empty), or None."""
        value = self.raw(key)
        if value is None:
            return None
        if (
            isinstance(value, str | bytes)
            or not isinstance(value, Sequence)
            or not all(isinstance(item, str) for item in value)
        ):
            self.fail(key, "a list of strings", value, TypeError)
        return tuple(value)

    def reals(self, key: str) -> tuple[float, ...] | None:
        """A non-empty list of finite positive real numbers, or None."""
        value = self.raw(key)
        if value is None:
            return None
        requirement = "a non-empty list of finite positive real numbers"
        items = self._items(key, value, requirement)
        for item in items:
            if isinstance(item, bool) or not isinstance(item, numbers.Real):
                self.fail(key, requirement, value, TypeError)
            if not (math.isfinite(_as_float(item)) and float(item) > 0.0):
                self.fail(key, requirement, value, ValueError)
        return tuple(float(item) for item in items)

    def integers(self, key: str) -> tuple[int, ...] | None:
        """A non-empty list of positive integers, or None."""
        value = self.raw(key)
        if value is None:
            return None
        requirement = "a non-empty list of positive integers"
        items = self._items(key, value, requirement)
        for item in items:
            if isinstance(item, bool) or not isinstance(item, numbers.Integral):
                self.fail(key, requirement, value, TypeError)
            if item < 1:
                self.fail(key, requirement, value, ValueError)
        return tuple(int(item) for item in items)

    def _items(self, key: str, value: Any, requirement: str) -> list[Any]:
        if hasattr(value, "tolist") and not isinstance(value, Sequence):
            value = value.tolist()  # NumPy arrays and tensors read as lists
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            self.fail(key, requirement, value, TypeError)
        items = list(value)
        if not items:
            self.fail(key, requirement, value, ValueError)
        return items

    def section(self, key: str) -> ConfigReader | None:
        """The nested config under `key` (a mapping or config object), or None."""
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, Mapping) and (
            isinstance(value, str | bytes | Sequence) or not hasattr(value, "__dict__")
        ):
            self.fail(key, "a mapping", value, TypeError)
        return ConfigReader(value, f"{self.where}.{key}")
