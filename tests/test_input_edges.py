"""Edges of the public calls: integer limits, lazy and foreign arrays, flags and sizes.

Each case was once a silent wrong answer or a crash; each now gives the right value or a
TypeError/ValueError naming the parameter.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import rope_ref as rr

RNG = np.random.default_rng(11)
X = RNG.standard_normal((5, 8))


def _float64_rotation(x: np.ndarray, positions: list[float]) -> np.ndarray:
    """x rotated in float64 by the formula (half pairing, base 10000), independently."""
    d = x.shape[-1]
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * theta
    cos, sin = np.cos(angles), np.sin(angles)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


# -- integer positions ---------------------------------------------------------------------

UINT64 = [1, 2**62, 2**63 - 1, 2**63 + 5, 2**64 - 1]


def _namespaces():
    out = [("numpy", np.asarray, np.asarray)]
    try:
        import torch

        out.append(("torch", torch.as_tensor, lambda a: a.numpy()))
    except ImportError:
        pass
    try:
        import array_api_strict as xs

        out.append(("array_api_strict", xs.asarray, np.asarray))
    except ImportError:
        pass
    try:
        import dask.array as da

        out.append(("dask", da.from_array, lambda a: a.compute()))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize(("name", "to", "back"), _namespaces(), ids=lambda v: str(v)[:16])
@pytest.mark.parametrize("offset", [1, -1, 7, -(2**62), 2**62])
def test_uint64_positions_shift_exactly_then_round_once(name, to, back, offset):
    x = to(X)
    positions = to(np.array(UINT64, dtype=np.uint64))
    got = back(rr.apply_rope(x, rr.RopeSpec(8), positions, offset=offset))
    # each exact sum, rounded once to float64
    expected = rr.apply_rope(X, rr.RopeSpec(8), np.array([float(v + offset) for v in UINT64]))
    np.testing.assert_array_equal(got, expected)


def test_jax_qk_default_positions_do_not_wrap_without_float64():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    with jax.enable_x64(False):
        for offset in (2**31 - 2, 2**31 + 5, 1e7 + 0.5, 2**40):
            k = jnp.asarray(X, dtype=jnp.float32)
            q_rot, k_rot = rr.apply_rope_qk(k[-1:], k, offset=offset)
            k_alone = rr.apply_rope(k, offset=offset)
            assert bool(jnp.all(k_rot == k_alone))
            assert bool(jnp.all(q_rot == k_alone[-1:]))
            positions = [float(offset) + i for i in range(5)]  # exact: all below 2**53
            rr.testing.assert_rope_close(
                np.asarray(k_rot), np.asarray(k, dtype=np.float32), rr.RopeSpec(8),
                positions=np.asarray(positions), angle_dtype="float64",
            )  # fmt: skip


# -- lazy arrays -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("positions", "kwargs", "message"),
    [
        ([0.0, np.nan, 2.0, 3.0, 4.0], {}, "`positions` must be finite"),
        ([0.0, np.inf, 2.0, 3.0, 4.0], {}, "`positions` must be finite"),
        ([0.0, 1e308, 2.0, 3.0, 4.0], {"offset": 1e308}, "`offset` moves `positions`"),
        ([0.0, 1e306, 2.0, 3.0, 4.0], {"spec": rr.RopeSpec(8, freqs=[1e3] * 4)}, "overflow"),
    ],
)
def test_dask_positions_are_checked_when_computed(positions, kwargs, message):
    dask = pytest.importorskip("dask")
    da = dask.array
    spec = kwargs.pop("spec", rr.RopeSpec(8))
    lazy = rr.apply_rope(da.from_array(X), spec, da.from_array(np.array(positions)), **kwargs)
    with pytest.raises(ValueError, match=message):  # the same error NumPy gets at once
        rr.apply_rope(X, spec, np.array(positions), **kwargs)
    with (
        dask.config.set(scheduler="synchronous"),
        np.errstate(over="ignore"),
        pytest.raises(ValueError, match=message),
    ):
        lazy.compute()


def test_dask_finite_positions_compute_the_rotation():
    da = pytest.importorskip("dask.array")
    positions = [0.0, 1.5, 2.0, 30.0, 4.0]
    got = rr.apply_rope(da.from_array(X), rr.RopeSpec(8), da.from_array(np.array(positions)))
    np.testing.assert_allclose(got.compute(), _float64_rotation(X, positions), rtol=0, atol=1e-14)


# -- arrays the Numba kernel cannot take -------------------------------------------------


def _memmap(tmp_path):
    m = np.memmap(tmp_path / "x.bin", dtype=np.float64, mode="w+", shape=X.shape)
    m[:] = X
    return m


class _Subclass(np.ndarray):
    pass


@pytest.mark.parametrize(
    "make", [_memmap, lambda _: X.astype(">f8"), lambda _: X.view(_Subclass)], ids=str
)
def test_auto_takes_the_reference_for_arrays_numba_cannot_take(tmp_path, make):
    pytest.importorskip("numba")
    x = make(tmp_path)
    expected = _float64_rotation(X, list(range(5)))
    np.testing.assert_allclose(np.asarray(rr.apply_rope(x, backend="auto")), expected, atol=1e-14)
    _, k_rot = rr.apply_rope_qk(x, x, backend="auto")
    np.testing.assert_allclose(np.asarray(k_rot), expected, atol=1e-14)


def test_numba_names_what_it_needs(tmp_path):
    pytest.importorskip("numba")
    with pytest.raises(TypeError, match=r"plain NumPy arrays .* got `x` of type memmap"):
        rr.apply_rope(_memmap(tmp_path), backend="numba")
    with pytest.raises(TypeError, match="native byte order; got >f8"):
        rr.apply_rope(X.astype(">f8"), backend="numba")


# -- positions of other dtypes and devices -----------------------------------------------


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "int4", "uint4"])
def test_ml_dtypes_positions_are_read_exactly(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    positions = np.arange(5).astype(getattr(ml_dtypes, name))  # 0..4: exact in every type
    expected = _float64_rotation(X, [0.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(rr.apply_rope(X, rr.RopeSpec(8), positions), expected, atol=1e-14)
    cos, _ = rr.rope_cos_sin(rr.RopeSpec(8), positions)
    np.testing.assert_allclose(cos[3], np.cos(3.0 * 10000.0 ** (-np.arange(0, 8, 2) / 8)))


def test_positions_on_another_device_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"`positions` must be on the device of `x` \(cpu\)"):
        rr.apply_rope(torch.as_tensor(X), positions=torch.arange(5, device="meta"))


# -- flags and sizes ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["False", "no", 0, 1, None])
@pytest.mark.parametrize("fn", ["softmax_attention", "linear_attention"])
def test_causal_must_be_a_bool(fn, value):
    q = RNG.standard_normal((4, 8))
    with pytest.raises(TypeError, match=r"`causal` must be True or False"):
        getattr(rr.attention, fn)(q, q, q, causal=value)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_normalize_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"`normalize` must be True or False"):
        rr.analysis.decay_bound(128, [1], normalize=value)


def test_attention_takes_numpy_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v = (RNG.standard_normal((4, 8)).astype(ml_dtypes.bfloat16) for _ in range(3))
    got = rr.attention.softmax_attention(q, k, v)
    wide = rr.attention.softmax_attention(*(a.astype(np.float64) for a in (q, k, v)))
    assert got.dtype == q.dtype
    # one rounding of the float64 result onto the bfloat16 grid: half an ulp, 2**-8 relative
    assert np.all(np.abs(got.astype(np.float64) - wide) <= 2.0**-8 * np.abs(wide))


@pytest.mark.parametrize("length", [2**1024, 10**400])
def test_full_turn_pairs_beyond_float64(length):
    spec = rr.RopeSpec(128)
    assert np.all(np.isfinite(rr.analysis.wavelengths(spec)))  # so every pair turns
    assert rr.analysis.full_turn_pairs(spec, length).all()


def test_pixel_max_freq_must_keep_frequencies_finite():
    largest = sys.float_info.max / math.pi * 2.0
    freqs = rr.axial_freqs((2, 2), kind="pixel", max_freq=largest * (1 - 1e-15))
    assert all(math.isfinite(f) for f in freqs)
    with pytest.raises(ValueError, match=r"`max_freq` must keep .* got 1\.7e\+308"):
        rr.axial_freqs((2, 2), kind="pixel", max_freq=1.7e308)


@pytest.mark.parametrize("segments", [None, 5, "abc", 2.5])
def test_mrope_segments_must_be_a_sequence(segments):
    with pytest.raises(TypeError, match=r"`segments` must be a sequence"):
        rr.mrope_positions(segments)


def test_python_ints_past_int64_are_rounded_once_to_float64():
    got = rr.apply_rope(X, rr.RopeSpec(8), [2**64 + 1, 2**70, 3, 2**63, 5])
    rounded = [float(2**64 + 1), float(2**70), 3.0, float(2**63), 5.0]
    np.testing.assert_array_equal(got, rr.apply_rope(X, rr.RopeSpec(8), np.array(rounded)))
    with pytest.raises(ValueError, match=r"`positions` must be finite in float64"):
        rr.apply_rope(X, rr.RopeSpec(8), [10**400] * 5)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: rr.apply_rope(np.zeros((5, 0))), "x"),
        (lambda: rr.convert_layout(np.zeros((5, 0))), "x"),
        (lambda: rr.permute_weights(np.zeros((0, 5)), n_heads=1), "w"),
        (lambda: rr.apply_rope(np.zeros((5, 7))), "x"),
    ],
)
def test_spec_none_names_the_array_its_head_dim_came_from(call, name):
    with pytest.raises(ValueError, match=rf"`{name}` must give a valid head_dim when spec is None"):
        call()


@pytest.mark.parametrize("position", [float("nan"), float("-inf")])
def test_a_non_finite_scalar_position_is_shown(position: float) -> None:
    """`rotation_matrix(spec, nan)` says ``got nan``, not "an array containing NaN"."""
    with pytest.raises(ValueError, match=rf"`position` must be finite; got {position!r}\."):
        rr.rotation_matrix(rr.RopeSpec(8), position)
