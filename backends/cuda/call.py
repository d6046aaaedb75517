"""The short road from ``apply_rope`` / ``apply_rope_qk`` to the CUDA kernel.

``rope_ref.apply_rope(x, ..., backend="cupy" or "auto")`` hands its arguments here (`run`,
through `rope_ref.backends.cuda.road`, which first hands the calls that record gradients or
are traced to the torch custom operators) when `x` is a CUDA array (CuPy, a PyTorch CUDA
tensor, a JAX GPU array). This path takes the calls that need no host work but a few
dictionary lookups:

- positions None: ``offset + arange(S)`` with an integer ``offset >= 0`` reads rows of the
  device table cache in place (the table kernel);
- positions on the device (an array of x's kind, int32, int64, float32 or float64), with an
  integer offset: the gather kernel reads each position and takes its cached row, or
  computes the tables of a position that has none, on the device. Nothing is read back to
  the host, so such a call can be captured in a CUDA graph.

The spec must have no xPos and no sections, and a length-dependent scaling needs an
explicit seq_len. Anything else, including every invalid argument, returns None: the
general path then validates, raises the documented errors, or builds the tables itself.
While the caller's stream is capturing a CUDA graph, such a call raises RuntimeError
instead (saying what a capture takes): the general path's host work cannot be captured.
An `out` on another device than x's raises ValueError.

A call is checked once per *signature*: a flat tuple of the adapter, the spec object,
``seq_axis``, ``inverse``, ``seq_len`` and each array's `Arrays.geometry` (shape, strides,
dtype, device). A repeated call builds that tuple, looks it up, and then only allocates
the outputs, copies the cached launch words and writes this call's addresses and offset
into the copy.

Each launch gets words of its own, never a buffer shared between calls: the driver copies
kernel arguments when a launch is made (CuPy hands it their address), so a shared buffer
would be safe against the GPU, but not against a second thread writing its addresses into
it between this thread's writes and its launch, nor for a launch kept after the call (the
host emulation records them). The copy costs a fraction of a microsecond.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from rope_ref._core.aliases import BackendName, Form, Role
from rope_ref._core.defaults import cached_default_spec
from rope_ref._core.positions import grid_axes
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.runner import general, general_qk

from .arrays import Arrays, arrays_for
from .capture import reason, refuse
from .plan import (
    ELEMENT_TYPES,
    PARAM_FIELDS,
    POSITION_TYPES,
    VECTOR_BYTES,
    Desc,
    Gather,
    Job,
    Launch,
    NeedsCopy,
    overlap,
    plan,
)
from .tables import DeviceTables, device_tables, length_dependent

__all__ = ["apply", "apply_qk", "clear", "decline", "run", "run_qk"]

#: (spec, prepared call or None) by signature (cleared when it grows past `MAX_SIGNATURES`).
_prepared: dict[Hashable, tuple[object, _Prepared | None]] = {}
MAX_SIGNATURES = 1024


def run(
    x: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    backend: BackendName,
    out: Any,
    role: Role | None,
) -> Any:
    """``apply_rope`` of a CUDA array (any other too): the short road, else the general path.

    The short road takes ``form="rotate_half"`` without a `role`; the other calls are
    declined (a RuntimeError while a CUDA graph is captured, whose host work it cannot hold).
    The general path is the engine's runner (`rope_ref._engine.runner.general`).
    """
    if role is None and isinstance(form, str) and form == "rotate_half":
        result = apply(x, spec, positions, offset, seq_axis, inverse, seq_len, out)
        if result is not None:
            return result
    else:
        decline(x)  # RuntimeError inside a CUDA graph capture
    return general(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                   inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                   role=role)  # fmt: skip


def run_qk(
    q: Any,
    k: Any,
    *,
    spec: RopeSpec | None,
    positions: Any,
    k_positions: Any,
    offset: float,
    seq_axis: int,
    inverse: bool,
    seq_len: float | None,
    form: Form,
    backend: BackendName,
) -> tuple[Any, Any]:
    """``apply_rope_qk`` of CUDA arrays: one launch on the short road, else the general path."""
    if isinstance(form, str) and form == "rotate_half":
        result = apply_qk(q, k, spec, positions, k_positions, offset, seq_axis, inverse, seq_len)
        if result is not None:
            return result
    else:
        decline(q)  # RuntimeError inside a CUDA graph capture
    return general_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                      offset=offset, seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                      form=form, backend=backend)  # fmt: skip


def apply(
    x: Any,
    spec: object,
    positions: Any,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
    out: Any,
) -> Any | None:
    """`apply_rope` of one CUDA array by the kernel, or None to take the general path."""
    arrays = arrays_for(x)
    if arrays is None:
        return None
    if out is not None and type(out) is not type(x):
        refuse(arrays, x, "its `out` is not an array of x's kind")
        return None
    if arrays.kind == "jax":
        if out is not None or not arrays.usable(x):
            return None  # not on one GPU, or out= (JAX arrays are immutable)
        return _through_cupy(arrays, apply, x, spec, positions, offset, seq_axis, inverse,
                             seq_len, None)  # fmt: skip
    results = _call(arrays, (x,), (positions,), out, spec, offset, seq_axis, inverse, seq_len)
    if results is None:
        refuse(arrays, x, reason(x, spec, positions, offset, seq_axis, seq_len))
        return None
    return results[0]


def apply_qk(
    q: Any,
    k: Any,
    spec: object,
    positions: Any,
    k_positions: Any,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
) -> tuple[Any, Any] | None:
    """`apply_rope_qk` of two CUDA arrays in one launch, or None to take the general path."""
    arrays = arrays_for(q)
    if arrays is None:
        return None
    if type(k) is not type(q) or (positions is None and k_positions is not None):
        refuse(arrays, q, "`k` is not of q's kind, or `k_positions` come without `positions`")
        return None
    if arrays.kind == "jax":
        if not (arrays.usable(q) and arrays.usable(k)):
            return None
        pair: tuple[Any, Any] | None = _through_cupy(
            arrays, apply_qk, q, k, spec, positions, k_positions, offset, seq_axis, inverse,
            seq_len,
        )  # fmt: skip
        return pair
    if k_positions is None:
        k_positions = positions
    results = _call(arrays, (q, k), (positions, k_positions), None, spec, offset, seq_axis,
                    inverse, seq_len)  # fmt: skip
    if results is None:
        refuse(arrays, q, reason(k, spec, positions, offset, seq_axis, seq_len))
        return None
    return results[0], results[1]


def decline(x: Any) -> None:
    """Leave a call on `x` to the general path; RuntimeError while a graph is captured.

    For the calls ``apply_rope`` never offers this path (a `role`, another `form`).
    """
    arrays = arrays_for(x)
    if arrays is not None:
        refuse(arrays, x, "a `role` or a `form` other than 'rotate_half' needs host work")


def clear() -> None:
    """Forget every prepared call (for tests)."""
    _prepared.clear()


def _through_cupy(arrays: Arrays, function: Any, *args: Any) -> Any:
    """Run `function` on CuPy views of JAX arrays (DLPack), hand the results back to JAX."""
    kind = type(args[0])
    converted = [arrays.launchable(a) if type(a) is kind and arrays.usable(a) else a for a in args]
    result = function(*converted)
    if result is None:
        return None
    # the views hold JAX's buffers: until the launch is done, not until this returns
    arrays.keep_alive([a for a, b in zip(converted, args, strict=True) if a is not b],
                      arrays.stream(converted[0]))  # fmt: skip
    if isinstance(result, tuple):
        return tuple(arrays.result(r) for r in result)
    return arrays.result(result)


def _call(
    arrays: Arrays,
    xs: tuple[Any, ...],
    positions: tuple[Any, ...],
    out: Any,
    spec: object,
    offset: object,
    seq_axis: object,
    inverse: object,
    seq_len: object,
) -> list[Any] | None:
    """Read the call's signature and addresses, look the signature up, run the call.

    `positions` holds one entry per x (None: the default positions); `out` is None or,
    for one x, the output array. None: the general path takes the call.
    """
    if type(seq_axis) is not int or type(inverse) is not bool or type(seq_len) not in _SEQ_LENS:
        return None
    geometry, address = arrays.geometry, arrays.address
    signature: list[Hashable] = [len(xs), arrays, id(spec), seq_axis, inverse, seq_len]
    ptrs: list[int] = []  # of the xs, then of their positions (gather kernel)
    for x in xs:
        x_geometry = geometry(x)
        if x_geometry is None:
            return None  # not in CUDA memory, or a tensor recording gradients
        signature.append(x_geometry)
        ptrs.append(address(x))
    previous: Any = None
    for p in positions:
        if p is None:
            signature.append(None)  # the default positions
        elif p is previous:  # the keys' positions are the queries' (read once)
            signature.append(_SAME)
            ptrs.append(ptrs[-1])
        else:
            if type(p) is not type(xs[0]):
                return None  # host positions: the general path lays them out
            p_geometry = geometry(p)
            if p_geometry is None:
                return None
            signature.append(p_geometry)
            ptrs.append(address(p))
            previous = p
    out_ptr = 0
    if out is not None:
        out_geometry = geometry(out)
        if out_geometry is not None and arrays.device(out) != arrays.device(xs[0]):
            msg = (
                f"`out` must be on the device of `x` (device {arrays.device(xs[0])}); "
                f"got an array on device {arrays.device(out)}."
            )
            raise ValueError(msg)
        if not _fits(arrays, xs[0], out, out_geometry, x_geometry):  # one x: its geometry
            return None
        out_ptr = address(out)
        signature += (out_geometry, out_ptr == ptrs[0])
    key = tuple(signature)
    found = _prepared.get(key)
    if found is None or found[0] is not spec:
        prepared = _prepare(key, arrays, xs, positions, spec, seq_axis, inverse, seq_len)
    else:
        prepared = found[1]
    if prepared is None:
        return None
    return prepared.run(arrays, xs, ptrs, out, out_ptr, offset)


def _fits(arrays: Arrays, x: Any, out: Any, out_geometry: Any, x_geometry: Any) -> bool:
    """Whether `out` is a CUDA array of x's shape and dtype, `x` itself or apart from it."""
    if out_geometry is None or (out_geometry[0], out_geometry[2]) != (x_geometry[0], x_geometry[2]):
        return False  # not in CUDA memory, or not of x's shape and dtype
    out_desc, x_desc = arrays.describe(out), arrays.describe(x)
    assert out_desc is not None
    assert x_desc is not None
    return out_desc.ptr == x_desc.ptr or not overlap(out_desc, x_desc)  # partial overlap


