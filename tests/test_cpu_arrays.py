"""PyTorch tensors and JAX arrays at the Numba kernel: the roads of
rope_ref/_engine/cpu_arrays.py.

The first call of a process (nothing known yet of tensor types and their views), a process
where numba is missing or torch was never imported, the forms the kernel does not compute,
calls the fast path declines, gradients of the queries alone, lazy negative views. Every
expected value is the RoPE formula in float64 NumPy written here, rounded once to the
dtype by torch's own cast where the call takes the reference, within a few of the dtype's
ulps where it takes the float32 kernel; gradients are torch autograd of a plain torch
formula.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._core import reference
from rope_ref._engine import cpu_arrays, torch_views

torch = pytest.importorskip("torch")

needs_numba = pytest.mark.skipif(
    rr.available_backends()["numba"] is not None, reason="the numba backend is not installed"
)
SPEC = rr.RopeSpec(64)
BASE = 10000.0
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def rope64(x: np.ndarray, positions: np.ndarray, *, inverse: bool = False) -> np.ndarray:
    """The half-layout rotation of `x` (..., seq, 64) at `positions` (seq,), in float64."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1] // 2
    inv_freq = BASE ** (-2.0 * np.arange(n, dtype=np.float64) / (2 * n))
    phi = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq
    if inverse:
        phi = -phi
    c, s = np.cos(phi), np.sin(phi)
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def rounded(x: Any, positions: np.ndarray, **kwargs: bool) -> Any:
    """`rope64` of tensor `x`, rounded once to x's dtype (torch's cast)."""
    want = rope64(x.detach().to(torch.float64).numpy(), positions, **kwargs)
    return torch.from_numpy(want).to(x.dtype)


def assert_close(got: Any, x: Any, positions: np.ndarray, **kwargs: bool) -> None:
    """`got` is a tensor like `x`, within 4 eps of its largest value of the formula."""
    assert type(got) is torch.Tensor
    assert got.dtype == x.dtype
    assert got.shape == x.shape
    assert not got.requires_grad
    want = rope64(x.detach().to(torch.float64).numpy(), positions, **kwargs)
    eps = float(torch.finfo(x.dtype).eps)
    bound = 4 * eps * float(np.max(np.abs(want)))
    assert np.max(np.abs(got.to(torch.float64).numpy() - want)) <= bound


def tensor(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> Any:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape)).to(dtype)


def no_reference(*args: object, **kwargs: object) -> None:
    msg = "the float64 reference rotated an array the kernel takes"
    raise AssertionError(msg)


@pytest.fixture
def first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a new process: no array type, tensor view or short road known yet."""
    monkeypatch.setattr(cpu_arrays, "_kinds", {})
    monkeypatch.setattr(torch_views, "TORCH_VIEWS", {})
    monkeypatch.setattr(cpu_arrays, "_short_roads", {})


@pytest.fixture(params=[ModuleNotFoundError, RuntimeError], ids=["missing", "no-threads"])
def no_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """As where numba is not installed (or cannot start its threads), in a new process."""
    error: type[Exception] = request.param

    def load_backend(name: str) -> None:
        raise error(name)

    monkeypatch.setattr(cpu_arrays, "_kinds", {})
    monkeypatch.setattr(torch_views, "TORCH_VIEWS", {})
    monkeypatch.setattr(cpu_arrays, "_short_roads", {})
    monkeypatch.setattr(cpu_arrays, "load_backend", load_backend)
    fresh = functools.cache(inspect.unwrap(cpu_arrays._numba))  # nothing looked up yet
    monkeypatch.setattr(cpu_arrays, "_numba", fresh)


# ----------------------------------------------------------------------------------------
# Which arrays are tensors and JAX arrays
# ----------------------------------------------------------------------------------------


@needs_numba
@pytest.mark.usefixtures("first_call")
def test_calls_work_where_torch_was_never_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch in sys.modules, `compiling` is False and array types are classified."""
    monkeypatch.delitem(sys.modules, "torch")
    assert cpu_arrays.compiling() is False
    x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
    positions = np.array([3, 1, 4, 1, 5])
    got = rr.apply_rope(x, SPEC, positions, backend="numba")
    want = rope64(x, positions)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want)) <= 4 * 2.0**-23 * np.max(np.abs(want))


@pytest.mark.usefixtures("first_call")
def test_only_tensors_and_concrete_jax_arrays_have_a_kind() -> None:
    """A class named like JAX's array, NumPy arrays and lists are neither, with JAX imported."""
    jnp = pytest.importorskip("jax.numpy")

    class ArrayImpl:  # JAX's concrete array class has this name
        pass

    assert cpu_arrays.array_kind(torch.zeros(2)) == "torch"
    assert cpu_arrays.array_kind(jnp.zeros(2)) == "jax"
    for other in (ArrayImpl(), np.zeros(2), [0.0, 1.0], None):
        assert cpu_arrays.array_kind(other) is None, type(other)


