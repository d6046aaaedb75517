"""JAX CPU arrays through the Numba kernel (rope_ref/_engine/jax_arrays.py).

Expected values are RoPE by its formula in NumPy float64 (written here); which road a call
takes (the kernel's short road, two `apply_rope` calls for queries and keys, jaxlib's
``batched_device_put`` or ``jax.device_put``) is pinned with spies where the values alone
cannot tell the roads apart.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import fast_path, jax_arrays, runner
from tests._helpers import run_on_two_cpu_devices

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _rope(x: np.ndarray, positions: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """RoPE in float64 along axis -2: pair (j, j + d/2) turned by p / scale * 10000^(-2j/d)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    n = d // 2
    theta = 10000.0 ** (-2.0 * np.arange(n) / d)
    angle = np.asarray(positions, dtype=np.float64)[:, None] / scale * theta
    a, b = x[..., :n], x[..., n:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                           b * np.cos(angle) + a * np.sin(angle)], axis=-1)  # fmt: skip


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def _counting(calls: list[int], fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, appending to `calls` each time it is called."""

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return fn(*args, **kwargs)

    return spy


@pytest.fixture
def numba() -> None:
    pytest.importorskip("numba")


@pytest.fixture
def fresh_lookup() -> Iterator[None]:
    """jaxlib's call looked up afresh in the test, and again after it."""
    clear = getattr(jax_arrays._direct_put, "cache_clear", lambda: None)
    clear()
    yield
    clear()


# ----------------------------------------------------------------------------------------
# usable, on_one_cpu
# ----------------------------------------------------------------------------------------


def test_what_has_no_sharding_is_neither_usable_nor_on_one_cpu() -> None:
    """`usable` and `on_one_cpu` answer False (not an AttributeError) for a NumPy array."""
    a = np.ones((3, 8), dtype=np.float32)
    assert jax_arrays.usable(a) is False
    assert jax_arrays.on_one_cpu(a) is False


def test_usable_takes_only_the_kernel_dtypes() -> None:
    """An int32 array on the CPU is on one CPU (positions) but not usable by the kernel."""
    for dtype in ("int32", "float32", "bfloat16", "float16"):
        a = jnp.ones((3, 8), dtype=dtype)
        assert a.sharding.device_set == {jax.devices("cpu")[0]}
        assert jax_arrays.on_one_cpu(a) is True
        assert jax_arrays.usable(a) is (dtype != "int32")


SHARDED = """
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from rope_ref._engine import jax_arrays
mesh = Mesh(np.array(jax.devices("cpu")), ("b",))
x = jax.device_put(np.ones((2, 3, 8), np.float32), NamedSharding(mesh, PartitionSpec("b")))
p = jax.device_put(np.arange(6).reshape(2, 3), NamedSharding(mesh, PartitionSpec("b")))
print(len(x.sharding.device_set), jax_arrays.usable(x), jax_arrays.on_one_cpu(p))
"""


def test_arrays_sharded_over_two_devices_are_neither_usable_nor_on_one_cpu() -> None:
    """Arrays split over two CPU devices answer False (not a ValueError): not the kernel's."""
    result = run_on_two_cpu_devices(SHARDED)
    assert result.stdout.split() == ["2", "False", "False"], result.stderr[-3000:]


# ----------------------------------------------------------------------------------------
# rotate: the kernel's short road for the decoding call
# ----------------------------------------------------------------------------------------


def test_the_plain_call_takes_the_kernels_short_road(
    monkeypatch: pytest.MonkeyPatch, numba: None
) -> None:
    """A JAX array without positions or role takes the kernel's short road,
    `numpy_kernel_call` (as a NumPy array does); with positions it takes `apply_rope`."""
    calls: list[int] = []
    monkeypatch.setattr(runner, "numpy_kernel_call", _counting(calls, fast_path.numpy_kernel_call))
    x = _data((5, 8), 0)
    y = rr.apply_rope(jnp.asarray(x), rr.RopeSpec(8), offset=3, backend="numba")
    assert len(calls) == 1
    np.testing.assert_allclose(np.asarray(y), _rope(x, np.arange(5) + 3), rtol=0, atol=2e-6)
    p = np.array([4, 0, 9, 2, 7])
    y = rr.apply_rope(jnp.asarray(x), rr.RopeSpec(8), jnp.asarray(p), backend="numba")
    assert len(calls) == 1
    np.testing.assert_allclose(np.asarray(y), _rope(x, p), rtol=0, atol=2e-6)


def test_a_role_is_checked_by_apply_rope(numba: None) -> None:
    """A call with a role leaves the short road, so `apply_rope` checks the role."""
    x = jnp.asarray(_data((5, 8), 1))
    with pytest.raises(ValueError, match="`role` must be one of 'query', 'key'"):
        rr.apply_rope(x, rr.RopeSpec(8), role="bogus", backend="numba")


# ----------------------------------------------------------------------------------------
# rotate_qk: two apply_rope calls where they give the same bits
# ----------------------------------------------------------------------------------------

# (id, q shape, k shape, keyword arguments, positions of q and k (None: the default ones),
# linear scaling factor, whether the call is two `rotate` calls)
QK_CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any], Any, float, bool]] = [
    ("2-d", (3, 8), (7, 8), {"offset": 2}, None, 1.0, True),
    ("equal-lengths", (5, 8), (5, 8), {}, None, 1.0, True),
    ("3-d", (2, 3, 8), (2, 7, 8), {"offset": 1}, None, 1.0, True),
    ("spec-none", (3, 8), (7, 8), {"spec": None}, None, 1.0, True),
    ("scaled-seq-len", (3, 8), (7, 8), {"seq_len": 10.0}, None, 2.0, True),
    ("scaled-inferred-seq-len", (3, 8), (7, 8), {}, None, 2.0, False),
    ("seq-axis-0", (3, 8), (7, 8), {"seq_axis": 0}, None, 1.0, False),
    ("float-offset", (3, 8), (7, 8), {"offset": 2.5}, None, 1.0, False),
    ("positions", (4, 8), (4, 8), {}, [5, 2, 9, 1], 1.0, False),
]