def _prepare(
    signature: tuple[Hashable, ...],
    arrays: Arrays,
    xs: tuple[Any, ...],
    positions: tuple[Any, ...],
    spec: object,
    seq_axis: int,
    inverse: bool,
    seq_len: object,
) -> _Prepared | None:
    """Check a new signature's call once and remember the outcome (None: the general path)."""
    descs = [arrays.describe(a) for a in xs]
    descs += [None if p is None else arrays.describe(p) for p in positions]
    devices = {arrays.device(a) for a in (*xs, *positions) if a is not None}
    prepared = _Prepared.check(descs, spec, seq_axis, inverse, seq_len, devices=devices)
    if len(_prepared) >= MAX_SIGNATURES:
        _prepared.clear()
    _prepared[signature] = (spec, prepared)  # `spec` kept alive: its id stays its own
    return prepared


_SEQ_LENS = (type(None), int, float)
_LIMIT = 2**53
_SAME = "the same array"  # in a signature: the previous positions again


class _Prepared:
    """What a signature's calls share: the validated spec, layout and the launch words."""

    def __init__(
        self,
        spec: RopeSpec,
        seq_len: float | None,
        inverse: bool,
        axes: list[int],
        lengths: list[int],
        x_descs: list[Desc],
        positions: list[Desc] | None,
        compute: str,
        device: int,
    ) -> None:
        self.spec, self.seq_len, self.inverse = spec, seq_len, inverse
        self.axes, self.x_descs, self.positions = axes, x_descs, positions
        self.compute, self.device = compute, device
        self.gather = positions is not None
        #: Tables per seq_len and stream: asked for each call (a dictionary lookup).
        self.per_length = length_dependent(spec)
        #: The words a call writes: x, out and positions of each x, then the offset (gather
        #: kernel), or x, out, cos and sin of each x (table kernel: the rows move with it).
        self.slots = [
            at for i in range(len(lengths))
            for at in ((*_ADDRESSES[i][:2], _POSITIONS[i]) if self.gather else _ADDRESSES[i])
        ] + ([_OFFSET] if self.gather else [])  # fmt: skip
        self.row_bytes = spec.n_pairs * np.dtype(compute).itemsize
        #: Rows of the table cache the last x reads, from the offset; byte offset of each x's
        #: first row past the offset's (queries read the last q_len rows of the keys').
        self.rows = lengths[-1]
        self.table_rows = [(lengths[-1] - length) * self.row_bytes for length in lengths]
        #: The table cache last used, with `device_tables.generation` when it was taken.
        self.tables: tuple[int, DeviceTables | None] = (-1, None)
        #: The launch by whether every address is 16-byte aligned (the vector path), and
        #: the table cache whose addresses its words hold (the gather kernel's).
        self.launches: dict[bool, Launch | None] = {}
        self.tables_in: dict[bool, DeviceTables] = {}

    @classmethod
    def check(
        cls,
        descs: list[Desc | None],
        spec: object,
        seq_axis: int,
        inverse: bool,
        seq_len: object,
        *,
        devices: set[int],
    ) -> _Prepared | None:
        """Everything the kernel relies on, once per signature; None when unusual or invalid.

        `descs` holds the xs, then their positions (None: the default positions).
        """
        n = len(descs) // 2
        x_descs = [d for d in descs[:n] if d is not None]
        if len(x_descs) != n or len(devices) != 1:
            return None
        head_dim = x_descs[0].shape[-1] if x_descs[0].shape else None
        resolved = _kernel_spec(spec, head_dim, seq_len)
        if resolved is None or x_descs[0].dtype not in ELEMENT_TYPES:
            return None
        if any(not d.shape or d.shape[-1] != head_dim or d.dtype != x_descs[0].dtype
               for d in x_descs):  # fmt: skip
            return None
        axes = [_seq_axis(seq_axis, len(d.shape)) for d in x_descs]
        valid_axes = [a for a in axes if a is not None]
        if len(valid_axes) != n:
            return None
        lengths = [d.shape[a] for d, a in zip(x_descs, valid_axes, strict=True)]
        laid: list[Desc] | None = None
        if all(p is None for p in descs[n:]):
            if length_dependent(resolved) or lengths[0] > lengths[-1]:
                return None
        else:
            laid = []
            for p, d, a in zip(descs[n:], x_descs, valid_axes, strict=True):
                done = None if p is None else _lay_out(p, d.shape[:-1], a)
                if done is None or done.dtype not in POSITION_TYPES:
                    return None
                laid.append(done)
        compute = "float64" if x_descs[0].dtype == "float64" else "float32"
        (device,) = devices
        return cls(resolved, _float(seq_len), inverse, valid_axes, lengths, x_descs, laid,
                   compute, device)  # fmt: skip

    def run(
        self, arrays: Arrays, xs: Sequence[Any], ptrs: list[int], out: Any, out_ptr: int,
        offset: object,
    ) -> list[Any] | None:  # fmt: skip
        """Allocate outputs, write this call's addresses into the launch words, launch.

        `ptrs` holds the addresses of the xs, then of their positions (gather kernel).
        """
        if not arrays.is_current(self.device):
            with arrays.xp.cuda.Device(self.device):
                return self._run(arrays, xs, ptrs, out, out_ptr, offset)
        return self._run(arrays, xs, ptrs, out, out_ptr, offset)

    def _run(
        self, arrays: Arrays, xs: Sequence[Any], ptrs: list[int], out: Any, out_ptr: int,
        offset: object,
    ) -> list[Any] | None:  # fmt: skip
        """`run`, with the arrays' device current."""
        shift = offset if type(offset) is int and -_LIMIT < offset < _LIMIT else _integer(offset)
        if shift is None or (shift < 0 and not self.gather):
            return None
        n, gather = len(xs), self.gather
        needed = 0 if gather else shift + self.rows
        stream = arrays.stream(xs[0])
        generation, tables = self.tables
        if self.per_length:
            tables = self._table_cache(arrays, xs[0], needed, stream)
            if arrays.capturing(stream):
                device_tables.captured(tables)  # the graph reads them at every replay
        elif tables is None or generation != device_tables.generation or tables.capacity < needed:
            tables = self._table_cache(arrays, xs[0], needed, stream)
            if tables.capacity < needed:
                return None  # rows past the largest cache: host-built tables instead
        if out is None:
            outs, out_ptrs = [], []
            for x in xs:
                outs.append(arrays.empty(x, x.shape))
                out_ptrs.append(arrays.address(outs[-1]))
        else:
            outs, out_ptrs = [out], [out_ptr]
        # this call's words, in the order of `self.slots`, and whether all its addresses
        # (x, out and the tables they read) are aligned for the vector path
        values: list[int] = []
        if gather:  # the cache's own addresses, which the template's words hold
            mask = tables.cos_ptr | tables.sin_ptr
            for i in range(n):
                values += (ptrs[i], out_ptrs[i], ptrs[n + i])
                mask |= ptrs[i] | out_ptrs[i]
            values.append(shift)
        else:  # the rows from the offset
            mask = 0
            for i in range(n):
                row = shift * self.row_bytes + self.table_rows[i]
                cos, sin = tables.cos_ptr + row, tables.sin_ptr + row
                values += (ptrs[i], out_ptrs[i], cos, sin)
                mask |= ptrs[i] | out_ptrs[i] | cos | sin
        aligned = not mask % VECTOR_BYTES
        template = self.launches.get(aligned, _UNPLANNED)
        if template is _UNPLANNED:
            template = self._plan(arrays, aligned, ptrs, outs, tables, shift)
        elif template is not None and gather and self.tables_in[aligned] is not tables:
            template = self._with_tables(aligned, template, tables, n)
        if template is None:
            return None  # the layout needs copies: the general path makes them
        words = template.params.copy()
        for slot, value in zip(self.slots, values, strict=True):
            words[slot] = value
        if template.grid > 0:
            arrays.launch(_new_launch(Launch, (*template[:6], words)), stream)
        return outs

    def _table_cache(self, arrays: Arrays, like: Any, rows: int, stream: Any) -> DeviceTables:
        """The device table cache (with `rows` rows if it can), kept for the next call."""
        generation = device_tables.generation  # read first: a change meanwhile is seen next time
        tables = device_tables.get(self.spec, self.seq_len, self.compute, arrays, like,
                                   rows=rows, stream=stream)  # fmt: skip
        self.tables = (generation, tables)
        return tables

    def _plan(
        self,
        arrays: Arrays,
        aligned: bool,
        ptrs: list[int],
        outs: list[Any],
        tables: DeviceTables,
        shift: int,
    ) -> Launch | None:
        """The launch of this geometry and alignment (planned once; None: needs copies)."""
        n = len(outs)
        gather = None
        jobs: list[Job] = []
        for i, stored in enumerate(self.x_descs):
            x = Desc(ptrs[i], *stored[1:])
            out = arrays.describe(outs[i])
            assert out is not None
            if self.positions is not None:
                p = self.positions[i]
                jobs.append((x, Desc(ptrs[n + i], *p[1:]), out))
                continue
            item = self.row_bytes // self.spec.n_pairs
            shape = [1] * (len(x.shape) - 1) + [self.spec.n_pairs]
            strides = [0] * (len(x.shape) - 1) + [item]
            shape[self.axes[i]], strides[self.axes[i]] = x.shape[self.axes[i]], self.row_bytes
            at = shift * self.row_bytes + self.table_rows[i]  # this x's rows from the offset
            cos = Desc(tables.cos_ptr + at, tuple(shape), tuple(strides), self.compute, item)
            jobs.append((x, (cos, Desc(tables.sin_ptr + at, *cos[1:])), out))
        if self.positions is not None:
            gather = Gather(
                cos=tables.cos_ptr, sin=tables.sin_ptr, n_pairs=self.spec.n_pairs,
                capacity=tables.capacity, inv_freq=tables.inv_freq_ptr, factor=tables.factor,
                offset=shift, table_dtype=self.compute,
            )  # fmt: skip
        try:
            launch = plan(jobs, layout=self.spec.layout, rotary_start=self.spec.rotary_start,
                          inverse=self.inverse, gather=gather)  # fmt: skip
        except NeedsCopy:
            launch = None
        self.launches[aligned] = launch
        self.tables_in[aligned] = tables
        return launch

    def _with_tables(self, aligned: bool, template: Launch, tables: DeviceTables, n: int) -> Launch:
        """`template` reading another (grown, or rebuilt) table cache; kept as the template."""
        words = template.params.copy()
        for i in range(n):
            words[_ADDRESSES[i][2]], words[_ADDRESSES[i][3]] = tables.cos_ptr, tables.sin_ptr
        words[_CAPACITY], words[_INV_FREQ] = tables.capacity, tables.inv_freq_ptr
        words[_FACTOR] = tables.factor
        template = Launch(*template[:6], words)
        self.launches[aligned], self.tables_in[aligned] = template, tables
        return template


