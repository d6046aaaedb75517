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
