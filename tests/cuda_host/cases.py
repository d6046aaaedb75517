"""Inputs and checks shared by the host-emulation and GPU tests of the CUDA kernel."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

import rope_ref as rr

BFLOAT16: dict[str, np.dtype] = {}
try:  # bfloat16 for NumPy comes from ml_dtypes (installed with jax)
    from ml_dtypes import bfloat16

    BFLOAT16["bfloat16"] = np.dtype(bfloat16)
except ImportError:  # pragma: no cover - the test extra installs it
    pass

DTYPES = {"float16": np.dtype(np.float16), **BFLOAT16, "float32": np.dtype(np.float32)}
DTYPES["float64"] = np.dtype(np.float64)
# (exponent of the smallest normal, mantissa bits) of the 16-bit formats
FORMATS16 = {"float16": (-14, 10), "bfloat16": (-126, 7)}
LAYOUTS = ("half", "interleaved")


# ---- checks ---------------------------------------------------------------------------------


def tables(spec, positions, dtype):
    """What apply_rope hands a kernel: float64 tables rounded once to the compute dtype."""
    cos, sin = rr.rope_cos_sin(spec, positions)
    compute = np.float64 if dtype == np.float64 else np.float32
    return cos.astype(compute), sin.astype(compute)


def pair_members(a, layout, start, n):
    if layout == "interleaved":
        return a[..., start : start + 2 * n : 2], a[..., start + 1 : start + 2 * n : 2]
    return a[..., start : start + n], a[..., start + n : start + 2 * n]


def pair_magnitude(x64, layout, start, n):
    """|a| + |b| of the pair each rotated feature belongs to (0 outside the rotary slice)."""
    a, b = pair_members(x64, layout, start, n)
    full = np.zeros_like(x64)
    first, second = pair_members(full, layout, start, n)
    first[...] = np.abs(a) + np.abs(b)
    second[...] = np.abs(a) + np.abs(b)
    return full


def ulp16(values, name):
    """Spacing of the 16-bit format `name` at |values|."""
    emin, bits = FORMATS16[name]
    v = np.maximum(np.abs(values), np.finfo(np.float64).tiny)
    return np.exp2(np.maximum(np.floor(np.log2(v)), emin) - bits)


def assert_error_model(out, x, spec, positions, *, inverse=False, seq_len=None, role=None):
    """out is within the kernel's error model of the float64 reference; pass-through exact."""
    name = x.dtype.name
    x64 = x.astype(np.float64)
    options = {"inverse": inverse, "seq_len": seq_len, "role": role}
    y64 = rr.apply_rope(x64, spec, positions, **options)
    got = np.asarray(out).astype(np.float64)
    n, start = spec.n_pairs, spec.rotary_start
    m = pair_magnitude(x64, spec.layout, start, n)
    if name == "float64":
        bound = 4 * 2.0**-52 * m
    elif name == "float32":
        bound = 4 * 2.0**-23 * m
    else:  # one rounding of the float32 result
        bound = 0.5 * ulp16(np.maximum(np.abs(y64), np.abs(got)), name) + 4 * 2.0**-23 * m
    rotated = slice(start, start + 2 * n)
    err = np.abs(got - y64)[..., rotated]
    worst = np.unravel_index(np.argmax(err - bound[..., rotated]), err.shape) if err.size else ()
    assert np.all(err <= bound[..., rotated]), (name, worst, err[worst], bound[..., rotated][worst])
    if name == "float16":  # and at most one float16 ulp from the reference's own float16 result
        y16 = rr.apply_rope(x, spec, positions, **options).astype(np.float64)
        assert np.all(np.abs(got - y16) <= ulp16(np.maximum(np.abs(y16), np.abs(got)), name))
    bits = np.dtype(f"u{x.dtype.itemsize}")
    keep = np.r_[0:start, start + 2 * n : x.shape[-1]]
    np.testing.assert_array_equal(
        np.asarray(out)[..., keep].view(bits), np.ascontiguousarray(x[..., keep]).view(bits)
    )


