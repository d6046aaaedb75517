"""Hypothesis strategies for RoPE: specs, positions and whole test cases.

Needs Hypothesis (``pip install 'rope-ref[testing]'``). The strategies lean on the edge
cases that broke real implementations: odd pair counts, ``rotary_dim < head_dim``,
``rotary_start > 0``, positions near :math:`2^8`, :math:`2^{11}` and :math:`2^{24}` (where
bfloat16, float16 and float32 stop holding integers exactly), batch rows with different
positions, and a single token with several batch rows.

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

from rope_ref._compat import array_namespace, host_namespace
from rope_ref._spec import RopeSpec
from rope_ref._typing import LAYOUTS

__all__ = ["RopeCase", "positions", "rope_cases", "rope_specs"]

#: Integers where 16- and 32-bit floats stop being exact: bfloat16, float16, float32.
EDGE_POWERS = (8, 11, 24)
_DEFAULT_MAX_POSITION = 2**24 + 2


@dataclass(frozen=True)
class RopeCase:
    """One drawn test case: queries or keys `x`, the `spec` and the `positions`.

    `x` has shape ``(batch, heads, seq, head_dim)`` (tokens on axis -2); `positions` is
    ``(seq,)`` or, for per-row positions, ``(batch, 1, seq)``; both are arrays of the
    requested namespace (positions int64).
    """

    x: Any
    spec: RopeSpec
    positions: Any

    def __repr__(self) -> str:
        shape = tuple(self.x.shape)
        p = np.asarray(_to_host(self.positions)).tolist()
        return f"RopeCase(spec={self.spec!r}, x=<{self.x.dtype} {shape}>, positions={p})"


def _to_host(a: Any) -> Any:
    from rope_ref._compat import to_numpy

    return to_numpy(a)


def _check_strategy(name: str, value: object) -> None:
    if value is not None and not isinstance(value, st.SearchStrategy):
        msg = f"`{name}` must be a Hypothesis strategy or None; got {value!r}."
        raise InvalidArgument(msg)


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        msg = f"`{name}` must be True or False; got {value!r}."
        raise InvalidArgument(msg)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        msg = f"`{name}` must be an integer >= {minimum}; got {value!r}."
        raise InvalidArgument(msg)
    return int(value)


def rope_specs(
    *,
    head_dims: st.SearchStrategy[int] | None = None,
    layouts: st.SearchStrategy[str] | None = None,
    bases: st.SearchStrategy[float] | None = None,
    partial: bool = True,
) -> st.SearchStrategy[RopeSpec]:
    """Valid `rope_ref.RopeSpec` values.

    Parameters
    ----------
    head_dims : strategy of int, optional
        Default: common sizes (2 to 128, 64, 128) and any size from 2 to 128.
    layouts : strategy of str, optional
        Default: ``"half"`` and ``"interleaved"``.
    bases : strategy of float, optional
        Default: 10000, 500000, 1e6 and any base from 1.5 to 1e7.
    partial : bool, default True
        Also draw ``rotary_dim < head_dim`` and ``rotary_start > 0`` (odd pair counts
        arise either way). With False, the whole head rotates (even head dims only).

    Examples
    --------
    >>> from hypothesis import given
    >>> from rope_ref.testing.strategies import rope_specs
    >>> @given(rope_specs(partial=False))
    ... def test_full(spec):
    ...     assert spec.rotary_dim == spec.head_dim
    >>> test_full()
    """
    for name, value in (("head_dims", head_dims), ("layouts", layouts), ("bases", bases)):
        _check_strategy(name, value)
    _check_bool("partial", partial)
    if head_dims is None:
        head_dims = st.one_of(st.sampled_from([2, 4, 6, 8, 10, 12, 64, 128]), st.integers(2, 128))
    if layouts is None:
        layouts = st.sampled_from(LAYOUTS)
    if bases is None:
        bases = st.one_of(
            st.sampled_from([10000.0, 500000.0, 1e6]),
            st.floats(1.5, 1e7, allow_nan=False, allow_infinity=False),
        )
    return _specs(head_dims, layouts, bases, partial)


@st.composite
def _specs(
    draw: st.DrawFn,
    head_dims: st.SearchStrategy[int],
    layouts: st.SearchStrategy[Any],
    bases: st.SearchStrategy[float],
    partial: bool,
) -> RopeSpec:
    head_dim = draw(head_dims)
    if head_dim < 2:
        msg = f"`head_dims` must draw integers >= 2; got {head_dim!r}."
        raise InvalidArgument(msg)
    if partial:
        start = draw(st.sampled_from([0, 0, 1, 2]).filter(lambda s: s + 2 <= head_dim))
        room = head_dim - start
        rotary_dim = draw(st.integers(1, room // 2)) * 2
    else:
        head_dim += head_dim % 2
        start, rotary_dim = 0, head_dim
    return RopeSpec(
        head_dim,
        rotary_dim=rotary_dim,
        rotary_start=start,
        base=draw(bases),
        layout=draw(layouts),
    )


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
    lo = _check_int("min_value", min_value, -(2**62))
    hi = _check_int("max_value", max_value, -(2**62))
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
        Also draw positions of shape ``(batch, 1, seq)``: a different position row per
        batch row (left padding, packed sequences).

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
    _check_strategy("specs", specs)
    _check_bool("per_row_positions", per_row_positions)
    sizes = (
        _check_int("max_batch", max_batch, 1),
        _check_int("max_heads", max_heads, 1),
        _check_int("max_seq", max_seq, 1),
    )
    lo = _check_int("min_position", min_position, -(2**62))
    hi = _check_int("max_position", max_position, -(2**62))
    if hi < lo:
        msg = f"`max_position` must be at least min_position = {lo}; got {hi}."
        raise InvalidArgument(msg)
    return _cases(
        namespace,
        dtype_strategy,
        rope_specs() if specs is None else specs,
        sizes,
        (lo, hi),
        per_row_positions,
    )


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
    per_row: bool,
) -> RopeCase:
    dtype = _resolve_dtype(xp, draw(dtypes))
    spec = draw(specs)
    batch, heads, seq = (draw(st.integers(1, n)) for n in sizes)
    p_shape = (batch, 1, seq) if per_row and draw(st.booleans()) else (seq,)
    p = draw(positions(p_shape, min_value=bounds[0], max_value=bounds[1]))
    seed = draw(st.integers(0, 2**32 - 1))
    host = np.random.default_rng(seed).uniform(-1.0, 1.0, (batch, heads, seq, spec.head_dim))
    x = xp.asarray(host.astype(np.float32) if _is_low(dtype) else host)
    x = array_namespace(x).astype(x, dtype)
    return RopeCase(x=x, spec=spec, positions=xp.asarray(p))


def _is_low(dtype: Any) -> bool:
    return "float64" not in str(dtype)
