"""Hypothesis strategies for RoPE: specs, positions and whole test cases.

Needs Hypothesis (``pip install 'rope-ref[testing]'``). The strategies lean on the edge
cases that broke real implementations: odd pair counts, ``rotary_dim < head_dim``,
``rotary_start > 0``, positions near :math:`2^8`, :math:`2^{11}` and :math:`2^{24}` (where
bfloat16, float16 and float32 stop holding integers exactly), batch rows with different
positions, and a single token with several batch rows. Cases never go past
`rope_ref.testing.max_checkable_position` for their spec and dtype, where the error model
could not tell a correct result from a wrong one.

Examples
--------
>>> from hypothesis import given
>>> import rope_ref as rr
>>> from rope_ref.testing import assert_rope_close
>>> from rope_ref.testing.strategies import rope_cases
>>> @given(rope_cases())
... def test_my_rope(case):
...     mine = rr.apply_rope(case.x, case.spec, case.positions)  # your implementation here
...     assert_rope_close(mine, case.x, case.spec, case.positions)
>>> test_my_rope()
"""

from __future__ import annotations

try:
    from hypothesis import assume
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument
    from hypothesis.extra import numpy as hnp
except ImportError as err:  # pragma: no cover - exercised in a subprocess
    msg = (
        "rope_ref.testing.strategies needs Hypothesis, which is not installed. "
        "Install it with: pip install 'rope-ref[testing]'"
    )
    raise ModuleNotFoundError(msg, name="hypothesis") from err

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._core.compat import array_namespace, host_namespace
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._strategy_specs import (
    check_bool,
    check_int,
    check_strategy,
    rope_specs,
    scaling_rules,
)
from rope_ref.testing._tolerance import dtype_name, max_checkable_position

__all__ = ["RopeCase", "positions", "rope_cases", "rope_specs", "scaling_rules"]

#: Integers where 16- and 32-bit floats stop being exact: bfloat16, float16, float32.
EDGE_POWERS = (8, 11, 24)
_DEFAULT_MAX_POSITION = 2**24 + 2


@dataclass(frozen=True)
class RopeCase:
    """One drawn test case: queries or keys `x`, the `spec`, the `positions` and `offset`.

    `x` has shape ``(batch, heads, seq, head_dim)`` (``seq_axis`` -2) or ``(batch, seq,
    heads, head_dim)`` (``seq_axis`` -3). `positions` is ``(seq,)``, per batch row
    (HF ``position_ids``: ``(batch, seq)`` for the second order, ``(batch, 1, seq)`` for
    the first, where a bare ``(batch, seq)`` could be read two ways), or None for the
    offset mode, where the
    positions are ``offset + arange(seq)``; a multi-axis spec adds a trailing axis of
    length ``len(spec.sections)``. Arrays are of the requested namespace (positions int64).
    Every case is checked with
    ``apply_rope(case.x, case.spec, case.positions, offset=case.offset,
    seq_axis=case.seq_axis)``.
    """

    x: Any
    spec: RopeSpec
    positions: Any
    offset: int = 0
    seq_axis: int = -2

    def __repr__(self) -> str:
        shape = tuple(self.x.shape)
        p = None if self.positions is None else np.asarray(_to_host(self.positions)).tolist()
        return (
            f"RopeCase(spec={self.spec!r}, x=<{self.x.dtype} {shape}>, positions={p}, "
            f"offset={self.offset}, seq_axis={self.seq_axis})"
        )


def _to_host(a: Any) -> Any:
    from rope_ref._core.compat import to_numpy

    return to_numpy(a)


def _position_values(min_value: int, max_value: int) -> st.SearchStrategy[int]:
    edges = sorted({2**k + d for k in EDGE_POWERS for d in range(-2, 3)} | {min_value, max_value})
    edges = [e for e in edges if min_value <= e <= max_value]
    return st.one_of(st.integers(min_value, max_value), st.sampled_from(edges))


