"""Core rules where a planted mistake in rope_ref/_core hides."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types

import numpy as np
import pytest

import rope_ref as rr


def test_xpos_default_scale_base_is_rotary_embedding_torch_own():
    """Catches: a changed default ``scale_base`` (rotary-embedding-torch's is 512)."""
    ret = pytest.importorskip("rotary_embedding_torch")
    default = inspect.signature(ret.RotaryEmbedding).parameters["xpos_scale_base"].default
    assert rr.XPos().scale_base == default == 512


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


def test_multi_axis_angles_of_batched_positions_read_the_last_axis():
    """Catches: the axis of each pair's coordinate taken as 1 instead of -1 (the same for
    (seq, 3) positions, not for (batch, seq, 3))."""
    spec = rr.RopeSpec(16, sections=(2, 3, 3))  # chunked: pairs 0-1 axis 0, 2-4 axis 1, ...
    positions = np.random.default_rng(0).integers(0, 50, size=(2, 4, 3))
    axis_of_pair = [0, 0, 1, 1, 1, 2, 2, 2]
    want = positions[..., axis_of_pair] * rr.inv_freq(spec)
    np.testing.assert_array_equal(rr.rope_angles(spec, positions), want)


def test_xpos_of_a_multi_axis_spec_scales_by_the_first_coordinate():
    """Catches: the xPos scale read from another coordinate than the first (temporal) one."""
    spec = rr.RopeSpec(8, sections=(2, 2), xpos=rr.XPos(4.0))  # pairs 0-1 axis 0, 2-3 axis 1
    p = np.array([[0, 5], [1, 7], [2, 3]])
    theta = rr.inv_freq(spec)
    angles = p[:, [0, 0, 1, 1]] * theta
    zeta = (2.0 * np.arange(4) + 0.4 * 8) / (1.4 * 8)
    scale = zeta ** ((p[:, :1] - 10 // 2) / 4.0)  # queries: zeta ** ((p0 - floor(L / 2)) / s)
    a = b = np.ones((3, 4))
    c, s = scale * np.cos(angles), scale * np.sin(angles)
    want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    got = rr.apply_rope(np.ones((3, 8)), spec, p, role="query", seq_len=10)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_tables_built_on_the_host_round_once_to_bfloat16():
    """Catches: host tables cast without rounding them onto the 16-bit grid first (JAX
    without x64 builds them in NumPy float64, then casts through float32: twice)."""
    jax = pytest.importorskip("jax")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import jax.numpy as jnp

    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        factor = 1 + 2.0**-8 + 2.0**-30  # above the bfloat16 tie 1 + 2**-8, float32 lands on it
        spec = rr.RopeSpec(2, scaling=rr.scaling.AttentionScale(factor))
        cos, _ = rr.rope_cos_sin(spec, jnp.asarray([0, 1]), dtype=jnp.bfloat16)
        assert cos.dtype == jnp.bfloat16
        one = float(np.float64(factor * np.cos(1.0)).astype(ml_dtypes.bfloat16))
        assert cos.astype(jnp.float32).tolist() == [[1 + 2.0**-7], [one]]
        cos32, _ = rr.rope_cos_sin(spec, jnp.asarray([0, 1]))
        assert cos32.dtype == jnp.float32
        assert cos32.tolist() == [
            [float(np.float32(factor))],
            [float(np.float32(factor * np.cos(1.0)))],
        ]
    finally:
        jax.config.update("jax_enable_x64", before)


def test_offset_past_float64_is_refused_naming_it():
    """Catches: an integer offset beyond float64's range let through (OverflowError)."""
    for offset in (10**400, -(10**400)):
        with pytest.raises(ValueError, match="`offset` must be finite"):
            rr.apply_rope(np.ones((2, 4)), offset=offset)


def test_an_inferred_seq_len_error_names_the_largest_position():
    """Catches: the largest position misreported in the message (max + 1 - 1)."""
    spec = rr.RopeSpec(4, scaling=rr.scaling.Linear(2.0))
    with pytest.raises(ValueError, match=r"got `positions` up to -5\.0\. Pass `seq_len`"):
        rr.apply_rope(np.ones((2, 4)), spec, np.array([-7, -5]))


def test_default_positions_of_a_multi_axis_spec_repeat_the_token_index_per_axis():
    """Catches: the default (seq, n_axes) positions stacked the other way round."""
    spec = rr.RopeSpec(16, sections=(2, 3, 3))
    for seq in (3, 5):
        x = np.random.default_rng(seq).standard_normal((seq, 16))
        angles = np.arange(seq)[:, None] * rr.inv_freq(spec)  # every coordinate = index
        c, s = np.cos(angles), np.sin(angles)
        a, b = x[:, :8], x[:, 8:]
        want = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
        np.testing.assert_allclose(rr.apply_rope(x, spec), want, rtol=1e-14, atol=1e-15)


def test_seq_axis_hint_only_for_one_or_two_dimensional_grids():
    """Catches: a hint made for a 3-D grid, or without a seq_axis."""
    from rope_ref._core.positions import seq_axis_hint

    assert seq_axis_hint((16,), (2, 16, 8), 2) != ""
    assert seq_axis_hint((2, 4, 16), (2, 16, 8), 2) == ""
    assert seq_axis_hint((16,), (2, 16, 8), None) == ""


def test_a_negative_offset_shifts_large_int64_positions_exactly():
    """Catches: the fit test of a negative offset reversed, which sends sums that fit
    through float64: 2**62 + 513 - 2 = 2**62 + 511 rounds once to 2**62, but rounding
    2**62 + 513 first (to 2**62 + 1024) then subtracting 2 gives 2**62 + 1024."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    x = np.array([[1.0, 0.0]])
    got = rr.apply_rope(x, spec, np.array([2**62 + 513]), offset=-2)
    phi = float(2**62 + 511)  # the exact sum, rounded once
    assert phi == 2.0**62
    np.testing.assert_allclose(got, [[np.cos(phi), np.sin(phi)]], rtol=1e-15, atol=1e-16)


def test_output_layout_is_kept_only_when_it_differs_from_layout():
    """Catches: the normalisation of ``output_layout`` inverted, or `written_layout` made a
    method."""
    crossed = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    assert crossed.output_layout == "half"
    assert crossed.written_layout == "half"
    same = rr.RopeSpec(8, layout="interleaved", output_layout="interleaved")
    assert same.output_layout is None
    assert same.written_layout == "interleaved"
    assert rr.RopeSpec(8).written_layout == "half"


class CustomXPos:
    """An xPos rule of one's own: scale_base, zeta() and center()."""

    def __init__(self, scale_base: float) -> None:
        self.scale_base = scale_base

    def zeta(self, rotary_dim: int) -> np.ndarray:
        return rr.XPos().zeta(rotary_dim)

    def center(self, seq_len: float) -> float:
        return 0.0


def test_xpos_rules_need_a_positive_scale_base():
    """Catches: the sign test of a rule's scale_base inverted."""
    assert rr.RopeSpec(8, xpos=rr.XPos(2.0)).xpos == rr.XPos(2.0)
    custom = CustomXPos(3.0)
    assert rr.RopeSpec(8, xpos=custom).xpos is custom
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=r"`xpos\.scale_base` must be positive"):
            rr.RopeSpec(8, xpos=CustomXPos(bad))


def test_interleaved_sections_fit_when_each_axis_last_pair_index_is_below_n_pairs():
    """Axis k >= 1 takes pairs k + n_axes * m (axis 0 every other pair, as HF's Qwen3-VL
    interleaves them); the last of them must be below n_pairs.

    Catches: the boundary (last index == n_pairs) accepted, or the test inverted.
    """
    for sections in [(4, 2, 2), (2, 2, 2), (1, 1, 1), (3, 2, 2)]:
        n_pairs, n_axes = sum(sections), len(sections)
        fits = all(k + n_axes * (size - 1) < n_pairs for k, size in enumerate(sections) if k)
        assert fits
        rr.RopeSpec(2 * n_pairs, sections=sections, section_order="interleaved")
    for sections in [(1, 2, 2), (1, 1, 2), (2, 3, 3)]:  # axis 2's last pair index >= n_pairs
        with pytest.raises(ValueError, match="`sections` must fit the interleaved order"):
            rr.RopeSpec(2 * sum(sections), sections=sections, section_order="interleaved")


def test_patch_positions_merge_size_must_divide_both_last_sizes():
    """Catches: only the height checked (a width of 3 with merge 2 cannot be blocked)."""
    with pytest.raises(ValueError, match="`merge_size` must divide the last two sizes"):
        rr.patch_positions((4, 3), merge_size=2)
    with pytest.raises(ValueError, match="`merge_size` must divide the last two sizes"):
        rr.patch_positions((3, 4), merge_size=2)
    blocked = rr.patch_positions((2, 4), merge_size=2).tolist()  # 2x2 blocks, row-major
    assert blocked == [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [0, 3], [1, 2], [1, 3]]


def test_multi_axis_builders_refuse_at_their_documented_limits():
    """Catches: changed constants in the limits of axial_freqs and mrope_positions."""
    with pytest.raises(ValueError, match=r"at most 32,768 pairs in all"):
        rr.axial_freqs((2**14, 2**14 + 1))  # head_dim at most 2**16: 2**15 pairs
    assert len(rr.axial_freqs((2, 2), base=1.5)) == 4  # any base above 1
    with pytest.raises(ValueError, match="`base` must be greater than 1"):
        rr.axial_freqs((2, 2), base=1.0)
    # pixel frequencies reach pi * max_freq / 2, which must stay finite
    assert max(rr.axial_freqs((2, 2), kind="pixel", max_freq=1e308)) == 1e308 / 2.0 * np.pi
    with pytest.raises(ValueError, match="`max_freq` must keep the highest frequency"):
        rr.axial_freqs((2, 2), kind="pixel", max_freq=1.5e308)
    for segments in ([10**12], [5, (1, 10**6, 10**6)]):  # three coordinates per token
        with pytest.raises(ValueError, match=r"x 3 = 3,000,000,000,0(00|15) values"):
            rr.mrope_positions(segments)


@pytest.mark.parametrize("form", ["rotate_half", "complex", "matrix"])
@pytest.mark.parametrize("inverse", [False, True])
def test_every_form_rotates_by_the_formula_and_writes_the_output_layout(form, inverse):
    """Catches: the complex form turning the other way (``sin / 1j``), or the pairs not
    rewritten in `output_layout`."""
    x = np.random.default_rng(1).standard_normal((3, 8))
    spec = rr.RopeSpec(8, layout="interleaved", output_layout="half")
    phi = np.arange(3)[:, None] * rr.inv_freq(spec) * (-1.0 if inverse else 1.0)
    if inverse:  # the inverse reads the pairs from the written (half) layout
        a, b = x[:, :4], x[:, 4:]
    else:
        a, b = x[:, 0::2], x[:, 1::2]
    first, second = a * np.cos(phi) - b * np.sin(phi), b * np.cos(phi) + a * np.sin(phi)
    if inverse:  # and writes them back in the interleaved layout
        want = np.stack([first, second], axis=-1).reshape(3, 8)
    else:
        want = np.concatenate([first, second], axis=-1)
    got = rr.apply_rope(x, spec, form=form, inverse=inverse)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


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


@pytest.mark.parametrize("dtype", [complex, bool, str])
def test_mixed_frequencies_must_be_real_numbers(dtype):
    """Catches: complex (or string) frequencies let through when not boolean."""
    from rope_ref._core.mixed import check_mixed_freqs

    with pytest.raises(TypeError, match="`freqs` must hold real numbers"):
        check_mixed_freqs(np.ones((2, 2)).astype(dtype))
    assert check_mixed_freqs(np.ones((2, 2), dtype=np.int32)).dtype == np.float64


# -- compat: array kinds, namespaces, dtypes -------------------------------------------------


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


def test_shifted_float_positions_are_computed_in_float64():
    """Catches: the compute dtype chosen the other way round (float32 where float64 exists):
    position 1e8 + 0.5 shifted by 0.25 is 100000000.75 in float64, 1e8 in float32."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    got = rr.apply_rope(np.array([[1.0, 0.0]]), spec, np.array([1e8 + 0.5]), offset=0.25)
    phi = 100_000_000.75  # exact in float64
    np.testing.assert_allclose(got, [[np.cos(phi), np.sin(phi)]], rtol=1e-15, atol=1e-16)


def test_to_numpy_copies_tensors_that_record_grad():
    """Catches: every array handed to ``numpy.asarray`` as it is (a tensor requiring grad
    cannot be)."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.compat import to_numpy

    got = to_numpy(torch.tensor([1.5, -2.0], requires_grad=True))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, [1.5, -2.0])
    np.testing.assert_array_equal(to_numpy(np.array([3.0])), [3.0])


# -- mixed: RoPE-Mixed frequencies and angles -------------------------------------------------


def test_mixed_angles_of_one_axis_and_of_several_heads():
    """Catches: a one-axis frequency array ``(1, pairs)`` refused as empty, and the sum taken
    over another axis than the axes one (per head too)."""
    from rope_ref._core.mixed import mixed_angles

    t = np.array([[2.0], [-3.0], [0.5]])  # (seq, 1 axis)
    f = np.array([[1.0, 0.25, 4.0]])  # (1 axis, 3 pairs)
    np.testing.assert_array_equal(mixed_angles(f, t), t * f)
    rng = np.random.default_rng(5)
    freqs = rng.normal(size=(2, 3, 4))  # (heads, axes, pairs)
    positions = rng.normal(size=(5, 3))  # (seq, axes)
    want = np.zeros((2, 5, 4))
    for h in range(2):
        for a in range(3):
            want[h] += positions[:, a, None] * freqs[h, a]
    np.testing.assert_allclose(mixed_angles(freqs, positions), want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize(
    ("freqs", "positions", "error", "message"),
    [
        (3.0, [[1.0]], TypeError, "`freqs` must be an array"),
        (np.ones((2, 0)), [[1.0, 2.0]], ValueError, "`freqs` must have shape"),
        (np.ones((2, 2, 2, 2)), [[1.0, 2.0]], ValueError, "`freqs` must have shape"),
        (np.ones((2, 2)), np.ones((3, 2), dtype=bool), TypeError, "`positions` must hold real"),
        (np.ones((2, 2)), np.ones((3, 2), dtype=complex), TypeError, "`positions` must hold real"),
        (np.ones((2, 2)), [1.0, 2.0], ValueError, r"`positions` must have shape \(seq, 2\)"),
        (np.ones((2, 2)), np.ones((1, 3, 2)), ValueError, r"`positions` must have shape"),
    ],
)
def test_mixed_angles_refuse_what_they_cannot_read(freqs, positions, error, message):
    """Catches: a scalar, empty or 4-D frequency array, boolean or complex positions, or
    positions of the wrong shape let through (or refused with another error)."""
    from rope_ref._core.mixed import mixed_angles

    with pytest.raises(error, match=message):
        mixed_angles(freqs, positions)


# -- reference: the rotation's forms, pass-through features and pair order ---------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_the_default_form_is_the_real_formula_to_the_last_bit(layout):
    """Catches: the forms' dispatch inverted (the default ``rotate_half`` form computed as a
    complex product, which rounds differently). With power-of-two frequencies and integer
    positions the angles are exact, so ``a cos - b sin`` and ``b cos + a sin``, each rounded
    once per operation, are the result bit for bit."""
    freqs = [1.0, 0.5, 0.25, 0.125]
    spec = rr.RopeSpec(8, freqs=freqs, layout=layout)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 8)) * rng.choice([1e-3, 1.0, 1e3], size=(300, 8))
    p = rng.integers(0, 10**6, size=300)
    phi = p[:, None] * np.array(freqs)
    c, s = np.cos(phi), np.sin(phi)
    a, b = (x[:, :4], x[:, 4:]) if layout == "half" else (x[:, 0::2], x[:, 1::2])
    first, second = a * c - b * s, b * c + a * s
    if layout == "half":
        want = np.concatenate([first, second], axis=-1)
    else:
        want = np.stack([first, second], axis=-1).reshape(300, 8)
    np.testing.assert_array_equal(rr.apply_rope(x, spec, p), want)
    np.testing.assert_array_equal(rr.apply_rope(x, spec, p, form="rotate_half"), want)


