"""Offset calls on NumPy with a kernel: the short road equals the general path bit for bit,
its table cache stays bounded however many sequences decode at once, and bad input gets
the general path's errors. Then, where a planted mistake would hide: which calls take the
short road, which blocks of cached positions they read, and the values at the blocks'
edges, checked against RoPE computed here from its definition in float64."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
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


# ----------------------------------------------------------------------------------------
# Which calls take the short road, the blocks they read, the values at the blocks' edges
# ----------------------------------------------------------------------------------------

#: Bases no other test uses, so that each test builds its blocks itself.
_bases = itertools.count()


def _fresh_spec(head_dim: int = 8, **kwargs: Any) -> rr.RopeSpec:
    """A spec of its own (an unused base): no block of it is cached yet."""
    return rr.RopeSpec(head_dim, base=20000.0 + next(_bases) / 8, **kwargs)


def _pairs(layout: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Feature indices of the pairs: (j, j + n) in half layout, (2j, 2j + 1) interleaved."""
    j = np.arange(n)
    return (j, j + n) if layout == "half" else (2 * j, 2 * j + 1)


def _rope(
    x: np.ndarray,
    positions: Sequence[int | float],
    inv_freq: np.ndarray,
    *,
    seq_axis: int = 0,
    inverse: bool = False,
    layout: str = "half",
    written: str | None = None,
) -> np.ndarray:
    """RoPE by its definition in float64: pair j of the token at position p turned by
    p * inv_freq[j] (by its negative for `inverse`), read in `layout`, written in `written`."""
    xs = np.moveaxis(np.asarray(x, dtype=np.float64), seq_axis, 0)
    angle = np.array([float(p) for p in positions])[:, None] * inv_freq  # exact int -> float
    angle = (-angle if inverse else angle).reshape(
        (len(positions),) + (1,) * (xs.ndim - 2) + (len(inv_freq),)
    )
    cos, sin = np.cos(angle), np.sin(angle)
    a_in, b_in = _pairs(layout, len(inv_freq))
    a_out, b_out = _pairs(written or layout, len(inv_freq))
    a, b = xs[..., a_in], xs[..., b_in]
    out = np.empty_like(xs)
    out[..., a_out] = a * cos - b * sin
    out[..., b_out] = b * cos + a * sin
    return np.moveaxis(out, 0, seq_axis)


def _inv_freq(spec: rr.RopeSpec) -> np.ndarray:
    """base ** (-2j / d), or the spec's own frequencies."""
    if spec.freqs is not None:
        return np.asarray(spec.freqs, dtype=np.float64)
    return float(spec.base) ** (-np.arange(0, spec.head_dim, 2) / spec.head_dim)


def _positions(offset: int | float, length: int) -> list[int | float]:
    return [offset + j for j in range(length)]


@pytest.fixture
def short_road(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `apply_rope` call took the short road (False: the general path)."""
    taken: list[bool] = []
    original = fast_path.numpy_kernel_call

    def spy(*args: Any) -> Any:
        result = original(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(runner, "numpy_kernel_call", spy)
    return taken


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int | float]]:
    """``(length, first position)`` of every table the short road builds."""
    built: list[tuple[int, int | float]] = []
    original = fast_path._OffsetTables._build

    def counting(self: Any, length: int, offset: Any) -> tuple[np.ndarray, np.ndarray]:
        built.append((length, offset))
        return original(self, length, offset)

    monkeypatch.setattr(fast_path._OffsetTables, "_build", counting)
    return built


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The shape of x of every call geometry the short road plans (on an empty plan dict)."""
    planned: list[tuple[int, ...]] = []
    original = fast_path._prepare

    def counting(kernel: Any, x: np.ndarray, *args: Any) -> Any:
        planned.append(x.shape)
        return original(kernel, x, *args)

    monkeypatch.setattr(fast_path, "_calls", {})
    monkeypatch.setattr(fast_path, "_prepare", counting)
    return planned


# ----------------------------------------------------------------------------------------
# Which calls take the short road (docs/kernels/numba.md, "Decoding: calls with offset")
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "seq_axis", "seq_len", "inverse"),
    [
        ((5, 8), -2, None, False),  # (seq, head_dim): two axes are enough
        ((5, 2, 8), -3, None, True),  # seq_axis = -x.ndim names the first axis
        ((1, 5, 2, 8), 1, 1, False),  # an int seq_len, and one of 1
        ((2, 5, 8), 1, 0.5, True),  # a float seq_len below 1
    ],
)
def test_plain_offset_calls_take_the_short_road(
    short_road: list[bool],
    shape: tuple[int, ...],
    seq_axis: int,
    seq_len: float | None,
    inverse: bool,
) -> None:
    """NumPy x of two axes or more, any valid seq_axis, any positive seq_len (int or float)
    and either direction: the short road, with RoPE's values."""
    spec = rr.RopeSpec(8)
    x = np.random.default_rng(len(shape)).standard_normal(shape)
    kwargs = {"seq_axis": seq_axis, "inverse": inverse, "seq_len": seq_len}
    got = rr.apply_rope(x, spec, offset=61, backend="numba", **kwargs)
    assert short_road == [True]
    axis = seq_axis % len(shape)
    want = _rope(x, _positions(61, shape[axis]), _inv_freq(spec), seq_axis=axis, inverse=inverse)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def _int_x() -> np.ndarray:
    return np.ones((3, 4, 8), dtype=np.int32)