def positions(
    shape: int | tuple[int, ...] | st.SearchStrategy[Any],
    *,
    min_value: int = 0,
    max_value: int = _DEFAULT_MAX_POSITION,
) -> st.SearchStrategy[np.ndarray]:
    r"""NumPy int64 arrays of positions, weighted toward :math:`2^k \\pm 2` for k = 8, 11, 24.

    Parameters
    ----------
    shape : int, tuple of int, or strategy
        Shape of the array, as for ``hypothesis.extra.numpy.arrays``.
    min_value, max_value : int
        Inclusive bounds (defaults 0 and :math:`2^{24} + 2`).

    Examples
    --------
    >>> from hypothesis import given
    >>> from rope_ref.testing.strategies import positions
    >>> @given(positions(5, max_value=300))
    ... def test_bounds(p):
    ...     assert p.shape == (5,) and p.dtype.name == "int64" and p.max() <= 300
    >>> test_bounds()
    """
    lo = check_int("min_value", min_value, -(2**62))
    hi = check_int("max_value", max_value, -(2**62))
    for name, value in (("min_value", lo), ("max_value", hi)):
        if value > 2**62:  # int64 arrays, with room for an offset
            msg = f"`{name}` must be at most 2**62; got {value}."
            raise InvalidArgument(msg)
    if not isinstance(shape, st.SearchStrategy):
        dims = (shape,) if isinstance(shape, int | np.integer) else shape
        if not isinstance(dims, tuple) or not all(
            isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0 for d in dims
        ):
            msg = f"`shape` must be an integer >= 0, a tuple of them or a strategy; got {shape!r}."
            raise InvalidArgument(msg)
    if hi < lo:
        msg = f"`max_value` must be at least min_value = {lo}; got {hi}."
        raise InvalidArgument(msg)
    return hnp.arrays(np.int64, shape, elements=_position_values(lo, hi))


def rope_cases(
    xp: ModuleType | None = None,
    *,
    dtypes: Sequence[Any] | st.SearchStrategy[Any] = ("float32", "float64"),
    specs: st.SearchStrategy[RopeSpec] | None = None,
    max_batch: int = 3,
    max_heads: int = 3,
    max_seq: int = 8,
    min_position: int = 0,
    max_position: int = _DEFAULT_MAX_POSITION,
    per_row_positions: bool = True,
    axes: Sequence[str] = ("bhsd",),
    position_modes: Sequence[str] | None = None,
) -> st.SearchStrategy[RopeCase]:
    """Whole RoPE test cases: `RopeCase` values with ``.x``, ``.spec`` and ``.positions``.

    `x` is drawn from a seeded generator (uniform in [-1, 1]), so shrinking works on the
    spec, shapes and positions and ends at small, readable examples.

    Parameters
    ----------
    xp : namespace, optional
        Array namespace of `x` and the positions (NumPy when omitted); a module such as
        ``torch`` or an array-api-compat namespace.
    dtypes : sequence or strategy of dtypes or dtype names
        Dtypes of `x`; names (``"bfloat16"``) are looked up on `xp`.
    specs : strategy of RopeSpec, optional
        Default: `rope_specs`.
    max_batch, max_heads, max_seq : int
        Largest sizes of the leading axes (each at least 1).
    min_position, max_position : int
        Bounds of the positions (defaults 0 and :math:`2^{24} + 2`).
    per_row_positions : bool, default True
        Also draw per-row positions (the ``"rows"`` mode) when `position_modes` is not
        given.
    axes : sequence of {"bhsd", "bshd"}, default ("bhsd",)
        Axis orders of x to draw: ``(batch, heads, seq, dim)`` (HF, MLX) and ``(batch, seq,
        heads, dim)`` (torchtune, flash-attn, Meta); `RopeCase.seq_axis` says which.
    position_modes : sequence of {"shared", "rows", "offset"}, optional
        ``"shared"``: one ``(seq,)`` row; ``"rows"``: ``(batch, seq)`` ids;
        ``"offset"``: no positions, ``offset + arange(seq)`` (MLX, torchtune's
        ``input_pos=None`` after a cache, KV-cache decoding). Default: shared and rows
        (shared only with ``per_row_positions=False``).

    Examples
    --------
    >>> from hypothesis import given
    >>> import rope_ref as rr
    >>> from rope_ref.testing.strategies import rope_cases
    >>> @given(rope_cases(dtypes=["float64"], max_position=4096))
    ... def test_inverse(case):
    ...     y = rr.apply_rope(case.x, case.spec, case.positions)
    ...     back = rr.apply_rope(y, case.spec, case.positions, inverse=True)
    ...     assert abs(back - case.x).max() < 1e-9
    >>> test_inverse()
    """
    namespace = xp if xp is not None else host_namespace()
    if not hasattr(namespace, "asarray"):
        msg = f"`xp` must be an array namespace (a module with asarray); got {xp!r}."
        raise InvalidArgument(msg)
    if isinstance(dtypes, st.SearchStrategy):
        dtype_strategy = dtypes
    else:
        if isinstance(dtypes, str) or not list(dtypes):
            msg = f"`dtypes` must be a non-empty sequence of dtypes or a strategy; got {dtypes!r}."
            raise InvalidArgument(msg)
        dtype_strategy = st.sampled_from([_resolve_dtype(namespace, d) for d in dtypes])
    check_strategy("specs", specs)
    check_bool("per_row_positions", per_row_positions)
    sizes = (
        check_int("max_batch", max_batch, 1),
        check_int("max_heads", max_heads, 1),
        check_int("max_seq", max_seq, 1),
    )
    lo = check_int("min_position", min_position, -(2**62))
    hi = check_int("max_position", max_position, -(2**62))
    if hi < lo:
        msg = f"`max_position` must be at least min_position = {lo}; got {hi}."
        raise InvalidArgument(msg)
    if position_modes is None:
        position_modes = ("shared", "rows") if per_row_positions else ("shared",)
    modes = _check_choices("position_modes", position_modes, ("shared", "rows", "offset"))
    orders = _check_choices("axes", axes, ("bhsd", "bshd"))
    return _cases(
        namespace,
        dtype_strategy,
        rope_specs() if specs is None else specs,
        sizes,
        (lo, hi),
        (modes, orders),
    )