@pytest.mark.parametrize(
    ("q_shape", "k_shape", "kwargs", "given", "factor", "split"),
    [case[1:] for case in QK_CASES],
    ids=[case[0] for case in QK_CASES],
)
def test_queries_and_keys_take_two_single_calls_where_those_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
    numba: None,
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    kwargs: dict[str, Any],
    given: list[int] | None,
    factor: float,
    split: bool,
) -> None:
    """Default positions, an integer offset, a negative seq_axis before the features and
    no seq_len-dependent choice: two single calls (queries at the keys' last positions);
    anything else the joint call. The values are RoPE's either way."""
    calls: list[int] = []
    monkeypatch.setattr(jax_arrays, "rotate", _counting(calls, jax_arrays.rotate))
    scaling = None if factor == 1.0 else rr.scaling.Linear(factor)
    kwargs = {"spec": rr.RopeSpec(8, scaling=scaling), **kwargs}
    q, k = _data(q_shape, 2), _data(k_shape, 3)
    positions = None if given is None else jnp.asarray(given)
    q_rot, k_rot = rr.apply_rope_qk(jnp.asarray(q), jnp.asarray(k), positions=positions,
                                    backend="numba", **kwargs)  # fmt: skip
    assert len(calls) == (2 if split else 0)
    offset = kwargs.get("offset", 0)
    q_len, k_len = q.shape[-2], k.shape[-2]
    if given is not None:
        q_pos = k_pos = np.asarray(given, dtype=np.float64) + offset
    else:
        k_pos = np.arange(k_len) + offset
        q_pos = k_pos[k_len - q_len :]
    for got, x, p in ((q_rot, q, q_pos), (k_rot, k, k_pos)):
        assert isinstance(got, jax.Array)
        assert got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), _rope(x, p, factor), rtol=0, atol=2e-6)


@pytest.mark.parametrize("seq_axis", [-3, -1, 5])
def test_a_seq_axis_off_the_token_axes_is_refused_naming_q(numba: None, seq_axis: int) -> None:
    """`apply_rope_qk` itself refuses a seq_axis out of range or on the features (the error
    names q), rather than a split into two calls failing on its own terms."""
    q, k = jnp.asarray(_data((3, 8), 4)), jnp.asarray(_data((5, 8), 5))
    with pytest.raises(ValueError, match="`seq_axis` must name an axis of q other than the last"):
        rr.apply_rope_qk(q, k, rr.RopeSpec(8), seq_axis=seq_axis, backend="numba")


def test_more_queries_than_keys_is_refused(numba: None) -> None:
    """Queries one longer than the keys have no positions to take: an error, not a shift
    of -1."""
    q, k = jnp.asarray(_data((4, 8), 6)), jnp.asarray(_data((3, 8), 7))
    with pytest.raises(ValueError, match=r"must not have more tokens \(4\) than there are key"):
        rr.apply_rope_qk(q, k, rr.RopeSpec(8), backend="numba")


# ----------------------------------------------------------------------------------------
# adopt
# ----------------------------------------------------------------------------------------


def _filled(shape: tuple[int, ...], seed: int) -> np.ndarray:
    out = jax_arrays.aligned_empty(shape, np.dtype(np.float32))
    out[...] = _data(shape, seed)
    return out


