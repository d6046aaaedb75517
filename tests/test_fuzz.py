"""Fuzzing the public functions: a correct result, or a TypeError/ValueError naming a parameter.

Hypothesis throws arrays of every NumPy dtype kind (bool, int, uint, float16/32/64,
longdouble, complex, object, str, bytes, datetime), masked, read-only and broadcast
(huge but cheap) arrays, 0-d and 0-size shapes, values at the int64/uint64 limits, +-inf,
NaN, 1e308 and subnormals, offsets at the int64 limits and at float64 rounding ties,
seq_axis values, inverse flags and dtypes at `apply_rope`, `apply_rope_qk`, `rope_angles`
and `rope_cos_sin`, with specs of both layouts, partial and off-centre rotary slices and
every scaling rule (config dicts at `RopeSpec.from_hf` are in test_fuzz_hf.py).

Each call passes when either

- it raises TypeError or ValueError whose message names, in backticks, an argument that
  the oracle below also finds wrong, or
- it returns what the independent computation gives (tests/_independent.py: positions
  shifted with Python integers by the documented rule; RoPE by the textbook formula
  below, in either layout, with the attention factor, either direction), within each
  element's own rounding bound;

and no input was mutated (tests/_fuzzing.py). Any other exception, an error for a valid
input or a result for an invalid one fails. NumPy's floating-point warnings are silenced
around the calls: with infinite or huge values in `x` the formula itself produces NaN and
overflow, on both sides alike, and the values are what is checked.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref.scaling import DynamicNTK, Linear, Llama3, LongRoPE, NTKAware, Proportional, YaRN
from tests._fuzzing import EXAMPLES, Invalid, call, check, invalid
from tests._independent import INT64_MAX, INT64_MIN, fits_int64, shifted_grid

DTYPES = [
    np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32,
    np.float64, np.longdouble, np.complex64, np.complex128, object, "U4", "S4", "M8[s]",
]  # fmt: skip
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 5e-324, 2.2e-308, 65504.0, 3.4e38, 1e308, -1e308]
SPECIAL = [*FLOATS, math.inf, -math.inf, math.nan, 2.0**63, 2.0**64, 2.0**53 + 2]
# float64 ties: 2**53 + 1 lies halfway between two float64 values, 2**62 + 511 one short
# of halfway (a position of 1 makes it a tie), INT64_MAX - 511 rounds up to 2**63
TIES = [2**53 + 1, -(2**53) - 1, 2**53 + 3, 2**62 + 511, 2**62 + 513, INT64_MAX - 511]
INTS = [0, 1, -1, 7, 2**31 - 1, 2**62, INT64_MAX, INT64_MIN, 2**63, 2**64 - 1, *TIES]
OFFSETS = [
    0, 1, -1, 3, 2**62, INT64_MAX, INT64_MIN, 2**63, 2**64, 10**400, 0.5, -0.25, 2.0**70,
    *TIES, INT64_MAX - 1, INT64_MIN + 1, -(2**62) - 511, 2.0**53 + 2.0,
    1e308, -1e308, math.inf, math.nan, True, False, None, "3", 1 + 2j,
    np.int64(5), np.uint64(2**63), np.float32(1.5), np.float16(3.0), np.bool_(True),
]  # fmt: skip
AXES = [-2, -1, 0, 1, 2, -3, True, False, 1.0, None, "x", np.int64(0), np.int8(-2), 10**20]
SPECS = [
    rr.RopeSpec(4),
    rr.RopeSpec(8),
    rr.RopeSpec(4, freqs=[1e308, 0.0]),
    rr.RopeSpec(4, freqs=[5e-324, 2.0]),
    rr.RopeSpec(8, layout="interleaved"),
    rr.RopeSpec(10, rotary_dim=4, rotary_start=2),  # partial, off-centre
    rr.RopeSpec(12, rotary_dim=8, layout="interleaved"),
    rr.RopeSpec(8, scaling=Linear(2.0)),
    rr.RopeSpec(8, scaling=NTKAware(4.0)),
    rr.RopeSpec(8, scaling=DynamicNTK(2.0, max_position=16)),
    rr.RopeSpec(8, scaling=YaRN(4.0, 16)),
    rr.RopeSpec(8, base=5e5, scaling=Llama3(8.0, 16), layout="interleaved"),
    rr.RopeSpec(8, scaling=LongRoPE([1.0, 1.5, 2.0, 3.0], [1.0, 2.0, 4.0, 8.0], 16, factor=4.0)),
    rr.RopeSpec(12, rotary_dim=6, scaling=Proportional(0.5, factor=2.0)),
]


# --- strategies --------------------------------------------------------------------------


@st.composite
def arrays(draw, shape, *, ints=False):
    """An array of any dtype kind holding special values; maybe masked, read-only, a list.

    Half of them are int64 or float64, the dtypes positions usually have; half of the
    elements are ordinary positions.
    """
    dtype = np.dtype(draw(st.sampled_from([np.int64, np.float64]) | st.sampled_from(DTYPES)))
    pool = st.sampled_from(INTS) | st.integers(-(2**64), 2**64) if ints else st.nothing()
    special = st.sampled_from(SPECIAL) | st.floats(-1e6, 1e6) | pool
    elements = st.integers(0, 10**6) | st.integers(0, 10**6) | special
    values = draw(st.lists(elements, min_size=math.prod(shape), max_size=math.prod(shape)))
    with np.errstate(all="ignore"):
        try:
            raw = np.array(values, dtype=object).reshape(shape)
            a = raw if dtype.kind == "O" else raw.astype(dtype)
        except (TypeError, ValueError, OverflowError):  # e.g. a huge int as int8, NaN as M8
            a = np.zeros(shape, dtype=dtype)
    form = draw(st.sampled_from(["plain", "plain", "plain", "readonly", "masked", "list"]))
    if form == "readonly":
        a.flags.writeable = False
    elif form == "masked":
        a = np.ma.masked_array(a, mask=draw(st.booleans()))
    elif form == "list" and a.ndim:
        return a.tolist()
    return a


@st.composite
def xs(draw, head_dim):
    """Queries or keys: mostly float, sometimes anything; sometimes a broadcast view."""
    lead = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    last = draw(st.sampled_from([head_dim] * 5 + [3]))
    if draw(st.integers(0, 5)):
        shape = (*lead, last)
        dtype = draw(st.sampled_from([np.float16, np.float32, np.float64, np.longdouble]))
        values = st.sampled_from(SPECIAL) | st.floats(-10, 10)
        flat = draw(st.lists(values, min_size=math.prod(shape), max_size=math.prod(shape)))
        with np.errstate(all="ignore"):
            x = np.array(flat, dtype=np.float64).reshape(shape).astype(dtype)
        if x.size and draw(st.integers(0, 5)) == 0:  # huge but cheap: 2**16 tokens, one row
            x = np.broadcast_to(x.reshape(-1, last)[:1], (2**16, last))
        return x
    return draw(arrays(tuple(draw(st.lists(st.integers(0, 3), max_size=3)))))


@st.composite
def positions_for(draw, x):
    """None, or positions along the sequence axis, 0-d, or a wrong length; any dtype."""
    kind = draw(st.sampled_from(["none", "seq", "seq", "seq", "scalar", "other"]))
    if kind == "none":
        return None
    if kind == "scalar":
        return draw(arrays((), ints=True))
    shape_x = np.shape(x)
    length = shape_x[-2] if kind == "seq" and len(shape_x) >= 2 else draw(st.integers(0, 4))
    p = draw(arrays((min(length, 8),), ints=True))
    if length > 8:  # for a broadcast x: 2**16 positions, the drawn ones repeated
        p = np.resize(np.asarray(p), length)
    return p


offsets = st.sampled_from(OFFSETS) | st.integers(-(2**65), 2**65) | st.floats()
offsets = st.integers(-100, 100) | st.integers(-100, 100) | offsets
axes = st.sampled_from([-2] * 8 + AXES)


# --- the oracle for apply_rope ------------------------------------------------------------


def valid_offset(offset: object) -> int | float | None:
    if isinstance(offset, bool | np.bool_) or not isinstance(
        offset, int | float | np.integer | np.floating
    ):
        return None
    try:
        if not math.isfinite(offset):
            return None
    except OverflowError:  # an int beyond float range
        return None
    return int(offset) if isinstance(offset, int | np.integer) else float(offset)


def valid_axis(seq_axis: object) -> int | None:
    if isinstance(seq_axis, bool | np.bool_):
        return None
    try:
        return operator.index(seq_axis)
    except TypeError:
        return None


def valid_positions(positions: object) -> np.ndarray | None:
    """Validated positions as a NumPy array (int or float dtype), else None."""
    if isinstance(positions, np.ma.MaskedArray):
        return None
    try:
        p = np.asarray(positions)
    except ValueError:
        return None
    if p.dtype.kind not in "iuf":
        return None
    if p.dtype.kind == "f" and not np.all(np.isfinite(p)):
        return None
    return p


def along(seq_axis: int, ndim: int) -> int | None:
    """`seq_axis` as an axis of x.shape[:-1], or None when it names none."""
    if ndim < 2 or not -ndim <= seq_axis < ndim or seq_axis % ndim == ndim - 1:
        return None
    return seq_axis % ndim


def default_grid(length: int, offset: int | float) -> np.ndarray:
    """offset + arange(length) by the documented rule."""
    if float(offset).is_integer() and fits_int64(int(offset), int(offset) + max(length - 1, 0)):
        return np.array([float(int(offset) + i) for i in range(length)])
    return np.float64(float(offset)) + np.arange(length, dtype=np.float64)


def frequencies(spec, grid, seq_len=None):
    """inv_freq and the attention factor at `seq_len` (for a scaling rule, by default
    max(grid) + 1, the documented inference), or `invalid(...)`."""
    if seq_len is None and spec.scaling is not None:
        seq_len = float(np.max(grid)) + 1.0 if np.size(grid) else 1.0
        if not seq_len > 0:
            return invalid("seq_len", "positions")
    try:
        return rr.inv_freq(spec, seq_len), rr.attention_factor(spec, seq_len)
    except ValueError:  # a rule whose frequencies leave float64 at this length
        return invalid("spec", "positions", "seq_len")


def rope_textbook(x, spec, grid, theta, factor, inverse):
    """RoPE in float64 by the textbook formula, and each output's pair size |a| + |b|.

    Pairs (j, j + n) ("half") or (2j, 2j + 1) ("interleaved") of the rotary slice; cos and
    sin times the attention factor; sin negated for the inverse rotation.
    """
    n, start = theta.shape[0], spec.rotary_start
    grid = np.asarray(grid, dtype=np.float64)
    lead = np.broadcast_shapes(x.shape[:-1], grid.shape)
    x = np.broadcast_to(np.asarray(x, dtype=np.float64), (*lead, x.shape[-1]))
    angles = grid[..., None] * theta
    c, s = factor * np.cos(angles), factor * np.sin(angles)
    if inverse:
        s = -s
    ia = start + (np.arange(n) if spec.layout == "half" else 2 * np.arange(n))
    ib = ia + (n if spec.layout == "half" else 1)
    a, b = x[..., ia], x[..., ib]
    out, size = x.copy(), np.zeros_like(x)
    out[..., ia], out[..., ib] = a * c - b * s, b * c + a * s
    size[..., ia] = size[..., ib] = factor * (np.abs(a) + np.abs(b))
    rest = np.ones(x.shape[-1], dtype=bool)
    rest[ia] = rest[ib] = False
    size[..., rest] = np.abs(x[..., rest])
    return out, size


def expected_rope(x, spec, positions, offset, seq_axis, inverse=False):
    """The result apply_rope must give and each element's pair size, or `invalid(...)`."""
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.ndim == 0:
        return invalid("x")
    if x.shape[-1] != spec.head_dim:
        return invalid("x", "spec")
    o, axis = valid_offset(offset), valid_axis(seq_axis)
    bad = {name for name, ok in (("offset", o), ("seq_axis", axis)) if ok is None}
    if positions is not None and valid_positions(positions) is None:
        bad.add("positions")
    if bad:
        return Invalid(bad)
    lead = x.shape[:-1]
    ax = along(axis, x.ndim)  # checked whatever the positions (a documented rule)
    if ax is None:
        return invalid("seq_axis", "x")
    if positions is None:
        grid = default_grid(lead[ax], o)
        shape = [1] * len(lead)
        shape[ax] = lead[ax]
        grid = grid.reshape(shape)
    else:
        p = valid_positions(positions)
        assert p is not None  # checked above
        grid = shifted_grid(p, o)
        if not np.all(np.isfinite(grid)):
            return invalid("offset", "positions")
        if p.ndim == 1:
            if p.shape[0] == lead[ax]:
                shape = [1] * len(lead)
                shape[ax] = lead[ax]
                grid = grid.reshape(shape)
            elif p.shape[0] not in (1, lead[-1]):
                return invalid("positions")
    found = frequencies(spec, grid)
    if isinstance(found, Invalid):
        return found
    theta, factor = found
    with np.errstate(all="ignore"):
        if not np.all(np.isfinite(np.asarray(grid)[..., None] * theta)):
            return invalid("positions", "offset")
        return rope_textbook(x, spec, grid, theta, factor, inverse)


