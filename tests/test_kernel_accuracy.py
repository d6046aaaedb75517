"""The Numba kernel's documented bound, for every dtype and every way of calling it.

Each result element is within one ulp (of its dtype, at the exact value) plus 4 * 2**-24 of
its pair's norm of an independent float64 rotation, written here: pairs split in the layout
read, turned by ``position * inv_freq`` in float64, joined in the layout written. Features
outside the rotary slice come back bit for bit. Both layouts, partial rotary, an output
layout, inverse, strided views, ``out=`` and in place; tensors, JAX arrays and
``apply_rope_qk`` give the NumPy call's bits.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine.dispatch import load_backend

pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

DTYPES = ["float16", "bfloat16", "float32", "float64"]
SPECS = [
    rr.RopeSpec(64),
    rr.RopeSpec(64, layout="interleaved"),
    rr.RopeSpec(48, rotary_dim=16, rotary_start=5, base=500.0),
    rr.RopeSpec(32, layout="interleaved", output_layout="half"),
    rr.RopeSpec(32, output_layout="interleaved"),
]


def dtype_of(name: str) -> np.dtype:
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


def mantissa_bits(dtype: np.dtype) -> tuple[int, int]:
    """(explicit mantissa bits, exponent of the smallest normal)."""
    return {"float16": (10, -14), "bfloat16": (7, -126), "float32": (23, -126)}.get(
        dtype.name, (52, -1022)
    )


def ulp(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of `dtype` at each |value| (the subnormal spacing below the normals)."""
    nmant, emin = mantissa_bits(dtype)
    _, e = np.frexp(np.abs(value))
    return np.exp2(np.maximum(e - 1, emin) - nmant)


