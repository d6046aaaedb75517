"""A new array kind is one adapter: registered by the documented step, rotated by every backend.

The toy kind is a thin wrapper around a NumPy array. It goes through
``rope_ref._engine.kinds.register`` and a `HostKind` subclass only (docs/index.md, "Adding
an array kind"); the values are checked against RoPE written out here (rotate-half with
LLaMA's frequencies), not against rope_ref's own NumPy call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import kinds

HEAD_DIM = 8
BASE = 10000.0


class Boxed:
    """A toy array kind: a NumPy array in a box (no array API of its own)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data


class BoxedKind(kinds.HostKind):
    called = "a Boxed array"

    def host_view(self, a: Any) -> np.ndarray:
        return a.data

    def wrap(self, result: np.ndarray, like: Any) -> Any:
        return Boxed(result)


class FrozenBoxed(Boxed):
    """The same kind, declared immutable: `out` is refused."""


class FrozenBoxedKind(BoxedKind):
    called = "a FrozenBoxed array"
    immutable = "FrozenBoxed"


@pytest.fixture(autouse=True)
def _registered() -> Any:
    kinds.register(Boxed, BoxedKind())
    kinds.register(FrozenBoxed, FrozenBoxedKind())
    yield
    kinds._registered.clear()
    kinds.KIND_BY_TYPE.clear()
    kinds.KIND_BY_TYPE[np.ndarray] = kinds.NUMPY


def _rope(x: np.ndarray, positions: np.ndarray, inverse: bool = False) -> np.ndarray:
    """RoPE, rotate-half, written out: pair j of feature halves turned by p * base**(-2j/d)."""
    half = HEAD_DIM // 2
    inv_freq = BASE ** (-np.arange(half, dtype=np.float64) * 2 / HEAD_DIM)
    angle = positions[:, None].astype(np.float64) * inv_freq  # (seq, half)
    if inverse:
        angle = -angle
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = x[..., :half].astype(np.float64), x[..., half:].astype(np.float64)
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _backends() -> list[str]:
    found = ["reference", "auto", "exact"]
    if rr.available_backends()["numba"] is None:
        found.append("numba")
    return found


def _data(shape: tuple[int, ...] = (2, 5, HEAD_DIM), dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(3).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_registered_kind_is_rotated_and_wrapped_back_by_every_backend(
    backend: str, dtype: Any
) -> None:
    if backend == "exact":
        pytest.importorskip("mpmath")
    x = _data(dtype=dtype)
    y = rr.apply_rope(Boxed(x), offset=3, backend=backend)
    assert type(y) is Boxed
    assert y.data.dtype == dtype
    want = _rope(x, np.arange(3, 8))
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(y.data, want, rtol=0, atol=tol)
    back = rr.apply_rope(y, offset=3, inverse=True, backend=backend)
    np.testing.assert_allclose(back.data, _rope(y.data, np.arange(3, 8), inverse=True), atol=tol)


@pytest.mark.parametrize("backend", _backends())
def test_a_registered_kind_takes_its_own_positions_and_queries_with_keys(backend: str) -> None:
    if backend == "exact":
        pytest.importorskip("mpmath")
    x = _data()
    positions = np.array([4, 0, 9, 2, 7])
    y = rr.apply_rope(Boxed(x), positions=Boxed(positions), backend=backend)
    np.testing.assert_allclose(y.data, _rope(x, positions), atol=1e-6)
    q, k = rr.apply_rope_qk(Boxed(x[:, -1:]), Boxed(x), backend=backend)
    assert type(q) is Boxed
    assert type(k) is Boxed
    np.testing.assert_allclose(k.data, _rope(x, np.arange(5)), atol=1e-6)
    np.testing.assert_allclose(q.data, _rope(x[:, -1:], np.array([4])), atol=1e-6)


def test_a_registered_kind_writes_into_out_of_its_kind() -> None:
    if rr.available_backends()["numba"] is not None:
        pytest.skip("numba is not installed")
    x = _data()
    out = Boxed(np.zeros_like(x))
    got = rr.apply_rope(Boxed(x), backend="numba", out=out)
    assert got is out
    np.testing.assert_allclose(out.data, _rope(x, np.arange(5)), atol=1e-6)
    with pytest.raises(TypeError, match=r"^`out` must be a Boxed array for a Boxed array `x`"):
        rr.apply_rope(Boxed(x), backend="numba", out=np.zeros_like(x))
    with pytest.raises(TypeError, match=r"^`spec` must be"):  # the earlier mistake first
        rr.apply_rope(Boxed(x), "llama", backend="numba", out=np.zeros_like(x))


def test_an_immutable_registered_kind_refuses_out() -> None:
    x = FrozenBoxed(_data())
    with pytest.raises(TypeError, match=r"^`out` must be None for FrozenBoxed arrays"):
        rr.apply_rope(x, backend="numba", out=FrozenBoxed(_data()))


def test_register_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match=r"^`array_type` must be a class; got str"):
        kinds.register("Boxed", BoxedKind())
    with pytest.raises(TypeError, match=r"^`kind` must be an ArrayKind; got int"):
        kinds.register(Boxed, 3)


def test_the_adapter_is_looked_up_once_per_type() -> None:
    kinds.KIND_BY_TYPE.pop(Boxed, None)
    calls = []
    original = kinds._classify

    def counting(kind: type) -> kinds.ArrayKind:
        calls.append(kind)
        return original(kind)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kinds, "_classify", counting)
        for _ in range(3):
            rr.apply_rope(Boxed(_data()))
    assert calls == [Boxed]


def test_the_runner_names_the_immutable_kinds_as_their_adapters_do() -> None:
    """Catches: `runner.immutable_kind` (asked by the roads that have no adapter: the CUDA
    road, the torch operators) and an adapter's `immutable` telling different stories, so
    that an `out` would be refused for a kind on one road and written on another."""
    from rope_ref._engine import runner

    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    cases = ((np.zeros((2, 4)), None), (torch.zeros(2, 4), None), (jnp.zeros((2, 4)), "JAX"))
    for a, expected in cases:
        assert kinds.kind_of(a).immutable == expected, type(a)
        assert runner.immutable_kind(a) == expected, type(a)
