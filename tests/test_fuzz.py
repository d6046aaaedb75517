"""Fuzzing the public functions: a correct result, or a TypeError/ValueError naming a parameter.

Hypothesis throws arrays of every NumPy dtype kind (bool, int, uint, float16/32/64,
longdouble, complex, object, str, bytes, datetime), masked, read-only and broadcast
(huge but cheap) arrays, 0-d and 0-size shapes, values at the int64/uint64 limits, +-inf,
NaN, 1e308 and subnormals, odd offsets, seq_axis values and dtypes at `apply_rope`,
`apply_rope_qk`, `rope_angles` and `rope_cos_sin`, and config dicts at `RopeSpec.from_hf`.

Each call passes when either

- it raises TypeError or ValueError whose message names, in backticks, a parameter of the
  function (or, for from_hf, a config key) and the oracle below also calls the input
  invalid, or
- it returns what the independent computation gives (tests/_independent.py: positions
  shifted with Python integers by the documented rule, RoPE by the textbook formula),
  within each element's own rounding bound;

and no input was mutated. Any other exception, an error for a valid input or a result for
an invalid one fails. NumPy's floating-point warnings are silenced around the calls: with
infinite or huge values in `x` the formula itself produces NaN and overflow, identically
on both sides, and the values are what is checked.
"""

from __future__ import annotations

import copy
import math
import operator
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import rope_ref as rr
from tests._independent import INT64_MAX, INT64_MIN, fits_int64, rope_half, shifted_grid

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# Per test: 150 under the derandomized "ci" profile (about 15 s in all), more under "thorough".
EXAMPLES = max(150, settings().max_examples)

INVALID = object()  # the oracle's verdict: the call must raise

DTYPES = [
    np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32,
    np.float64, np.longdouble, np.complex64, np.complex128, object, "U4", "S4", "M8[s]",
]  # fmt: skip
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 5e-324, 2.2e-308, 65504.0, 3.4e38, 1e308, -1e308]
SPECIAL = [*FLOATS, math.inf, -math.inf, math.nan, 2.0**63, 2.0**64, 2.0**53 + 2]
INTS = [0, 1, -1, 7, 2**31 - 1, 2**53 + 1, 2**62, INT64_MAX, INT64_MIN, 2**63, 2**64 - 1]
OFFSETS = [
    0, 1, -1, 3, 2**62, INT64_MAX, INT64_MIN, 2**63, 2**64, 10**400, 0.5, -0.25, 2.0**70,
    1e308, -1e308, math.inf, math.nan, True, False, None, "3", 1 + 2j,
    np.int64(5), np.uint64(2**63), np.float32(1.5), np.float16(3.0), np.bool_(True),
]  # fmt: skip
AXES = [-2, -1, 0, 1, 2, -3, True, False, 1.0, None, "x", np.int64(0), np.int8(-2), 10**20]
SPECS = [
    rr.RopeSpec(4),
    rr.RopeSpec(8),
    rr.RopeSpec(4, freqs=[1e308, 0.0]),
    rr.RopeSpec(4, freqs=[5e-324, 2.0]),
]


def named(error: Exception) -> set[str]:
    """Names in backticks in an error message (``spec.xpos`` counts as ``spec``)."""
    return {m.split(".")[0] for m in re.findall(r"`([A-Za-z_][\w.]*)`", str(error))}


