"""Hypothesis strategies for `RopeSpec` values and scaling rules (see `strategies`).

Imported only through `rope_ref.testing.strategies`, which checks that Hypothesis is
installed first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from rope_ref._core.aliases import LAYOUTS
from rope_ref._core.spec import RopeSpec

__all__ = ["check_bool", "check_int", "check_strategy", "rope_specs", "scaling_rules"]


def check_strategy(name: str, value: object) -> None:
    if value is not None and not isinstance(value, st.SearchStrategy):
        msg = f"`{name}` must be a Hypothesis strategy or None; got {value!r}."
        raise InvalidArgument(msg)


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        msg = f"`{name}` must be True or False; got {value!r}."
        raise InvalidArgument(msg)


def as_strategy(name: str, value: object, allowed: tuple[Any, ...] | None = None) -> Any:
    """`value` as a strategy: a strategy, None, or a non-empty sequence to sample from."""
    if value is None or isinstance(value, st.SearchStrategy):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        msg = (
            f"`{name}` must be a Hypothesis strategy, a non-empty sequence or None; got {value!r}."
        )
        raise InvalidArgument(msg)
    for item in value:
        if allowed is not None and item not in allowed:
            msg = f"`{name}` must hold only {list(allowed)}; got {item!r}."
            raise InvalidArgument(msg)
    return st.sampled_from(list(value))


def check_items(name: str, values: Any, ok: Any, what: str) -> None:
    """InvalidArgument naming `name` unless every item of the sequence `values` is `ok`."""
    for item in values:
        if not ok(item):
            msg = f"`{name}` must hold only {what}; got {item!r}."
            raise InvalidArgument(msg)


def _is_head_dim(value: object) -> bool:
    return (
        isinstance(value, int | np.integer)
        and not isinstance(value, bool)
        and bool(2 <= value <= 65536)
    )


def _is_base(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    try:
        return math.isfinite(value) and bool(value > 1)
    except OverflowError:  # an int beyond float64
        return False


def check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        msg = f"`{name}` must be an integer >= {minimum}; got {value!r}."
        raise InvalidArgument(msg)
    return int(value)


def rope_specs(
    *,
    head_dims: st.SearchStrategy[int] | Sequence[int] | None = None,
    layouts: st.SearchStrategy[str] | Sequence[str] | None = None,
    bases: st.SearchStrategy[float] | Sequence[float] | None = None,
    partial: bool = True,
    nonzero_start: bool = True,
    scalings: st.SearchStrategy[Any] | None = None,
    sections: bool = False,
    min_rotary_dim: int = 2,
    freqs: bool = False,
) -> st.SearchStrategy[RopeSpec]:
    """Valid `rope_ref.RopeSpec` values.

    Parameters
    ----------
    head_dims : strategy or sequence of int, optional
        Default: common sizes (2 to 128, 64, 128) and any size from 2 to 128. A sequence
        is sampled from (as for `rope_cases`' ``dtypes``).
    layouts : strategy or sequence of str, optional
        Default: ``"half"`` and ``"interleaved"``.
    bases : strategy or sequence of float, optional
        Default: 10000, 500000, 1e6 and any base from 1.5 to 1e7.
    partial : bool, default True
        Also draw ``rotary_dim < head_dim`` and ``rotary_start > 0`` (odd pair counts
        arise either way). With False, the whole head rotates (even head dims only).
    nonzero_start : bool, default True
        With False, ``rotary_start`` is always 0: the rotated slice starts at the first
        feature, as in HF, vLLM, torchtune and MLX.
    scalings : strategy, optional
        Scaling rules (or None) to draw, e.g. `scaling_rules`; called with the drawn
        number of pairs when it is a function of it. Default: no scaling.
    sections : bool, default False
        Draw multi-axis (M-RoPE) specs: 2 to 4 sections of the pairs, chunked or
        interleaved (positions then carry a trailing axis).
    min_rotary_dim : int, default 2
        Smallest rotary dim drawn (an even integer >= 2): head dims grow to hold it, for
        kernels with a minimum width.
    freqs : bool, default False
        Draw custom frequencies (``freqs=``): the drawn base's ladder divided by per-pair
        factors from 1 to 8, as ggml's ``freq_factors``. A drawn scaling rule then takes
        them as its input, and the spec keeps the base for it (YaRN's ramp ends).

    Examples
    --------
    >>> from hypothesis import given
    >>> from rope_ref.testing.strategies import rope_specs
    >>> @given(rope_specs(partial=False))
    ... def test_full(spec):
    ...     assert spec.rotary_dim == spec.head_dim
    >>> test_full()
    >>> @given(rope_specs(layouts=["interleaved"], min_rotary_dim=16))
    ... def test_wide(spec):
    ...     assert spec.layout == "interleaved" and spec.rotary_dim >= 16
    >>> test_wide()
    >>> @given(rope_specs(freqs=True))
    ... def test_given(spec):
    ...     assert spec.freqs is not None
    >>> test_given()
    """
    head_dim_strategy = as_strategy("head_dims", head_dims)
    layout_strategy = as_strategy("layouts", layouts, LAYOUTS)
    base_strategy = as_strategy("bases", bases)
    if head_dim_strategy is not None and not isinstance(head_dims, st.SearchStrategy):
        check_items("head_dims", head_dims, _is_head_dim, "integers from 2 to 65536")
    if base_strategy is not None and not isinstance(bases, st.SearchStrategy):
        check_items("bases", bases, _is_base, "finite real numbers above 1")
    check_strategy("scalings", scalings)
    min_rotary = check_int("min_rotary_dim", min_rotary_dim, 2)
    if min_rotary % 2:
        msg = f"`min_rotary_dim` must be even; got {min_rotary_dim!r}."
        raise InvalidArgument(msg)
    for name, flag in (("partial", partial), ("nonzero_start", nonzero_start)):
        check_bool(name, flag)
    check_bool("sections", sections)
    check_bool("freqs", freqs)
    if head_dim_strategy is None:
        head_dim_strategy = st.one_of(
            st.sampled_from([2, 4, 6, 8, 10, 12, 64, 128]), st.integers(2, 128)
        )
    if layout_strategy is None:
        layout_strategy = st.sampled_from(LAYOUTS)
    if base_strategy is None:
        base_strategy = st.one_of(
            st.sampled_from([10000.0, 500000.0, 1e6]),
            st.floats(1.5, 1e7, allow_nan=False, allow_infinity=False),
        )
    options = _SpecOptions(partial, nonzero_start, scalings, sections, min_rotary // 2, freqs)
    return _specs(head_dim_strategy, layout_strategy, base_strategy, options)


@dataclass(frozen=True)
class _SpecOptions:
    partial: bool
    nonzero_start: bool
    scalings: st.SearchStrategy[Any] | None
    sections: bool
    min_pairs: int = 1
    freqs: bool = False


@st.composite
def _specs(
    draw: st.DrawFn,
    head_dims: st.SearchStrategy[int],
    layouts: st.SearchStrategy[Any],
    bases: st.SearchStrategy[float],
    options: _SpecOptions,
) -> RopeSpec:
    head_dim = draw(head_dims)
    if head_dim < 2:
        msg = f"`head_dims` must draw integers >= 2; got {head_dim!r}."
        raise InvalidArgument(msg)
    min_pairs = max(2 if options.sections else 1, options.min_pairs)  # two axes: two pairs
    head_dim = max(head_dim, 2 * min_pairs)
    if options.partial:
        starts = [0, 0, 1, 2] if options.nonzero_start else [0]
        start = draw(st.sampled_from(starts).filter(lambda s: s + 2 * min_pairs <= head_dim))
        room = head_dim - start
        rotary_dim = draw(st.integers(min_pairs, room // 2)) * 2
    else:
        head_dim += head_dim % 2
        start, rotary_dim = 0, head_dim
    n_pairs = rotary_dim // 2
    scaling = None if options.scalings is None else draw(options.scalings)
    if callable(scaling):  # a rule that needs the number of pairs (LongRoPE)
        scaling = scaling(n_pairs)
    multi: dict[str, Any] = {}
    if options.sections:
        multi = draw(_sections(n_pairs))
    base = draw(bases)
    if options.freqs:  # the base's ladder over ggml-style frequency factors
        factors = draw(st.lists(st.floats(1.0, 8.0), min_size=n_pairs, max_size=n_pairs))
        ladder = base ** (-2.0 * np.arange(n_pairs) / rotary_dim) / np.array(factors)
        multi["freqs"] = tuple(float(f) for f in ladder)
        base = base if scaling is not None else 10000.0  # read by the rule alone
    return RopeSpec(
        head_dim,
        rotary_dim=rotary_dim,
        rotary_start=start,
        base=base,
        layout=draw(layouts),
        scaling=scaling,
        **multi,
    )


@st.composite
def _sections(draw: st.DrawFn, n_pairs: int) -> dict[str, Any]:
    n_axes = draw(st.integers(2, min(4, n_pairs)))
    cuts = sorted(
        draw(st.sets(st.integers(1, n_pairs - 1), min_size=n_axes - 1, max_size=n_axes - 1))
    )
    sizes = tuple(b - a for a, b in zip([0, *cuts], [*cuts, n_pairs], strict=True))
    order = draw(st.sampled_from(["chunked", "interleaved"]))
    fits = all(a + n_axes * (size - 1) < n_pairs for a, size in enumerate(sizes))
    return {"sections": sizes, "section_order": order if fits else "chunked"}


def scaling_rules(*, max_factor: float = 64.0) -> st.SearchStrategy[Any]:
    """Scaling rules of every type in the rope-type table (`HF_RULES`), each as its row draws.

    Linear, DynamicNTK and NTKAware (Hunyuan's ``alpha``), YaRN (with and without
    ``truncate``, and ggml's partial YaRN, ``ext_factor`` below 1), LongRoPE, Llama3,
    Proportional and vLLM's NTKScaling (fixed and mixed), and any type added to the table
    since (see docs/variants/index.md, "Adding a rule"). LongRoPE needs the number of pairs,
    so it is drawn as a function of it; `rope_specs` (``scalings=scaling_rules()``) calls it
    with the spec's pair count.

    Parameters
    ----------
    max_factor : float, default 64
        Largest scaling factor drawn (factors start at 1).

    Examples
    --------
    >>> from hypothesis import given
    >>> from rope_ref.testing.strategies import rope_specs, scaling_rules
    >>> @given(rope_specs(scalings=scaling_rules()))
    ... def test_scaled(spec):
    ...     assert spec.scaling is not None
    >>> test_scaled()
    """
    from rope_ref._config.hf_rules import HF_RULES, RuleDraws

    if not (isinstance(max_factor, int | float) and max_factor >= 1.0 and max_factor < 1e6):
        msg = f"`max_factor` must be a number from 1 to 1e6; got {max_factor!r}."
        raise InvalidArgument(msg)
    edges = [f for f in (2.0, 4.0, 8.0, 16.0, 32.0) if f <= max_factor]  # none below 2
    factors = st.floats(1.0, float(max_factor))
    if edges:
        factors = st.one_of(st.sampled_from(edges), factors)
    lengths = st.sampled_from([2048, 4096, 8192, 32768])
    draws = RuleDraws(st, factors, lengths)
    return st.one_of(*(row.draw(draws) for row in HF_RULES.values() if row.draw is not None))