def assert_close(got: np.ndarray, expected: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> None:
    """Equal after rounding to x.dtype within each element's own bound; non-finite alike."""
    value, size = expected
    assert type(got) is np.ndarray
    assert got.dtype == x.dtype
    assert got.shape == value.shape
    with np.errstate(all="ignore"):  # huge x: bounds and roundings overflow, as they should
        rounded = value.astype(x.dtype)
        eps = float(np.finfo(x.dtype).eps)
        tol = (4 * 2.0**-52 + eps) * size + float(np.finfo(x.dtype).smallest_subnormal)
        error = np.abs(got.astype(np.float64) - value)
    finite = np.isfinite(rounded)
    # Infinite inputs give NaN or infinity by the formula; kernels may order the operations
    # otherwise (NaN where the formula has infinity): non-finite either way.
    assert not np.any(np.isfinite(got[~finite]))
    assert np.all((error <= tol)[finite]), float(np.max(np.where(finite, error - tol, -1)))


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_apply_rope_fuzz(data, spec):
    x = data.draw(xs(spec.head_dim), label="x")
    positions = data.draw(positions_for(x), label="positions")
    offset = data.draw(offsets, label="offset")
    seq_axis = data.draw(axes, label="seq_axis")
    # "auto" picks the Numba kernel for float16/32/64 NumPy arrays; others are the
    # reference's alone. The kernel's short path builds tables for blocks of 1024 positions
    # (see test_kernel_short_path_agrees_with_the_reference_or_refuses) and validates its
    # own offsets; offsets beyond the float range (10**400) go to the reference here.
    kernel = isinstance(x, np.ndarray) and x.dtype in (np.float16, np.float32, np.float64)
    kernel = kernel and float(np.max(rr.inv_freq(spec))) < 1e300
    kernel = kernel and not (isinstance(offset, int) and abs(offset) > 2**1000)
    backends = ["reference", "reference", "auto"] if kernel else ["reference"]
    backend = data.draw(st.sampled_from(backends), label="backend")
    inverse = data.draw(st.booleans(), label="inverse")
    expected = expected_rope(x, spec, positions, offset, seq_axis, inverse)
    result = call(rr.apply_rope, x, spec, positions, offset=offset, seq_axis=seq_axis,
                  inverse=inverse, backend=backend)  # fmt: skip
    check(result, expected)
    if not isinstance(result, Exception):
        assert_close(result, expected, x)


NUMBERS = [o for o in OFFSETS if valid_offset(o) is not None]
POSITION_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32,
                   np.float64]  # fmt: skip


