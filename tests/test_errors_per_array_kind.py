"""The same wrong argument gets the same error on every array kind.

Each case plants one mistake (or two: the first checked must be the one reported) in an
``apply_rope`` / ``apply_rope_qk`` call, and the call is made on NumPy arrays, PyTorch CPU
tensors, JAX arrays, MLX arrays (where installed) and array-api-strict arrays, with each
backend that takes them (array-api-strict arrays have no kernel: the reference). NumPy's
error (type and message) is what the others must repeat: the arguments are checked once, in
the engine's general path, whichever road the array kind takes first.

Two rules name the array kind, and are pinned as such: an `out` that is not an array of x's
kind (the message names the kind: "a NumPy array", "a torch tensor"), and an `out` for an
array that cannot be written (JAX, MLX), refused at one stage whatever the backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rope_ref as rr

SHAPE = (2, 3, 8)  # (batch, seq, head_dim)
SPEC = rr.RopeSpec(head_dim=8)


def _numpy(a: np.ndarray) -> Any:
    return a


def _torch(a: np.ndarray) -> Any:
    torch = pytest.importorskip("torch")
    return torch.from_numpy(a.copy())


def _jax(a: np.ndarray) -> Any:
    jnp = pytest.importorskip("jax.numpy")
    return jnp.asarray(a)


def _mlx(a: np.ndarray) -> Any:
    mx = pytest.importorskip("mlx.core")
    return mx.array(a)


def _strict(a: np.ndarray) -> Any:
    xp = pytest.importorskip("array_api_strict")
    return xp.asarray(a)


KINDS: dict[str, Callable[[np.ndarray], Any]] = {
    "torch": _torch,
    "jax": _jax,
    "mlx": _mlx,
    "array_api_strict": _strict,
}
#: Arrays that cannot be written: `out` is refused for them.
IMMUTABLE = ("jax", "mlx")


def _x(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


#: id -> (keyword arguments of apply_rope, the shape of x); `"OUT"` stands for an array of
#: x's kind and shape, `"X"` for x itself.
CASES: dict[str, tuple[dict[str, Any], tuple[int, ...]]] = {
    "spec-not-a-spec": ({"spec": "llama"}, SHAPE),
    "spec-head-dim": ({"spec": rr.RopeSpec(head_dim=16)}, SHAPE),
    "default-spec-odd-head-dim": ({}, (2, 3, 7)),
    "offset-text": ({"offset": "3"}, SHAPE),
    "offset-nan": ({"offset": float("nan")}, SHAPE),
    "seq-axis-last": ({"seq_axis": -1}, SHAPE),
    "seq-axis-out-of-range": ({"seq_axis": 5}, SHAPE),
    "seq-axis-float": ({"seq_axis": 1.0}, SHAPE),
    "seq-len-negative": ({"seq_len": -1}, SHAPE),
    "seq-len-text": ({"seq_len": "long"}, SHAPE),
    "positions-wrong-length": ({"positions": np.arange(5)}, SHAPE),
    "positions-text": ({"positions": ["a", "b", "c"]}, SHAPE),
    "inverse-text": ({"inverse": "yes"}, SHAPE),
    "form-unknown": ({"form": "polar"}, SHAPE),
    "role-unknown": ({"role": "value"}, SHAPE),
    "out-not-an-array": ({"out": "buffer"}, SHAPE),
    "out-wrong-shape": ({"out": np.zeros((2, 3, 4), np.float32)}, SHAPE),
    "spec-and-out": ({"spec": "llama", "out": "buffer"}, SHAPE),
    "offset-and-out": ({"offset": "3", "out": "buffer"}, SHAPE),
    "positions-and-out": ({"positions": np.arange(5), "out": "buffer"}, SHAPE),
}
#: An `out` that is no array: the message names the array x is ("a NumPy array", "a tensor").
OUT_ONLY = ("out-not-an-array",)
BACKENDS = ("reference", "numba", "auto")


def _error(call: Callable[[], object]) -> tuple[type[BaseException], str] | None:
    try:
        call()
    except (TypeError, ValueError) as err:
        return type(err), _plain(str(err))
    return None


def _plain(message: str) -> str:
    """The message without the array type's name where it quotes it (``got ndarray``)."""
    return re.sub(r"\b(ndarray|Tensor|ArrayImpl|Array|array)\b", "ARRAY", message)


def _kernel_or_skip(kind: str, backend: str) -> None:
    if backend == "numba" and rr.available_backends()["numba"] is not None:
        pytest.skip("numba is not installed")
    if kind == "array_api_strict" and backend != "reference":
        pytest.skip("array-api-strict arrays have no kernel")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_wrong_argument_gets_the_same_error(kind: str, case: str, backend: str) -> None:
    _kernel_or_skip(kind, backend)
    kwargs, shape = CASES[case]
    if kind in IMMUTABLE and "out" in kwargs:
        pytest.skip("`out` for an immutable array: test_out_for_an_immutable_array_...")
    make = KINDS[kind]
    x = _x(shape)
    mine = make(x)  # skips where the kind's library is absent
    want = _error(lambda: rr.apply_rope(x, backend=backend, **kwargs))
    assert want is not None, "the mistake must be one for NumPy too"
    moved = {k: make(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    got = _error(lambda: rr.apply_rope(mine, backend=backend, **moved))
    if case in OUT_ONLY and backend != "reference":  # the message names x's kind
        assert got is not None
        assert got[0] is want[0]
        # the same form, naming x's kind (`_plain` wrote NumPy's "array" as ARRAY)
        form = r"`out` must be (a NumPy ARRAY|a torch tensor) for \1 `x`; got str\."
        assert re.fullmatch(form, want[1]), want
        assert re.fullmatch(form, got[1]), got
    else:
        assert got == want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_wrong_argument_gets_the_same_error_for_queries_and_keys(
    kind: str, case: str, backend: str
) -> None:
    _kernel_or_skip(kind, backend)
    kwargs, shape = CASES[case]
    if "out" in kwargs or "role" in kwargs:
        pytest.skip("apply_rope_qk takes no `out` and no `role`")
    make = KINDS[kind]
    x = _x(shape)
    mine = make(x)
    want = _error(lambda: rr.apply_rope_qk(x, x, backend=backend, **kwargs))
    assert want is not None, "the mistake must be one for NumPy too"
    moved = {k: make(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    got = _error(lambda: rr.apply_rope_qk(mine, mine, backend=backend, **moved))
    assert got == want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", IMMUTABLE)
def test_out_for_an_immutable_array_is_refused_alike(kind: str, backend: str) -> None:
    """`out` for a JAX or MLX array: one error, whichever backend, naming the kind."""
    _kernel_or_skip(kind, backend)
    make = KINDS[kind]
    x = make(_x())
    name = {"jax": "JAX", "mlx": "MLX"}[kind]
    with pytest.raises(
        TypeError, match=rf"^`out` must be None for {name} arrays \(they are immutable\)"
    ):
        rr.apply_rope(x, backend=backend, out=x)
    with pytest.raises(TypeError, match=r"^`spec` "):  # the spec is checked first
        rr.apply_rope(x, "llama", backend=backend, out=x)