def random_x(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


# ---- geometry cases: (x, positions, spec, expected vector path) ------------------------------


def case_bshd(rng, dtype, layout):
    x = random_x(rng, (2, 7, 4, 64), dtype)
    return x, np.arange(7).reshape(1, 7, 1), rr.RopeSpec(head_dim=64, layout=layout), True


def case_bhsd(rng, dtype, layout):
    x = random_x(rng, (2, 4, 7, 64), dtype)
    return x, np.arange(7).reshape(1, 1, 7), rr.RopeSpec(head_dim=64, layout=layout), True


def case_per_head_positions(rng, dtype, layout):
    x = random_x(rng, (2, 7, 4, 32), dtype)
    positions = rng.integers(0, 5000, size=(2, 7, 4))
    return x, positions, rr.RopeSpec(head_dim=32, layout=layout, base=500000.0), True


def case_partial(rng, dtype, layout):
    x = random_x(rng, (3, 5, 2, 80), dtype)
    spec = rr.RopeSpec(head_dim=80, rotary_dim=32, rotary_start=16, layout=layout)
    return x, np.arange(5).reshape(1, 5, 1) + 100, spec, True


def case_partial_odd(rng, dtype, layout):
    x = random_x(rng, (3, 5, 2, 23), dtype)
    spec = rr.RopeSpec(head_dim=23, rotary_dim=10, rotary_start=3, layout=layout)
    return x, np.arange(5).reshape(1, 5, 1), spec, False


def case_odd_sizes(rng, dtype, layout):
    x = random_x(rng, (3, 5, 3, 18), dtype)
    return x, np.arange(5).reshape(1, 5, 1), rr.RopeSpec(head_dim=18, layout=layout), False


def case_misaligned(rng, dtype, layout):
    base = random_x(rng, (2, 6, 3, 65), dtype)
    x = base[..., 1:]  # every row starts one element past a 16-byte boundary
    return x, np.arange(6).reshape(1, 6, 1), rr.RopeSpec(head_dim=64, layout=layout), False


def case_reversed(rng, dtype, layout):
    x = random_x(rng, (2, 6, 3, 32), dtype)[:, ::-1]  # negative strides, still aligned
    return x, np.arange(6).reshape(1, 6, 1), rr.RopeSpec(head_dim=32, layout=layout), True


def case_feature_stride(rng, dtype, layout):
    x = random_x(rng, (2, 6, 3, 64), dtype)[..., ::2]
    return x, np.arange(6).reshape(1, 6, 1), rr.RopeSpec(head_dim=32, layout=layout), False


def case_many_axes(rng, dtype, layout):
    # 6 leading axes, permuted, tables varying on 4 of them: more than ROPE_MAX_DIMS row axes
    base = random_x(rng, (2, 3, 2, 3, 2, 2, 16), dtype)
    x = base.transpose(4, 1, 5, 0, 3, 2, 6)
    positions = rng.integers(0, 100, size=(2, 3, 1, 2, 1, 2)).astype(np.float64) + 0.5
    return x, positions, rr.RopeSpec(head_dim=16, layout=layout), True


def case_decode(rng, dtype, layout):
    x = random_x(rng, (1, 1, 32, 128), dtype)
    spec = rr.RopeSpec(head_dim=128, layout=layout, base=500000.0)
    return x, np.full((1, 1, 1), 4095), spec, True


def case_rows_only(rng, dtype, layout):
    x = random_x(rng, (37, 48), dtype)  # tokens x features, no head axis
    return x, np.arange(37) * 3.25, rr.RopeSpec(head_dim=48, layout=layout), True


CASES = {
    f.__name__.removeprefix("case_"): f
    for f in (
        case_bshd, case_bhsd, case_per_head_positions, case_partial, case_partial_odd,
        case_odd_sizes, case_misaligned, case_reversed, case_feature_stride, case_many_axes,
        case_decode, case_rows_only,
    )
}  # fmt: skip


def huge(shape, dtype, order=None):
    """A view of `shape` over 16 bytes: for planning and index arithmetic only, never read."""
    strides = (
        np.empty((1,) * len(shape), dtype=dtype).itemsize * np.cumprod((1, *shape[:0:-1]))[::-1]
    )
    view = as_strided(np.zeros(16, dtype=np.uint8).view(dtype), shape=shape, strides=strides)
    return view if order is None else view.transpose(order)
