"""Fuzzing xPos specs: the textbook xPos rotation, or an error naming the wrong argument.

Specs with xPos (both layouts, partial and off-centre slices, scale bases from 1 to 512,
with a scaling rule and its attention factor) meet positions, offsets (up to one that
sends the scales past float64), explicit and inferred `seq_len`, good and bad `role`,
both directions, at `apply_rope` and `apply_rope_qk`. The oracle is the formula of Sun
et al. (2022) written below: pair j at position p turns by ``p * theta_j`` and is scaled
by ``zeta_j ** (+-(p - c) / s)`` (queries +, keys -), ``zeta_j = (2j + 0.4 d) / (1.4 d)``,
``c = floor(L / 2)``, L the sequence length (``max(p) + 1`` unless given); the inverse
turns back and keeps the scale. Frequencies and the attention factor come from
`rr.inv_freq` and `rr.attention_factor`, which other tests check against HF and mpmath.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref.scaling import DynamicNTK, Linear, YaRN
from tests._fuzzing import EXAMPLES, Invalid, call, check, invalid
from tests._independent import shifted_grid

SPECS = [
    rr.RopeSpec(8, xpos=rr.XPos()),
    rr.RopeSpec(8, layout="interleaved", xpos=rr.XPos(8.0)),
    rr.RopeSpec(12, rotary_dim=8, xpos=rr.XPos(1.0)),  # partial
    rr.RopeSpec(10, rotary_dim=4, rotary_start=2, layout="interleaved", xpos=rr.XPos(64.0)),
    rr.RopeSpec(8, scaling=YaRN(4.0, 16), xpos=rr.XPos(16.0)),  # attention factor != 1
    rr.RopeSpec(8, scaling=DynamicNTK(2.0, max_position=16), xpos=rr.XPos()),  # needs L
    rr.RopeSpec(8, scaling=Linear(2.0), xpos=rr.XPos(2.0), layout="interleaved"),
]
# 10**7 puts every scale past float64 (|exponent| > 1900): queries 0, keys overflow.
OFFSETS = [0, 0, 1, -3, 7, 40, -40, 0.5, 2.5, 10**7, math.nan, math.inf, "3", None, True]
SEQ_LENS = [None, None, None, 1, 8, 77, 300, 0.5, 12.5, 0, -4, math.nan, math.inf, "8", True]
ROLES = ["query", "query", "key", "key", None, "value", 3]
EPS64 = 2.0**-52


def valid_offset(offset: object) -> float | None:
    if isinstance(offset, bool) or not isinstance(offset, int | float):
        return None
    return float(offset) if math.isfinite(offset) else None


def valid_seq_len(seq_len: object) -> float | None:
    """A real, finite, positive `seq_len` (None: inferred); else math.nan."""
    if seq_len is None:
        return None
    if isinstance(seq_len, bool) or not isinstance(seq_len, int | float):
        return math.nan
    return float(seq_len) if math.isfinite(seq_len) and seq_len > 0 else math.nan


def textbook(x, spec, grid, seq_len, role, inverse):
    """xPos RoPE in float64 along the last-but-one axis: (result, size, conditioning).

    `size` is each output's pair magnitude times its scale and attention factor;
    `conditioning` the magnitude of the scale's exponent ``|t log zeta|``, by which float64
    errors in ``zeta ** t`` grow.
    """
    rule_len = seq_len if spec.scaling is not None else None
    theta, factor = rr.inv_freq(spec, rule_len), rr.attention_factor(spec, rule_len)
    d = spec.rotary_dim
    n = d // 2
    zeta = (2.0 * np.arange(n) + 0.4 * d) / (1.4 * d)
    sign = 1.0 if role == "query" else -1.0
    t = sign * (grid[:, None] - math.floor(seq_len / 2)) / spec.xpos.scale_base
    with np.errstate(over="ignore", under="ignore"):
        scale = zeta**t
    if not np.all(np.isfinite(scale)):
        return invalid("positions", "offset")
    angles = grid[:, None] * theta
    c, s = factor * scale * np.cos(angles), factor * scale * np.sin(angles)
    if inverse:
        s = -s
    start = spec.rotary_start
    ia = start + (np.arange(n) if spec.layout == "half" else 2 * np.arange(n))
    ib = ia + (n if spec.layout == "half" else 1)
    x = np.asarray(x, dtype=np.float64)
    a, b = x[..., ia], x[..., ib]
    out, size, cond = x.copy(), np.abs(x), np.zeros_like(x)
    out[..., ia], out[..., ib] = a * c - b * s, b * c + a * s
    size[..., ia] = size[..., ib] = factor * scale * (np.abs(a) + np.abs(b))
    cond[..., ia] = cond[..., ib] = np.broadcast_to(np.abs(t * np.log(zeta)), a.shape)
    return out, size, cond


def assert_close(got: Any, expected: tuple[np.ndarray, ...], x: np.ndarray) -> None:
    """Equal after rounding to x.dtype within each element's bound; overflow alike."""
    value, size, cond = expected
    assert type(got) is np.ndarray
    assert got.dtype == x.dtype
    assert got.shape == value.shape
    with np.errstate(over="ignore"):
        rounded = value.astype(x.dtype)
    eps = float(np.finfo(x.dtype).eps)
    tol = (8 * EPS64 * (1 + cond) + eps) * size + float(np.finfo(x.dtype).smallest_subnormal)
    finite = np.isfinite(rounded)
    assert not np.any(np.isfinite(got[~finite]))
    error = np.abs(got.astype(np.float64) - value)
    assert np.all((error <= tol)[finite]), float(np.max(np.where(finite, error - tol, -1)))


