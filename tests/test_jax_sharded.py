"""JAX arrays sharded over several devices: rotated on their own devices, sharding kept.

The tables and positions built for such an array are put whole on each of its devices
(replicated): its own partition would not divide their shapes. The check runs in a child
process with two CPU devices (XLA_FLAGS must be set before JAX starts).
"""

from __future__ import annotations

import pytest

from tests._helpers import run_on_two_cpu_devices

pytest.importorskip("jax")

CHILD = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import rope_ref as rr

mesh = Mesh(np.array(jax.devices()), ("b",))
split = NamedSharding(mesh, PartitionSpec("b"))
rng = np.random.default_rng(5)
host = rng.standard_normal((2, 6, 3, 8))  # (batch, seq, heads, head_dim), batch split


def rope(v, p, inverse=False):  # half-split RoPE in float64, written here
    theta = 10000.0 ** (-np.arange(4) / 4.0)
    a = np.asarray(p, dtype=np.float64)[..., :, None, None] * theta
    a = -a if inverse else a
    x1, x2 = v[..., :4], v[..., 4:]
    return np.concatenate([x1 * np.cos(a) - x2 * np.sin(a), x2 * np.cos(a) + x1 * np.sin(a)], -1)


def check(name, got, want):
    assert got.sharding == split, (name, got.sharding)
    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want)))
    assert err < 1e-5, (name, err)
    print(name, "ok")


x = jax.device_put(jnp.asarray(host, dtype=jnp.float32), split)
spec = rr.RopeSpec(8)
for backend in ("reference", "auto"):
    y = rr.apply_rope(x, spec, seq_axis=1, backend=backend)
    check("apply " + backend, y, rope(host, np.arange(6)))
check("offset", rr.apply_rope(x, spec, seq_axis=1, offset=7), rope(host, np.arange(6) + 7))
p = jax.device_put(jnp.asarray([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]]), split)
check("positions", rr.apply_rope(x, spec, p, seq_axis=1), rope(host, np.asarray(p)))
check("inverse", rr.apply_rope(x, spec, seq_axis=1, inverse=True), rope(host, np.arange(6), True))
q, k = rr.apply_rope_qk(x, x, spec, seq_axis=1)
check("qk queries", q, rope(host, np.arange(6)))
check("qk keys", k, rope(host, np.arange(6)))
same = rr.rerotate(x, spec, seq_axis=1, from_seq_len=6, to_seq_len=6)
check("rerotate", same, host)
cos, sin = rr.rope_cos_sin(spec, p)
assert cos.shape == (2, 6, 4), cos.shape
print("tables ok")
"""


def test_arrays_sharded_over_two_devices_are_rotated_keeping_their_sharding() -> None:
    """apply_rope, apply_rope_qk, rerotate and rope_cos_sin on a batch split over two
    devices: values against a float64 formula, the result on x's own sharding."""
    result = run_on_two_cpu_devices(CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-2] == "tables ok", result.stdout


FEATURE_SPLIT = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import rope_ref as rr

mesh = Mesh(np.array(jax.devices()), ("f",))
split = NamedSharding(mesh, PartitionSpec(None, None, "f"))  # the feature axis split
host = np.random.default_rng(7).standard_normal((2, 6, 8))


def rope(v, start, n, pairs):  # RoPE of features start..start+2n in float64, written here
    theta = 10000.0 ** (-np.arange(n) / n)
    a = np.arange(6, dtype=np.float64)[:, None] * theta
    idx = [(start + j, start + j + n) if pairs == "half" else (start + 2 * j, start + 2 * j + 1)
           for j in range(n)]
    out = v.copy()
    for j, (i1, i2) in enumerate(idx):
        c, s = np.cos(a[:, j]), np.sin(a[:, j])
        out[..., i1] = v[..., i1] * c - v[..., i2] * s
        out[..., i2] = v[..., i2] * c + v[..., i1] * s
    return out


x = jax.device_put(jnp.asarray(host, dtype=jnp.float32), split)
for start, n, layout in ((0, 2, "half"), (2, 2, "half"), (4, 2, "interleaved"), (0, 4, "half")):
    spec = rr.RopeSpec(8, rotary_dim=2 * n, rotary_start=start, layout=layout)
    want = rope(host, start, n, layout)
    for backend in ("reference", "auto"):
        results = [rr.apply_rope(x, spec, backend=backend),
                   *rr.apply_rope_qk(x, x, spec, backend=backend)]
        for got in results:
            assert got.sharding == split, (start, n, layout, backend, got.sharding)
            err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want)))
            assert err < 1e-5, (start, n, layout, backend, err)
print("feature split ok")
"""


def test_arrays_split_along_the_features_keep_their_sharding_with_partial_rotary_specs() -> None:
    """A partial rotary slice of an array split along its features: the pass-through and
    rotated features are joined back on x's own sharding (not replicated), with the values
    of a float64 formula, for the reference and "auto"."""
    result = run_on_two_cpu_devices(FEATURE_SPLIT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-2] == "feature split ok", result.stdout