def _odd_x() -> np.ndarray:
    return np.ones((3, 4, 5), dtype=np.float32)


@pytest.mark.parametrize(
    ("make_x", "spec", "kwargs", "error", "match"),
    [
        (None, None, {"seq_axis": 3}, ValueError, r"`seq_axis` must name an axis of x other"),
        (None, None, {"seq_axis": 4}, ValueError, r"`seq_axis` must name an axis of x other"),
        (None, None, {"seq_len": "5000"}, TypeError, r"`seq_len` must be a real number"),
        (_int_x, None, {}, TypeError, r"`x` must have a real floating dtype; got int32"),
        (_odd_x, None, {}, ValueError, r"`x` must give a valid head_dim when spec is None"),
        (None, rr.RopeSpec(8, xpos=rr.XPos()), {}, ValueError, r"`role` must be 'query' or"),
    ],
)
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_calls_the_short_road_does_not_serve_get_the_general_path_s_errors(
    make_x: Callable[[], np.ndarray] | None,
    spec: rr.RopeSpec | None,
    kwargs: dict[str, Any],
    error: type[Exception],
    match: str,
    backend: str,
) -> None:
    """Axes past the last, seq_len of another type, integer x, an odd last axis without a
    spec, and xPos without a role are the general path's documented errors, not a rotation
    (nor another error) from the short road."""
    x = make_x() if make_x is not None else np.ones((3, 4, 8), dtype=np.float32)
    with pytest.raises(error, match=match):
        rr.apply_rope(x, spec, offset=3, backend=backend, **kwargs)


def test_pairs_are_written_in_the_spec_s_output_layout() -> None:
    """A spec reading half and writing interleaved pairs writes them interleaved."""
    spec = rr.RopeSpec(8, layout="half", output_layout="interleaved")
    x = np.random.default_rng(7).standard_normal((3, 2, 8))
    got = rr.apply_rope(x, spec, offset=70, seq_axis=0, backend="numba")
    want = _rope(x, _positions(70, 3), _inv_freq(spec), layout="half", written="interleaved")
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("sections", [(2, 1, 1), (2, 2)])
def test_multi_axis_specs_turn_every_axis_by_the_offset_positions(
    sections: tuple[int, ...],
) -> None:
    """Without positions, every axis of a multi-axis spec is at offset + arange(S): pair j
    turns by the token's position times the default frequency j (the general path's
    rotation, which the short road does not serve)."""
    spec = rr.RopeSpec(8, sections=sections)
    x = np.random.default_rng(14).standard_normal((5, 8))
    got = rr.apply_rope(x, spec, offset=70, backend="numba")
    want = _rope(x, _positions(70, 5), 10000.0 ** (-np.arange(0, 8, 2) / 8))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