def split(head: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    n = head.shape[-1] // 2
    return (
        (head[..., :n], head[..., n:]) if layout == "half" else (head[..., 0::2], head[..., 1::2])
    )


def join(a: np.ndarray, b: np.ndarray, layout: str) -> np.ndarray:
    if layout == "half":
        return np.concatenate([a, b], axis=-1)
    return np.stack([a, b], axis=-1).reshape(*a.shape[:-1], 2 * a.shape[-1])


def rotated(x: np.ndarray, spec: rr.RopeSpec, positions: np.ndarray, inverse: bool):
    """float64 result and each element's pair norm; `positions` broadcast to x.shape[:-1]."""
    x64 = x.astype(np.float64)
    start, n = spec.rotary_start, spec.n_pairs
    read, written = spec.layout, spec.output_layout or spec.layout
    if inverse:
        read, written = written, read
    angles = positions.astype(np.float64)[..., None] * rr.inv_freq(spec)
    cos, sin = np.cos(angles), (-1.0 if inverse else 1.0) * np.sin(angles)
    a, b = split(x64[..., start : start + 2 * n], read)
    out = x64.copy()
    out[..., start : start + 2 * n] = join(a * cos - b * sin, b * cos + a * sin, written)
    norm = np.zeros_like(x64)
    pair = np.hypot(a, b)
    norm[..., start : start + 2 * n] = join(pair, pair, written)
    return out, norm


def assert_within_bound(got, x, spec, positions, inverse=False):
    want, norm = rotated(x, spec, positions, inverse)
    dtype = x.dtype
    got64 = np.asarray(got).astype(np.float64)
    table = 2.0**-24 if dtype.itemsize <= 4 else 2.0**-52
    bound = ulp(want, dtype) + 4 * table * norm
    error = np.abs(got64 - want)
    assert np.all(error <= bound), float(np.max(error / bound))
    start, stop = spec.rotary_start, spec.rotary_start + spec.rotary_dim
    for part in (np.s_[..., :start], np.s_[..., stop:]):
        assert np.asarray(got)[part].tobytes() == x[part].tobytes()


def draw(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 30.0], shape)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.parametrize("how", ["new", "out", "in_place", "strided", "inverse"])
@pytest.mark.parametrize("seq", [3, 300])  # the serial loop and the threaded one
def test_every_dtype_and_call_within_the_documented_bound(dtype, spec, how, seq):
    dt = dtype_of(dtype)
    offset = 4000
    fused = draw((2, seq, 3, spec.head_dim), dt, seed=seq)  # a fused qkv: q is a view
    x = fused[:, :, 1:3] if how == "strided" else fused[:, :, :2].copy()
    kept = x.copy()
    positions = np.broadcast_to((offset + np.arange(seq))[None, :, None], x.shape[:-1])
    kwargs = {"offset": offset, "seq_axis": 1, "backend": "numba"}
    if how == "out":
        out = np.empty_like(x)
        assert rr.apply_rope(x, spec, out=out, **kwargs) is out
        got = out
    elif how == "in_place":
        got = x.copy()
        assert rr.apply_rope(got, spec, out=got, **kwargs) is got
    else:
        got = rr.apply_rope(x, spec, inverse=how == "inverse", **kwargs)
    assert got.dtype == x.dtype
    assert_within_bound(got, kept, spec, positions, inverse=how == "inverse")
    assert x.tobytes() == kept.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_calls_run_the_kernel(monkeypatch, dtype):
    """Partial rotary and output layouts of 16-bit arrays are planned for the kernel's
    loop (`prepare`), never the reference path."""
    kernel = load_backend("numba")
    planned = []
    prepare = kernel.prepare

    def spy(*args):
        planned.append(args[2])
        return prepare(*args)

    monkeypatch.setattr(kernel, "prepare", spy)
    x = draw((1, 5, 2, 32), dtype_of(dtype))
    for spec in [*SPECS[3:], rr.RopeSpec(32, rotary_dim=8, rotary_start=3)]:
        rr.apply_rope(x, spec, np.arange(5), seq_axis=1, backend="auto")
    assert planned == [x.dtype] * 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_tensors_give_the_numpy_bits(dtype):
    torch = pytest.importorskip("torch")
    dt = dtype_of(dtype)
    spec = rr.RopeSpec(32, rotary_dim=16)
    fused = draw((1, 300, 6, 32), dt)
    want = rr.apply_rope(fused[:, :, 2:4], spec, offset=9, seq_axis=1, backend="numba")
    as_tensor = torch.from_numpy(fused.view(np.int16) if dtype == "bfloat16" else fused)
    t = as_tensor.view(torch.bfloat16) if dtype == "bfloat16" else as_tensor
    view = t[:, :, 2:4]  # a strided view of a fused qkv
    got = rr.apply_rope(view, spec, offset=9, seq_axis=1, backend="auto")
    bits = (lambda a: a.view(torch.int16).numpy()) if dtype == "bfloat16" else (lambda a: a.numpy())
    assert bits(got).tobytes() == want.tobytes()
    out = torch.empty_like(view)
    rr.apply_rope(view, spec, offset=9, seq_axis=1, backend="auto", out=out)
    assert bits(out).tobytes() == want.tobytes()
    grad = view.detach().clone().requires_grad_()
    through_ops = rr.apply_rope(grad, spec, offset=9, seq_axis=1, backend="auto")
    assert bits(through_ops.detach()).tobytes() == want.tobytes()
    view.copy_(view.clone())  # in place on the view itself
    rr.apply_rope(view, spec, offset=9, seq_axis=1, backend="auto", out=view)
    assert bits(view.contiguous()).tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_jax_arrays_and_apply_rope_qk_give_the_numpy_bits(dtype):
    jnp = pytest.importorskip("jax.numpy")
    dt = dtype_of(dtype)
    spec = rr.RopeSpec(64)
    q, k = draw((1, 300, 4, 64), dt, 1), draw((1, 300, 2, 64), dt, 2)
    want_q = rr.apply_rope(q, spec, seq_axis=1, backend="numba")
    want_k = rr.apply_rope(k, spec, seq_axis=1, backend="numba")
    got_q, got_k = rr.apply_rope_qk(q, k, spec, seq_axis=1, backend="numba")
    assert got_q.tobytes() == want_q.tobytes()
    assert got_k.tobytes() == want_k.tobytes()
    jq = rr.apply_rope(jnp.asarray(q), spec, seq_axis=1, backend="auto")
    assert np.asarray(jq).tobytes() == want_q.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_new_outputs_own_their_memory_and_keep_their_values(dtype):
    """Large new outputs (the threaded loop, 4 MiB and more) are arrays of their own: a
    later call, after the first result is let go or while it is held, never writes into
    it, and each result is within the bound."""
    dt = dtype_of(dtype)
    spec = rr.RopeSpec(128)
    x = draw((1, 1024, 16, 128), dt)
    assert x.nbytes >= 4 << 20
    kept = x.copy()
    positions = [
        np.broadcast_to((k + np.arange(1024))[None, :, None], x.shape[:-1]) for k in (0, 7)
    ]
    first = rr.apply_rope(x, spec, seq_axis=1, backend="numba")
    first_bytes = first.tobytes()
    held = first[0, 3:]  # a view of the first result, the result itself let go
    del first
    second = rr.apply_rope(x, spec, offset=7, seq_axis=1, backend="numba")
    for result in (held.base, second):
        assert result.flags.owndata
        assert result.flags.c_contiguous
        assert result.flags.writeable
    assert not np.shares_memory(second, held)
    assert held.base.tobytes() == first_bytes
    assert_within_bound(held.base, kept, spec, positions[0])
    assert_within_bound(second, kept, spec, positions[1])
    assert x.tobytes() == kept.tobytes()


def test_concurrent_calls_from_threads_give_right_values():
    """Threads rotating large arrays at once each get outputs of their own, within the bound."""
    spec = rr.RopeSpec(128)
    inputs = [draw((1, 1024, 16, 128), np.dtype(np.float32), seed=k) for k in range(3)]
    failures: list[str] = []

    def work(x: np.ndarray) -> None:
        for offset in range(3):
            got = rr.apply_rope(x, spec, offset=offset, seq_axis=1, backend="numba")
            other = rr.apply_rope(x, spec, offset=offset, seq_axis=1, backend="numba")
            if np.shares_memory(got, other) or got.tobytes() != other.tobytes():
                failures.append("two live outputs shared memory or differed")
            positions = np.broadcast_to((offset + np.arange(1024))[None, :, None], x.shape[:-1])
            try:
                assert_within_bound(got, x, spec, positions)
            except AssertionError as err:
                failures.append(str(err))

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
