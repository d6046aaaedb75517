"""JAX CPU arrays through the Numba kernel: read in place, one aligned output adopted by JAX.

`rope_ref._engine.cpu_arrays` hands concrete JAX arrays (not tracers) here. ``numpy.asarray``
views the array's buffer; the kernel writes one NumPy array aligned to `JAX_ALIGNMENT`
bytes, which JAX then adopts without a copy, as a JAX array on x's device with x's
sharding and commitment. JAX's own ``jax.device_put`` costs about 18 µs per call in
Python before it reaches the C++ call that adopts the buffer; where this jaxlib has that
call (``xla_client.batched_device_put``) it is made directly (about 2 µs), else
``jax.device_put`` is.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from rope_ref._core.aliases import Form, Role
from rope_ref._core.defaults import cached_default_spec
from rope_ref._core.spec import RopeSpec
from rope_ref._engine import runner
from rope_ref._engine.call import Call
from rope_ref._engine.dispatch import KERNEL_DTYPES

__all__ = [
    "JAX_ALIGNMENT",
    "adopt",
    "aligned_empty",
    "is_concrete",
    "on_one_cpu",
    "rotate",
    "rotate_qk",
    "usable",
]

#: Bytes the outputs are aligned to, so that JAX adopts them without a copy.
JAX_ALIGNMENT = 64
#: The dtypes the kernel takes, by name (bfloat16 is ml_dtypes', which JAX uses).
_DTYPES = frozenset(KERNEL_DTYPES["numba"])


def usable(x: Any) -> bool:
    """Whether JAX array `x` lives on one CPU device in a dtype the kernel takes."""
    try:
        (device,) = x.sharding.device_set  # read as the cheapest of JAX's ways to ask
    except (AttributeError, ValueError):  # sharded over several devices
        return False
    dtype = x.dtype
    known = _kernel_dtypes.get(dtype)
    if known is None:
        known = _kernel_dtypes[dtype] = dtype.name in _DTYPES
    return known and device.platform == "cpu"


def is_concrete(x: object) -> bool:
    """Whether `x` is a concrete JAX array (not a tracer; checked without importing JAX)."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.Array) and type(x).__name__ == "ArrayImpl"


def on_one_cpu(x: Any) -> bool:
    """Whether JAX array `x` (of any dtype: positions too) lives on one CPU device."""
    try:
        (device,) = x.sharding.device_set
    except (AttributeError, ValueError):  # sharded over several devices
        return False
    return bool(device.platform == "cpu")


#: Whether the kernel takes each dtype seen (a dtype's ``name`` costs microseconds).
_kernel_dtypes: dict[np.dtype[Any], bool] = {}


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """A C-contiguous NumPy array whose data starts on a `JAX_ALIGNMENT`-byte boundary.

    Examples
    --------
    >>> import numpy as np
    >>> a = aligned_empty((3, 5), np.dtype(np.float32))
    >>> a.shape, a.flags.c_contiguous, a.ctypes.data % JAX_ALIGNMENT
    ((3, 5), True, 0)
    """
    size = math.prod(shape) * dtype.itemsize
    raw = np.empty(size + JAX_ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % JAX_ALIGNMENT
    return raw[start : start + size].view(dtype).reshape(shape)


def rotate(
    x: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    role: Role | None,
) -> Any:
    """The runner (backend="numba") on JAX array `x`, read in place, as JAX.

    `positions` are on the host (NumPy) or None. Plain keyword parameters down to the short road,
    as for ``torch_views.torch_direct`` (a `Call` measured 0.5 to 0.9 µs more per call).
    """
    xn = np.asarray(x)
    out = aligned_empty(xn.shape, xn.dtype)
    done = runner.short_road(xn, spec=spec, positions=positions, offset=offset,
                             seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form=form,
                             backend="numba", out=out, role=role)  # fmt: skip
    if done is None:
        runner.general(xn, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, form=form, backend="numba", out=out,
                       role=role)  # fmt: skip
    return adopt(out, x)


def rotate_qk(q: Any, k: Any, call: Call) -> tuple[Any, Any]:
    """The runner's queries and keys of JAX arrays `q` and `k`; positions on the host or None.

    The calls that are two `rotate` calls, bit for bit, are made so: one aligned output
    each, adopted by JAX.
    """
    shift = _query_shift(q, k, call)
    if shift is not None:
        spec, offset, seq_axis = call.spec, call.offset, call.seq_axis
        inverse, seq_len, form = call.inverse, call.seq_len, call.form
        return (rotate(q, spec=spec, positions=None, offset=offset + shift, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, form=form, role=None),
                rotate(k, spec=spec, positions=None, offset=offset, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, form=form, role=None))  # fmt: skip
    pair = runner.rotate_qk(np.asarray(q), np.asarray(k), call)
    return adopt(pair[0], q), adopt(pair[1], k)


def _query_shift(q: Any, k: Any, call: Call) -> int | None:
    """Where the queries start past `offset` (``k_len - q_len``), or None.

    `apply_rope_qk` gives the queries the keys' last positions. The calls that are then
    two `apply_rope` calls, bit for bit: default positions, an integer offset, no xPos
    (whose scale needs the role) and a seq_len that does not depend on the call.
    """
    spec, offset, seq_axis = call.spec, call.offset, call.seq_axis
    if call.positions is not None or call.k_positions is not None or type(offset) is not int:
        return None
    if not (spec is None or (type(spec) is RopeSpec and spec.xpos is None)):
        return None
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim or (spec or cached_default_spec(head_dim)) is None:
        return None  # the general path names `q` or `k` in its error
    if spec is not None and spec.head_dim != head_dim:
        return None
    if spec is not None and spec.scaling is not None and call.seq_len is None:
        return None
    if type(seq_axis) is not int or not (q.ndim == k.ndim >= 2 and -q.ndim <= seq_axis < -1):
        return None
    shift = int(k.shape[seq_axis]) - int(q.shape[seq_axis])
    return shift if shift >= 0 else None


def adopt(out: np.ndarray, like: Any) -> Any:
    """`out` as a JAX array on like's device, with like's sharding and commitment.

    JAX adopts an aligned NumPy array without a copy (as ``jax.device_put`` does).
    """
    direct = _direct_put()
    if direct is not None:
        put, shaped = direct
        key = (out.shape, out.dtype)
        aval = _avals.get(key)
        if aval is None:
            if len(_avals) >= 256:
                _avals.clear()
            aval = _avals[key] = shaped(out.shape, out.dtype)
        sharding = like.sharding
        (device,) = sharding.device_set
        return put(aval, sharding, [out], [device], like.committed)
    import jax

    return jax.device_put(out, like.device) if like.committed else jax.device_put(out)


#: The abstract value (shape, dtype) of each output geometry, for `adopt`.
_avals: dict[tuple[tuple[int, ...], np.dtype[Any]], Any] = {}


@functools.cache
def _direct_put() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """The ``batched_device_put`` of jaxlib and JAX's ``ShapedArray``, or None if not here."""
    try:
        from jax._src import core
        from jaxlib import xla_client
    except ImportError:  # pragma: no cover - another JAX layout
        return None
    put = getattr(xla_client, "batched_device_put", None)
    shaped = getattr(core, "ShapedArray", None)
    if put is None or shaped is None:  # pragma: no cover - another JAX layout
        return None
    return put, shaped