def _check_choices(name: str, values: object, choices: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        msg = f"`{name}` must be a non-empty sequence of {list(choices)}; got {values!r}."
        raise InvalidArgument(msg)
    for value in values:
        if value not in choices:
            msg = f"`{name}` must hold only {list(choices)}; got {value!r}."
            raise InvalidArgument(msg)
    return tuple(values)


def _resolve_dtype(xp: ModuleType, dtype: Any) -> Any:
    if not isinstance(dtype, str):
        return dtype
    resolved = getattr(xp, dtype, None)
    if resolved is None:
        msg = f"`dtypes` must name dtypes of {xp.__name__}; got {dtype!r}, which it lacks."
        raise InvalidArgument(msg)
    return resolved


@st.composite
def _cases(
    draw: st.DrawFn,
    xp: ModuleType,
    dtypes: st.SearchStrategy[Any],
    specs: st.SearchStrategy[RopeSpec],
    sizes: tuple[int, int, int],
    bounds: tuple[int, int],
    modes_and_orders: tuple[tuple[str, ...], tuple[str, ...]],
) -> RopeCase:
    modes, orders = modes_and_orders
    dtype = _resolve_dtype(xp, draw(dtypes))
    spec = draw(specs)
    bounds = _checkable(bounds, spec, dtype)
    batch, heads, seq = (draw(st.integers(1, n)) for n in sizes)
    order = draw(st.sampled_from(orders))
    mode = draw(st.sampled_from(modes))
    trailing = () if spec.sections is None else (len(spec.sections),)
    seed = draw(st.integers(0, 2**32 - 1))
    shape = (batch, heads, seq) if order == "bhsd" else (batch, seq, heads)
    host = np.random.default_rng(seed).uniform(-1.0, 1.0, (*shape, spec.head_dim))
    x = xp.asarray(host.astype(np.float32) if _is_low(dtype) else host)
    x = array_namespace(x).astype(x, dtype)
    seq_axis = -2 if order == "bhsd" else -3
    if mode == "offset" and not trailing:
        start = draw(
            positions((), min_value=bounds[0], max_value=max(bounds[1] - seq + 1, bounds[0]))
        )
        return RopeCase(x=x, spec=spec, positions=None, offset=int(start), seq_axis=seq_axis)
    if mode == "rows":  # (batch, seq) ids; (batch, 1, seq) when seq is the last axis
        p_shape: tuple[int, ...] = (batch, 1, seq) if order == "bhsd" else (batch, seq)
    else:
        p_shape = (seq,)
    p = draw(positions((*p_shape, *trailing), min_value=bounds[0], max_value=bounds[1]))
    return RopeCase(x=x, spec=spec, positions=xp.asarray(p), seq_axis=seq_axis)


def _checkable(bounds: tuple[int, int], spec: RopeSpec, dtype: Any) -> tuple[int, int]:
    """`bounds` cut to the positions `assert_rope_close` can check in `dtype` for `spec`."""
    limit = max_checkable_position(spec, dtype_name(dtype))
    lo, hi = max(bounds[0], -limit), min(bounds[1], limit)
    assume(lo <= hi)  # nothing checkable in the range asked for: draw another spec
    return lo, hi


def _is_low(dtype: Any) -> bool:
    return "float64" not in str(dtype)
