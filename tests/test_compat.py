"""Array-kind helpers (rope_ref/_core/compat.py and the error model): which arrays are MLX,
CUDA or traced, dtype names, float64 support read from the inspection API, host copies of
tensors that record gradients, and the documented angle-error formula.
"""

from __future__ import annotations

import dataclasses
import sys
import types

import numpy as np
import pytest

import rope_ref as rr


@pytest.mark.parametrize("phi", [0.0, 0.5, -3.0, 1e4])
def test_angle_error_and_tolerance_are_their_documented_formulas(phi):
    """Catches: a changed constant in the error model's bounds (2 eps (|phi| + 1), and
    magnitude (roundings eps + 2 angle_error))."""
    from rope_ref._core.error_model import angle_error, tolerance

    eps64, eps32 = 2.0**-52, 2.0**-23
    assert angle_error(phi) == 2.0 * eps64 * (abs(phi) + 1.0)
    assert angle_error(phi, angle_eps=eps32) == 2.0 * eps32 * (abs(phi) + 1.0)
    for roundings in (1, 2, 3):
        want = 3.0 * (roundings * eps32 + 4.0 * eps64 * (abs(phi) + 1.0))
        got = tolerance(eps32, max_angle=phi, magnitude=3.0, roundings=roundings)
        assert got == pytest.approx(want, rel=1e-15)
    default = tolerance(eps32, max_angle=phi, magnitude=3.0)  # two roundings by default
    assert default == pytest.approx(3.0 * (2 * eps32 + 4.0 * eps64 * (abs(phi) + 1.0)), rel=1e-15)
    with pytest.raises(ValueError, match="`roundings`"):
        tolerance(eps32, max_angle=phi, magnitude=3.0, roundings=0)


def test_only_mlx_arrays_are_read_as_mlx():
    """Catches: any type named ``array`` (the standard library's) taken for MLX's."""
    import array

    from rope_ref._core.foreign import is_mlx_array

    assert not is_mlx_array(array.array("d", [1.0, 2.0]))
    with pytest.raises(TypeError, match="`x`"):
        rr.apply_rope(array.array("d", [1.0, 2.0]))


def test_mlx_bfloat16_rounds_once_from_float64():
    """Catches: bfloat16 MLX input computed from float32 (the result then rounds twice).

    At position 0 the result is the attention factor times x: 1 + 2**-8 + 2**-30 is above
    the bfloat16 tie 1 + 2**-8 and rounds up to 1 + 2**-7; through float32 it lands on the
    tie and rounds to even, 1.
    """
    mx = pytest.importorskip("mlx.core")
    factor = 1 + 2.0**-8 + 2.0**-30
    spec = rr.RopeSpec(2, scaling=rr.scaling.AttentionScale(factor))
    got = rr.apply_rope(mx.ones((1, 2), dtype=mx.bfloat16), spec)
    assert got.dtype == mx.bfloat16
    assert got.astype(mx.float32).tolist() == [[1 + 2.0**-7, 1 + 2.0**-7]]
    got32 = rr.apply_rope(mx.ones((1, 2), dtype=mx.float32), spec)
    assert got32.tolist() == [[float(np.float32(factor))] * 2]  # float32: rounded once too


def test_records_grad_only_for_tensors_requiring_grad_with_grad_enabled():
    """Catches: the test of requires_grad or of grad mode inverted."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.compat import records_grad

    assert not records_grad(np.ones(2))
    assert not records_grad(torch.ones(2))
    assert records_grad(torch.ones(2, requires_grad=True))
    with torch.no_grad():
        assert not records_grad(torch.ones(2, requires_grad=True))


def test_all_finite_of_a_traced_array_is_unknown():
    """Catches: a JAX tracer's missing values raised instead of reported as unknown."""
    jax = pytest.importorskip("jax")
    from array_api_compat import array_namespace

    from rope_ref._core.compat import all_finite

    seen = []

    def probe(a):
        seen.append(all_finite(a, array_namespace(a)))
        return a

    jax.jit(probe)(jax.numpy.ones(2))
    assert seen == [None]
    assert all_finite(np.array([1.0, np.inf]), array_namespace(np.ones(1))) is False


@dataclasses.dataclass(frozen=True)
class _Device:
    """A stand-in for a JAX device: its platform, and an id keeping devices apart."""

    platform: str
    id: int


def _jax_array_on(platforms):
    """A stand-in for a JAX array held on devices of these platforms (no GPU needed)."""
    jax = pytest.importorskip("jax")

    class OnDevices(jax.Array):  # type: ignore[name-defined,misc]
        def devices(self):
            return {_Device(p, i) for i, p in enumerate(platforms)}

    return OnDevices()


