"""The engine's runner: one checked call in, the chosen kernel run, the result out.

`rope_ref.apply_rope` and `apply_rope_qk` (`rope_ref._engine.api`) choose the road of an
array kind once; every road ends here, and nothing here calls back up:

- `host` runs a NumPy array: the Numba kernel's short roads (`rope_ref._engine.fast_path`,
  `rope_ref._engine.position_ids`) when they take the call, else `general`. The adapters of
  the array kinds that are read through NumPy views (PyTorch CPU tensors, JAX CPU arrays,
  MLX arrays, the torch custom operators' CPU implementation) take the same road on those views
  (`short_road`, else `general`).
- ``rope_ref.backends.cuda.call.run`` runs a CUDA array: the CUDA kernel's short road when
  it takes the call, else `general`.
- `general` (`general_qk`) checks every argument, builds or reads the float64 tables and
  hands them to the backend chosen for the array.

The kernels (``rope_ref.backends.*``) are loaded by name (`rope_ref._engine.dispatch`).
The layers: this module is below the kernels, which may import it; the public calls
(`rope_ref._engine.api`) and the adapters (`rope_ref._engine.kinds`, `cpu_arrays`,
`torch_views`, `jax_arrays`) are above them.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from types import ModuleType
from typing import Any

import array_api_compat
import numpy as np

from rope_ref._core import reference
from rope_ref._core.aliases import FORMS, Array, ArrayNamespace, BackendName, Form, Role
from rope_ref._core.compat import (
    array_namespace,
    device,
    dtype_name,
    has_float64,
    host_namespace,
    is_cuda_array,
    is_real_floating,
    records_grad,
)
from rope_ref._core.defaults import default_spec
from rope_ref._core.foreign import is_mlx_array
from rope_ref._core.frequencies import (
    check_seq_len,
    inferred_seq_len,
    max_plus_one,
    move_tables,
    tables,
)
from rope_ref._core.laid_out import laid_out_positions
from rope_ref._core.positions import (
    as_positions,
    check_offset,
    default_positions,
    grid_axes,
    normalize_seq_axis,
)
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import (
    check_axis,
    check_bool,
    check_choice,
    check_dense,
    check_known_shape,
    check_not_masked,
)
from rope_ref._engine.call import Call
from rope_ref._engine.dispatch import (
    BACKENDS,
    KERNEL_DTYPES,
    QK_KERNELS,
    load_backend,
    unusable_reason,
)
from rope_ref._engine.fast_path import numpy_kernel_call
from rope_ref._engine.position_ids import numpy_ids_call
from rope_ref._engine.table_cache import positions_key, table_cache

__all__ = [
    "check_x",
    "general",
    "general_qk",
    "host",
    "host_call",
    "immutable_kind",
    "kind_called",
    "numpy_ids_call",
    "numpy_kernel_call",
    "refuse_out",
    "resolve_spec",
    "rotate",
    "rotate_qk",
    "short_road",
    "short_road_kernel",
]


def host(
    x: np.ndarray,
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
    """`apply_rope` of NumPy array `x`: the Numba kernel's short roads, else `general`."""
    result = short_road(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                        inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                        role=role)  # fmt: skip
    if result is not None:
        return result
    return general(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                   inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                   role=role)  # fmt: skip


def short_road(
    x: np.ndarray,
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
) -> Any | None:
    """`host`'s short roads alone: the Numba kernel's result, or None (nothing checked)."""
    kernel = short_road_kernel(x, form, backend, role, out)
    if kernel is not None:
        if positions is None:
            return numpy_kernel_call(kernel, x, spec, offset, seq_axis, inverse, seq_len, out)
        if type(positions) is np.ndarray:  # position ids: small ones take a short road
            return numpy_ids_call(kernel, x, spec, positions, offset, seq_axis, inverse,
                                  seq_len, out)  # fmt: skip
    return None


def short_road_kernel(
    x: object, form: object, backend: object, role: object, out: object
) -> ModuleType | None:
    """The one predicate of NumPy's short roads: the Numba kernel when they may take the call.

    They may when `x` is a plain NumPy array, the call has no `role` and the form is
    ``"rotate_half"``, `out` is None or a NumPy array (anything else is refused by the
    general path), `backend` is ``"numba"`` or ``"auto"`` and the kernel loads; the
    short roads themselves then decline what they do not fully understand (returning None).
    `short_road` and `rope_ref.apply_rope` (which inlines the roads, one call frame less)
    both ask it.
    """
    if (
        role is None
        and form == "rotate_half"
        and type(x) is np.ndarray
        and (out is None or isinstance(out, np.ndarray))
        and backend in ("numba", "auto")
    ):
        try:
            return load_backend("numba")
        except (ModuleNotFoundError, RuntimeError):  # not installed, or cannot run here
            return None
    return None