def call(function, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, its TypeError/ValueError returned, inputs unchanged."""
    before = copy.deepcopy((args, kwargs))
    try:
        with np.errstate(all="ignore"):
            result = function(*args, **kwargs)
    except (TypeError, ValueError) as err:
        result = err
    assert_unchanged(before, (args, kwargs))
    return result


def assert_unchanged(before: Any, after: Any) -> None:
    if isinstance(before, np.ndarray):
        assert type(before) is type(after)
        assert before.dtype == after.dtype
        assert before.shape == after.shape
        if before.dtype.kind == "O":
            assert_unchanged(before.ravel().tolist(), after.ravel().tolist())
        else:
            assert np.array_equal(before, after, equal_nan=before.dtype.kind in "fcmM")
        if isinstance(before, np.ma.MaskedArray):
            assert np.array_equal(np.ma.getmaskarray(before), np.ma.getmaskarray(after))
    elif isinstance(before, list | tuple):
        for b, a in zip(before, after, strict=True):
            assert_unchanged(b, a)
    elif isinstance(before, dict):
        assert before.keys() == after.keys()
        for key in before:
            assert_unchanged(before[key], after[key])
    elif isinstance(before, float) and math.isnan(before):
        assert math.isnan(after)
    else:
        assert before == after or before is after


def check(result: Any, expected: Any, names: set[str]) -> None:
    """The verdict: an error naming one of `names` iff the oracle says INVALID."""
    event("refused" if isinstance(result, Exception) else "computed")
    if isinstance(result, Exception):
        assert expected is INVALID, f"refused a valid input: {result!r}"
        assert named(result) & names, f"the error names none of {sorted(names)}: {result}"
    else:
        assert expected is not INVALID, f"returned a result for an invalid input: {result!r}"


# --- strategies --------------------------------------------------------------------------


@st.composite
def arrays(draw, shape, *, ints=False):
    """An array of any dtype kind holding special values; maybe masked, read-only, a list.

    Half of them are int64 or float64, the dtypes positions usually have.
    """
    dtype = np.dtype(draw(st.sampled_from([np.int64, np.float64]) | st.sampled_from(DTYPES)))
    pool = st.sampled_from(INTS) | st.integers(-(2**64), 2**64) if ints else st.nothing()
    elements = st.integers(0, 10**6) | st.sampled_from(SPECIAL) | st.floats(-1e6, 1e6) | pool
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
    last = draw(st.sampled_from([head_dim, head_dim, head_dim, 3]))
    if draw(st.integers(0, 3)):
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
    kind = draw(st.sampled_from(["none", "seq", "seq", "scalar", "other"]))
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
axes = st.sampled_from([-2, -2, -2, *AXES])


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


def expected_rope(x, spec, positions, offset, seq_axis):
    """The result apply_rope must give, or INVALID."""
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.ndim == 0:
        return INVALID
    if x.shape[-1] != spec.head_dim:
        return INVALID
    o, axis = valid_offset(offset), valid_axis(seq_axis)
    if o is None or axis is None:
        return INVALID
    lead = x.shape[:-1]
    if positions is None:
        ax = along(axis, x.ndim)
        if ax is None:
            return INVALID
        grid = default_grid(lead[ax], o)
        shape = [1] * len(lead)
        shape[ax] = lead[ax]
        grid = grid.reshape(shape)
    else:
        p = valid_positions(positions)
        if p is None:
            return INVALID
        grid = shifted_grid(p, o)
        if not np.all(np.isfinite(grid)):
            return INVALID
        if p.ndim == 1:
            ax = along(axis, x.ndim)
            if ax is None:
                return INVALID
            if p.shape[0] == lead[ax]:
                shape = [1] * len(lead)
                shape[ax] = lead[ax]
                grid = grid.reshape(shape)
            elif p.shape[0] not in (1, lead[-1]):
                return INVALID
    theta = rr.inv_freq(spec)
    with np.errstate(all="ignore"):
        if not np.all(np.isfinite(np.asarray(grid)[..., None] * theta)):
            return INVALID
        return rope_half(x, grid, theta)


def assert_close(got: np.ndarray, expected: np.ndarray, x: np.ndarray) -> None:
    """Equal after rounding to x.dtype within each element's own bound; non-finite alike."""
    assert type(got) is np.ndarray
    assert got.dtype == x.dtype
    assert got.shape == expected.shape
    with np.errstate(all="ignore"):
        rounded = expected.astype(x.dtype)
        size = np.broadcast_to(np.abs(x.astype(np.float64)), expected.shape)
    n = x.shape[-1] // 2
    pair = size[..., :n] + size[..., n : 2 * n]
    size = np.concatenate([pair, pair, size[..., 2 * n :]], axis=-1)
    finite = np.isfinite(rounded)
    # Infinite inputs give NaN or infinity by the formula; kernels may order the operations
    # otherwise (NaN where the formula has infinity): non-finite either way.
    assert not np.any(np.isfinite(got[~finite]))
    eps = float(np.finfo(x.dtype).eps)
    tol = (4 * 2.0**-52 + eps) * size + float(np.finfo(x.dtype).smallest_subnormal)
    with np.errstate(all="ignore"):
        error = np.abs(got.astype(np.float64) - expected)
    assert np.all((error <= tol)[finite]), float(np.max(np.where(finite, error - tol, -1)))


APPLY = {"x", "spec", "positions", "offset", "seq_axis"}


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
    expected = expected_rope(x, spec, positions, offset, seq_axis)
    result = call(rr.apply_rope, x, spec, positions, offset=offset, seq_axis=seq_axis,
                  backend=backend)  # fmt: skip
    check(result, expected, APPLY | {"backend"})
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
    expected = expected_rope(x, spec, positions, offset, -2)
    result = call(rr.apply_rope, x, spec, positions, offset=offset, backend=backend)
    check(result, expected, {"positions", "offset"})
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
    expected = rope_half(x, np.arange(3.0), rr.inv_freq(spec))
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
    check(result, expected, {"q", "k", "spec", "positions", "offset", "seq_axis"})
    if not isinstance(result, Exception):
        q_rot, k_rot = result
        assert_close(k_rot, expected, k)
        assert_close(q_rot, expected[..., -1:, :], q)


# --- rope_angles and rope_cos_sin -------------------------------------------------------

TABLE_DTYPES = [
    None, np.float16, np.float32, np.float64, np.longdouble, "float32", "f8", np.int32,
    bool, np.uint8, object, np.complex128, "bogus", "M8[s]", 3,
]  # fmt: skip


def expected_angles(spec, positions):
    p = valid_positions(positions)
    if p is None:
        return INVALID
    with np.errstate(all="ignore"):
        angles = p.astype(np.float64)[..., None] * rr.inv_freq(spec)
    return angles if np.all(np.isfinite(angles)) else INVALID


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
    angles = expected_angles(spec, positions)
    result = call(rr.rope_angles, spec, positions)
    check(result, angles, {"spec", "positions"})
    if not isinstance(result, Exception):
        np.testing.assert_array_equal(result, angles)
    out = table_dtype(dtype)
    expected = INVALID if angles is INVALID or out is None else angles
    result = call(rr.rope_cos_sin, spec, positions, dtype=dtype)
    check(result, expected, {"spec", "positions", "dtype"})
    if not isinstance(result, Exception):
        cos, sin = result
        assert cos.dtype == sin.dtype == out
        np.testing.assert_array_equal(cos, np.cos(angles).astype(out))
        np.testing.assert_array_equal(sin, np.sin(angles).astype(out))


# --- RopeSpec.from_hf ---------------------------------------------------------------------

CONFIG: dict[str, Any] = {
    "head_dim": 64,
    "max_position_embeddings": 16384,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
    },
}
# key: (in rope_parameters?, kind). Kinds: int, base (> 1), positive, real, fraction, flag.
KEYS = {
    "head_dim": (False, "int"),
    "max_position_embeddings": (False, "int"),
    "rope_theta": (True, "base"),
    "factor": (True, "positive"),
    "original_max_position_embeddings": (True, "int"),
    "beta_fast": (True, "positive"),
    "beta_slow": (True, "positive"),
    "mscale": (True, "real"),
    "mscale_all_dim": (True, "real"),
    "attention_factor": (True, "positive"),
    "truncate": (True, "flag"),
    "partial_rotary_factor": (True, "fraction"),
}
VALUES = [
    None, 0, 0.0, -1, 1, 2, 3, 7, 64, 64.0, 96, 128, 4096, 4096.0, 128.7, 0.5, 1.5, 1e308,
    2**53 + 1, 10**400, math.nan, math.inf, -math.inf, True, False, "", "128", "2", "1e6",
    [1e4], [], {}, {"a": 1}, "yarn", np.float64(2.5), np.int64(32),
]  # fmt: skip


