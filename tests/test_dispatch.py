"""Choosing the road of a call (rope_ref/_engine/dispatch.py): backend settings read from the
environment, why a backend cannot load, `auto`'s choice by array kind, the table cache the
NumPy road reads, and the Numba fast path's refusals and exact shifts.

Expected values are the RoPE formula written in NumPy here, or the documented refusals.
"""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref._engine import dispatch, kinds, runner
from rope_ref._engine.table_cache import table_cache
from tests._helpers import rope_rotate_half as _rotate_half


@pytest.mark.parametrize(
    ("setting", "value", "refused"),
    [
        ("NUMBA_NUM_THREADS", "1", False),
        ("NUMBA_NUM_THREADS", " 16 ", False),
        ("NUMBA_NUM_THREADS", "0", True),
        ("NUMBA_NUM_THREADS", "-3", True),
        ("NUMBA_NUM_THREADS", "two", True),
        ("NUMBA_THREADING_LAYER", "OMP", False),
        ("NUMBA_THREADING_LAYER", "workqueue", False),
        ("NUMBA_THREADING_LAYER", "bogus", True),
    ],
)
def test_numba_settings_are_read_from_the_environment(monkeypatch, setting, value, refused):
    """Catches: the thread-count bound moved, the layer names not checked."""
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.delenv("NUMBA_THREADING_LAYER", raising=False)
    monkeypatch.setenv(setting, value)
    monkeypatch.setattr(dispatch, "_START_FAILURES", {})
    reason = dispatch._numba_environment_reason()
    assert (reason is not None) == refused
    if reason is not None:
        assert setting in reason
        assert reason == dispatch.unusable_reason("numba")  # said before loading anything
        assert reason == rr.available_backends()["numba"]


@pytest.mark.parametrize(
    ("message", "said"),
    [("No threading layer could be loaded.\nHINT: install tbb", "loaded.)"), ("", "Error)")],
)
def test_a_threading_layer_that_cannot_start_is_said_in_one_line(monkeypatch, message, said):
    """Catches: a later line of numba's message (or none) reported."""
    numba = pytest.importorskip("numba")

    def fail() -> int:
        raise ValueError(message)

    monkeypatch.setattr(numba, "get_num_threads", fail)
    monkeypatch.setattr(dispatch, "_START_FAILURES", {})
    dispatch._start_numba_threads()
    reason = dispatch._START_FAILURES["numba"]
    assert reason.startswith("numba's threading layer cannot start")
    assert reason.endswith(said)
    assert "\n" not in reason


def test_a_kernel_module_outside_the_installation_is_missing(monkeypatch):
    """Catches: find_spec's ModuleNotFoundError (parent package absent) not caught."""
    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("no_such_package.kernel", None))
    reason = dispatch._missing_reason("ghost")
    assert reason == "the kernel module no_such_package.kernel is not part of this installation"
    assert dispatch.unusable_reason("ghost") == reason


@pytest.mark.parametrize("error", [RuntimeError, ImportError])
def test_auto_hears_why_a_backend_would_not_load(monkeypatch, error):
    """Catches: an exception type dropped from those that make a backend unusable."""

    def load(name: str) -> None:
        msg = f"{name} cannot run"
        raise error(msg)

    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("rope_ref._core.reference", None))
    monkeypatch.setattr(dispatch, "load_backend", load)
    assert dispatch.unusable_reason("ghost") == "ghost cannot run"


def test_a_missing_dependency_names_it_in_the_error(monkeypatch):
    """Catches: ModuleNotFoundError.name set to the kernel module, not the dependency."""
    monkeypatch.setitem(dispatch._REGISTRY, "ghost", ("rope_ref._core.reference", "no_such_dep"))
    monkeypatch.setitem(dispatch.INSTALL_HINTS, "ghost", "pip install no_such_dep")
    with pytest.raises(ModuleNotFoundError, match="backend='ghost' is not available") as caught:
        dispatch.load_backend("ghost")
    assert caught.value.name == "no_such_dep"