@pytest.mark.parametrize(("rotary_dim", "rotary_start"), [(4, 0), (4, 1), (2, 1), (2, 2)])
def test_single_pass_through_features_are_kept(rotary_dim, rotary_start):
    """Catches: a pass-through part of one feature dropped from the output (head_dim 5 with
    4 rotated: one feature is left before or after the rotated slice)."""
    spec = rr.RopeSpec(5, rotary_dim=rotary_dim, rotary_start=rotary_start)
    x = np.random.default_rng(8).standard_normal((3, 5))
    n = rotary_dim // 2
    phi = np.arange(3)[:, None] * 10000.0 ** (-np.arange(n) * 2.0 / rotary_dim)
    stop = rotary_start + rotary_dim
    a, b = x[:, rotary_start : rotary_start + n], x[:, rotary_start + n : stop]
    c, s = np.cos(phi), np.sin(phi)
    rotated = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    want = np.concatenate([x[:, :rotary_start], rotated, x[:, stop:]], axis=-1)
    got = rr.apply_rope(x, spec)
    assert got.shape == (3, 5)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


def test_interleaved_features_map_to_half_features_by_non_negative_indices():
    """Catches: the half index of the second member of a pair written ``j - n`` (NumPy's
    take wraps it round to ``j + n``, PyTorch's refuses it). Interleaved feature ``2j`` is
    half feature ``j``; ``2j + 1`` is half feature ``j + n``."""
    torch = pytest.importorskip("torch")
    from rope_ref._core.reference import half_index_of_interleaved

    for n in (1, 2, 5):
        order = [h for j in range(n) for h in (j, j + n)]
        assert half_index_of_interleaved(n) == order
    spec = rr.RopeSpec(4, freqs=[1.0, 0.5], layout="interleaved")
    x = np.random.default_rng(9).standard_normal((3, 4))
    phi = np.arange(3)[:, None] * np.array([1.0, 0.5])
    a, b, c, s = x[:, 0::2], x[:, 1::2], np.cos(phi), np.sin(phi)
    want = np.stack([a * c - b * s, b * c + a * s], axis=-1).reshape(3, 4)
    got = rr.apply_rope(torch.as_tensor(x), spec, form="matrix").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