@st.composite
def edge_positions(draw, length):
    """Valid-typed positions at the edges: int64/uint64 limits, huge and tiny floats."""
    dtype = np.dtype(draw(st.sampled_from(POSITION_DTYPES)))
    if dtype.kind == "f":
        elements = st.sampled_from(FLOATS) | st.floats(-1e300, 1e300) | st.integers(-99, 99)
    else:
        info = np.iinfo(dtype)
        edges = st.sampled_from([int(info.min), int(info.max), 0, 1, int(info.max) - 1])
        elements = edges | st.integers(int(info.min), int(info.max))
    values = draw(st.lists(elements, min_size=min(length, 8), max_size=min(length, 8)))
    with np.errstate(all="ignore"):
        p = np.array(values, dtype=object).astype(dtype)
    return np.resize(p, length) if length > 8 else p


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_apply_rope_fuzz_edge_values(data, spec):
    """Well-formed calls with values at the edges: exact shifts, overflow errors."""
    shape = (*data.draw(st.lists(st.integers(0, 3), max_size=2)), 4, spec.head_dim)
    x = (
        np.random.default_rng(len(shape))
        .standard_normal(shape)
        .astype(data.draw(st.sampled_from([np.float16, np.float32, np.float64])))
    )
    positions = data.draw(st.none() | edge_positions(shape[-2]), label="positions")
    offset = data.draw(st.sampled_from(NUMBERS) | st.integers(-(2**64), 2**64) | st.floats(
        allow_nan=False, allow_infinity=False), label="offset")  # fmt: skip
    backend = "reference" if float(np.max(rr.inv_freq(spec))) > 1e300 else "auto"
    inverse = data.draw(st.booleans(), label="inverse")
    expected = expected_rope(x, spec, positions, offset, -2, inverse)
    result = call(rr.apply_rope, x, spec, positions, offset=offset, inverse=inverse,
                  backend=backend)  # fmt: skip
    check(result, expected)
    if not isinstance(result, Exception):
        assert_close(result, expected, x)