def test_only_arrays_on_one_gpu_are_cuda_arrays(monkeypatch):
    """Catches: a test of is_cuda_array negated or its default flipped (NumPy, PyTorch CPU
    and JAX CPU arrays read as CUDA ones, or a JAX array on one GPU, or on several, misread),
    and a JAX tracer's missing devices raised instead of read as "not CUDA"."""
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    from rope_ref._core.compat import is_cuda_array

    assert not is_cuda_array(np.ones(2))
    assert not is_cuda_array(torch.ones(2))
    assert not is_cuda_array(jax.numpy.ones(2))
    assert not is_cuda_array([1.0, 2.0])
    assert is_cuda_array(_jax_array_on(["gpu"]))
    assert not is_cuda_array(_jax_array_on(["gpu", "gpu"]))  # sharded: no one device
    assert not is_cuda_array(_jax_array_on(["cpu"]))
    assert not is_cuda_array(_jax_array_on([]))
    seen = []

    def probe(a):
        seen.append(is_cuda_array(a))
        return a

    jax.jit(probe)(jax.numpy.ones(2))
    assert seen == [False]

    cupy = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's own class name, which array_api_compat looks up
        pass

    cupy.ndarray = ndarray  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert is_cuda_array(ndarray())


def test_mixed_namespaces_are_a_type_error_naming_the_parameter():
    """Catches: array_api_compat's own TypeError let through, naming no parameter."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.compat import array_namespace

    with pytest.raises(TypeError, match=r"`q` must be arrays of one array-API namespace; got "):
        array_namespace(np.ones(2), torch.ones(2), name="q")


def test_dtype_names_are_the_last_dotted_part():
    """Catches: the name of a dtype given by its name (``"float32"``) taken past its end
    (JAX takes dtype names: tables built on the host are then moved by that name)."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    from rope_ref._core.compat import dtype_name

    assert dtype_name(torch.bfloat16) == "bfloat16"
    assert dtype_name("float32") == "float32"
    assert dtype_name(np.dtype(np.float16)) == "float16"
    with jax.enable_x64(False):  # tables built on the host, moved to JAX by the name
        for name in ("float32", "bfloat16"):
            cos, _sin = rr.rope_cos_sin(rr.RopeSpec(2, freqs=[1.0]), jax.numpy.arange(3), name)
            assert str(cos.dtype) == name
            want = np.cos(np.arange(3.0))[:, None].astype(getattr(jax.numpy, name))
            np.testing.assert_array_equal(np.asarray(cos), want)


@pytest.mark.parametrize("name", ["array_api_strict", "dask.array"])
def test_a_dtype_name_is_not_taken_for_bfloat16_where_the_namespace_has_none(name):
    """Catches: the name ``"bfloat16"`` counted as a real floating dtype of a namespace that
    has none (the tables then failed in the namespace's own cast, naming no parameter)."""
    module = pytest.importorskip(name)
    with pytest.raises(TypeError, match=r"`dtype` must be a real floating dtype"):
        rr.rope_cos_sin(rr.RopeSpec(4), module.arange(3), dtype="bfloat16")


class _Info:
    """An inspection object whose ``dtypes()`` lists `kinds` (with or without ``device=``)."""

    def __init__(self, kinds, *, takes_device):
        self.kinds, self.takes_device = kinds, takes_device

    def dtypes(self, *, kind, **device):
        if device and not self.takes_device:
            msg = "dtypes() got an unexpected keyword argument 'device'"
            raise TypeError(msg)
        return dict.fromkeys(self.kinds)


def _namespace(info):
    ns = types.SimpleNamespace(__name__="stand_in")
    if info is not None:
        ns.__array_namespace_info__ = info
    return ns


def test_float64_support_is_read_from_the_inspection_api(monkeypatch):
    """Catches: a namespace without the inspection API (or one whose inspection fails)
    reported without float64 or raising, and an info whose ``dtypes()`` takes no
    ``device=`` raising."""
    from rope_ref._core import compat

    monkeypatch.setattr(compat, "_FLOAT64_SUPPORT", {})

    def fails():
        msg = "no inspection here"
        raise RuntimeError(msg)

    # every stand-in kept alive: the cache is keyed by the namespace's id
    bare, failing = _namespace(None), _namespace(fails)
    assert compat.has_float64(bare, "cpu")
    assert compat.has_float64(failing, "cpu")
    kept = [bare, failing]
    for takes_device in (True, False):
        wide = _namespace(lambda d=takes_device: _Info(["float32", "float64"], takes_device=d))
        narrow = _namespace(lambda d=takes_device: _Info(["float32"], takes_device=d))
        narrow.float32, narrow.float64 = "f4", "f8"
        assert compat.has_float64(wide, "cpu")
        assert not compat.has_float64(narrow, "cpu")
        assert compat.compute_dtype(narrow, "cpu") == "f4"
        kept += [wide, narrow]


def test_to_numpy_copies_tensors_that_record_grad():
    """Catches: every array handed to ``numpy.asarray`` as it is (a tensor requiring grad
    cannot be)."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.compat import to_numpy

    got = to_numpy(torch.tensor([1.5, -2.0], requires_grad=True))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, [1.5, -2.0])
    np.testing.assert_array_equal(to_numpy(np.array([3.0])), [3.0])