# ----------------------------------------------------------------------------------------
# The kernel's road, from the first call of a process
# ----------------------------------------------------------------------------------------


@needs_numba
@pytest.mark.usefixtures("first_call")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_first_tensor_calls_of_a_process_take_the_kernel(
    dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding, explicit positions and `out=` of each dtype: the kernel, never the
    float64 reference, from the very first call."""
    monkeypatch.setattr(reference, "rotate", no_reference)
    x = tensor((2, 6, 64), dtype, seed=2)
    before = x.clone()
    assert_close(rr.apply_rope(x, SPEC, offset=3, backend="auto"), x, 3 + np.arange(6))
    positions = torch.tensor([9, 2, 6, 5, 3, 5])
    got = rr.apply_rope(x, SPEC, positions, backend="numba")
    assert_close(got, x, positions.numpy())
    out = torch.empty_like(x)
    assert rr.apply_rope(x, SPEC, offset=3, backend="auto", out=out) is out
    assert_close(out, x, 3 + np.arange(6))
    assert torch.equal(x, before)


@needs_numba
def test_a_decoding_call_the_fast_path_declines_is_rotated_by_the_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A NumPy integer seq_axis leaves the short road's fast call for the general one."""
    monkeypatch.setattr(reference, "rotate", no_reference)
    x = tensor((1, 3, 2, 64), torch.float32, seed=3)
    got = rr.apply_rope(x, SPEC, offset=5, seq_axis=np.int64(-3), backend="auto")
    want = rope64(x.numpy().swapaxes(-3, -2), 5 + np.arange(3)).swapaxes(-3, -2)
    assert type(got) is torch.Tensor
    assert got.dtype == torch.float32
    assert np.max(np.abs(got.numpy() - want)) <= 4 * 2.0**-23 * np.max(np.abs(want))
    inverse = rr.apply_rope(x[0], SPEC, offset=5, inverse=np.True_, backend="auto")
    assert_close(inverse, x[0], 5 + np.arange(2), inverse=True)


# ----------------------------------------------------------------------------------------
# Where numba is missing: the reference, for tensors and JAX arrays alike
# ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_kernel")
def test_without_the_kernel_tensors_take_the_reference() -> None:
    """backend="auto" rotates a float32 tensor in float64 and rounds once."""
    x = tensor((2, 5, 64), torch.float32, seed=4)
    assert torch.equal(rr.apply_rope(x, SPEC, offset=7, backend="auto"),
                       rounded(x, 7 + np.arange(5)))  # fmt: skip
    positions = torch.tensor([4, 0, 8, 1, 6])
    got = rr.apply_rope(x, SPEC, positions, backend="auto")
    assert torch.equal(got, rounded(x, positions.numpy()))
    q_rot, k_rot = rr.apply_rope_qk(x[:, 3:], x, SPEC, backend="auto")
    assert torch.equal(k_rot, rounded(x, np.arange(5)))
    assert torch.equal(q_rot, rounded(x[:, 3:], np.arange(3, 5)))


@pytest.mark.usefixtures("no_kernel")
def test_without_the_kernel_jax_arrays_take_the_reference() -> None:
    """apply_rope(_qk) of JAX float32 arrays with backend="auto": the reference rotates them
    (in float32 on the device where JAX has no float64, hence a bound, not bits)."""
    jax = pytest.importorskip("jax")
    x = tensor((2, 5, 64), torch.float32, seed=5)
    q, k = jax.numpy.asarray(x[:, 3:].numpy()), jax.numpy.asarray(x.numpy())
    assert_close(
        torch.from_numpy(np.array(rr.apply_rope(k, SPEC, backend="auto"))), x, np.arange(5)
    )
    q_rot, k_rot = rr.apply_rope_qk(q, k, SPEC, backend="auto")
    for got, like, positions in ((q_rot, x[:, 3:], np.arange(3, 5)), (k_rot, x, np.arange(5))):
        assert isinstance(got, jax.Array)
        assert_close(torch.from_numpy(np.array(got)), like, positions)


# ----------------------------------------------------------------------------------------
# Forms, queries and keys, devices, lazy views
# ----------------------------------------------------------------------------------------


@needs_numba
def test_forms_the_kernel_does_not_compute_take_the_reference_or_are_refused() -> None:
    """form="complex" with "auto" is the reference's (rounded once), with "numba" refused;
    an unknown form is refused by name, for apply_rope and apply_rope_qk."""
    x = tensor((2, 5, 64), torch.float32, seed=6)
    want = rounded(x, np.arange(5))
    assert torch.equal(rr.apply_rope(x, SPEC, form="complex", backend="auto"), want)
    q_rot, k_rot = rr.apply_rope_qk(x, x, SPEC, form="complex", backend="auto")
    assert torch.equal(q_rot, want)
    assert torch.equal(k_rot, want)
    for call in (
        lambda: rr.apply_rope(x, SPEC, form="complex", backend="numba"),
        lambda: rr.apply_rope_qk(x, x, SPEC, form="complex", backend="numba"),
    ):
        with pytest.raises(ValueError, match="`form` applies to backend='reference' only"):
            call()
    for backend in ("auto", "numba"):
        with pytest.raises(ValueError, match="`form` must be one of"):
            rr.apply_rope(x, SPEC, form="bogus", backend=backend)


@needs_numba
def test_queries_and_keys_of_two_kinds_are_refused_naming_k() -> None:
    """A tensor q with a NumPy k: the namespace error of the general path."""
    x = tensor((3, 64), torch.float32, seed=7)
    with pytest.raises(TypeError, match="`k` must be in the namespace of `q`"):
        rr.apply_rope_qk(x, x.numpy(), SPEC, backend="auto")


@needs_numba
def test_a_key_the_kernel_cannot_take_leaves_the_pair_to_the_general_path() -> None:
    """k with its negative bit set: with "auto", the keys are rotated by the reference
    (which resolves the bit) and the queries by the kernel; "numba" refuses naming `k`."""
    x = tensor((2, 5, 64), torch.float32, seed=8)
    k = torch._neg_view(-x)  # stands for x
    assert k.is_neg()
    q_rot, k_rot = rr.apply_rope_qk(x, k, SPEC, backend="auto")
    assert_close(q_rot, x, np.arange(5))
    assert torch.equal(k_rot, rounded(x, np.arange(5)))
    with pytest.raises(ValueError, match="`k` must not have its negative or conjugate bit"):
        rr.apply_rope_qk(x, k, SPEC, backend="numba")


@needs_numba
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_queries_alone_recording_gradients_keep_their_graph(backend: str) -> None:
    """q requires grad, k does not: q's gradient is torch autograd's of the formula."""
    rng = np.random.default_rng(9)
    q = torch.tensor(rng.standard_normal((2, 3, 64)), requires_grad=True)
    k = torch.tensor(rng.standard_normal((2, 5, 64)))
    g = torch.tensor(rng.standard_normal((2, 3, 64)))
    q_rot, k_rot = rr.apply_rope_qk(q, k, SPEC, backend=backend)
    assert q_rot.requires_grad
    assert "rope_ref" in q_rot.grad_fn.name()  # the kernel's operator
    assert_close(k_rot.detach(), k, np.arange(5))
    (q_rot * g).sum().backward()
    plain = q.detach().clone().requires_grad_()
    n = 32
    inv_freq = BASE ** (-2.0 * torch.arange(n, dtype=torch.float64) / 64)
    phi = torch.arange(2, 5, dtype=torch.float64)[:, None] * inv_freq
    c, s = torch.cos(phi), torch.sin(phi)
    a, b = plain[..., :n], plain[..., n:]
    (torch.cat([a * c - b * s, b * c + a * s], dim=-1) * g).sum().backward()
    assert q.grad is not None
    assert plain.grad is not None
    torch.testing.assert_close(q.grad, plain.grad, rtol=0, atol=1e-12)


def test_a_tensor_on_another_device_is_left_by_auto() -> None:
    """A meta tensor with backend="auto" goes past the kernel: a meta tensor comes back."""
    x = torch.empty((2, 3, 64), device="meta")
    got = rr.apply_rope(x, SPEC, offset=2, backend="auto")
    assert got.device.type == "meta"
    assert got.shape == x.shape
    assert got.dtype == x.dtype


@needs_numba
def test_out_with_its_negative_bit_set_is_refused_by_name() -> None:
    """The kernel cannot write through a lazy negative view of `out`."""
    x = tensor((3, 64), torch.float32, seed=10)
    out = torch._neg_view(torch.zeros(3, 64))
    with pytest.raises(ValueError, match="`out` must be a plain CPU tensor like `x`"):
        rr.apply_rope(x, SPEC, backend="numba", out=out)
    assert not out.any()


@needs_numba
def test_positions_recording_gradients_are_read_as_values() -> None:
    """Under no_grad, float positions that require grad (a learned offset, say) are read
    detached (with gradients on, the operators differentiate them: test_autograd.py)."""
    x = tensor((2, 4, 64), torch.float32, seed=11)
    positions = torch.tensor([0.5, 2.0, 7.25, 3.0], dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        got = rr.apply_rope(x, SPEC, positions, backend="numba")
        pair = rr.apply_rope_qk(x, x, SPEC, positions, k_positions=positions, backend="auto")
    assert_close(got, x, positions.detach().numpy())
    q_rot, k_rot = pair
    assert_close(q_rot, x, positions.detach().numpy())
    assert_close(k_rot, x, positions.detach().numpy())


@needs_numba
@pytest.mark.usefixtures("first_call")
def test_without_ml_dtypes_bfloat16_tensors_take_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where ml_dtypes cannot be imported, bfloat16 tensors have no NumPy view: "auto"
    rotates them in float64 and rounds once; the other dtypes still take the kernel."""
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` fails
    x = tensor((2, 5, 64), torch.float32, seed=12)
    positions = torch.tensor([1, 0, 3, 9, 4])
    assert_close(rr.apply_rope(x, SPEC, positions, backend="numba"), x, positions.numpy())
    half = x.to(torch.bfloat16)
    got = rr.apply_rope(half, SPEC, positions, backend="auto")
    assert torch.equal(got, rounded(half, positions.numpy()))


@needs_numba
def test_arrays_of_other_dtypes_are_refused_by_the_general_path_naming_them() -> None:
    """Integer tensors, and JAX queries or keys the kernel does not take, reach the
    general path's dtype check, which names the array."""
    x = torch.ones((2, 3, 64), dtype=torch.int32)
    for backend in ("auto", "numba"):
        with pytest.raises(TypeError, match="`x` must have a real floating dtype"):
            rr.apply_rope(x, SPEC, backend=backend)
    jnp = pytest.importorskip("jax.numpy")
    ints, floats = jnp.ones((2, 3, 64), dtype=jnp.int32), jnp.ones((2, 3, 64), jnp.float32)
    for q, k, name in ((ints, ints, "q"), (ints, floats, "q"), (floats, ints, "k")):
        with pytest.raises(TypeError, match=f"`{name}` must have a real floating dtype"):
            rr.apply_rope_qk(q, k, SPEC, backend="auto")


@pytest.mark.usefixtures("first_call")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_numpy_view_of_a_process_s_first_tensor_is_a_view(dtype: Any) -> None:
    """The view shares the tensor's memory and bits (bfloat16 as ml_dtypes' bfloat16)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = tensor((3, 4), dtype, seed=13)
    view = cpu_arrays.numpy_view(x)
    want = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16,
            torch.float32: np.float32, torch.float64: np.float64}[dtype]  # fmt: skip
    assert view.dtype == np.dtype(want)
    assert view.ctypes.data == x.data_ptr()
    np.testing.assert_array_equal(view.astype(np.float64), x.to(torch.float64).numpy())


@needs_numba
@pytest.mark.parametrize("backend", ["numba", "auto"])
def test_positions_with_their_negative_bit_set_are_read_as_their_values(backend: str) -> None:
    """A lazy negative view of positions (torch._neg_view) stands for its values, as the
    reference reads it, for queries and keys too."""
    x = tensor((2, 4, 64), torch.float32, seed=15)
    positions = torch._neg_view(torch.tensor([-6.0, -2.0, -0.5, -11.0], dtype=torch.float64))
    assert positions.is_neg()
    values = np.array([6.0, 2.0, 0.5, 11.0])
    assert_close(rr.apply_rope(x, SPEC, positions, backend=backend), x, values)
    k_positions = torch._neg_view(torch.tensor([-1, -5, -3, -8]))
    q_rot, k_rot = rr.apply_rope_qk(x, x, SPEC, positions, k_positions=k_positions,
                                    backend=backend)  # fmt: skip
    assert_close(q_rot, x, values)
    assert_close(k_rot, x, np.array([1, 5, 3, 8]))


@needs_numba
def test_as_torch_compile_traces_float_cpu_tensors_take_the_operators_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a call is traced, a float CPU tensor goes to the custom operator (the kernel,
    not the reference); an integer tensor reaches the general path's dtype check; `out=`
    is never left unwritten behind another result."""
    monkeypatch.setattr(cpu_arrays, "compiling", lambda: True)
    monkeypatch.setattr(reference, "rotate", no_reference)
    x = tensor((2, 5, 64), torch.float32, seed=16)
    positions = torch.tensor([2, 7, 1, 8, 2])
    assert_close(rr.apply_rope(x, SPEC, positions, backend="auto"), x, positions.numpy())
    with pytest.raises(TypeError, match="`x` must have a real floating dtype"):
        rr.apply_rope(torch.ones((2, 5, 64), dtype=torch.int32), SPEC, positions, backend="auto")
    for backend in ("auto", "numba"):
        out = torch.zeros_like(x)
        try:
            got = rr.apply_rope(x, SPEC, positions, backend=backend, out=out)
        except (TypeError, ValueError):  # refused while traced
            continue
        assert got is out
        assert_close(out, x, positions.numpy())
