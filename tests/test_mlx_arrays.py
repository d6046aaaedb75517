"""MLX arrays in apply_rope and the testing kit (float32, float16, bfloat16)."""

from __future__ import annotations

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, rope_report

mx = pytest.importorskip("mlx.core")

DTYPES = ["float32", "float16", "bfloat16"]


def _x(dtype, shape=(2, 3, 6, 16)):
    values = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    return mx.array(values).astype(getattr(mx, dtype)), values


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_rope_takes_and_returns_mlx_arrays(dtype):
    x, _values = _x(dtype)
    spec = rr.RopeSpec(16)
    y = rr.apply_rope(x, spec, offset=5)
    assert isinstance(y, mx.array)
    assert y.dtype == getattr(mx, dtype)
    assert y.shape == x.shape
    assert not isinstance(y, np.ndarray)
    exact = rr.apply_rope(np.array(x.astype(mx.float32), dtype=np.float64), spec, offset=5)
    got = np.array(y.astype(mx.float32), dtype=np.float64)
    eps = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    assert np.max(np.abs(got - exact)) <= 2 * eps * np.max(np.abs(exact)) + 1e-7
    q, k = rr.apply_rope_qk(x, x, spec)
    assert isinstance(q, mx.array)
    assert isinstance(k, mx.array)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlx_fast_rope_passes_the_assertion(dtype):
    x, _ = _x(dtype)
    spec = rr.RopeSpec(16, base=500000.0)
    y = mx.fast.rope(x, 16, traditional=False, base=500000.0, scale=1.0, offset=7)
    report = assert_rope_close(y, x, spec, offset=7)
    assert report.ok
    wrong = mx.fast.rope(x, 16, traditional=True, base=500000.0, scale=1.0, offset=7)
    diagnosis = rope_report(wrong, x, spec, offset=7).diagnosis
    assert diagnosis is not None
    assert diagnosis.cause == "layout"


def test_mlx_out_is_refused():
    x, _ = _x("float32")
    with pytest.raises(TypeError, match="`out` must be None for MLX arrays"):
        rr.apply_rope(x, rr.RopeSpec(16), out=x)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_mlx_results_are_rounded_once(dtype):
    """Each element is the float64 rotation rounded once (rational arithmetic), and q and
    k come back in their own dtypes."""
    from tests._helpers import exact_round

    x, _ = _x(dtype)
    spec = rr.RopeSpec(16)
    x64 = np.array(x.astype(mx.float32), dtype=np.float64)  # exact: 16-bit values
    want = np.vectorize(exact_round, excluded={1})(rr.apply_rope(x64, spec, offset=12345), dtype)
    got = rr.apply_rope(x, spec, offset=12345)
    assert np.array_equal(np.array(got.astype(mx.float32), dtype=np.float64), want)
    q, k = rr.apply_rope_qk(x, x.astype(mx.float32), spec)
    assert (q.dtype, k.dtype) == (getattr(mx, dtype), mx.float32)
