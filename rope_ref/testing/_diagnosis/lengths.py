"""Diagnoses of length-dependent rules: the spec's own rule at an engine's configured length.

vLLM computes dynamic NTK and LongRoPE once, from its configured maximum length
(``max_model_len``), and llama.cpp picks LongRoPE's factor list by its context size
(``n_ctx``); the oracle, like HF, takes the length from the positions of the call (the
largest position + 1) unless it is given ``seq_len``. A result that follows the spec's own
rule at another length is named with that length: for LongRoPE the other factor list, for
dynamic NTK the spec's lengths, powers of two and the length fitted from the result, for
any other rule that says it depends on the length (`is_length_dependent`) the lengths it
states and powers of two. A length is named only where the rule rebuilt at it matches the
result element by element, under the error model of that length's own angles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.frequencies import attention_factor, inv_freq
from rope_ref.scaling._checks import pair_exponents
from rope_ref.scaling._facts import is_length_dependent
from rope_ref.testing._compare import F64, Comparison, tolerance
from rope_ref.testing._diagnosis.focus import focus
from rope_ref.testing._diagnosis.rule_fits import TurnedAngles
from rope_ref.testing._diagnosis.rules import COMMON_LENGTHS, low_position_freqs
from rope_ref.testing._diagnosis.shared import Diagnosis, explains

__all__ = ["CONFIGURED_LENGTHS", "configured_length", "fitted_ntk_lengths"]

#: Lengths an engine is commonly configured for, besides those the rule states: 2^10..2^21.
CONFIGURED_LENGTHS = tuple(2**k for k in range(10, 22))
#: Multiples of a length the rule states that are tried too (a context extended k times).
MULTIPLES = (2, 4, 8, 16, 32)
#: How many of the best-ranked lengths are judged under the error model.
JUDGED = 4

Candidate = tuple[float, str]


def _length_text(length: float | None) -> str:
    """The oracle's length as a message says it (None: the rule's own default)."""
    return "none (the rule's default)" if length is None else f"{length:g}"


def _stated_lengths(rule: object) -> list[int]:
    """The lengths a rule (or each rule of a `Chain`) states, and their common multiples."""
    inner = rule.rules if isinstance(rule, rules.Chain) else (rule,)
    found: list[int] = []
    for r in inner:
        for name in ("original_max_position", "max_position"):
            value = getattr(r, name, None)
            if isinstance(value, int) and value > 0:
                found.append(value)
        factor, original = getattr(r, "factor", None), getattr(r, "original_max_position", None)
        if isinstance(factor, float) and isinstance(original, int) and factor > 1.0:
            found.append(round(factor * original))  # LongRoPE's max_position_embeddings
    multiples = [k * n for n in found for k in MULTIPLES]
    return list(dict.fromkeys([*found, *multiples]))


def _longrope(s_len: float | None, rule: rules.LongRoPE) -> Iterator[Candidate]:
    original, told = rule.original_max_position, _length_text(s_len)
    if not rule.uses_long(s_len):
        configured = round(rule.factor * original) if rule.factor else 0
        length, named = configured, ", max_position_embeddings"
        if configured <= original:  # no factor to tell it: any length above the original
            length, named = 2 * original, ""
        yield (
            length,
            "the result uses LongRoPE's long factors at every position, as engines configured "
            f"with a maximum length above original_max_position ({original}) do (vLLM by "
            "max_model_len, llama.cpp by n_ctx); the oracle chose the short factors by the "
            f"length {told}: pass seq_len=<the engine's configured length> (e.g. "
            f"seq_len={length}{named}).",
        )
        return
    yield (
        original,
        "the result uses LongRoPE's short factors at every position, as engines configured "
        f"with a maximum length of at most original_max_position ({original}) do, while the "
        f"oracle chose the long ones by the length {told}: pass seq_len={original} (or "
        "the engine's configured length).",
    )


def fitted_ntk_lengths(c: Comparison, rule: rules.DynamicNTK) -> list[int]:
    """Lengths whose dynamic NTK base the result's frequencies follow, read off its pairs.

    Each pair ``j > 0`` turns at ``theta_j * r^(-2j/(d-2))`` with ``r = 1 + s (L - M) / M``
    (`rope_ref.scaling.DynamicNTK`), so it gives one estimate of ``r`` and so of ``L``; the
    median of them and those of the two fastest pairs (measured most precisely), rounded,
    with their neighbours. Empty where the result's frequencies cannot be read, and where
    they follow a round base (at most 3 significant digits): every base is dynamic NTK's at
    some length, and another base (`frequencies`) is then the likelier story.
    """
    spec = c.setup.spec
    measured = low_position_freqs(c)
    if measured is None or spec.sections is not None or measured.size < 2:
        return []
    plain = inv_freq(dataclasses.replace(spec, scaling=None))
    exponents = pair_exponents(spec._rotary_dim)[1:]
    got, want = measured[1:], plain[1:]
    usable = (got > 0) & (want > 0) & (exponents > 0)
    if not np.any(usable):
        return []
    log_ratio = -np.log(got[usable] / want[usable]) / exponents[usable]
    estimates = [float(np.median(log_ratio)), *log_ratio[:2].tolist()]
    d = spec._rotary_dim
    if _is_round(spec.base * math.exp(min(estimates[0], 700.0) * d / (d - 2))):
        return []
    found: list[int] = []
    for value in estimates:
        ratio = math.exp(value) if value < 700.0 else math.inf
        length = rule.max_position * (1.0 + (ratio - 1.0) / rule.factor)
        if not math.isfinite(length) or length <= rule.max_position:
            continue
        found += [round(length) + k for k in (0, -1, 1)]
    return [n for n in dict.fromkeys(found) if n > rule.max_position]


def _is_round(value: float) -> bool:
    """Whether `value` lies within 1e-4 of a number of at most 3 significant digits."""
    if not math.isfinite(value) or value <= 0.0:
        return False
    rounded = float(f"{value:.3g}")
    return abs(value - rounded) <= 1e-4 * rounded


def _other_limits(c: Comparison, rule: rules.DynamicNTK) -> set[int]:
    """Lengths whose base is the one of a common max_position at the oracle's length.

    At the oracle's length ``S``, ``max_position = n`` gives the base of the length
    ``M S / n`` under the spec's ``M``: such a fitted length is another ``max_position``,
    which `scaling` names (a common length is likelier than a fitted one).
    """
    s_len = c.setup.seq_len
    if s_len is None:
        return set()
    near = (round(rule.max_position * s_len / n) for n in COMMON_LENGTHS)
    return {m + k for m in near for k in (-1, 0, 1)}


def _dynamic(c: Comparison, rule: rules.DynamicNTK) -> Iterator[Candidate]:
    told = _length_text(c.setup.seq_len)
    limit = rule.max_position
    yield (
        limit,
        "the result keeps dynamic NTK's unscaled base (the base at max_position "
        f"{limit} or less), as an engine configured with a maximum length of at most "
        f"{limit} computes it, while the oracle took the length {told}: pass "
        f"seq_len={limit} (or the engine's configured length).",
    )
    fitted = [n for n in fitted_ntk_lengths(c, rule) if n not in _other_limits(c, rule)]
    for length, how in [  # a fitted length that is also a common one is named as such
        *((n, "") for n in [*_stated_lengths(rule), *CONFIGURED_LENGTHS]),
        *((n, " (fitted from the result)") for n in fitted),
    ]:
        yield (
            length,
            f"the result follows dynamic NTK at the length {length}{how}, not at the "
            f"oracle's {told}: engines such as vLLM compute the base once from their "
            "configured maximum length (max_model_len), not from the positions of the call "
            "(and HF keeps the length of a longer earlier call until a call stays below "
            f"max_position): pass seq_len={length} (the engine's configured length).",
        )


def _any_rule(c: Comparison) -> Iterator[Candidate]:
    told = _length_text(c.setup.seq_len)
    for length in [*_stated_lengths(c.setup.spec.scaling), *CONFIGURED_LENGTHS]:
        yield (
            length,
            f"the result follows the spec's rule at the length {length}, not at the oracle's "
            f"{told}: the rule depends on the length, and an engine computes it from its "
            f"configured maximum length, not from the positions of the call: pass "
            f"seq_len={length} (the engine's configured length).",
        )


def _tables(c: Comparison, length: float | None) -> tuple[F64, float]:
    spec = c.setup.spec
    return inv_freq(spec, length), attention_factor(spec, length)


def _distinct(c: Comparison, candidates: Iterator[Candidate]) -> list[tuple[F64, Candidate]]:
    """The candidates whose tables differ from the oracle's and from each earlier one's."""
    own_freqs, own_factor = _tables(c, c.setup.seq_len)
    seen: list[tuple[F64, float]] = [(own_freqs, own_factor)]
    kept: list[tuple[F64, Candidate]] = []
    for length, message in candidates:
        try:
            freqs, factor = _tables(c, length)
        except ValueError:
            continue
        if any(np.array_equal(freqs, f) and factor == a for f, a in seen):
            continue
        seen.append((freqs, factor))
        kept.append((freqs, (length, message)))
    return kept


def explained_at(c: Comparison, length: float) -> bool:
    """Whether the oracle at `length` explains the result, under that length's own model.

    Tried first on the telling rows (`focus`), then on the whole result.
    """
    small = focus(c)
    for part in (small, c) if small is not c else (c,):
        s = dataclasses.replace(part.setup, seq_len=length)
        alt = s.expected
        tol = part.tolerance
        if part.model is not None:
            tol = tolerance(s, alt, part.model, part.model.eps)
        if not explains(part, alt, tol=tol):
            return False
    return True


def configured_length(c: Comparison) -> Diagnosis | None:
    """The spec's length-dependent rule at another length: the fix is ``seq_len=<L>``.

    Only for rules whose tables change with the length (`is_length_dependent`); the
    candidate lengths are ranked by how far their angles lie from the result's, and the
    best `JUDGED` are rebuilt and judged element by element.
    """
    spec = c.setup.spec
    rule = spec.scaling
    if rule is None or not is_length_dependent(rule):
        return None
    if isinstance(rule, rules.LongRoPE):
        candidates = _longrope(c.setup.seq_len, rule)
    elif isinstance(rule, rules.DynamicNTK):
        candidates = _dynamic(c, rule)
    else:
        candidates = _any_rule(c)
    distinct = _distinct(c, candidates)
    if not distinct:
        return None
    if len(distinct) > JUDGED and spec.n_pairs > 0:
        turned = TurnedAngles.of(c)
        distinct.sort(key=lambda item: turned.residual(item[0]))
    for _, (length, message) in distinct[:JUDGED]:
        if explained_at(c, length):
            return Diagnosis("seq_len", message)
    return None