def test_kernel_short_path_agrees_with_the_reference_or_refuses():
    """The Numba short path builds tables for a block of 1024 positions and checks them all.

    With inverse frequencies near 1e306 the block's last angles overflow although the
    positions asked for do not; the reference rotates, the short path may refuse (a clear
    error, never a wrong value).
    """
    pytest.importorskip("numba")
    spec = rr.RopeSpec(2, freqs=[1e306])  # position 179 overflows, positions 0..2 do not
    x = np.ones((3, 2))
    expected = rope_textbook(x, spec, np.arange(3.0), rr.inv_freq(spec), 1.0, False)
    assert_close(rr.apply_rope(x, spec), expected, x)
    result = call(rr.apply_rope, x, spec, backend="numba")
    if isinstance(result, ValueError):
        assert "`positions` times the inverse frequencies overflow float64" in str(result)
    else:
        assert_close(result, expected, x)


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_apply_rope_qk_fuzz(data, spec):
    """Queries take the newest key positions, offset + arange(k_len)[-q_len:]."""
    k = data.draw(xs(spec.head_dim), label="k")
    q = k[..., -1:, :] if isinstance(k, np.ndarray) and k.ndim >= 2 else k
    offset = data.draw(offsets, label="offset")
    result = call(rr.apply_rope_qk, q, k, spec, offset=offset)
    expected = expected_rope(k, spec, None, offset, -2)
    if isinstance(expected, Invalid) and "x" in expected.names:  # q is a slice of k
        expected = Invalid(expected.names | {"q", "k"})
    check(result, expected)
    if not isinstance(result, Exception):
        q_rot, k_rot = result
        assert_close(k_rot, expected, k)
        assert_close(q_rot, tuple(e[..., -1:, :] for e in expected), q)


