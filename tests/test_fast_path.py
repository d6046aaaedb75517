"""Offset calls on NumPy with a kernel: the short road equals the general path bit for bit,
its table cache stays bounded however many sequences decode at once, and bad input gets
the general path's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_ref as rr
from rope_ref._engine import fast_path, runner
from rope_ref._engine.table_cache import offset_cache

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

BLOCK = fast_path.BLOCK
EXACT_INT = fast_path.EXACT_INT


def general_path(*args: Any, **kwargs: Any) -> np.ndarray:
    """`apply_rope` with the short road closed: validation and tables of the general path."""
    mp = pytest.MonkeyPatch()
    mp.setattr(runner, "numpy_kernel_call", lambda *a: None)
    try:
        return rr.apply_rope(*args, **kwargs)
    finally:
        mp.undo()


offsets = st.one_of(
    st.integers(-(2**40), 2**40),
    st.integers(-3 * BLOCK, 3 * BLOCK),  # block edges, negative positions
    st.integers(EXACT_INT - 600, EXACT_INT - 1),  # the last exact integers
    st.integers(-EXACT_INT, -EXACT_INT + 600),
)


@given(
    offsets,
    st.integers(1, 5 * BLOCK),  # one block, several, more than a call takes from blocks
    st.sampled_from([np.float16, np.float32, np.float64]),
    st.sampled_from(["half", "interleaved"]),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=60)
def test_integer_offsets_equal_explicit_positions_exactly(
    offset, seq, dtype, layout, as_float, inverse
):
    """Integer offsets (and integral floats, which the general path treats alike) below
    2**62 read their rows from cached blocks; the rotation is bit-identical to passing
    the positions explicitly, which builds the tables of exactly those positions."""
    spec = rr.RopeSpec(32, layout=layout)
    x = np.random.default_rng(seq).standard_normal((seq, 2, 32)).astype(dtype)
    given_offset = float(offset) if as_float and abs(offset) < 2**53 else offset
    got = rr.apply_rope(x, spec, offset=given_offset, seq_axis=0, inverse=inverse, backend="numba")
    positions = np.arange(seq, dtype=np.int64) + offset
    want = rr.apply_rope(x, spec, positions, seq_axis=0, inverse=inverse, backend="numba")
    np.testing.assert_array_equal(got, want)


@given(
    st.one_of(
        st.integers(EXACT_INT, 2**70),
        st.integers(-(2**200), -EXACT_INT),
        st.floats(-1e30, 1e30, allow_nan=False).filter(lambda v: not v.is_integer()),
        st.floats(2.0**62, 1e300),
    ),
    st.integers(1, 70),
    st.booleans(),
)
@settings(max_examples=40)
def test_other_offsets_equal_the_general_path_exactly(offset, seq, inverse):
    """Fractional and huge offsets get the general path's positions and tables."""
    spec = rr.RopeSpec(16)
    x = np.random.default_rng(seq).standard_normal((1, seq, 2, 16)).astype(np.float32)
    kwargs = {"offset": offset, "seq_axis": -3, "inverse": inverse, "backend": "numba"}
    got = rr.apply_rope(x, spec, **kwargs)
    want = general_path(x, spec, **kwargs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("offset", [2**62, 2**62 + 1, 2**63 - 1, 2**63 + 12345, -(2**62) - 7])
def test_one_token_at_a_huge_offset_equals_its_explicit_position(offset):
    """A decode step at an offset beyond int64's exact range rotates by float64(offset)."""
    spec = rr.RopeSpec(64)
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 64))
    got = rr.apply_rope(x, spec, offset=offset, seq_axis=-3, backend="numba")
    want = rr.apply_rope(x, spec, np.array([float(offset)]), seq_axis=-3, backend="numba")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seq_len", [None, 5000, 70000.0])
def test_length_dependent_scaling_equals_explicit_positions(seq_len):
    """Without `seq_len`, DynamicNTK's frequencies depend on the call's positions: such
    calls build their own rows, never a block's."""
    spec = rr.RopeSpec(32, scaling=rr.scaling.DynamicNTK(4.0, max_position=4096))
    x = np.random.default_rng(1).standard_normal((3, 32)).astype(np.float32)
    for offset, inverse in ((0, False), (10_000, True), (10_001, False), (10_001, True)):
        kwargs = {"seq_len": seq_len, "inverse": inverse, "backend": "numba"}
        got = rr.apply_rope(x, spec, offset=offset, **kwargs)
        positions = np.arange(3) + offset
        want = rr.apply_rope(x, spec, positions, **kwargs)
        np.testing.assert_array_equal(got, want)


def test_interleaved_sequences_build_each_block_once(monkeypatch):
    """1000 sequences decoding in turn (offsets 1024 apart, one token each per round)
    build one block each, once; the next rounds only read them, and the cache stays
    within its byte bound."""
    builds: list[tuple[int, Any]] = []
    original = fast_path._OffsetTables._build

    def counting(self, length, offset):
        builds.append((length, offset))
        return original(self, length, offset)

    monkeypatch.setattr(fast_path._OffsetTables, "_build", counting)
    spec = rr.RopeSpec(128, base=123457.0)  # a spec of its own: blocks not built yet
    x = np.random.default_rng(2).standard_normal((1, 1, 8, 128)).astype(np.float32)
    starts = [1024 * i + 7 for i in range(1000)]
    for step in range(3):
        for start in starts:
            rr.apply_rope(x, spec, offset=start + step, seq_axis=-3, backend="numba")
    assert builds == [(BLOCK, start - 7) for start in starts]
    assert offset_cache.nbytes <= offset_cache.max_bytes