def _like(committed: bool) -> Any:
    """A JAX array on the CPU, committed to its device or not."""
    data = _data((3, 8), 8)
    like = jax.device_put(data, jax.devices("cpu")[0]) if committed else jnp.asarray(data)
    assert like.committed is committed
    return like


@pytest.mark.parametrize("committed", [False, True])
def test_adopt_takes_jaxlibs_batched_device_put(
    monkeypatch: pytest.MonkeyPatch, fresh_lookup: None, committed: bool
) -> None:
    """Where jaxlib has ``batched_device_put``, adopting an output calls it once and never
    ``jax.device_put`` (the fast road); the result keeps like's sharding and commitment."""
    from jaxlib import xla_client

    like = _like(committed)
    direct: list[int] = []
    slow: list[int] = []
    monkeypatch.setattr(
        xla_client, "batched_device_put", _counting(direct, xla_client.batched_device_put)
    )
    monkeypatch.setattr(jax, "device_put", _counting(slow, jax.device_put))
    out = _filled((3, 8), 9)
    y = jax_arrays.adopt(out, like)
    assert (len(direct), len(slow)) == (1, 0)
    assert y.sharding == like.sharding
    assert y.committed is committed
    np.testing.assert_array_equal(np.asarray(y), out)


def test_jaxlibs_call_is_looked_up_once(
    monkeypatch: pytest.MonkeyPatch, fresh_lookup: None
) -> None:
    """The import and look-up of ``batched_device_put`` happen on the first adoption only:
    a later replacement of jaxlib's attribute is not seen."""
    from jaxlib import xla_client

    first: list[int] = []
    later: list[int] = []
    like = _like(False)
    put = xla_client.batched_device_put
    monkeypatch.setattr(xla_client, "batched_device_put", _counting(first, put))
    jax_arrays.adopt(_filled((3, 8), 10), like)
    monkeypatch.setattr(xla_client, "batched_device_put", _counting(later, put))
    y = jax_arrays.adopt(_filled((3, 8), 11), like)
    assert (len(first), len(later)) == (2, 0)
    np.testing.assert_array_equal(np.asarray(y), _data((3, 8), 11))


def _check_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """`adopt` through ``jax.device_put``: once per call, like's device and commitment kept."""
    slow: list[int] = []
    for committed in (False, True):
        like = _like(committed)
        out = _filled((3, 8), 12)
        with monkeypatch.context() as m:
            m.setattr(jax, "device_put", _counting(slow, jax.device_put))
            y = jax_arrays.adopt(out, like)
        assert len(slow) == 1 + committed
        assert y.sharding == like.sharding
        assert y.committed is committed
        np.testing.assert_array_equal(np.asarray(y), out)


def test_adopt_falls_back_to_device_put_without_batched_device_put(
    monkeypatch: pytest.MonkeyPatch, fresh_lookup: None
) -> None:
    """A jaxlib without ``batched_device_put`` sends the output through ``jax.device_put``.

    The attribute is missing only while `adopt` looks it up (JAX's own device_put needs it).
    """
    from jaxlib import xla_client

    with monkeypatch.context() as m:
        m.delattr(xla_client, "batched_device_put")
        assert jax_arrays._direct_put() is None
    _check_fallback(monkeypatch)


def test_adopt_falls_back_to_device_put_without_xla_client(
    monkeypatch: pytest.MonkeyPatch, fresh_lookup: None
) -> None:
    """A jaxlib without ``xla_client`` (an ImportError) sends the output through
    ``jax.device_put``."""
    import jaxlib

    with monkeypatch.context() as m:
        m.delattr(jaxlib, "xla_client")
        m.setitem(sys.modules, "jaxlib.xla_client", None)
        assert jax_arrays._direct_put() is None
    _check_fallback(monkeypatch)


def test_adopt_keeps_the_abstract_values_of_several_geometries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Alternating geometries (queries and keys while decoding) build one abstract value
    each, not one per call."""
    direct = jax_arrays._direct_put()
    if direct is None:  # pragma: no cover - another JAX layout
        pytest.skip("this jaxlib has no batched_device_put")
    put, shaped = direct
    built: list[int] = []
    monkeypatch.setattr(jax_arrays, "_direct_put", lambda: (put, _counting(built, shaped)))
    monkeypatch.setattr(jax_arrays, "_avals", {})
    like = _like(False)
    for _ in range(3):
        for shape in ((1, 8), (5, 8), (2, 3, 8)):
            out = _filled(shape, 13)
            y = jax_arrays.adopt(out, like)
            assert y.shape == shape
            np.testing.assert_array_equal(np.asarray(y), out)
    assert len(built) == 3
