"""What a scaling rule says about itself: its class attributes, read with their defaults.

A rule class may state two facts that the kernels ask for instead of listing rule types:

- ``length_dependent`` (class attribute, bool): whether its frequencies or attention factor
  change with ``seq_len``. A rule that does not say is taken to depend on it (its tables are
  then built per length: slower, never wrong).
- ``exact_form`` (class attribute, str): the name of the closed formula ``backend="exact"``
  evaluates for it (one of `EXACT_FORMS`). Only the class's own statement counts: a subclass
  may change the formula, so it is evaluated from its float64 values unless it restates
  ``exact_form``. A rule without one is taken at its float64 values.
"""

from __future__ import annotations

__all__ = ["EXACT_FORMS", "exact_form", "is_length_dependent"]

#: The formulas `backend="exact"` knows, each written in `rope_ref.backends.exact.frequencies`.
EXACT_FORMS = frozenset(
    {"linear", "ntk", "ntk_scaling", "dynamic_ntk", "yarn", "llama3", "longrope", "proportional"}
)


def is_length_dependent(rule: object) -> bool:
    """Whether `rule`'s tables change with seq_len; True unless its class says otherwise.

    Examples
    --------
    >>> from rope_ref.scaling import DynamicNTK, Linear
    >>> is_length_dependent(Linear(2.0)), is_length_dependent(DynamicNTK(2.0, max_position=64))
    (False, True)
    >>> is_length_dependent(None)
    False
    """
    if rule is None:
        return False
    return bool(getattr(type(rule), "length_dependent", True))


def exact_form(rule: object) -> str | None:
    """The formula `rule`'s own class declares for ``backend="exact"``, else None.

    Examples
    --------
    >>> from rope_ref.scaling import Linear, YaRN
    >>> exact_form(YaRN(4.0, original_max_position=4096))
    'yarn'
    >>> class Halved(Linear):
    ...     pass
    >>> exact_form(Halved(2.0)) is None  # a subclass restates its formula, or has none
    True
    """
    form = vars(type(rule)).get("exact_form")
    return form if isinstance(form, str) and form in EXACT_FORMS else None