@pytest.mark.parametrize("offset", [2**62 + 5, 123.25])
def test_offsets_outside_the_blocks_build_only_their_own_rows(monkeypatch, offset):
    builds: list[int] = []
    original = fast_path._OffsetTables._build

    def counting(self, length, at):
        builds.append(length)
        return original(self, length, at)

    monkeypatch.setattr(fast_path._OffsetTables, "_build", counting)
    x = np.ones((1, 1, 4, 64), dtype=np.float32)
    for step in range(5):
        rr.apply_rope(x, None, offset=offset + step * 1024, seq_axis=-3, backend="numba")
    assert builds == [1] * 5


def test_geometry_is_planned_once_and_keyed_by_the_spec_object():
    spec = rr.RopeSpec(64, base=31337.0)
    x = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    before = len(fast_path._calls)
    for offset in range(5):
        rr.apply_rope(x, spec, offset=offset, backend="numba")
    assert len(fast_path._calls) in (before + 1, 1)  # one geometry (or a fresh dict)
    other = rr.RopeSpec(64, base=31338.0)  # another spec: another answer
    assert not np.array_equal(
        rr.apply_rope(x, spec, offset=3, backend="numba"),
        rr.apply_rope(x, other, offset=3, backend="numba"),
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"offset": 10**400}, ValueError, r"`offset` must be finite; got 1000000000"),
        ({"offset": -(10**400)}, ValueError, r"`offset` must be finite; got -1000000000"),
        ({"offset": float("nan")}, ValueError, r"`offset` must be finite; got nan"),
        ({"offset": float("inf")}, ValueError, r"`offset` must be finite; got inf"),
        ({"offset": True}, TypeError, r"`offset` must be a real number; got True"),
        ({"offset": "3"}, TypeError, r"`offset` must be a real number; got '3'"),
        ({"seq_axis": 1.0}, TypeError, r"`seq_axis` must be an integer; got 1.0"),
        ({"seq_axis": -1}, ValueError, r"`seq_axis` must name an axis of x other than"),
        ({"inverse": 1}, TypeError, r"`inverse` must be True or False; got 1"),
        ({"seq_len": float("nan")}, ValueError, r"`seq_len` must be"),
        ({"seq_len": 0}, ValueError, r"`seq_len` must be positive; got 0"),
        ({"seq_len": 10**400}, ValueError, r"`seq_len` must be"),
        ({"spec": rr.RopeSpec(16)}, ValueError, r"`x` must have spec.head_dim = 16"),
    ],
)
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_bad_arguments_get_the_documented_errors(kwargs, error, match, backend):
    x = np.ones((3, 4, 8), dtype=np.float32)
    kwargs = dict(kwargs)
    spec = kwargs.pop("spec", None)
    with pytest.raises(error, match=match):
        rr.apply_rope(x, spec, backend=backend, **kwargs)


def _broadcast_out(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.zeros(x.shape[-1], x.dtype), x.shape)


def _writeable_zero_stride(x: np.ndarray) -> np.ndarray:
    row = np.zeros(x.shape[-1], x.dtype)
    return np.lib.stride_tricks.as_strided(row, x.shape, (0, 0, x.itemsize), writeable=True)


def _read_only_x(x: np.ndarray) -> np.ndarray:
    x.flags.writeable = False
    return x


@pytest.mark.parametrize(
    ("make_out", "match"),
    [
        (_read_only_x, r"`out` must be writeable; got `x` itself, a read-only array"),
        (_broadcast_out, r"`out` must be writeable; got a read-only array"),
        (_writeable_zero_stride, r"`out` must not have elements that share memory"),
    ],
)
@pytest.mark.parametrize("positions", [None, np.arange(4)])
def test_outputs_the_kernel_cannot_write_are_refused(make_out, match, positions):
    """Read-only arrays (x itself included) and broadcast views are a ValueError naming
    `out`, through the short road (positions None) and the general path alike."""
    x = np.random.default_rng(4).standard_normal((3, 4, 8)).astype(np.float32)
    out = make_out(x)
    before = x.copy()
    with pytest.raises(ValueError, match=match):
        rr.apply_rope(x, None, positions, backend="numba", out=out)
    np.testing.assert_array_equal(x, before)


def test_an_out_of_other_strides_is_planned_and_written():
    x = np.random.default_rng(5).standard_normal((3, 4, 8)).astype(np.float32)
    out = np.zeros((8, 4, 3), dtype=np.float32).T  # Fortran order
    want = rr.apply_rope(x, None, offset=9, backend="numba")
    assert rr.apply_rope(x, None, offset=9, backend="numba", out=out) is out
    np.testing.assert_array_equal(out, want)


def test_a_block_that_overflows_does_not_refuse_a_call_that_fits():
    """Blocks hold 64 positions: with inverse frequency 1e307 the block's last angles pass
    float64's largest number while the call's own positions 0..2 do not."""
    spec = rr.RopeSpec(2, freqs=[1e307])
    x = np.ones((3, 2))
    got = rr.apply_rope(x, spec, backend="numba")
    angles = np.arange(3) * 1e307
    want = np.stack([np.cos(angles) - np.sin(angles), np.sin(angles) + np.cos(angles)], -1)
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.finfo(np.float64).eps)
    with pytest.raises(ValueError, match="overflow"):  # and where the call's own do, it says so
        rr.apply_rope(x, spec, offset=20, backend="numba")