# ----------------------------------------------------------------------------------------
# Blocks of 64 positions: which are built, and which calls build their own rows
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "length", "built"),
    [
        (100, 1, [(64, 64)]),  # positions 64..127
        (-100, 1, [(64, -128)]),  # negative positions: the block below, -128..-65
        (100.0, 1, [(64, 64)]),  # an integral float offset is an integer offset
        (60.0, 4, [(64, 0)]),  # 60..63: one block, not the next too
        (60, 5, [(64, 0), (64, 64)]),  # 60..64: across a block edge
        (0, 256, [(64, 0), (64, 64), (64, 128), (64, 192)]),  # 256 tokens: from blocks
        (0, 257, [(257, 0)]),  # more than 256 tokens: the call's own rows
    ],
)
def test_integer_positions_come_from_blocks_of_64_positions(
    builds: list[tuple[int, int | float]], offset: int | float, length: int, built: list[Any]
) -> None:
    """Blocks hold 64 positions from a multiple of 64; a call of up to 256 tokens reads
    the blocks it touches and no other, a longer one builds its own rows."""
    spec = _fresh_spec()
    x = np.random.default_rng(length).standard_normal((length, 8))
    got = rr.apply_rope(x, spec, offset=offset, backend="numba")
    assert builds == built
    np.testing.assert_allclose(
        got, _rope(x, _positions(offset, length), _inv_freq(spec)), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    ("offset", "length", "built"),
    [
        (2**61 + 5, 1, [(64, 2**61)]),
        (2**62 - 1, 1, [(64, 2**62 - 64)]),  # the last block below 2**62
        (2**62 - 65, 65, [(64, 2**62 - 128), (64, 2**62 - 64)]),  # its last call across
        (2**62, 1, [(1, 2**62)]),  # from 2**62 on: the call's own rows
        (-(2**62) + 64, 65, [(64, -(2**62) + 64), (64, -(2**62) + 128)]),  # the first block
        (-(2**62) + 63, 1, [(1, -(2**62) + 63)]),  # its block would hold -2**62
        (-(2**62) - 5, 1, [(1, -(2**62) - 5)]),
    ],
)
def test_blocks_hold_only_positions_of_magnitude_below_2_62(
    builds: list[tuple[int, int | float]], offset: int, length: int, built: list[Any]
) -> None:
    """Integer offsets of magnitude 2**62 or more, and calls that would read a block
    holding such a position, build their own rows; the others read blocks. Either way the
    rotation is that of the positions rounded once to float64."""
    # Powers of two (of their own): angles at positions near 2**62 are exact products.
    spec = rr.RopeSpec(4, freqs=[1.0, 2.0 ** -(2 + next(_bases) % 60)])
    x = np.random.default_rng(length).standard_normal((length, 4))
    got = rr.apply_rope(x, spec, offset=offset, backend="numba")
    assert builds == built
    want = _rope(x, _positions(offset, length), _inv_freq(spec))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)


def test_blocks_are_shared_by_calls_of_other_shapes(builds: list[tuple[int, int | float]]) -> None:
    """Tables are shared by every call with the same spec, dtype and seq_len: a second
    geometry reads the block the first built."""
    spec = _fresh_spec()
    rng = np.random.default_rng(8)
    for heads in (2, 3):
        x = rng.standard_normal((4, heads, 8)).astype(np.float32)
        got = rr.apply_rope(x, spec, offset=5, seq_axis=0, backend="numba")
        want = _rope(x, _positions(5, 4), _inv_freq(spec))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    assert builds == [(64, 0)]


def test_a_call_inside_one_block_reads_its_rows_in_place() -> None:
    """The rows of a call inside one block are the cached block itself, from the call's
    row: not a copy (an integral float offset reaches them through `rows`)."""
    spec = _fresh_spec()
    tables = fast_path._offset_tables(spec, np.dtype(np.float64), None)
    rows = tables.rows(60.0, 4)
    assert rows is not None
    cos, sin, row = rows
    block = offset_cache.get((tables.id, 0))
    assert block is not None
    assert row == 60
    assert cos is block[0]
    assert sin is block[1]
    np.testing.assert_allclose(cos[60:64], np.cos(np.outer(np.arange(60, 64), _inv_freq(spec))))


def test_an_empty_call_whose_block_overflows_is_an_empty_array() -> None:
    """Zero tokens at an offset whose block has an angle past float64's largest number
    rotate nothing, as in the general path (not "need at least one array")."""
    spec = rr.RopeSpec(2, freqs=[1e307])
    for offset in (0, 64, 70):
        got = rr.apply_rope(np.ones((0, 2)), spec, offset=offset, backend="numba")
        assert got.shape == (0, 2)
        assert got.dtype == np.float64


# ----------------------------------------------------------------------------------------
# Call geometries: planned once, kept by the spec object, at most MAX_CALLS of them
# ----------------------------------------------------------------------------------------