# -- positions: shifting, default positions, grids ---------------------------------------------


def test_default_positions_ending_at_int64_max_are_added_exactly():
    """Catches: the int64 fit of default positions tested with ``<`` at its top, which sends
    ``offset + arange(n)`` ending exactly at 2**63 - 1 through float64: the offset is then
    rounded first (2**63 - 1537 to 2**63 - 1024) and each sum rounded again, which moves
    1022 of these 1537 positions to another float64 than their exact value's."""
    n = 1537
    offset = 2**63 - n  # the last position is 2**63 - 1
    phi = np.array([float(offset + k) for k in range(n)])  # each exact sum, rounded once
    x = np.tile([[1.0, 0.0]], (n, 1))
    got = rr.apply_rope(x, rr.RopeSpec(2, freqs=[1.0]), offset=offset)
    np.testing.assert_array_equal(got, np.stack([np.cos(phi), np.sin(phi)], axis=-1))


def test_an_integer_sum_of_exactly_int64_max_is_added_exactly():
    """Catches: the elementwise fit of ``p + offset`` tested with ``<`` at int64's top. The
    sum 2**63 - 1 rounds once to 2**63; rounding the position and the offset first gives
    another float64 (the pairs below were found by searching for such a double rounding)."""
    spec = rr.RopeSpec(2, freqs=[1.0])
    for q in (1_560_980_764_159, 3_494_775_225_855):
        offset = 2**63 - 1 - q
        assert float(np.float64(q) + np.float64(offset)) != 2.0**63  # the trap is real
        got = rr.apply_rope(np.array([[1.0, 0.0]]), spec, np.array([q]), offset=offset)
        phi = float(2**63 - 1)  # the exact sum, rounded once: 2**63
        np.testing.assert_array_equal(got, [[np.cos(phi), np.sin(phi)]])


