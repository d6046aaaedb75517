"""Compare a third-party RoPE result with the oracle under the error model, on the host."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import Role
from rope_ref._core.compat import host_namespace, is_array
from rope_ref._core.frequencies import max_plus_one, rope_angles
from rope_ref._core.reference import split_pairs
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_nonnegative
from rope_ref._engine.api import apply_rope, laid_out_positions
from rope_ref.testing._extremes import Extremes, extremes
from rope_ref.testing._once import lazy, once
from rope_ref.testing._tolerance import (
    CHECKABLE_SHARE,
    EPS,
    ErrorModel,
    checkable_angle,
    dtype_name,
    error_model,
    host64,
)

__all__ = [
    "Comparison",
    "HostResult",
    "Setup",
    "check_actual",
    "check_dtype",
    "check_tolerances",
    "compare",
    "compare_checked",
    "setup",
    "true_dtype",
]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class Setup:
    """Everything about the inputs the oracle needs, on the host in float64.

    `grid` holds the position of every row of `x`, shape ``x.shape[:-1]`` (plus the axis
    of a multi-axis spec), offset included; `seq_len` is the one the oracle used.

    What every consumer of a comparison reads is computed once, on first use, and kept:
    the oracle's result (`expected`), its pair norms (`expected_norms`) and the largest
    angle of each row (`max_angles` of the setup's own spec), all from the positions as
    the engine lays them out (`compact_grid`), not from one copy per row.
    """

    x: F64
    spec: RopeSpec
    grid: F64
    seq_axis: int
    inverse: bool
    seq_len: float | None
    role: Role | None
    dtype: str

    def oracle(
        self,
        *,
        spec: RopeSpec | None = None,
        grid: F64 | None = None,
        inverse: bool | None = None,
    ) -> F64:
        """The exact (float64) result, optionally with one ingredient replaced.

        Without a replaced ingredient it is `expected`, computed once.
        """
        if spec is None and grid is None and (inverse is None or inverse == self.inverse):
            return self.expected.copy()
        return self._rotated(spec, self.compact_grid if grid is None else grid, inverse)

    @once
    def expected(self) -> F64:
        """The oracle's result, computed on first use (read-only: `oracle` gives a copy)."""
        y = self._rotated(None, self.compact_grid, None)
        y.setflags(write=False)
        return y

    @once
    def expected_norms(self) -> F64:
        """`pair_norms` of `expected`, computed on first use (read-only)."""
        norms = pair_norms(self.spec, self.expected, inverse=self.inverse)
        norms.setflags(write=False)
        return norms

    @once
    def compact_grid(self) -> F64:
        """`grid` without its broadcast axes: the positions as the engine lays them out.

        Same values as `grid` wherever it is read; one row per position, not per head.
        """
        g = self.grid
        keep = tuple(
            slice(0, 1) if stride == 0 and n > 1 else slice(None)
            for stride, n in zip(g.strides, g.shape, strict=True)
        )
        return g[keep]

    def _rotated(self, spec: RopeSpec | None, grid: F64, inverse: bool | None) -> F64:
        return np.asarray(
            apply_rope(
                self.x,
                self.spec if spec is None else spec,
                grid,
                seq_axis=self.seq_axis,
                inverse=self.inverse if inverse is None else inverse,
                seq_len=self.seq_len,
                role=self.role,
            ),
            dtype=np.float64,
        )

    @property
    def row_positions(self) -> F64:
        """Position of each row, shape ``x.shape[:-1]`` (first axis of a multi-axis spec)."""
        return self.grid if self.spec.sections is None else self.grid[..., 0]

    def max_angles(self, spec: RopeSpec | None = None) -> F64:
        """Largest |angle| of each row, shape ``x.shape[:-1]`` (read-only).

        For the setup's own spec it is computed once, on first use.
        """
        if spec is None or spec == self.spec:
            return self._own_max_angles
        return self._max_angles(spec)

    @once
    def angles(self) -> F64:
        """The angle of every pair at every position, computed once, on first use.

        Shape: ``compact_grid``'s rows plus ``(n_pairs,)`` (read-only; read a row of x's
        with `angles_at`).
        """
        angles = np.array(rope_angles(self.spec, self.compact_grid, self.seq_len), np.float64)
        angles.setflags(write=False)  # a copy: the engine's array is never made read-only
        return angles

    def angles_at(self, row: tuple[int, ...]) -> F64:
        """The angles of the pairs of the row `row` (an index into ``x.shape[:-1]``)."""
        lead = self.angles.shape[: len(row)]
        at = tuple(i if n > 1 else 0 for i, n in zip(row, lead, strict=True))
        return np.asarray(self.angles[at], dtype=np.float64)

    @once
    def _own_max_angles(self) -> F64:
        return self._max_angles(self.spec, self.angles)

    def _max_angles(self, spec: RopeSpec, angles: F64 | None = None) -> F64:
        lead = self.x.shape[:-1]
        if angles is None:
            angles = np.asarray(rope_angles(spec, self.compact_grid, self.seq_len))
        if angles.shape[-1] == 0:
            return np.broadcast_to(np.zeros(()), lead)
        largest = np.abs(angles).max(axis=-1)
        return np.broadcast_to(largest, lead)


def _host_actual(c: Comparison) -> F64:
    """The result as float64 on the host (what `actual` holds when not given)."""
    given = c.given
    return given.values if isinstance(given, HostResult) else host64(given)


def _error_of(c: Comparison) -> F64:
    """`_error` of the comparison's result (what `error` holds when not given)."""
    return _error(c.actual, c.expected)


def _tolerance_of(c: Comparison) -> F64:
    """The error model's tolerance per element (what `tolerance` holds when not given)."""
    s, model = c.setup, c.model
    if model is None:  # an explicit tolerance is always given
        msg = "a comparison under an explicit tolerance must be given its `tolerance`."
        raise ValueError(msg)
    per_row = np.asarray(model.atol(s.max_angles(), 1.0), dtype=np.float64)
    tol = _model_tolerance(s, per_row, EPS[c.judged_dtype])
    if c.position_eps is not None:
        tol = tol + position_tolerance(s, c.expected, c.position_eps)
    return _finite(tol)


def _finite(tol: F64) -> F64:
    """`tol` with its infinite or NaN entries made 0 (only the same value passes there)."""
    if not math.isfinite(float(tol.max(initial=0.0))):
        tol = np.where(np.isfinite(tol), tol, 0.0)
    return tol


@dataclass(frozen=True)
class Comparison:
    """The result of `compare`: errors and tolerances per element, and what produced them.

    `actual` (the result in float64), `error` and `tolerance` are built on first read
    unless given: a passing check under the error model reads only `extremes`, its
    largest error and ratio found pair by pair (see `rope_ref.testing._extremes`).
    """

    setup: Setup
    expected: F64
    model: ErrorModel | None
    actual: lazy[Comparison, F64] = lazy(_host_actual)  # noqa: RUF009 (a descriptor)
    error: lazy[Comparison, F64] = lazy(_error_of)  # noqa: RUF009 (a descriptor)
    tolerance: lazy[Comparison, F64] = lazy(_tolerance_of)  # noqa: RUF009 (a descriptor)
    #: Why the result's dtype fails (it is not the precision asked for), or None.
    dtype_mismatch: str | None = None
    #: Rows (``x.shape[:-1]``) whose tolerance cannot tell a correct result from zeros,
    #: the identity or the inverse rotation (see `checkable_angle`); None: every row.
    unchecked: NDArray[np.bool_] | None = None
    #: Epsilon of the dtype the implementation rounds its positions to (`position_dtype`).
    position_eps: float | None = None
    #: The dtype the result is judged at (`dtype`, default the dtype of `x`); "" reads as x's.
    precision: str = ""
    #: The result as `compare` was given it (read for `actual` when that is not given).
    given: Any = field(default=None, init=False, repr=False, compare=False)
    #: Largest error and ratio, found pair by pair, or None (not copied by `replace`).
    extremes: Extremes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def judged_dtype(self) -> str:
        """The name of the dtype the result is judged at (and its ulps counted in)."""
        return self.precision or self.setup.dtype

    @property
    def checkable(self) -> bool:
        """Whether every row's tolerance can tell a correct result from a wrong one."""
        return self.unchecked is None or not bool(self.unchecked.any())

    @once
    def ratio(self) -> F64:
        """``error / tolerance`` per element (inf where the tolerance is 0 and error is not)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self.error / self.tolerance
        if math.isnan(float(r.max(initial=0.0))):  # 0 / 0: no error where none is allowed
            r[np.isnan(r)] = 0.0  # (error is never NaN: a NaN result's error is inf)
        return r

    @once
    def max_ratio(self) -> float:
        """The largest `ratio` (0 for an empty result)."""
        if self.extremes is not None:
            return self.extremes.max_ratio
        return float(self.ratio.max(initial=0.0))

    @once
    def max_error(self) -> float:
        """The largest `error` (0 for an empty result)."""
        if self.extremes is not None:
            return self.extremes.max_error
        return float(self.error.max(initial=0.0))

    @once
    def failed(self) -> NDArray[np.bool_]:
        """Mask of elements outside the tolerance (NaN counts as outside)."""
        return ~(self.error <= self.tolerance)

    @once
    def ok(self) -> bool:
        """Whether every element is within a meaningful tolerance, in the dtype asked for."""
        # error / tolerance < 1 everywhere implies error < tolerance: no mask needed then.
        within = self.max_ratio < 1.0 or not bool(np.any(self.failed))
        return within and self.dtype_mismatch is None and self.checkable

    @once
    def worst(self) -> tuple[int, ...]:
        """Index of the element with the largest error relative to its tolerance."""
        if self.error.size == 0:
            return ()
        return tuple(int(i) for i in np.unravel_index(np.argmax(self.ratio), self.error.shape))


@dataclass(frozen=True)
class HostResult:
    """A result already on the host: its float64 values and the name of its stored dtype.

    What `rope-ref check` decodes from its child process; `compare` takes it as it
    takes an array.
    """

    values: F64
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the values."""
        return tuple(self.values.shape)


#: Array libraries whose own ``dtype`` attribute is believed over a subclass's.
_ARRAY_LIBRARIES = ("numpy", "torch", "jax", "jaxlib", "mlx", "cupy", "dask", "array_api_strict")


def true_dtype(a: object) -> object:
    """The dtype of `a` as its array library stores it, past any subclass's override.

    An ``ndarray`` subclass whose ``dtype`` property says float32 while it stores float64
    reports float64 here: the attribute is read from the first class of the array library
    itself in the type's method resolution order.
    """
    for cls in type(a).__mro__:
        if cls.__module__.split(".")[0] in _ARRAY_LIBRARIES and "dtype" in vars(cls):
            attribute = vars(cls)["dtype"]
            getter = getattr(type(attribute), "__get__", None)
            return attribute if getter is None else getter(attribute, a, type(a))
    return getattr(a, "dtype", None)


def setup(
    x: Any,
    spec: RopeSpec,
    positions: Any = None,
    *,
    offset: float = 0,
    seq_axis: int = -2,
    inverse: bool = False,
    seq_len: float | None = None,
    role: Role | None = None,
) -> Setup:
    """Validate the inputs the way `apply_rope` does and bring them to the host."""
    check_spec(spec)
    name = check_array("x", x)
    x64 = host64(x)
    if x64 is x or x64.base is not None:
        x64 = x64.copy()  # never a view of x (a float64 x converts to itself)
    if x64.ndim == 0 or x64.shape[-1] != spec.head_dim:
        msg = (
            f"`x` must have spec.head_dim = {spec.head_dim} features on its last axis; "
            f"got shape {tuple(x64.shape)}."
        )
        raise ValueError(msg)
    hxp = _host_namespace()
    raw = host64(positions) if type(positions) is np.ndarray or is_array(positions) else positions
    # The engine's own layout of the positions against x (one copy of the rules).
    laid, _ = laid_out_positions(x64, spec, raw, offset=offset, seq_axis=seq_axis, xp=hxp)
    lead = tuple(x64.shape[:-1])
    trailing = () if spec.sections is None else (len(spec.sections),)
    grid = np.broadcast_to(np.asarray(laid, dtype=np.float64), lead + trailing)
    if seq_len is None and (spec.scaling is not None or spec.xpos is not None):
        seq_len = max_plus_one(grid, hxp)
    return Setup(
        x=x64,
        spec=spec,
        grid=grid,
        seq_axis=seq_axis,
        inverse=inverse,
        seq_len=seq_len,
        role=role,
        dtype=name,
    )


@functools.cache
def _host_namespace() -> Any:
    """`host_namespace`, looked up once: the NumPy namespace does not change."""
    return host_namespace()


def check_array(name: str, a: object) -> str:
    """Return the dtype name of the floating array `a`, or raise naming `name`."""
    if type(a) is np.ndarray:  # no subclass: its dtype is what it stores
        dtype: object = a.dtype
    elif isinstance(a, HostResult):
        dtype = a.dtype
    elif not is_array(a) and not isinstance(a, np.ndarray):
        msg = f"`{name}` must be an array; got {type(a).__name__}."
        raise TypeError(msg)
    else:
        dtype = true_dtype(a)
    try:
        return dtype_name(dtype)
    except ValueError:
        msg = f"`{name}` must have one of the floating dtypes {sorted(EPS)}; got {dtype}."
        raise ValueError(msg) from None


def check_actual(actual: object) -> str:
    """Return the dtype name of the result `actual`, or raise naming `actual`."""
    return check_array("actual", actual)


def check_tolerances(rtol: object, atol: object) -> tuple[float | None, float | None]:
    """`rtol` and `atol` as floats (None stays None): each finite, >= 0 and not a bool."""
    return (
        None if rtol is None else check_nonnegative("rtol", rtol),
        None if atol is None else check_nonnegative("atol", atol),
    )


def pair_norms(spec: RopeSpec, y: F64, *, inverse: bool = False) -> F64:
    """Norm of the pair each feature belongs to (``|x|`` for pass-through features).

    `y` holds the pairs as written: in ``spec.written_layout``, or for the `inverse`
    rotation (which reads that layout) in ``spec.layout``.
    """
    start, stop = spec.rotary_start, spec.rotary_stop
    layout = spec.layout if inverse else spec.written_layout
    first, second = split_pairs(y[..., start:stop], layout=layout)
    out = np.empty_like(y, dtype=np.float64)
    out[..., :start] = np.abs(y[..., :start])  # pass-through features: |x|
    out[..., stop:] = np.abs(y[..., stop:])
    r = _radii(first, second)
    if layout == "half":
        n = r.shape[-1]
        out[..., start : start + n] = r
        out[..., start + n : stop] = r
    else:
        out[..., start:stop:2] = r
        out[..., start + 1 : stop : 2] = r
    return out


def _radii(first: F64, second: F64) -> F64:
    """``hypot(first, second)`` within an ulp, three times faster where it is safe.

    ``sqrt(a * a + b * b)`` where every norm lies in [1e-150, 1e150] (nothing overflows or
    loses bits to underflow there); `np.hypot` otherwise (zeros, huge, tiny, inf or NaN).
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        r = np.square(first)
        r += np.square(second)
        np.sqrt(r, out=r)
    if r.size and not (float(r.min()) > 1e-150 and float(r.max()) < 1e150):
        return np.asarray(np.hypot(first, second), dtype=np.float64)
    return r


def _norms(s: Setup, expected: F64) -> F64:
    """Pair norms of `expected`: the setup's own, computed once, when it is its oracle."""
    if expected is s.expected:
        return s.expected_norms
    return pair_norms(s.spec, expected, inverse=s.inverse)


def tolerance(s: Setup, expected: F64, model: ErrorModel, actual_eps: float) -> F64:
    """Per-element tolerance: the model on rotated features, storage rounding elsewhere."""
    spec = s.spec
    norms = _norms(s, expected)
    tol = np.asarray(model.atol(s.max_angles()[..., None], norms), dtype=np.float64)
    # Copied features: exact, up to one rounding if the result has a coarser dtype.
    for kept in (slice(0, spec.rotary_start), slice(spec.rotary_stop, spec.head_dim)):
        if kept.stop > kept.start:
            tol[..., kept] = 0.5 * actual_eps * norms[..., kept]
    return np.asarray(tol, dtype=np.float64)


def _model_tolerance(s: Setup, per_row: F64, actual_eps: float) -> F64:
    """`tolerance` of the setup's own oracle, without spreading the pair norms first.

    The same numbers: each pair's norm times its row's ``model.atol(angle, 1)``
    (`per_row`), computed on pairs and then written to both features of the pair.
    """
    spec = s.spec
    y = s.expected
    start, stop = spec.rotary_start, spec.rotary_stop
    layout = spec.layout if s.inverse else spec.written_layout
    first, second = split_pairs(y[..., start:stop], layout=layout)
    r = _radii(first, second)
    r *= per_row[..., None]
    pair_tol = r
    tol = np.empty_like(y, dtype=np.float64)
    if layout == "half":
        n = pair_tol.shape[-1]
        tol[..., start : start + n] = pair_tol
        tol[..., start + n : stop] = pair_tol
    else:
        tol[..., start:stop:2] = pair_tol
        tol[..., start + 1 : stop : 2] = pair_tol
    for kept in (slice(0, start), slice(stop, spec.head_dim)):  # copied: one rounding at most
        if kept.stop > kept.start:
            tol[..., kept] = 0.5 * actual_eps * np.abs(y[..., kept])
    return tol


def position_shift(s: Setup, position_eps: float) -> float:
    """Angle error (radians) of the fastest pair when positions are rounded to `position_eps`.

    A grid built in that dtype (an arange, a linspace) is off by up to ``2 * eps *
    (max |p| + 1)`` at every position (0 included), which turns the fastest pair by that
    times its frequency.
    """
    spec = s.spec
    if spec.n_pairs == 0 or position_eps == 0.0:
        return 0.0
    units = np.eye(len(spec.sections)) if spec.sections is not None else np.ones((1,))
    fastest = float(np.max(np.abs(np.asarray(rope_angles(spec, units, s.seq_len)))))
    return 2.0 * position_eps * (float(np.max(np.abs(s.grid), initial=0.0)) + 1.0) * fastest


def position_tolerance(s: Setup, expected: F64, position_eps: float) -> F64:
    """Tolerance added on rotated features for positions rounded to `position_eps`."""
    spec = s.spec
    extra = _norms(s, expected) * position_shift(s, position_eps)
    extra[..., : spec.rotary_start] = 0.0
    extra[..., spec.rotary_stop :] = 0.0
    return np.asarray(extra, dtype=np.float64)


def compare(
    actual: Any,
    s: Setup,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    angle_dtype: object = None,
    dtype: object = None,
    position_dtype: object = None,
) -> Comparison:
    """Compare `actual` with the oracle of `s`; raise ValueError if the shapes differ.

    Every public comparison (`assert_rope_close`, `rope_report`, `diagnose`) comes through
    here, so `actual`, `rtol` and `atol` are checked here, before anything is computed.
    The result is judged at the precision `dtype` (default: the dtype of `x`); a result
    in another dtype fails, and a row whose tolerance is vacuous is "not checkable".
    `position_dtype` widens the model for an implementation that rounds its own position
    grid to that dtype (see `position_tolerance`).
    """
    rtol, atol = check_tolerances(rtol, atol)
    return compare_checked(
        actual,
        s,
        rtol=rtol,
        atol=atol,
        angle_dtype=angle_dtype,
        dtype=None if dtype is None else check_dtype(dtype),
        position_dtype=None
        if position_dtype is None
        else check_dtype(position_dtype, "position_dtype"),
    )


def compare_checked(
    actual: Any,
    s: Setup,
    *,
    rtol: float | None,
    atol: float | None,
    angle_dtype: object,
    dtype: str | None,
    position_dtype: str | None,
    actual_name: str | None = None,
) -> Comparison:
    """`compare` with its keywords already checked (`rtol`, `atol`; dtypes as names).

    `actual_name` is the dtype name `check_actual` gave for `actual`, when the caller
    has checked it already (None: it is checked here).
    """
    precision = s.dtype if dtype is None else dtype
    position_eps = None if position_dtype is None else EPS[position_dtype]
    if actual_name is None:
        actual_name = check_actual(actual)
    given = actual.values if isinstance(actual, HostResult) else actual
    lazily = type(given) is np.ndarray  # its shape is known; its float64 copy can wait
    if not lazily:
        given = host64(given)
    if given.shape != s.x.shape:
        msg = f"`actual` must have the shape of `x` {s.x.shape}; got {given.shape}."
        raise ValueError(msg)
    expected = s.expected
    model: ErrorModel | None = None
    unchecked = None
    found = None
    given_arrays: dict[str, F64] = {}
    if rtol is None and atol is None:
        model = error_model(precision, angle_dtype=angle_dtype)
        per_row = np.asarray(model.atol(s.max_angles(), 1.0), dtype=np.float64)
        if s.spec.n_pairs:
            shift = 0.0 if position_eps is None else position_shift(s, position_eps)
            per_unit = per_row + shift
            unchecked = (s.max_angles() > checkable_angle(model)) | (per_unit > CHECKABLE_SHARE)
        if position_eps is None:
            found = extremes(
                given, expected, per_row, s.spec, inverse=s.inverse, copied_eps=EPS[precision]
            )
    else:
        tol = (atol or 0.0) + (rtol or 0.0) * np.abs(expected)
        given_arrays["tolerance"] = _finite(np.broadcast_to(tol, s.x.shape).astype(np.float64))
    if not lazily:
        given_arrays["actual"] = given
    mismatch = None
    if actual_name != precision:
        mismatch = (
            f"the result is {actual_name} where {precision} was asked for (the "
            f"{'dtype stated' if dtype is not None else 'dtype of the input'}); it is judged "
            f"at {precision} precision. State dtype={actual_name!r} (rope-ref check "
            f"--result-dtype {actual_name}) if {actual_name} results are what you mean to check."
        )
    c = Comparison(
        setup=s,
        expected=expected,
        model=model,
        dtype_mismatch=mismatch,
        unchecked=unchecked,
        position_eps=position_eps,
        precision=precision,
        **given_arrays,
    )
    object.__setattr__(c, "given", given)
    object.__setattr__(c, "extremes", found)
    return c


def _error(actual: F64, expected: F64) -> F64:
    """``|actual - expected|``, with infinities and NaN judged as values.

    0 where both are the same value (the same infinity, or both NaN); inf where only one
    is NaN or they are different infinities.
    """
    with np.errstate(invalid="ignore"):
        error = np.subtract(actual, expected)
        np.abs(error, out=error)
    if not math.isfinite(float(error.max(initial=0.0))):
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        error = np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))
    return error


def check_dtype(dtype: object, name: str = "dtype") -> str:
    try:
        return dtype_name(dtype)
    except ValueError:
        msg = f"`{name}` must be one of the floating dtypes {sorted(EPS)}; got {dtype!r}."
        raise ValueError(msg) from None
