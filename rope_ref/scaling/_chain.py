"""Scaling rules applied one after another."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import set_field

__all__ = ["Chain"]


@dataclass(frozen=True, init=False)
class Chain:
    r"""Several scaling rules in turn: each rescales what the previous one returned.

    Parameters
    ----------
    *rules : scaling rule
        Two or more rules (instances with ``inv_freq`` and ``attention_factor``, such as
        those of `rope_ref.scaling`), applied first to last.

    Raises
    ------
    TypeError
        If a rule is a class or lacks ``inv_freq``/``attention_factor``.
    ValueError
        If fewer than two rules are given.

    Notes
    -----
    The frequencies are :math:`\theta' = r_n(\dots r_1(\theta))` and the attention factor is
    the product of the rules' factors. A position rule composes with a frequency rule this
    way: dividing positions by :math:`c` is `Linear` (:math:`c`) on the frequencies, so
    litgpt's ``condense_ratio`` :math:`c` with its Llama 3 scaling is
    ``Chain(Llama3(...), Linear(c))`` (the angle :math:`(p / c)\,\theta'_j` equals
    :math:`p\,(\theta'_j / c)`; the two roundings differ by an ulp or so). The order
    matters where a rule reads the frequencies it is given: Llama 3 chooses its bands by
    wavelength, so ``Chain(Linear(c), Llama3(...))`` is a different RoPE.

    Examples
    --------
    >>> import rope_ref as rr
    >>> from rope_ref.scaling import AttentionScale, Chain, Linear
    >>> rule = Chain(Linear(4.0), AttentionScale(1.25))
    >>> spec = rr.RopeSpec(head_dim=4, scaling=rule)
    >>> rr.inv_freq(spec).tolist(), rr.attention_factor(spec)
    ([0.25, 0.0025], 1.25)
    >>> Chain(Linear(2.0))
    Traceback (most recent call last):
    ...
    ValueError: `rules` must hold at least two scaling rules; got 1.
    """

    #: Taken to depend on seq_len (what it wraps may): its tables are built per length.
    length_dependent: ClassVar[bool] = True

    rules: tuple[Any, ...]

    def __init__(self, *rules: object) -> None:
        if len(rules) < 2:
            msg = f"`rules` must hold at least two scaling rules; got {len(rules)}."
            raise ValueError(msg)
        for rule in rules:
            if isinstance(rule, type) or not (
                callable(getattr(rule, "inv_freq", None))
                and callable(getattr(rule, "attention_factor", None))
            ):
                msg = (
                    "`rules` must be scaling rule instances with inv_freq() and "
                    f"attention_factor(); got {rule!r}."
                )
                raise TypeError(msg)
        set_field(self, "rules", tuple(rules))

    def check_rotary_dim(self, rotary_dim: int) -> None:
        """Let each rule that depends on the rotary dimension check it."""
        for rule in self.rules:
            check = getattr(rule, "check_rotary_dim", None)
            if callable(check):
                check(rotary_dim)

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        """Return the inverse frequencies after every rule, first to last."""
        out = np.asarray(inv_freq, dtype=np.float64)
        for rule in self.rules:
            out = rule.inv_freq(out, base=base, rotary_dim=rotary_dim, seq_len=seq_len)
        return np.asarray(out, dtype=np.float64)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return the product of the rules' attention factors."""
        factor = 1.0
        for rule in self.rules:
            factor *= float(rule.attention_factor(seq_len=seq_len))
        return factor