def test_an_offset_of_int64_max_still_adds_exactly():
    """Catches: an offset of exactly 2**63 - 1 taken as beyond int64. Position -512 plus it
    is 2**63 - 513, which rounds once to 2**63 - 1024; rounding the offset first (to 2**63)
    gives 2**63 - 512, a tie that rounds to 2**63."""
    offset = 2**63 - 1
    got = rr.apply_rope(np.array([[1.0, 0.0]]), rr.RopeSpec(2, freqs=[1.0]), [-512], offset=offset)
    phi = float(offset - 512)
    assert phi == 2.0**63 - 1024
    np.testing.assert_array_equal(got, [[np.cos(phi), np.sin(phi)]])


def test_seq_axis_names_an_axis_of_x_other_than_the_last():
    """Catches: the range of `seq_axis` off by one at either end (``-ndim - 1`` or ``ndim``
    accepted, ``-ndim`` refused), or the feature axis accepted under another name."""
    from rope_ref._core.positions import normalize_seq_axis

    for axis, want in ((-3, 0), (-2, 1), (0, 0), (1, 1)):
        assert normalize_seq_axis(axis, 3) == want
    for axis in (-4, -1, 2, 3):
        with pytest.raises(ValueError, match=r"`seq_axis` must name an axis of x other than"):
            normalize_seq_axis(axis, 3)
    with pytest.raises(ValueError, match=r"`x` must have a sequence axis before the feature"):
        normalize_seq_axis(0, 1)
    assert normalize_seq_axis(0, 2) == 0