# --- rope_angles and rope_cos_sin -------------------------------------------------------

TABLE_DTYPES = [
    None, np.float16, np.float32, np.float64, np.longdouble, "float32", "f8", np.int32,
    bool, np.uint8, object, np.complex128, "bogus", "M8[s]", 3,
]  # fmt: skip


def expected_angles(spec, positions):
    """Angles and the attention factor, or `invalid(...)`."""
    p = valid_positions(positions)
    if p is None:
        return invalid("positions")
    found = frequencies(spec, p.astype(np.float64))
    if isinstance(found, Invalid):
        return found
    theta, factor = found
    with np.errstate(all="ignore"):
        angles = p.astype(np.float64)[..., None] * theta
    return (angles, factor) if np.all(np.isfinite(angles)) else invalid("positions")


def table_dtype(dtype: Any) -> np.dtype | None:
    if dtype is None:
        return np.dtype(np.float64)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return None
    return dtype if dtype.kind == "f" else None


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_rope_angles_and_cos_sin_fuzz(data, spec):
    shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2), label="shape"))
    positions = data.draw(arrays(shape, ints=True), label="positions")
    dtype = data.draw(st.sampled_from(TABLE_DTYPES), label="dtype")
    expected = expected_angles(spec, positions)
    result = call(rr.rope_angles, spec, positions)
    check(result, expected)
    if not isinstance(result, Exception):
        np.testing.assert_array_equal(result, expected[0])
    out = table_dtype(dtype)
    if out is None:
        bad = expected.names if isinstance(expected, Invalid) else frozenset()
        expected = Invalid({"dtype", *bad})
    result = call(rr.rope_cos_sin, spec, positions, dtype=dtype)
    check(result, expected)
    if not isinstance(result, Exception):
        cos, sin = result
        angles, factor = expected
        assert cos.dtype == sin.dtype == out
        with np.errstate(all="ignore"):
            cos_want, sin_want = factor * np.cos(angles), factor * np.sin(angles)
        np.testing.assert_array_equal(cos, cos_want.astype(out))
        np.testing.assert_array_equal(sin, sin_want.astype(out))