def test_numpy_calls_with_positions_go_through_the_table_cache(monkeypatch):
    """Catches: the cache skipped for plain NumPy positions (or used only without a key)."""
    keys = []
    original = table_cache.get_or_build

    def counting(key, build):
        keys.append(key)
        return original(key, build)

    monkeypatch.setattr(table_cache, "get_or_build", counting)
    x = np.random.default_rng(0).standard_normal((4, 8))
    spec = rr.RopeSpec(8)
    first = rr.apply_rope(x, spec, np.arange(4) + 3)
    second = rr.apply_rope(x, spec, np.arange(4) + 3)
    assert len(keys) == 2
    assert keys[0] is not None
    assert keys[0] == keys[1]
    np.testing.assert_array_equal(first, second)
    rr.apply_rope(x, spec, [3, 4, 5, 6])  # a Python list: validated by the build, not cached
    assert len(keys) == 2


def test_auto_falls_back_to_the_reference_when_numba_is_missing(monkeypatch):
    """Catches: a missing kernel module raised instead of "auto" taking the reference."""

    def missing(name):
        msg = f"No module named {name!r}"
        raise ModuleNotFoundError(msg)

    monkeypatch.setattr(runner, "load_backend", missing)
    monkeypatch.setattr(runner, "unusable_reason", lambda name: "numba is not installed")
    x = np.random.default_rng(1).standard_normal((3, 8))
    got = rr.apply_rope(x, backend="auto")
    np.testing.assert_array_equal(got, rr.apply_rope(x, backend="reference"))


def test_auto_sends_only_cuda_arrays_to_the_cuda_kernel(monkeypatch):
    """Catches: an array that is neither NumPy nor CUDA (array-api-strict, Dask) sent to
    the CUDA kernel whenever it is usable."""
    xp = pytest.importorskip("array_api_strict")
    monkeypatch.setattr(runner, "unusable_reason", lambda name: None)  # as if CuPy were there
    x = xp.ones((3, 8), dtype=xp.float64)
    assert runner._resolve_backend("auto", x) == "reference"


def test_a_cleared_cache_holds_no_bytes():
    """Catches: the byte count left over after `clear`, which then evicts too early."""
    from rope_ref._engine.table_cache import TableCache

    cache = TableCache(max_entries=None, max_bytes=1 << 20)
    cache.get_or_build("a", lambda: (np.zeros(8), np.zeros(8)))
    assert cache.nbytes > 0
    cache.clear()
    assert cache.nbytes == 0


def test_numba_fast_path_refuses_a_negative_seq_len_as_the_reference_does():
    """The fast path's own seq_len test is backed by the tables' check: both refuse."""
    pytest.importorskip("numba")
    x = np.ones((3, 8))
    for backend in ("reference", "numba", "auto"):
        for seq_len in (-5.0, 0.0, -1):
            with pytest.raises(ValueError, match="`seq_len` must be positive"):
                rr.apply_rope(x, rr.RopeSpec(8), seq_len=seq_len, backend=backend)