def grid_of(positions: np.ndarray | None, offset: float, seq: int) -> np.ndarray:
    """The shifted positions along the sequence (offset + arange(seq) by default)."""
    if positions is None:
        positions = np.arange(seq)
    return shifted_grid(positions, int(offset) if float(offset).is_integer() else offset)


def expected_apply(x, spec, positions, offset, seq_len, role, inverse):
    """What `apply_rope(x, spec, positions, offset=..., seq_len=..., role=...)` gives."""
    o, length = valid_offset(offset), valid_seq_len(seq_len)
    checks = {
        "offset": o is not None,
        "role": role in ("query", "key"),
        "seq_len": length is None or not math.isnan(length),
    }
    bad = {name for name, ok in checks.items() if not ok}
    if positions is not None and positions.shape[0] not in (1, x.shape[-2]):  # 1 broadcasts
        bad.add("positions")
    if bad:
        return Invalid(bad)
    assert o is not None  # checked above
    grid = grid_of(positions, o, x.shape[-2])
    if length is None:
        length = float(np.max(grid)) + 1.0 if grid.size else 1.0
        if spec.scaling is not None and length <= 0:
            return invalid("seq_len", "positions")
    return textbook(x, spec, grid, length, role, inverse)


@st.composite
def queries(draw: st.DrawFn, head_dim: int) -> np.ndarray:
    """Standard normal values of shape (..., seq, head_dim) in a float dtype."""
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    seq = draw(st.integers(0, 5))
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return rng.standard_normal((*lead, seq, head_dim)).astype(dtype)


@st.composite
def positions_along(draw: st.DrawFn, seq: int) -> np.ndarray | None:
    """None, or integer or real positions of length `seq` (sometimes one too many)."""
    kind = draw(st.sampled_from(["none", "int", "float", "wrong"]))
    if kind == "none":
        return None
    length = seq + 1 if kind == "wrong" else seq
    if kind == "float":
        values = st.floats(-50, 50, allow_nan=False)
        return np.array(draw(st.lists(values, min_size=length, max_size=length)), dtype=float)
    values = st.integers(-50, 50)
    return np.array(draw(st.lists(values, min_size=length, max_size=length)), dtype=np.int64)


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_apply_rope_xpos_fuzz(data, spec):
    x = data.draw(queries(spec.head_dim), label="x")
    positions = data.draw(positions_along(x.shape[-2]), label="positions")
    offset = data.draw(st.sampled_from(OFFSETS), label="offset")
    seq_len = data.draw(st.sampled_from(SEQ_LENS), label="seq_len")
    role = data.draw(st.sampled_from(ROLES), label="role")
    inverse = data.draw(st.booleans(), label="inverse")
    backend = data.draw(st.sampled_from(["reference", "auto"]), label="backend")
    expected = expected_apply(x, spec, positions, offset, seq_len, role, inverse)
    result = call(rr.apply_rope, x, spec, positions, offset=offset, seq_len=seq_len, role=role,
                  inverse=inverse, backend=backend)  # fmt: skip
    check(result, expected)
    if not isinstance(result, Exception):
        assert_close(result, expected, x)


@settings(max_examples=EXAMPLES)
@given(data=st.data(), spec=st.sampled_from(SPECS))
def test_apply_rope_qk_xpos_fuzz(data, spec):
    """Queries take the newest key positions; both share L = offset + k_len."""
    k = data.draw(queries(spec.head_dim), label="k")
    q = k[..., k.shape[-2] - data.draw(st.integers(0, k.shape[-2]), label="q_len") :, :]
    offset = data.draw(st.sampled_from(OFFSETS), label="offset")
    inverse = data.draw(st.booleans(), label="inverse")
    result = call(rr.apply_rope_qk, q, k, spec, offset=offset, inverse=inverse)
    o = valid_offset(offset)
    if o is None:
        check(result, invalid("offset"))
        return
    grid = grid_of(None, o, k.shape[-2])
    length = float(np.max(grid)) + 1.0 if grid.size else 1.0
    if length <= 0:  # an inferred length must be positive
        check(result, invalid("seq_len", "positions", "offset"))
        return
    want_k = textbook(k, spec, grid, length, "key", inverse)
    want_q = textbook(q, spec, grid[k.shape[-2] - q.shape[-2] :], length, "query", inverse)
    if isinstance(want_k, Invalid) or isinstance(want_q, Invalid):
        check(result, invalid("positions", "offset"))
        return
    check(result, want_k)
    q_rot, k_rot = result
    assert_close(q_rot, want_q, q)
    assert_close(k_rot, want_k, k)


def test_apply_rope_qk_xpos_without_queries_centres_keys_on_their_own_length():
    """No query positions add nothing to L: keys at -3 alone give L = -2, refused as inferred.

    Catches: the empty query array counted as ``max + 1 = 1``, which centred the keys at 0
    (L = 1) instead of refusing, and so scaled them otherwise than ``apply_rope`` would.
    """
    spec = rr.RopeSpec(8, xpos=rr.XPos(4.0))
    k = np.ones((3, 8))
    with pytest.raises(ValueError, match="`seq_len` is inferred"):
        rr.apply_rope_qk(k[3:], k, spec, offset=-5)  # keys at -5, -4, -3
    q_rot, k_rot = rr.apply_rope_qk(k[3:], k, spec, offset=1)  # keys at 1, 2, 3: L = 4
    want = textbook(k, spec, np.array([1.0, 2.0, 3.0]), 4.0, "key", False)
    assert q_rot.shape == (0, 8)
    assert_close(k_rot, want, k)