_UNPLANNED: Any = object()
_new_launch = tuple.__new__  # what Launch(...) does, without its Python-level __new__
_INDEX = {name: i for i, name in enumerate(PARAM_FIELDS)}
_ADDRESSES = tuple(tuple(_INDEX[f"t{i}.{name}"] for name in ("x", "out", "cos", "sin"))
                   for i in range(2))  # fmt: skip
_POSITIONS = (_INDEX["positions0"], _INDEX["positions1"])
_OFFSET, _CAPACITY = _INDEX["position_offset"], _INDEX["capacity"]
_INV_FREQ, _FACTOR = _INDEX["inv_freq"], _INDEX["factor"]


def _kernel_spec(spec: object, head_dim: object, seq_len: object) -> RopeSpec | None:
    """`spec` (the default for None) when this path can serve it, else None."""
    if type(head_dim) is not int:
        return None
    if spec is None:
        spec = cached_default_spec(head_dim)  # None: an invalid head_dim, said by the general path
    if type(spec) is not RopeSpec or spec.head_dim != head_dim:
        return None
    if spec.xpos is not None or spec.sections is not None or spec.output_layout is not None:
        return None
    if seq_len is None:
        return None if length_dependent(spec) else spec
    value = _float(seq_len)
    return spec if value is not None and math.isfinite(value) and value > 0 else None