def key_value(kind: str, value: Any) -> Any:
    """The value `kind` reads from `value` (None for absent), or INVALID."""
    if value is None:
        return None
    if kind == "flag":
        return value if isinstance(value, bool) else INVALID
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return INVALID
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if kind == "int":
        if isinstance(value, int | np.integer):
            ok = 1 <= int(value) <= 2**53
        else:
            ok = math.isfinite(number) and number.is_integer() and 1 <= number <= 2**53
        return int(number if not isinstance(value, int | np.integer) else value) if ok else INVALID
    low_ok = {
        "base": number > 1, "positive": number > 0, "real": True, "fraction": 0 < number <= 1
    }[kind]  # fmt: skip
    return number if math.isfinite(number) and low_ok else INVALID


def intended_spec(values: dict[str, Any]) -> Any:
    """The spec the config means (fields from the values read, HF's defaults), or INVALID."""
    read = {k: key_value(KEYS[k][1], v) for k, v in values.items()}
    if any(v is INVALID for v in read.values()):
        return INVALID
    get = {**dict.fromkeys(KEYS), **CONFIG, **CONFIG["rope_parameters"], **read}.get
    head_dim, fraction = get("head_dim"), get("partial_rotary_factor") or 1.0
    if head_dim is None:
        return INVALID  # no head size at all
    original = get("original_max_position_embeddings") or get("max_position_embeddings")
    factor = get("factor")
    if factor is None and get("max_position_embeddings") is not None and original:
        factor = get("max_position_embeddings") / original
    try:
        rule = rr.scaling.YaRN(
            factor,
            original,
            beta_fast=32.0 if get("beta_fast") is None else get("beta_fast"),
            beta_slow=1.0 if get("beta_slow") is None else get("beta_slow"),
            mscale=get("mscale"),
            mscale_all_dim=get("mscale_all_dim"),
            attention_factor=get("attention_factor"),
            truncate=True if get("truncate") is None else get("truncate"),
        )
        base = 10000.0 if get("rope_theta") is None else get("rope_theta")
        return rr.RopeSpec(head_dim, rotary_dim=int(head_dim * fraction), base=base, scaling=rule)
    except (TypeError, ValueError):
        return INVALID