@pytest.mark.parametrize(
    "positions",
    [
        [None, None],
        ["a", "b"],
        [1 + 2j, 3.0],
        [True, False],
        [2**64, "a"],
        [2**64, True],
        np.zeros(2, dtype=[("t", "f8")]),  # a structured (void) dtype
    ],
    ids=repr,
)
def test_positions_that_are_not_real_numbers_are_a_type_error_naming_them(positions):
    """Catches: Python objects other than real numbers (None, strings, complex, bools,
    alone or beside an int past int64) or a structured dtype converted, or failing in
    another error than a TypeError naming `positions`."""
    with pytest.raises(TypeError, match=r"`positions` must (hold|have) (integer|an integer)"):
        rr.apply_rope(np.ones((2, 4)), rr.RopeSpec(4), positions)


# -- multiaxis: M-RoPE ids and patch grids ------------------------------------------------------


def test_mrope_text_runs_are_ints_not_bools():
    """Catches: the text-run test widened to bools or narrowed from NumPy integers: a NumPy
    int is a run of text tokens, True is refused rather than read as one token."""
    want = [[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [2, 3, 3], [4, 4, 4]]
    assert rr.mrope_positions([np.int64(2), (1, 2, 2), np.int32(1)]).tolist() == want  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"`segments` must hold ints .* got True"):
        rr.mrope_positions([True])


