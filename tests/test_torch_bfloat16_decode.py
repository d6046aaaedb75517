"""bfloat16 CPU tensors decode on the tensors' short road: the kernel reads their int16 bit
patterns as ml_dtypes' bfloat16 in place, by `offset=` and by position ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import cpu_arrays, runner
from rope_ref._engine.dispatch import load_backend
from tests._independent import rope_half, rotate_pairs

pytest.importorskip("numba")
torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

BF16 = np.dtype(ml_dtypes.bfloat16)


def tensor(shape: tuple[int, ...], seed: int = 0) -> Any:
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return torch.from_numpy(values).to(torch.bfloat16)


def as_numpy(t: Any) -> np.ndarray:
    """The bfloat16 values of tensor `t`, read through float32 (a copy, exact)."""
    return t.float().numpy().astype(BF16)


def assert_rope_equal(got: np.ndarray, expected: np.ndarray, x: np.ndarray) -> None:
    """`got` is float64 `expected` rounded once to bfloat16, within the documented bound:
    one bfloat16 ulp plus 4 * 2**-24 of each pair's norm (bounded by |a| + |b|)."""
    n = x.shape[-1] // 2
    size = np.abs(x.astype(np.float64))
    pair = size[..., :n] + size[..., n:]
    bound = (float(ml_dtypes.finfo(BF16).eps) + 4 * 2.0**-24) * np.concatenate([pair, pair], -1)
    error = np.abs(got.astype(np.float64) - expected)
    assert np.all(error <= bound), float(np.max(error - bound))


@pytest.fixture
def short_road_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if the call leaves the short road for the tensors' general one."""

    def refuse(*args: object, **kwargs: object) -> None:
        msg = "a bfloat16 decoding call must take the short road"
        raise AssertionError(msg)

    monkeypatch.setattr(cpu_arrays, "torch_direct", refuse)


def general_path(x: np.ndarray, positions: Any, offset: int) -> np.ndarray:
    """The general path's result for NumPy bfloat16 `x` (no short road of any kind)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(runner, "numpy_ids_call", lambda *args: None)
        m.setattr(runner, "numpy_kernel_call", lambda *args: None)
        return np.asarray(
            rr.apply_rope(x, None, positions, offset=offset, seq_axis=1, backend="numba")
        )


IDS = [
    lambda: np.array([1000]),
    lambda: np.array([[1000]]),
    lambda: torch.tensor([1000]),
    lambda: torch.tensor([[1000]], dtype=torch.int32),
]


@pytest.mark.usefixtures("short_road_only")
@pytest.mark.parametrize("make_ids", IDS, ids=["np-1d", "np-2d", "torch-1d", "torch-int32"])
@pytest.mark.parametrize("offset", [0, 3])
def test_bfloat16_decoding_by_position_ids(make_ids: Any, offset: int) -> None:
    x = tensor((1, 1, 32, 128), seed=1)
    before = x.clone()
    positions = make_ids()
    got = rr.apply_rope(x, None, positions, offset=offset, seq_axis=1, backend="auto")
    assert type(got) is torch.Tensor
    assert got.dtype == torch.bfloat16
    assert got.shape == x.shape
    xn = as_numpy(x)
    ids = np.asarray(positions).reshape(-1)
    want = general_path(xn, ids, offset)
    assert as_numpy(got).tobytes() == want.tobytes()
    theta = rr.inv_freq(rr.RopeSpec(128))
    expected = rope_half(xn.astype(np.float64), (ids + offset).reshape(1, 1, 1), theta)
    assert_rope_equal(as_numpy(got), expected, xn)
    assert torch.equal(x, before)


@pytest.mark.usefixtures("short_road_only")
def test_bfloat16_decoding_of_a_fused_qkv_slice_and_by_offset() -> None:
    """A strided view (the query third of a fused projection) is read in place."""
    qkv = tensor((2, 1, 3 * 8, 64), seed=2)
    before = qkv.clone()
    q = qkv[:, :, :8]
    assert not q.is_contiguous()
    positions = np.array([[700], [5]])
    got = rr.apply_rope(q, None, positions, seq_axis=1, backend="auto")
    qn = as_numpy(q)
    assert as_numpy(got).tobytes() == general_path(qn, positions, 0).tobytes()
    theta = rr.inv_freq(rr.RopeSpec(64))
    expected = rope_half(qn.astype(np.float64), positions[..., None], theta)
    assert_rope_equal(as_numpy(got), expected, qn)
    by_offset = rr.apply_rope(q, None, offset=700, seq_axis=1, backend="auto")
    assert as_numpy(by_offset).tobytes() == general_path(qn, None, 700).tobytes()
    assert torch.equal(qkv, before)


def test_bfloat16_tensors_the_short_road_declines_keep_their_results() -> None:
    """Positions past the short road's reach go the general way, with the same value."""
    x = tensor((1, 1, 4, 16), seed=3)
    positions = torch.tensor([[2**62]])
    got = rr.apply_rope(x, None, positions, seq_axis=1, backend="auto")
    xn = as_numpy(x)
    assert as_numpy(got).tobytes() == general_path(xn, positions.numpy(), 0).tobytes()


@pytest.mark.usefixtures("short_road_only")
@pytest.mark.parametrize("inverse", [False, True])
def test_bfloat16_tensors_of_many_rows_on_the_threaded_loop(inverse: bool) -> None:
    """Enough rows for the threaded loops, which read the int16 bits as the serial one."""
    x = tensor((2, 40, 8, 64), seed=4)
    before = x.clone()
    got = rr.apply_rope(x, None, offset=9, seq_axis=1, inverse=inverse, backend="auto")
    xn = as_numpy(x)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(runner, "numpy_kernel_call", lambda *args: None)
        want = rr.apply_rope(xn, None, offset=9, seq_axis=1, inverse=inverse, backend="numba")
    assert as_numpy(got).tobytes() == np.asarray(want).tobytes()
    theta = rr.inv_freq(rr.RopeSpec(64)) * (-1 if inverse else 1)
    positions = (9 + np.arange(40)).reshape(1, 40, 1)
    assert_rope_equal(as_numpy(got), rope_half(xn.astype(np.float64), positions, theta), xn)
    assert torch.equal(x, before)


def test_a_launch_takes_the_bits_of_a_bfloat16_array_as_the_array() -> None:
    """The kernel's planned call given the int16 view of bfloat16 `x` writes the same bits."""
    numba_cpu = load_backend("numba")

    xn = as_numpy(tensor((1, 3, 4, 16), seed=5))
    cos = np.cos(np.arange(3 * 8, dtype=np.float32).reshape(3, 8) / 7)
    sin = np.sin(np.arange(3 * 8, dtype=np.float32).reshape(3, 8) / 7)
    launch = numba_cpu.prepare(xn.shape, xn.strides, xn.dtype, (1, 3, 1, 8), "half", 0, False)
    bits = xn.view(np.int16)
    got = launch(bits, None, cos, sin)
    assert got.dtype == np.int16
    assert got.tobytes() == launch(xn, None, cos, sin).tobytes()
    angles = np.arctan2(sin.astype(np.float64), cos.astype(np.float64))
    angles = np.broadcast_to(angles.reshape(1, 3, 1, 8), (1, 3, 4, 8))
    expected = rotate_pairs(xn.astype(np.float64), angles)
    assert_rope_equal(got.view(BF16), expected, xn)