def general(
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
    """`apply_rope` of any array-API array: every argument checked, tables, the backend."""
    call = Call(
        spec=spec,
        positions=positions,
        offset=offset,
        seq_axis=seq_axis,
        inverse=inverse,
        seq_len=seq_len,
        form=form,
        backend=backend,
        out=out,
        role=role,
    )
    return rotate(x, call)


def rotate(x: Any, call: Call) -> Any:
    """`general` of one `Call`: every argument checked, tables, the backend."""
    xp = check_x(x, "x")
    spec = resolve_spec(call.spec, x)
    form = check_choice("form", call.form, FORMS)
    name = _resolve_backend(check_choice("backend", call.backend, BACKENDS), x)
    inverse = check_bool("inverse", call.inverse)
    _check_kernel_options(name, form, call.out, immutable_kind(x))
    _check_kernel_dtype(name, x, "x")
    if name == "exact":  # correctly rounded from the positions: no float64 tables
        return load_backend(name).apply(
            x, spec, call.positions, offset=call.offset, seq_axis=call.seq_axis,
            inverse=inverse, seq_len=call.seq_len, role=call.role, out=call.out, xp=xp,
        )  # fmt: skip
    cos, sin = _tables_for(x, spec, call, xp=xp, dtype=_table_dtype(name, x, xp))
    if name == "reference":
        return reference.rotate(
            x,
            cos,
            sin,
            layout=spec.layout,
            rotary_start=spec.rotary_start,
            inverse=inverse,
            form=form,
            xp=xp,
            output_layout=spec.output_layout,
        )
    _check_out_is_array(call.out, x)
    return load_backend(name).rotate(
        x,
        cos,
        sin,
        layout=spec.layout,
        rotary_start=spec.rotary_start,
        inverse=inverse,
        out=call.out,
        **_written(spec),
    )


def general_qk(
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
    """`apply_rope_qk` of any array-API arrays: one kernel launch where the kernel has one."""
    call = Call(
        spec=spec,
        positions=positions,
        offset=offset,
        seq_axis=seq_axis,
        inverse=inverse,
        seq_len=seq_len,
        form=form,
        backend=backend,
        k_positions=k_positions,
    )
    return rotate_qk(q, k, call)


def rotate_qk(q: Any, k: Any, call: Call) -> tuple[Any, Any]:
    """`general_qk` of one `Call`: the queries' and the keys' calls, then one launch or two."""
    xp = check_x(q, "q")
    if check_x(k, "k") is not xp:
        msg = f"`k` must be in the namespace of `q`; got {type(k).__name__}."
        raise TypeError(msg)
    spec = resolve_spec(call.spec, q, "q")
    if k.shape[-1] != spec.head_dim:
        msg = f"`k` must have head_dim = {spec.head_dim} features; got shape {tuple(k.shape)}."
        raise ValueError(msg)
    positions, k_positions, offset = call.positions, call.k_positions, call.offset
    if k_positions is not None:
        _check_key_positions(k_positions, k, spec, call.seq_axis)
    if positions is None:
        q_len = q.shape[normalize_seq_axis(call.seq_axis, q.ndim, "q")]
        # where apply_rope would make default positions: on k's device if it has float64,
        # else on the host (int32 or float32 positions would wrap or round)
        dev = device(k)
        pxp, pdev = (xp, dev) if has_float64(xp, dev) else (host_namespace(), None)
        if k_positions is None:
            k_len = k.shape[normalize_seq_axis(call.seq_axis, k.ndim, "k")]
            k_positions = default_positions(
                k_len, check_offset(offset), xp=pxp, dev=pdev, n_axes=spec.position_axes
            )
            offset = 0
        else:
            pxp, pdev = xp, dev
        positions = _newest(k_positions, q_len, spec, xp=pxp, dev=pdev)
    elif k_positions is None:
        k_positions = positions
    seq_len = call.seq_len
    if seq_len is None and (spec.scaling is not None or spec.xpos is not None):
        seq_len = _joint_seq_len(spec, positions, k_positions, offset)
    xpos = spec.xpos is not None
    shared = call.but(spec=spec, offset=offset, seq_len=seq_len, out=None, k_positions=None)
    q_call = shared.but(positions=positions, role="query" if xpos else None)
    k_call = shared.but(positions=k_positions, role="key" if xpos else None)
    name = _resolve_backend(check_choice("backend", call.backend, BACKENDS), q)
    if name in QK_KERNELS:
        return _kernel_qk(name, q, k, q_call, k_call, xp)
    if isinstance(q, np.ndarray):  # the host road, each (its short roads included)
        return host_call(q, q_call), host_call(k, k_call)
    return rotate(q, q_call), rotate(k, k_call)


def host_call(x: np.ndarray, call: Call) -> Any:
    """`host` of one `Call`: the Numba kernel's short roads, else `rotate` of the call."""
    result = short_road(
        x,
        spec=call.spec,
        positions=call.positions,
        offset=call.offset,
        seq_axis=call.seq_axis,
        inverse=call.inverse,
        seq_len=call.seq_len,
        form=call.form,
        backend=call.backend,
        out=call.out,
        role=call.role,
    )
    return rotate(x, call) if result is None else result


def check_x(x: Array, name: str) -> ArrayNamespace:
    if not array_api_compat.is_array_api_obj(x):
        msg = f"`{name}` must be an array; got {type(x).__name__}."
        raise TypeError(msg)
    check_not_masked(name, x)
    check_dense(name, x)
    xp = array_namespace(x, name=name)
    if not is_real_floating(xp, x.dtype):
        msg = f"`{name}` must have a real floating dtype; got {x.dtype}."
        raise TypeError(msg)
    if x.ndim == 0:
        msg = f"`{name}` must have a feature axis; got a 0-d array."
        raise ValueError(msg)
    check_known_shape(name, x)
    return xp


def resolve_spec(spec: RopeSpec | None, x: Array, name: str = "x") -> RopeSpec:
    if spec is None:
        return default_spec(x.shape[-1], name, tuple(x.shape))
    spec = check_spec(spec)
    if x.shape[-1] != spec.head_dim:
        msg = (
            f"`{name}` must have spec.head_dim = {spec.head_dim} features on its last axis; "
            f"got shape {tuple(x.shape)}."
        )
        raise ValueError(msg)
    return spec


def _tables_for(
    x: Array, spec: RopeSpec, call: Call, *, xp: ArrayNamespace, dtype: object | None
) -> tuple[Array, Array]:
    """Validated positions laid out against x, then float64 cos/sin of the grid.

    Where x's namespace or device has no float64, positions stay on the host (NumPy int64 /
    float64) and only the finished tables move, rounded once to float32. The tables are
    then cast to `dtype` (None keeps them). For NumPy arrays, tables are cached by value
    (see `rope_ref._engine.table_cache`), so repeated calls on the same positions skip building.
    """

    def build() -> tuple[Array, Array]:
        cos, sin = _build_tables(x, spec, call, xp=xp)
        if dtype is None or cos.dtype == dtype:
            return cos, sin
        return xp.astype(cos, dtype), xp.astype(sin, dtype)

    if not array_api_compat.is_numpy_namespace(xp):
        return build()
    # What the key holds is validated first: a cache hit must refuse what a miss refuses.
    checked = call.but(
        offset=check_offset(call.offset),
        seq_axis=check_axis("seq_axis", call.seq_axis),
        seq_len=check_seq_len(call.seq_len),
    )
    if not (call.positions is None or _plain_real_array(call.positions)):
        return build()  # Python sequences, object arrays, masked arrays: validated there
    key = _cache_key(x, spec, checked, dtype)
    return build() if key is None else table_cache.get_or_build(key, build)


def _plain_real_array(positions: object) -> bool:
    """Whether `positions` is a plain NumPy array of integers or reals (keyable by bytes)."""
    return type(positions) is np.ndarray and positions.dtype.kind in "iuf"


def _cache_key(x: Array, spec: RopeSpec, call: Call, dtype: object) -> Hashable | None:
    """Everything that shapes the tables, by value; None when something cannot be keyed."""
    p_key = positions_key(call.positions)
    if p_key is None:
        return None
    offset = call.offset
    key = (spec, p_key, type(offset), offset, call.seq_axis, tuple(x.shape[:-1]), call.seq_len,
           call.role, dtype)  # fmt: skip
    try:
        hash(key)
    except TypeError:  # e.g. a user scaling rule that is not hashable
        return None
    return key


def _build_tables(
    x: Array, spec: RopeSpec, call: Call, *, xp: ArrayNamespace
) -> tuple[Array, Array]:
    p, pxp = laid_out_positions(
        x, spec, call.positions, offset=call.offset, seq_axis=call.seq_axis, xp=xp
    )
    cos, sin = tables(spec, p, xp=pxp, seq_len=call.seq_len, role=call.role)
    return (cos, sin) if pxp is xp else move_tables(cos, sin, xp=xp, dev=device(x))


def _check_key_positions(k_positions: Array, k: Array, spec: RopeSpec, seq_axis: object) -> None:
    """Raise naming `k_positions` if they are not positions, or do not fit `k`."""
    p = as_positions(k_positions, n_axes=spec.position_axes, name="k_positions")
    grid = tuple(p.shape[: p.ndim - (0 if spec.sections is None else 1)])
    lead = tuple(k.shape[:-1])
    try:
        grid_axes(grid, lead, normalize_seq_axis(check_axis("seq_axis", seq_axis), k.ndim, "k"))
    except ValueError as err:  # grid_axes speaks of `positions` against x
        msg = str(err).replace("`positions`", "`k_positions`").replace("x.shape", "k.shape")
        raise ValueError(msg) from None


def _newest(
    k_positions: Array, q_len: int, spec: RopeSpec, *, xp: ArrayNamespace, dev: object
) -> Array:
    """The last `q_len` key positions along the last grid axis: the queries' positions."""
    p = as_positions(k_positions, xp=xp, dev=dev, n_axes=spec.position_axes)
    grid_ndim = p.ndim - (0 if spec.sections is None else 1)
    if grid_ndim == 0 or p.shape[grid_ndim - 1] < q_len:
        msg = (
            f"`q` must not have more tokens ({q_len}) than there are key positions when "
            "query positions are omitted (tokens along `seq_axis`); got key positions of "
            f"shape {tuple(p.shape)}."
        )
        raise ValueError(msg)
    start = p.shape[grid_ndim - 1] - q_len
    index = (slice(None),) * (grid_ndim - 1) + (slice(start, None),)
    return p[index]


def _joint_seq_len(spec: RopeSpec, q_pos: Array, k_pos: Array, offset: float) -> float:
    """``max(all query and key positions) + offset + 1``: one seq_len for q and k."""
    arrays = [as_positions(p, n_axes=spec.position_axes) for p in (q_pos, k_pos)]
    tops = [max_plus_one(p, array_namespace(p)) for p in arrays if 0 not in p.shape]
    shift = float(check_offset(offset))
    # no positions: nothing to rotate, and 1.0 as apply_rope's max(positions) + 1 of none
    return inferred_seq_len(max(tops) + shift) if tops else 1.0


def _kernel_qk(
    name: str, q: Array, k: Array, q_call: Call, k_call: Call, xp: ArrayNamespace
) -> tuple[Array, Array]:
    """Queries and keys through a kernel's ``rotate_qk`` (one launch for both)."""
    spec = q_call.spec
    assert spec is not None  # resolved by `rotate_qk`
    form = check_choice("form", q_call.form, FORMS)
    inverse = check_bool("inverse", q_call.inverse)
    _check_kernel_options(name, form, None, None)
    _check_kernel_dtype(name, q, "q")
    _check_kernel_dtype(name, k, "k")
    (cq, sq), (ck, sk) = (
        _tables_for(a, spec, c, xp=xp, dtype=_table_dtype(name, a, xp))
        for a, c in ((q, q_call), (k, k_call))
    )
    q_rot, k_rot = load_backend(name).rotate_qk(
        q, k, cq, sq, ck, sk, layout=spec.layout, rotary_start=spec.rotary_start, inverse=inverse,
        **_written(spec),
    )  # fmt: skip
    return q_rot, k_rot


def _written(spec: RopeSpec) -> dict[str, str]:
    """``output_layout`` for a kernel, only when the spec writes pairs in another layout."""
    return {} if spec.output_layout is None else {"output_layout": spec.output_layout}


def refuse_out(
    x: Any,
    kind: str,
    *,
    spec: RopeSpec | None,
    form: Form,
    backend: BackendName,
    inverse: bool,
) -> None:
    """Raise as `general` does for an `out` given with an array of immutable `kind`.

    `x` is the array read on the host; what `general` checks before `out` is checked first.
    """
    check_x(x, "x")
    resolve_spec(spec, x)
    form = check_choice("form", form, FORMS)
    name = _resolve_backend(check_choice("backend", backend, BACKENDS), x)
    check_bool("inverse", inverse)
    _check_kernel_options(name, form, x, kind)


def immutable_kind(a: object) -> str | None:
    """``"JAX"`` or ``"MLX"`` for an array of a kind that cannot be written, else None."""
    if is_mlx_array(a):
        return "MLX"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(a, jax.Array):
        return "JAX"
    return None


def _check_kernel_options(name: str, form: Form, out: Array | None, immutable: str | None) -> None:
    """`out` and `form` against the backend; `immutable`: x's kind when it cannot be written."""
    if out is not None and immutable is not None:
        msg = f"`out` must be None for {immutable} arrays (they are immutable); got an array."
        raise TypeError(msg)
    if name == "reference":
        if out is not None:
            msg = "`out` is supported by the kernel backends ('numba', 'cupy') only; got an array."
            raise ValueError(msg)
    elif form != "rotate_half":
        msg = f"`form` applies to backend='reference' only; got form={form!r} with {name!r}."
        raise ValueError(msg)


def _check_out_is_array(out: object, x: Array) -> None:
    """TypeError naming x's kind when `out` is given and is no array at all.

    Checked last, just before the kernel runs, so that every other mistake is reported
    first; the adapters of the array kinds that check `out` themselves (PyTorch tensors)
    raise the same error, of the same form.
    """
    if out is not None and not array_api_compat.is_array_api_obj(out):
        called = kind_called(x)
        msg = f"`out` must be {called} for {called} `x`; got {type(out).__name__}."
        raise TypeError(msg)


def kind_called(x: object) -> str:
    """The array kind of `x` as messages name it: ``"a NumPy array"``, ``"a torch tensor"``."""
    if array_api_compat.is_numpy_array(x):
        return "a NumPy array"
    if array_api_compat.is_torch_array(x):
        return "a torch tensor"
    if array_api_compat.is_cupy_array(x):
        return "a CuPy array"
    if array_api_compat.is_jax_array(x):
        return "a JAX array"
    return f"an array of {type(x).__module__.split('.')[0]}"


def _check_kernel_dtype(name: str, x: Array, what: str) -> None:
    """TypeError naming the backend when its kernel does not take x's dtype."""
    dtypes = KERNEL_DTYPES.get(name)
    if dtypes is not None and dtype_name(x.dtype) not in dtypes:
        msg = f"`{what}` must be one of {', '.join(dtypes)} for backend={name!r}; got {x.dtype}."
        raise TypeError(msg)


def _table_dtype(name: str, x: Array, xp: ArrayNamespace) -> object | None:
    """The dtype of a backend's tables: None (as built) for the reference, else the kernel's.

    Kernels compute in float64 for float64 `x` and in float32 otherwise.
    """
    if name == "reference":
        return None
    dtype: object = xp.float64 if x.dtype == xp.float64 else xp.float32
    return dtype


def _resolve_backend(backend: str, x: Array) -> str:
    """The backend for `x`: `backend` itself unless "auto".

    "auto" picks numba for plain NumPy arrays (not subclasses such as memmap, nor
    byte-swapped dtypes; PyTorch CPU tensors and JAX CPU arrays reach it before, through
    `rope_ref._engine.cpu_arrays`) and the CUDA kernel for CuPy arrays, PyTorch CUDA
    tensors and JAX GPU arrays, when installed and when the kernel takes x's dtype (and, for
    a CUDA tensor that records gradients, never: such calls reach the CUDA kernel before,
    through its custom operator, and those it does not take are the reference's);
    otherwise the reference.
    """
    if backend != "auto":
        return backend
    if array_api_compat.is_numpy_array(x):
        if type(x) is not np.ndarray or not x.dtype.isnative:  # memmap, byte-swapped, ...
            return "reference"
        kernel = "numba"
    elif is_cuda_array(x) and not records_grad(x):
        kernel = "cupy"
    else:
        return "reference"
    if dtype_name(x.dtype) in KERNEL_DTYPES[kernel] and unusable_reason(kernel) is None:
        return kernel
    return "reference"