def test_numba_fast_path_shifts_offsets_below_2_62_exactly():
    """Offsets near 2**61 are added exactly, block-cached or not: 2**61 + 767 + 1 is the tie
    2**61 + 768 and rounds once to even, 2**61 + 1024; rounding the offset first (to
    2**61 + 512) then adding 1 would give 2**61 + 512."""
    pytest.importorskip("numba")
    spec = rr.RopeSpec(2, freqs=[1.0])
    x = np.tile([[1.0, 0.0]], (2, 1))
    phi = np.array([float(2**61 + 767), float(2**61 + 768)])
    assert phi[1] == 2.0**61 + 1024
    want = np.stack([np.cos(phi), np.sin(phi)], axis=-1)
    for backend in ("numba", "reference"):
        got = rr.apply_rope(x, spec, offset=2**61 + 767, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


def test_numba_jax_output_is_adopted_by_jax_without_a_copy(monkeypatch):
    """Catches: outputs aligned to other than XLA's 64 bytes, which JAX then copies."""
    pytest.importorskip("numba")
    jnp = pytest.importorskip("jax.numpy")
    from rope_ref._engine import jax_arrays

    written = []
    aligned_empty = jax_arrays.aligned_empty

    def recorded(shape, dtype):
        written.append(aligned_empty(shape, dtype))
        return written[-1]

    monkeypatch.setattr(jax_arrays, "aligned_empty", recorded)
    rng = np.random.default_rng(3)
    for seq in (5, 7, 11):
        x = rng.standard_normal((seq, 8)).astype(np.float32)
        y = rr.apply_rope(jnp.asarray(x), rr.RopeSpec(8), backend="numba")
        assert y.unsafe_buffer_pointer() == written[-1].ctypes.data  # the kernel's own buffer
        np.testing.assert_allclose(np.asarray(y), _rotate_half(x, np.arange(seq)), atol=2e-6)


def test_numba_refuses_a_bad_role_for_torch_tensors_as_for_numpy():
    """Catches: PyTorch's short road taken for calls with a role, which it never checks."""
    pytest.importorskip("numba")
    torch = pytest.importorskip("torch")
    for x in (np.ones((4, 8)), torch.ones(4, 8, dtype=torch.float64)):
        for role in ("bogus", 3):
            with pytest.raises(ValueError, match="`role` must be one of"):
                rr.apply_rope(x, rr.RopeSpec(8), role=role, backend="numba")


def test_the_caches_have_their_documented_bounds():
    """Catches: the bounds of docs/kernels/numba.md changed (the positions cache holds at
    most 32 entries and 256 MiB, the offsets cache 64 MiB with no bound on entries)."""
    from rope_ref._engine.table_cache import offset_cache

    assert (table_cache.max_bytes, offset_cache.max_bytes) == (256 * 2**20, 64 * 2**20)
    assert offset_cache.max_entries is None
    spec = rr.RopeSpec(4, base=7777.0)
    x = np.ones((1, 4))
    table_cache.clear()
    for p in range(33):  # 33 calls with positions of their own: 33 tables
        rr.apply_rope(x, spec, np.array([p]))
    assert len(table_cache) == 32


def test_a_table_of_exactly_the_byte_bound_is_kept():
    """Catches: a pair whose size equals `max_bytes` refused (only larger ones are)."""
    from rope_ref._engine.table_cache import ENTRY_OVERHEAD, TableCache

    cache = TableCache(max_entries=None, max_bytes=2 * 4 * 8 + ENTRY_OVERHEAD)
    builds = []

    def build():
        builds.append(1)
        return np.zeros(4), np.zeros(4)

    first = cache.get_or_build("k", build)
    assert cache.get_or_build("k", build)[0] is first[0]
    assert builds == [1]
    assert len(cache) == 1


def test_a_hit_evicted_by_another_thread_before_its_move_is_still_returned():
    """Catches: the KeyError of `move_to_end` let out when another thread evicts the entry
    between the look-up and the move (the race is made certain here)."""
    from collections import OrderedDict

    from rope_ref._engine.table_cache import TableCache

    class EvictedRightAfterLookUp(OrderedDict):
        def get(self, key, default=None):
            hit = super().get(key, default)
            self.pop(key, None)  # another thread evicts it now
            return hit

    cache = TableCache(max_entries=4, max_bytes=1 << 20)
    stored = cache.get_or_build("k", lambda: (np.arange(3.0), np.ones(3)))
    cache._entries = EvictedRightAfterLookUp(cache._entries)
    assert cache.get("k") is stored


def test_auto_picks_numba_for_plain_native_numpy_arrays_only():
    """Catches: "auto" sending plain NumPy arrays to the reference, or memmaps and
    byte-swapped arrays (which the kernel does not take) to the kernel."""
    pytest.importorskip("numba")
    plain = np.ones((3, 8), dtype=np.float32)
    assert runner._resolve_backend("auto", plain) == "numba"
    assert runner._resolve_backend("auto", plain.astype(">f4")) == "reference"
    assert runner._resolve_backend("auto", plain.view(np.recarray)) == "reference"


def test_calls_without_positions_are_cached_too(monkeypatch):
    """Catches: the table cache skipped for default positions (positions=None)."""
    keys = []
    original = table_cache.get_or_build

    def counting(key, build):
        keys.append(key)
        return original(key, build)

    monkeypatch.setattr(table_cache, "get_or_build", counting)
    x = np.random.default_rng(5).standard_normal((4, 8))
    rr.apply_rope(x, rr.RopeSpec(8))
    assert len(keys) == 1


def test_only_cupy_and_auto_knock_at_the_cuda_short_road(monkeypatch):
    """Catches: every backend name (the reference's too) tried on the CUDA short road, which
    would rotate a CUDA array by the kernel when the reference was asked for."""
    knocked = []

    class Road:
        @staticmethod
        def run(*args, **kwargs):
            knocked.append("apply")

        @staticmethod
        def run_qk(*args, **kwargs):
            knocked.append("apply_qk")

    monkeypatch.setattr(kinds, "cuda_road", lambda: Road)
    x = np.random.default_rng(14).standard_normal((3, 8))
    for backend in ("reference", "exact"):
        rr.apply_rope(x, backend=backend)
        rr.apply_rope_qk(x, x, backend=backend)
    assert knocked == []
    xp = pytest.importorskip("array_api_strict")  # a stand-in for a device array (NumPy
    device_like = xp.asarray(x)  # arrays take the host road, which knocks at no CUDA road)
    rr.apply_rope(device_like, None, xp.arange(3.0, dtype=xp.float64), backend="auto")
    assert knocked == ["apply"]


def test_auto_leaves_cuda_arrays_that_record_gradients_to_the_reference(monkeypatch):
    """Catches: "auto" resolving a CUDA tensor that records gradients to the kernel (such
    calls reach the kernel through its autograd operator, before; the rest are the
    reference's), and CUDA arrays without gradients not resolved to the kernel."""
    xp = pytest.importorskip("array_api_strict")
    grads = {"on": True}
    monkeypatch.setattr(runner, "unusable_reason", lambda name: None)  # as if CuPy were there
    monkeypatch.setattr(runner, "is_cuda_array", lambda x: True)  # a stand-in device array
    monkeypatch.setattr(runner, "records_grad", lambda x: grads["on"])
    x = xp.ones((3, 8), dtype=xp.float32)
    assert runner._resolve_backend("auto", x) == "reference"
    grads["on"] = False
    assert runner._resolve_backend("auto", x) == "cupy"


def test_rope_angles_takes_its_arguments_by_name_and_backend_only_by_name():
    """Catches: the keyword-only marker of `rope_angles` turned into a positional-only one,
    which refuses `spec=`, `positions=` and `seq_len=` by name and takes `backend` by place."""
    spec = rr.RopeSpec(4)
    angles = rr.rope_angles(spec=spec, positions=[0, 1, 2], seq_len=3)
    np.testing.assert_array_equal(angles, np.arange(3)[:, None] * np.array([1.0, 0.01]))
    with pytest.raises(TypeError):
        rr.rope_angles(spec, [0, 1], None, "reference")  # type: ignore[call-arg]


def test_the_registry_says_which_kernels_rotate_queries_and_keys_in_one_launch():
    """Catches: a kernel module given (or stripped of) ``rotate_qk`` without its registry
    row, read from each kernel module's source (the CUDA one imports CuPy)."""
    import ast
    import importlib.util

    for name, (module_name, _) in dispatch._REGISTRY.items():
        spec = importlib.util.find_spec(module_name)
        assert spec is not None
        assert spec.origin is not None
        with open(spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert ("rotate_qk" in defined) == (name in dispatch.QK_KERNELS), name