def test_each_geometry_is_planned_once(plans: list[tuple[int, ...]]) -> None:
    """Calls alternating between two geometries plan each once, then find the plans."""
    spec = rr.RopeSpec(8)
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((3, 8)), rng.standard_normal((4, 8))]
    for offset in range(3):
        for x in xs:
            got = rr.apply_rope(x, spec, offset=offset, backend="numba")
            want = _rope(x, _positions(offset, len(x)), _inv_freq(spec))
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert plans == [(3, 8), (4, 8)]


def test_a_plan_is_not_reused_for_another_spec_at_the_same_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plans are keyed by the spec's id and checked by identity: the plan of a spec whose
    id a new spec now has (the old one freed) does not rotate for the new spec."""
    monkeypatch.setattr(fast_path, "_calls", {})
    old, new = rr.RopeSpec(8, base=100.0), rr.RopeSpec(8, base=1e6)
    x = np.random.default_rng(10).standard_normal((3, 8))
    rr.apply_rope(x, old, offset=2, backend="numba")
    [(key, plan)] = fast_path._calls.items()
    fast_path._calls[(id(new), *key[1:])] = plan  # as if `new` had taken `old`'s address
    got = rr.apply_rope(x, new, offset=2, backend="numba")
    np.testing.assert_allclose(got, _rope(x, [2, 3, 4], _inv_freq(new)), rtol=1e-13, atol=1e-13)


def test_no_more_than_max_calls_geometries_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """With MAX_CALLS geometries kept, a new one forgets them all before it is kept."""
    full = {("planned", i): object() for i in range(fast_path.MAX_CALLS)}
    monkeypatch.setattr(fast_path, "_calls", full)
    spec = rr.RopeSpec(8)
    x = np.random.default_rng(11).standard_normal((3, 8))
    got = rr.apply_rope(x, spec, offset=1, backend="numba")
    assert len(fast_path._calls) == 1
    np.testing.assert_allclose(got, _rope(x, [1, 2, 3], _inv_freq(spec)), rtol=1e-13, atol=1e-13)


# ----------------------------------------------------------------------------------------
# Values: block edges, negative and huge offsets, inverse, 16-bit dtypes, strides
# ----------------------------------------------------------------------------------------


def _dtype(name: str) -> np.dtype[Any]:
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("inverse", [False, True])
def test_offsets_across_block_edges_rotate_by_their_positions(
    dtype_name: str, layout: str, inverse: bool
) -> None:
    """Offsets inside a block, at its first and last row, across one edge or several,
    negative, and where float64 positions are no longer all integers apart: each token
    turned by its own position, rounded once to x's dtype."""
    dtype = _dtype(dtype_name)
    spec = rr.RopeSpec(8, layout=layout, freqs=[1.0, 0.5, 0.25, 0.125])
    rng = np.random.default_rng(12)
    eps = 1e-12 if dtype == np.float64 else 4 * float(np.finfo(np.float32).eps)
    if dtype.itemsize == 2:
        eps = 2.0 ** -(8 if dtype.name == "bfloat16" else 11)
    cases = [(0, 3), (63, 1), (64, 64), (62, 5), (10, 150), (-1, 3), (-65, 70), (2**53 - 3, 6)]
    for offset, length in cases:
        x = rng.standard_normal((2, length, 8)).astype(dtype)
        got = rr.apply_rope(x, spec, offset=offset, seq_axis=1, inverse=inverse, backend="numba")
        assert got.dtype == dtype
        want = _rope(
            x.astype(np.float64),
            _positions(offset, length),
            _inv_freq(spec),
            seq_axis=1,
            inverse=inverse,
            layout=layout,
        )
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=eps, atol=eps)


def test_views_of_other_strides_rotate_by_their_own_plan() -> None:
    """Arrays of one shape and dtype but other strides (every other token, heads in
    reverse, Fortran order) each rotate their own elements, not by another's plan."""
    spec = rr.RopeSpec(8)
    rng = np.random.default_rng(13)
    wide = rng.standard_normal((10, 2, 8)).astype(np.float32)
    views = [wide[:5].copy(), wide[::2], wide[:5, ::-1], np.asfortranarray(wide[:5])]
    for x in views:
        got = rr.apply_rope(x, spec, offset=62, seq_axis=0, backend="numba")
        want = _rope(x, _positions(62, 5), _inv_freq(spec))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