def test_video_patches_are_ordered_block_by_block_per_frame():
    """Catches: a changed axis order of the merge blocks of a video (T, H, W): tokens go
    frame by frame, then block row, block column, row and column within the block."""
    t, h, w, m = 2, 4, 6, 2
    want = [
        [f, bi * m + r, bj * m + c]
        for f in range(t)
        for bi in range(h // m)
        for bj in range(w // m)
        for r in range(m)
        for c in range(m)
    ]
    assert rr.patch_positions((t, h, w), merge_size=m).tolist() == want


def _rotated_by(phi):
    """[1, 0] rotated by each angle of `phi`: the rows [cos, sin]."""
    phi = np.asarray(phi, dtype=np.float64)
    return np.stack([np.cos(phi), np.sin(phi)], axis=-1)


ONE_PAIR = rr.RopeSpec(2, freqs=[1.0])


def test_default_positions_below_int64_are_rounded_not_wrapped():
    """Catches: INT64_MIN written ``~(2**63)`` (an offset of -2**63 - 1 then added in int64)
    or ``-(2**62)`` (offsets from -2**63 to -2**62 then rounded before the sum), and the top
    fit test moved one past 2**63 - 1 (the last position then wraps) or off empty x."""
    n = 1537
    for offset in (-(2**63) - 1, -(2**62) - n, 2**63 - n + 1):
        if -(2**63) <= offset <= 2**63 - n:  # every sum fits int64: exact, rounded once
            phi = np.array([float(offset + k) for k in range(n)])
        else:  # documented: float(offset) + arange(n) in float64
            phi = float(offset) + np.arange(n, dtype=np.float64)
        got = rr.apply_rope(np.tile([[1.0, 0.0]], (n, 1)), ONE_PAIR, offset=offset)
        np.testing.assert_array_equal(got, _rotated_by(phi))
    assert rr.apply_rope(np.ones((0, 2)), ONE_PAIR, offset=2**63).shape == (0, 2)


def test_integer_shifts_at_the_ends_of_int64_are_exact_or_rounded_once():
    """Catches: the fast int64 path taken for a dtype whose range plus the offset leaves
    int64 (int32 -2**31 plus -2**63 + 2**30 wraps round), an offset of exactly -2**63 sent
    through float64 (2**62 + 513 rounds up first), and negative int64 positions taken as
    not fitting (rounded before the sum)."""
    cases = [
        (np.array([-(2**31), 0], dtype=np.int32), -(2**63) + 2**30),
        (np.array([2**62 + 513]), -(2**63)),
        (np.array([-(2**62) - 513]), 2),
    ]
    for p, offset in cases:
        phi = [float(int(v) + offset) for v in p]  # exact, rounded once
        got = rr.apply_rope(np.tile([[1.0, 0.0]], (len(p), 1)), ONE_PAIR, p, offset=offset)
        np.testing.assert_array_equal(got, _rotated_by(phi))


def test_python_int_positions_stay_integers():
    """Catches: every Python list of positions turned into float64 before the shift (the
    object-array test widened): 2**62 + 513 - 2 is exact in int64, but rounding 2**62 + 513
    first lands 1024 away."""
    got = rr.apply_rope(np.array([[1.0, 0.0]]), ONE_PAIR, [2**62 + 513], offset=-2)
    np.testing.assert_array_equal(got, _rotated_by([float(2**62 + 511)]))


def test_positions_of_another_namespace_than_x():
    """Catches: the NumPy exception for positions reversed (NumPy positions refused for a
    PyTorch x, PyTorch positions silently converted for a NumPy x)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((3, 2))
    want = rr.apply_rope(x, ONE_PAIR, np.array([0, 5, 9]))
    got = rr.apply_rope(torch.as_tensor(x), ONE_PAIR, np.array([0, 5, 9]))
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match=r"`positions` must be in the namespace of `x`"):
        rr.apply_rope(x, ONE_PAIR, torch.tensor([0, 5, 9]))


def test_multi_axis_positions_need_one_trailing_coordinate_per_section():
    """Catches: a scalar or a wrong trailing length let through (or an IndexError)."""
    spec = rr.RopeSpec(8, sections=(2, 2))
    for bad in (np.int64(3), np.zeros((5, 3), dtype=np.int64)):
        with pytest.raises(ValueError, match=r"`positions` must have a trailing axis of length 2"):
            rr.apply_rope(np.ones((5, 8)), spec, bad)


def test_ragged_positions_are_named():
    """Catches: NumPy's own ValueError for a ragged list let through."""
    with pytest.raises(ValueError, match=r"`positions` must be a real number or a rectangular"):
        rr.apply_rope(np.ones((2, 2, 2)), ONE_PAIR, [[0, 1], [2]])


def test_seq_axis_error_gives_the_valid_range():
    """Catches: a wrong range in the message (its ends from -ndim to ndim - 2)."""
    from rope_ref._core.positions import normalize_seq_axis

    with pytest.raises(ValueError, match=r"\(from -4 to 2, excluding -1\); got 7\.$"):
        normalize_seq_axis(7, 4)


def test_seq_axis_hints_name_the_first_other_axis_of_that_length():
    """Catches: hints for 2-D ids dropped, the ids' batch axis offered as the sequence,
    the length read from the batch, a 1-D grid's axis 0 skipped, or the last match named."""
    from rope_ref._core.positions import seq_axis_hint

    def hint(bad, ndim, good, length, axis_length):
        return (
            f" seq_axis={bad - ndim} has length {axis_length}, but axis {good - ndim} has "
            f"the positions' length {length}: pass seq_axis={good - ndim}."
        )

    assert seq_axis_hint((2, 16), (2, 16, 8), 2) == hint(2, 4, 1, 16, 8)  # (batch, seq) ids
    assert seq_axis_hint((16, 16), (16, 4, 8), 1) == ""  # axis 0 is the ids' batch
    assert seq_axis_hint((16,), (16, 4, 8), 1) == hint(1, 4, 0, 16, 4)  # 1-D: axis 0 counts
    assert seq_axis_hint((8,), (2, 16, 8), 1) == hint(1, 4, 2, 8, 16)
    assert seq_axis_hint((16,), (16, 16, 4, 8), 2) == hint(2, 5, 0, 16, 4)  # the first


def test_batch_seq_ids_are_recognised_by_shape():
    """Catches: ids with a batch of 1 not read as (batch, seq) ids when x has a batch,
    ids of 5-D x missed, and ids tried along axis 0 when seq_axis is 0."""
    from rope_ref._core.positions import grid_axes

    assert grid_axes((1, 4), (2, 4, 4), 1) == (0, 1)
    assert grid_axes((2, 4), (2, 3, 4, 5), 2) == (0, 2)
    assert grid_axes((1, 4), (4, 3, 4), 0) == (1, 2)  # right-aligned, as a full grid