@settings(max_examples=2 * EXAMPLES)
@given(
    entries=st.dictionaries(
        st.sampled_from(sorted(KEYS)), st.sampled_from(VALUES) | st.floats(), max_size=3
    )
)
def test_from_hf_fuzz(entries):
    config = copy.deepcopy(CONFIG)
    for key, value in entries.items():
        (config["rope_parameters"] if KEYS[key][0] else config)[key] = value
    expected = intended_spec(entries)
    result = call(rr.RopeSpec.from_hf, config)
    check(result, expected, set(KEYS) | {"config", "head_dim"})
    if expected is INVALID:
        bad = {k for k, v in entries.items() if key_value(KEYS[k][1], v) is INVALID}
        if "head_dim" in entries and entries["head_dim"] is None:
            bad |= {"config", "head_dim"}  # no head size: a problem of its own
        assert not bad or named(result) & bad, (result, bad)
    else:
        assert result == expected


WILD_KEYS = {"config", "rope_parameters", "rope_scaling", "text_config", "rope_type", "type"}
WILD_KEYS |= {"layer_type", "hidden_size", "num_attention_heads"}


@settings(max_examples=EXAMPLES)
@given(
    config=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(sorted(set(KEYS) | WILD_KEYS)),
                inner,
                max_size=4,
            )
        ),
        max_leaves=8,
    )
)
def test_from_hf_wild_configs(config):
    result = call(rr.RopeSpec.from_hf, config)
    if isinstance(result, Exception):
        assert named(result) & (set(KEYS) | WILD_KEYS), result
    else:
        assert isinstance(result, rr.RopeSpec)