def _float(seq_len: object) -> float | None:
    """`seq_len` as a float when it is a Python int or float, else None."""
    return float(seq_len) if type(seq_len) in (int, float) else None  # type: ignore[arg-type]


def _seq_axis(seq_axis: object, ndim: int) -> int | None:
    if type(seq_axis) is not int or ndim < 2 or not -ndim <= seq_axis < ndim:
        return None
    axis = seq_axis % ndim
    return None if axis == ndim - 1 else axis


def _integer(offset: object) -> int | None:
    """`offset` as an int when it is an integer of magnitude below 2**53, else None."""
    if (type(offset) is float and offset.is_integer()) or isinstance(offset, np.integer):
        offset = int(offset)
    if type(offset) is not int or abs(offset) >= 2**53:
        return None
    return offset


def _lay_out(p: Desc, lead: tuple[int, ...], seq_axis: int) -> Desc | None:
    """Positions laid against x's leading axes by `rope_ref._core.positions.grid_axes`' rule.

    None when the grid does not fit (the general path raises the documented error).
    """
    try:
        axes = grid_axes(p.shape, lead, seq_axis)
    except ValueError:
        return None
    shape, strides = [1] * len(lead), [0] * len(lead)
    for size, stride, axis in zip(p.shape, p.strides, axes, strict=True):
        shape[axis], strides[axis] = size, stride if size > 1 else 0
    return Desc(p.ptr, tuple(shape), tuple(strides), p.dtype, p.itemsize)
