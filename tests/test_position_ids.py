"""Small position arrays (decode, a few speculative tokens, a batch of sequences at different
lengths) take a short road: the general path's results, without hashing the positions."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import position_ids, runner, table_cache
from tests._independent import rope_half

pytest.importorskip("numba")

DTYPES = ["float16", "bfloat16", "float32", "float64"]


def dtype_of(name: str) -> np.dtype:
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def draw(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype_of(dtype))


def refuse_hashing(m: pytest.MonkeyPatch) -> None:
    """Fail if the positions are keyed by value (the general path's table cache)."""

    def refuse(positions):
        msg = "the short road must not hash the positions"
        raise AssertionError(msg)

    m.setattr(runner, "positions_key", refuse)
    m.setattr(table_cache, "positions_key", refuse)


@pytest.fixture
def no_hashing(monkeypatch):
    refuse_hashing(monkeypatch)


# (x shape, positions, seq_axis): decode by HF position ids (batch, seq) and by vLLM-style
# 1-D positions, speculative decoding's few tokens, a batch of sequences at different
# lengths, positions across blocks of cached rows, negative positions.
CASES = [
    ((1, 1, 32, 128), np.array([1000]), 1),
    ((1, 1, 32, 128), np.array([[1000]]), 1),
    ((1, 4, 8, 64), np.array([[1000, 1001, 1002, 1003]]), 1),
    ((3, 1, 8, 64), np.array([[5], [700], [63]]), 1),
    ((3, 2, 4, 32), np.array([[62, 63], [64, 65], [4095, 4096]]), 1),
    ((2, 4, 1, 16), np.array([-3, 0, 2**40, 17]), 1),
    ((4, 1, 2, 8), np.array([9, 10, 11, 12], dtype=np.int32), 0),
    ((1, 8, 2, 16), np.array([0, 1, 2, 3, 64, 65, 66, 67], dtype=np.uint16), -3),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "positions", "seq_axis"), CASES)
def test_small_position_arrays_equal_the_general_path_bit_for_bit(
    dtype, shape, positions, seq_axis
):
    x = draw(shape, dtype)
    kept = x.copy(), positions.copy()
    with pytest.MonkeyPatch.context() as m:
        refuse_hashing(m)
        got = rr.apply_rope(x, None, positions, seq_axis=seq_axis, backend="numba")
    with pytest.MonkeyPatch.context() as m:  # the general path
        m.setattr(runner, "numpy_ids_call", lambda *args: None)
        expected = rr.apply_rope(x, None, positions, seq_axis=seq_axis, backend="numba")
    assert got.dtype == x.dtype
    assert got.shape == x.shape
    assert got.tobytes() == expected.tobytes()
    assert x.tobytes() == kept[0].tobytes()
    assert np.array_equal(positions, kept[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "positions", "seq_axis"), CASES)
def test_small_position_arrays_against_the_float64_formula(dtype, shape, positions, seq_axis):
    x = draw(shape, dtype, seed=1)
    got = rr.apply_rope(x, None, positions, seq_axis=seq_axis, backend="numba")
    theta = rr.inv_freq(rr.RopeSpec(shape[-1]))
    axis = seq_axis % x.ndim
    grid = [1] * (x.ndim - 1)
    if positions.ndim == 1:
        grid[axis] = positions.shape[0]
    else:
        grid[0], grid[axis] = positions.shape
    expected = rope_half(x.astype(np.float64), positions.astype(np.float64).reshape(grid), theta)
    scale = np.abs(x.astype(np.float64)).max()
    eps = float(np.finfo(x.dtype).eps)
    tol = 8 * eps * scale + 2**40 * 2.0**-52 * scale * (np.abs(positions).max() > 2**30)
    assert np.max(np.abs(got.astype(np.float64) - expected)) <= tol


def test_offset_and_out_and_in_place_on_the_short_road(no_hashing):
    x = draw((2, 3, 4, 32), "float32")
    p = np.array([[10, 11, 12], [500, 501, 502]])
    want = rr.apply_rope(x, None, p + 7, seq_axis=1, backend="numba")
    got = rr.apply_rope(x, None, p, offset=7, seq_axis=1, backend="numba")
    assert got.tobytes() == want.tobytes()
    out = np.empty_like(x)
    assert rr.apply_rope(x, None, p, seq_axis=1, backend="auto", out=out) is out
    y = x.copy()
    assert rr.apply_rope(y, None, p, seq_axis=1, backend="numba", out=y) is y
    assert out.tobytes() == y.tobytes()
    back = rr.apply_rope(y, None, p, seq_axis=1, backend="numba", inverse=True)
    assert np.max(np.abs(back - x)) < 1e-5


def test_tables_come_from_shared_blocks_built_once(monkeypatch):
    """Decoding steps by position ids read the offset road's cached blocks: one build per
    64 positions, none per call."""
    from rope_ref._engine import fast_path

    built: list[int] = []
    original = fast_path._OffsetTables._build

    def counting(self, length, offset):
        built.append(offset)
        return original(self, length, offset)

    monkeypatch.setattr(fast_path._OffsetTables, "_build", counting)
    spec = rr.RopeSpec(64, base=12345.0)  # tables of their own, not cached by other tests
    x = draw((1, 1, 4, 64), "float32")
    for step in range(100):
        rr.apply_rope(x, spec, np.array([[3000 + step]]), seq_axis=1, backend="numba")
    assert sorted(set(built)) == built == [2944, 3008, 3072]


@pytest.mark.parametrize(
    "positions",
    [
        np.arange(65),  # longer than the short road takes
        np.array([2**62]),  # beyond the cached blocks
        np.array([1.0]),  # float positions
        np.array([True]),  # not integers: the general path says so
    ],
)
def test_what_the_short_road_does_not_take_goes_the_general_way(positions):
    x = draw((1, positions.size, 2, 8), "float64")
    if positions.dtype == bool:
        with pytest.raises(TypeError, match="positions"):
            rr.apply_rope(x, None, positions, seq_axis=1, backend="numba")
        return
    with pytest.MonkeyPatch.context() as m:
        m.setattr(position_ids, "MAX_IDS", 10**6)
        got = rr.apply_rope(x, None, positions, seq_axis=1, backend="numba")
    reference = rr.apply_rope(x, None, positions, seq_axis=1, backend="reference")
    assert np.max(np.abs(got - reference)) <= 1e-12 * max(1.0, float(np.abs(positions).max()))


def test_positions_that_do_not_fit_x_keep_the_general_paths_error():
    x = draw((1, 3, 2, 8), "float32")
    with pytest.raises(ValueError, match="positions"):
        rr.apply_rope(x, None, np.array([1, 2, 3, 4]), seq_axis=1, backend="numba")


def test_torch_position_ids_take_the_short_road(no_hashing):
    torch = pytest.importorskip("torch")
    x = draw((2, 1, 4, 32), "float32")
    t = torch.from_numpy(x.copy())
    p = torch.tensor([[1000], [7]])
    got = rr.apply_rope(t, None, p, seq_axis=1, backend="auto")
    want = rr.apply_rope(x, None, p.numpy(), seq_axis=1, backend="numba")
    assert isinstance(got, torch.Tensor)
    assert got.numpy().tobytes() == want.tobytes()
    assert torch.equal(t, torch.from_numpy(x))


def test_torch_positions_for_numpy_x_keep_the_namespace_error():
    torch = pytest.importorskip("torch")
    x = draw((1, 1, 2, 8), "float32")
    with pytest.raises(TypeError, match="namespace"):
        rr.apply_rope(x, None, torch.tensor([3]), seq_axis=1, backend="numba")
