"""PyTorch CPU tensors and JAX CPU arrays through the Numba kernel, on views of their memory.

Each result is compared bit for bit with the kernel's NumPy call on the same values (the
NumPy kernel is itself checked against the reference and an independent rotation in
test_numba_kernel.py and test_numba_bfloat16.py); results come back as the caller's type
and dtype, inputs are never written, and what the kernel cannot take is refused by name.
"""

from __future__ import annotations

import gc
import importlib
import threading
import weakref

import numpy as np
import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")
pytestmark = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)

SPEC = rr.RopeSpec(64)
PARTIAL = rr.RopeSpec(40, rotary_dim=16, rotary_start=4, layout="interleaved")
TORCH_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def as_numpy(t):
    """Tensor `t` as a NumPy array of the same bits (bfloat16 as ml_dtypes), a copy."""
    if t.dtype == torch.bfloat16:
        return t.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.detach().numpy().copy()


def assert_same_bits(got, want: np.ndarray) -> None:
    got = as_numpy(got) if isinstance(got, torch.Tensor) else np.asarray(got)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def tensor(shape, dtype, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape)).to(dtype)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
@pytest.mark.parametrize("backend", ["numba", "auto"])
@pytest.mark.parametrize("rows", [6, 320], ids=["serial", "parallel"])
def test_tensors_equal_the_numpy_kernel(dtype, backend, rows):
    x = tensor((2, rows // 2, 3, 64), dtype)
    before = x.clone()
    y = rr.apply_rope(x, SPEC, seq_axis=-3, offset=7, backend=backend)
    assert type(y) is torch.Tensor
    assert y.dtype == dtype
    assert y.device == x.device
    want = rr.apply_rope(as_numpy(x), SPEC, seq_axis=-3, offset=7, backend="numba")
    assert_same_bits(y, want)
    assert torch.equal(x.view(torch.uint8), before.view(torch.uint8))  # x is not written


def test_a_tensor_requiring_grad_under_no_grad_takes_the_kernel_directly():
    x = tensor((2, 5, 64), torch.float32, 11).requires_grad_()
    with torch.no_grad():
        y = rr.apply_rope(x, SPEC, offset=4, backend="auto")
    assert y.grad_fn is None
    assert not y.requires_grad
    assert_same_bits(y, rr.apply_rope(as_numpy(x), SPEC, offset=4, backend="numba"))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_views_of_a_fused_qkv_projection_are_read_in_place(dtype):
    """q is a strided slice of one (batch, seq, 3 * heads * head_dim) projection; out= a
    slice of another such buffer is written in place, the rest of it untouched."""
    qkv = tensor((2, 5, 3 * 4 * 40), dtype, seed=1)
    q = qkv.view(2, 5, 3, 4, 40)[:, :, 0]
    want = rr.apply_rope(as_numpy(q), PARTIAL, seq_axis=-3, backend="numba")
    assert_same_bits(rr.apply_rope(q, PARTIAL, seq_axis=-3, backend="auto"), want)
    target = torch.zeros_like(qkv)
    out = target.view(2, 5, 3, 4, 40)[:, :, 1]
    assert rr.apply_rope(q, PARTIAL, seq_axis=-3, backend="numba", out=out) is out
    assert_same_bits(out, want)
    assert not target.view(2, 5, 3, 4, 40)[:, :, [0, 2]].any()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_out_and_in_place(dtype):
    x = tensor((3, 9, 64), dtype, seed=2)
    want = rr.apply_rope(as_numpy(x), SPEC, offset=3, backend="numba")
    out = torch.empty_like(x)
    assert rr.apply_rope(x, SPEC, offset=3, backend="numba", out=out) is out
    assert_same_bits(out, want)
    pointer = x.data_ptr()
    assert rr.apply_rope(x, SPEC, offset=3, backend="auto", out=x) is x
    assert x.data_ptr() == pointer
    assert_same_bits(x, want)


def test_positions_tensors_and_qk_equal_the_numpy_calls():
    x, k = tensor((2, 6, 64), torch.float32, 3), tensor((2, 9, 64), torch.float32, 4)
    positions = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    want = rr.apply_rope(as_numpy(x), SPEC, positions.numpy(), backend="numba")
    assert_same_bits(rr.apply_rope(x, SPEC, positions, backend="numba"), want)
    q_rot, k_rot = rr.apply_rope_qk(x, k, SPEC, offset=5, backend="auto")
    q_want, k_want = rr.apply_rope_qk(as_numpy(x), as_numpy(k), SPEC, offset=5, backend="numba")
    assert_same_bits(q_rot, q_want)
    assert_same_bits(k_rot, k_want)


def test_decoding_calls_reuse_their_plan_and_stay_exact():
    """The short road: one token at growing offsets equals explicit positions."""
    x = tensor((1, 1, 4, 64), torch.float32, 5)
    for offset in (0, 63, 64, 1000, 2**40):
        got = rr.apply_rope(x, SPEC, seq_axis=-3, offset=offset, backend="auto")
        explicit = rr.apply_rope(as_numpy(x), SPEC, np.array([offset]), seq_axis=-3)
        np.testing.assert_allclose(got.numpy(), explicit, rtol=0, atol=2e-6)
        assert_same_bits(got, rr.apply_rope(as_numpy(x), SPEC, np.array([offset]),
                                            seq_axis=-3, backend="numba"))  # fmt: skip


def test_a_tensor_on_another_device_is_refused_by_numba_and_left_by_auto():
    x = torch.empty((2, 64), device="meta")
    with pytest.raises(TypeError, match=r"`x` must be a CPU tensor for backend='numba'; got a "
                       r"tensor on meta"):  # fmt: skip
        rr.apply_rope(x, SPEC, backend="numba")
    with pytest.raises(TypeError, match=r"`q` must be a CPU tensor"):
        rr.apply_rope_qk(x, x, SPEC, backend="numba")


def test_a_negative_bit_is_refused_by_numba_and_resolved_by_auto():
    base = tensor((3, 64), torch.float32, 6)
    x = torch._neg_view(base)
    assert x.is_neg()
    with pytest.raises(ValueError, match=r"`x` must not have its negative or conjugate bit"):
        rr.apply_rope(x, SPEC, backend="numba")
    want = rr.apply_rope(-as_numpy(base), SPEC)  # the reference, on the values x stands for
    np.testing.assert_array_equal(rr.apply_rope(x, SPEC, backend="auto").numpy(), want)


@pytest.mark.parametrize(
    ("make_out", "error", "match"),
    [
        (lambda x: torch.empty_like(x).requires_grad_(), ValueError, "`out` must not require"),
        (lambda x: np.empty(tuple(x.shape), np.float32), TypeError, "`out` must be a torch"),
        (lambda x: torch.empty_like(x, dtype=torch.float64), ValueError, "`out` must have x's"),
        (lambda x: torch.empty((3, 64), device="meta"), ValueError, "`out` must be a plain CPU"),
    ],
)
def test_bad_out_is_refused_by_name(make_out, error, match):
    x = tensor((3, 64), torch.float32, 7)
    with pytest.raises(error, match=match):
        rr.apply_rope(x, SPEC, backend="numba", out=make_out(x))


def test_out_is_refused_for_a_tensor_recording_gradients():
    x = tensor((3, 64), torch.float64, 8).requires_grad_()
    with pytest.raises(ValueError, match="`out` must be None when `x` records gradients"):
        rr.apply_rope(x, SPEC, backend="numba", out=torch.empty(3, 64, dtype=torch.float64))


# ----------------------------------------------------------------------------------------
# JAX
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_jax_arrays_equal_the_numpy_kernel(dtype):
    jax = pytest.importorskip("jax")
    x_np = np.random.default_rng(9).standard_normal((2, 33, 4, 64)).astype(dtype)
    x = jax.numpy.asarray(x_np)
    y = rr.apply_rope(x, SPEC, seq_axis=-3, offset=2, backend="auto")
    assert isinstance(y, jax.Array)
    assert y.dtype == x.dtype
    assert_same_bits(y, rr.apply_rope(x_np, SPEC, seq_axis=-3, offset=2, backend="numba"))
    q, k = rr.apply_rope_qk(x, x, SPEC, seq_axis=-3, backend="numba")
    q_want, _ = rr.apply_rope_qk(x_np, x_np, SPEC, seq_axis=-3, backend="numba")
    assert_same_bits(q, q_want)
    assert_same_bits(k, q_want)
    np.testing.assert_array_equal(np.asarray(x).view("u1"), x_np.view("u1"))


@pytest.mark.parametrize(
    "spec",
    [SPEC, rr.RopeSpec(64, xpos=rr.XPos()), rr.RopeSpec(64, scaling=rr.scaling.DynamicNTK(4.0, 4))],
    ids=["plain", "xpos", "dynamic-ntk"],
)
@pytest.mark.parametrize("offset", [0, 9, 2.5])
def test_jax_queries_and_keys_equal_the_numpy_kernel(spec, offset):
    """Queries shorter than the keys (decoding against a cache): the queries take the
    keys' last positions, as in the NumPy call, whichever road the call takes."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(10)
    q_np = rng.standard_normal((2, 3, 4, 64)).astype(np.float32)
    k_np = rng.standard_normal((2, 7, 4, 64)).astype(np.float32)
    got = rr.apply_rope_qk(jax.numpy.asarray(q_np), jax.numpy.asarray(k_np), spec,
                           offset=offset, seq_axis=-3, backend="numba")  # fmt: skip
    want = rr.apply_rope_qk(q_np, k_np, spec, offset=offset, seq_axis=-3, backend="numba")
    for a, b in zip(got, want, strict=True):
        assert isinstance(a, jax.Array)
        assert_same_bits(a, b)


def test_jax_out_is_refused_and_tracers_take_the_general_path():
    jax = pytest.importorskip("jax")
    x = jax.numpy.ones((3, 64), dtype="float32")
    with pytest.raises(TypeError, match=r"`out` must be None for JAX arrays"):
        rr.apply_rope(x, SPEC, backend="numba", out=x)
    jitted = jax.jit(lambda a: rr.apply_rope(a, SPEC, backend="auto"))
    want = rr.apply_rope(np.ones((3, 64), np.float32), SPEC)
    np.testing.assert_allclose(np.asarray(jitted(x)), want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("committed", [False, True])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "device_put"])
def test_jax_results_are_adopted_on_the_device_and_commitment_of_x(monkeypatch, committed, direct):
    """The result lives where `x` does, as committed as `x`, whichever way JAX adopts it
    (jaxlib's C++ call made directly, or ``jax.device_put`` where that call is missing)."""
    jax = pytest.importorskip("jax")
    jax_arrays = importlib.import_module("rope_ref._engine.jax_arrays")
    if not direct:
        monkeypatch.setattr(jax_arrays, "_direct_put", lambda: None)
    x_np = np.random.default_rng(11).standard_normal((1, 1, 4, 64)).astype(np.float32)
    device = jax.devices("cpu")[0]
    x = jax.device_put(x_np, device) if committed else jax.numpy.asarray(x_np)
    assert x.committed is committed
    y = rr.apply_rope(x, SPEC, seq_axis=-3, offset=5, backend="auto")
    assert isinstance(y, jax.Array)
    assert y.committed is committed
    assert y.sharding == x.sharding
    assert_same_bits(y, rr.apply_rope(x_np, SPEC, seq_axis=-3, offset=5, backend="numba"))
    assert_same_bits(y + 0, rr.apply_rope(x_np, SPEC, seq_axis=-3, offset=5, backend="numba"))


def _rope64(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """Half-layout RoPE in float64, written here (positions along axis -2)."""
    n = x.shape[-1] // 2
    angles = positions[:, None] * base ** (-np.arange(n) / n)
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * np.cos(angles) - b * np.sin(angles),
                           b * np.cos(angles) + a * np.sin(angles)], axis=-1)  # fmt: skip


def test_the_operators_keep_a_bounded_number_of_specs():
    """5,000 distinct specs through the operators leave at most MAX_SPECS (plus those
    compiled graphs hold); a backward whose spec has been evicted meanwhile, and a
    compiled step whose spec is older than all of them, still rotate by their own spec."""
    specs_module = importlib.import_module("rope_ref.backends.torch_ops.specs")
    rng = np.random.default_rng(3)
    x_np, g_np = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    old = rr.RopeSpec(8, base=123.0)
    torch._dynamo.reset()
    step = torch.compile(lambda t: rr.apply_rope(t, old, backend="auto"), backend="aot_eager",
                         fullgraph=True)  # fmt: skip
    step(torch.from_numpy(x_np))
    x = torch.tensor(x_np, requires_grad=True)
    y = rr.apply_rope(x, rr.RopeSpec(8, base=777.0), backend="auto")  # backward comes later
    before = specs_module.size()
    alive = []
    for i in range(5000):
        spec = rr.RopeSpec(8, base=1000.0 + i)
        alive.append(weakref.ref(spec))
        rr.apply_rope(torch.tensor(x_np, requires_grad=True), spec, backend="numba")
    del spec
    gc.collect()
    assert specs_module.size() <= specs_module.MAX_SPECS + before
    # whoever holds them: the kernel's own caches keep at most a few hundred specs
    assert sum(ref() is not None for ref in alive) < 1000
    (y * torch.from_numpy(g_np)).sum().backward()  # R^T g: the inverse rotation
    inverse = _rope64(g_np, -np.arange(3.0), 777.0)
    np.testing.assert_allclose(x.grad.numpy(), inverse, rtol=0, atol=1e-12)
    got = step(torch.from_numpy(x_np)).numpy()
    np.testing.assert_allclose(got, _rope64(x_np, np.arange(3.0), 123.0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_empty_tensors_recording_gradients_are_rotated(backend):
    """Zero tokens: an empty result (not an `out` the caller never gave), and a gradient."""
    x = torch.zeros(0, 8, requires_grad=True)
    y = rr.apply_rope(x, rr.RopeSpec(8), backend=backend)
    assert y.shape == (0, 8)
    y.sum().backward()
    assert x.grad is not None
    assert x.grad.shape == (0, 8)
    q_rot, k_rot = rr.apply_rope_qk(x, torch.zeros(2, 0, 8), rr.RopeSpec(8), backend=backend)
    assert q_rot.shape == (0, 8)
    assert k_rot.shape == (2, 0, 8)
    out = torch.empty(0, 8)
    with torch.no_grad():
        assert rr.apply_rope(x, rr.RopeSpec(8), out=out, backend=backend) is out


def test_threads_evicting_each_others_specs_rotate_by_their_own():
    """Four threads, 150 distinct specs each, through the operators at once: the
    registry evicts all the time, and every result and gradient is its own spec's."""
    rng = np.random.default_rng(4)
    x_np, g_np = rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 3, 8))
    errors: list[str] = []

    def work(thread: int) -> None:
        for i in range(150):
            base = 200.0 + 1000 * thread + i
            x = torch.tensor(x_np, requires_grad=True)
            y = rr.apply_rope(x, rr.RopeSpec(8, base=base), backend="numba")
            (y * torch.from_numpy(g_np)).sum().backward()
            if not np.allclose(y.detach().numpy(), _rope64(x_np, np.arange(3.0), base),
                               rtol=0, atol=1e-12):  # fmt: skip
                errors.append(f"value at base {base}")
            if not np.allclose(x.grad.numpy(), _rope64(g_np, -np.arange(3.0), base),
                               rtol=0, atol=1e-12):  # fmt: skip
                errors.append(f"gradient at base {base}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
