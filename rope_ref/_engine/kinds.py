"""One adapter per array kind, looked up once by type: how the engine reads that kind.

`rope_ref.apply_rope` and `apply_rope_qk` read the adapter of x's type once
(`kind_of`: a dict keyed by ``type(x)``, filled on first sight, as einops' backend
table) and hand the call to its `~ArrayKind.apply` / `~ArrayKind.apply_qk`; each road
goes down to the engine's runner (`rope_ref._engine.runner`) and never comes back up.

The built-in kinds:

- NumPy arrays: the runner's host road (the Numba kernel's short roads, else the general
  path); with ``backend="cupy"`` or ``"auto"``, the CUDA arrays' road (a NumPy array
  stands in for a device array in the CUDA kernel's host emulation).
- PyTorch tensors and concrete JAX arrays: on the CPU with ``backend="numba"`` or
  ``"auto"``, `rope_ref._engine.cpu_arrays` (NumPy views of their memory, or the torch
  custom operators for autograd and ``torch.compile``); on a GPU with ``"cupy"`` or
  ``"auto"``, the CUDA arrays' road (``rope_ref.backends.cuda.road``); else the
  general path. JAX arrays are immutable: `out` is refused.
- MLX arrays: a `HostKind` (read on the host, the result wrapped back, immutable).
- Anything else (CuPy, Dask, array-api-strict, ...): the CUDA arrays' road with
  ``"cupy"`` or ``"auto"``, else the general path, which takes any array-API array.

A new array kind whose memory NumPy can read is one `HostKind` subclass and one call of
`register` (see "Adding an array kind" in the docs' index).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

from rope_ref._core.aliases import BackendName, Form, Role
from rope_ref._core.foreign import compute_array, to_mlx
from rope_ref._core.spec import RopeSpec
from rope_ref._engine import cpu_arrays
from rope_ref._engine.runner import general, general_qk, host, refuse_out
from rope_ref._engine.torch_views import compiling

__all__ = ["KIND_BY_TYPE", "NUMPY", "ArrayKind", "HostKind", "kind_of", "register"]


def cpu_backend(backend: object) -> bool:
    """Whether `backend` names a CPU kernel choice (``"numba"`` or ``"auto"``)."""
    return type(backend) is str and backend in ("numba", "auto")


def cuda_backend(backend: object) -> bool:
    """Whether `backend` names a CUDA kernel choice (``"cupy"`` or ``"auto"``)."""
    return type(backend) is str and backend in ("cupy", "auto")


class ArrayKind:
    """How the engine takes one kind of array (the base: any array-API array).

    Attributes
    ----------
    called : str
        The kind as messages name it (``"a NumPy array"``).
    immutable : str or None
        The kind's name when its arrays cannot be written (`out` is refused), else None.
    """

    called = "an array"
    immutable: str | None = None

    def apply(
        self,
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
        """``apply_rope`` of `x`: the CUDA arrays' road for CUDA backends, else the general path.

        The arguments are those of ``apply_rope``, as given: plain parameters, so that a
        decoding call builds no value on its way down.
        """
        if cuda_backend(backend):
            return cuda_road().run(x, spec=spec, positions=positions, offset=offset,
                                   seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                                   form=form, backend=backend, out=out, role=role)  # fmt: skip
        return general(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                       inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                       role=role)  # fmt: skip

    def apply_qk(
        self,
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
        """``apply_rope_qk`` of `q` (this kind) and `k`."""
        if cuda_backend(backend):
            return cuda_road().run_qk(q, k, spec=spec, positions=positions,  # type: ignore[no-any-return]
                                      k_positions=k_positions, offset=offset, seq_axis=seq_axis,
                                      inverse=inverse, seq_len=seq_len, form=form,
                                      backend=backend)  # fmt: skip
        return general_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                          offset=offset, seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                          form=form, backend=backend)  # fmt: skip


class _NumPy(ArrayKind):
    """NumPy arrays: the runner's host road, or the CUDA road's host emulation."""

    called = "a NumPy array"

    def apply(
        self,
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
        if cuda_backend(backend):
            return super().apply(x, spec=spec, positions=positions, offset=offset,
                                 seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form=form,
                                 backend=backend, out=out, role=role)  # fmt: skip
        return host(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                    inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                    role=role)  # fmt: skip


class _CpuViewed(ArrayKind):
    """PyTorch tensors and JAX arrays: NumPy views on the CPU, else the base's roads."""

    def apply(
        self,
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
        if isinstance(backend, str) and backend in ("numba", "auto"):  # `cpu_backend`, inline
            result = cpu_arrays.apply(x, spec=spec, positions=positions, offset=offset,
                                      seq_axis=seq_axis, inverse=inverse, seq_len=seq_len,
                                      form=form, backend=backend, out=out, role=role)  # fmt: skip
            if result is not None:
                return result
        return super().apply(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                             inverse=inverse, seq_len=seq_len, form=form, backend=backend,
                             out=out, role=role)  # fmt: skip

    def apply_qk(
        self,
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
        if cpu_backend(backend):
            pair = cpu_arrays.apply_qk(q, k, spec=spec, positions=positions,
                                       k_positions=k_positions, offset=offset, seq_axis=seq_axis,
                                       inverse=inverse, seq_len=seq_len, form=form,
                                       backend=backend)  # fmt: skip
            if pair is not None:
                return pair
        return super().apply_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                                offset=offset, seq_axis=seq_axis, inverse=inverse,
                                seq_len=seq_len, form=form, backend=backend)  # fmt: skip


class _Torch(_CpuViewed):
    called = "a torch tensor"


class _Jax(_CpuViewed):
    called = "a JAX array"
    immutable = "JAX"


class HostKind(ArrayKind):
    """A kind read through NumPy on the host: view in, the host road, wrapped back out.

    Subclass it with `host_view` and `wrap` (and `out_view` for a kind that can be
    written, or `immutable` for one that cannot), then `register` the array type.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> class Boxed:  # a toy array kind: an ndarray in a box
    ...     def __init__(self, data): self.data = data
    >>> class BoxedKind(HostKind):
    ...     called = "a Boxed array"
    ...     def host_view(self, a): return a.data
    ...     def wrap(self, result, like): return Boxed(result)
    >>> register(Boxed, BoxedKind())
    >>> y = rr.apply_rope(Boxed(np.ones((3, 4))))
    >>> type(y).__name__, y.data[0].tolist()
    ('Boxed', [1.0, 1.0, 1.0, 1.0])
    """

    def host_view(self, a: Any) -> np.ndarray:
        """A NumPy array of `a`'s values (a view of its memory where the kind allows)."""
        raise NotImplementedError

    def out_view(self, out: Any) -> np.ndarray:
        """The NumPy view that the kernel writes for `out` (an array of this kind)."""
        return self.host_view(out)

    def wrap(self, result: np.ndarray, like: Any) -> Any:
        """`result` as an array of this kind, like `like` (the array it was computed from)."""
        raise NotImplementedError

    def _host(self, a: Any) -> Any:
        """`a` read on the host when it is of this kind; anything else as it is."""
        return a if a is None or kind_of(a) is not self else self.host_view(a)

    def apply(
        self,
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
        view = self.host_view(x)
        out_view = None
        if out is not None:
            if self.immutable is not None:
                refuse_out(view, self.immutable, spec=spec, form=form, backend=backend,
                           inverse=inverse)  # fmt: skip
            if kind_of(out) is not self:  # what is checked before `out` is reported first
                host(view, spec=spec, positions=self._host(positions), offset=offset,
                     seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form=form,
                     backend=backend, out=None, role=role)  # fmt: skip
                got = type(out).__name__
                msg = f"`out` must be {self.called} for {self.called} `x`; got {got}."
                raise TypeError(msg)
            out_view = self.out_view(out)
        result = host(view, spec=spec, positions=self._host(positions), offset=offset,
                      seq_axis=seq_axis, inverse=inverse, seq_len=seq_len, form=form,
                      backend=backend, out=out_view, role=role)  # fmt: skip
        return out if out is not None else self.wrap(result, x)

    def apply_qk(
        self,
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
        q_rot, k_rot = general_qk(
            self.host_view(q), self._host(k), spec=spec, positions=self._host(positions),
            k_positions=self._host(k_positions), offset=offset, seq_axis=seq_axis,
            inverse=inverse, seq_len=seq_len, form=form, backend=backend,
        )  # fmt: skip
        return self.wrap(q_rot, q), (self.wrap(k_rot, k) if kind_of(k) is self else k_rot)


class _Mlx(HostKind):
    """MLX arrays (``mlx.core.array``): read on the host, bfloat16 as float64, immutable."""

    called = "an MLX array"
    immutable = "MLX"

    def host_view(self, a: Any) -> np.ndarray:
        return compute_array(a)

    def wrap(self, result: np.ndarray, like: Any) -> Any:
        return to_mlx(result, like)


NUMPY: ArrayKind = _NumPy()
_ARRAY_API = ArrayKind()
_TORCH = _Torch()
_JAX = _Jax()
_MLX = _Mlx()

#: type -> its adapter, filled on first sight (and by `register`).
KIND_BY_TYPE: dict[type, ArrayKind] = {np.ndarray: NUMPY}
#: types registered by `register`, which `_classify` checks first (subclasses included).
_registered: dict[type, ArrayKind] = {}


def kind_of(x: object) -> ArrayKind:
    """The adapter of `x`'s type, looked up once per type.

    Examples
    --------
    >>> import numpy as np
    >>> kind_of(np.zeros(2)).called
    'a NumPy array'
    """
    kind = type(x)
    found = KIND_BY_TYPE.get(kind)
    if found is None:
        found = _classify(kind)
        if not compiling():  # torch.compile traces without side effects on the caches
            KIND_BY_TYPE[kind] = found
    return found


def register(array_type: object, kind: object) -> None:
    """Take arrays of `array_type` (and its subclasses) through adapter `kind` from now on.

    Raises
    ------
    TypeError
        If `array_type` is not a class or `kind` is not an `ArrayKind`.
    """
    if not isinstance(array_type, type):
        msg = f"`array_type` must be a class; got {type(array_type).__name__}."
        raise TypeError(msg)
    if not isinstance(kind, ArrayKind):
        msg = f"`kind` must be an ArrayKind; got {type(kind).__name__}."
        raise TypeError(msg)
    _registered[array_type] = kind
    KIND_BY_TYPE.clear()  # subclasses seen before are classified again
    KIND_BY_TYPE[np.ndarray] = NUMPY


def _classify(kind: type) -> ArrayKind:
    for base in kind.__mro__:  # the nearest registered class: a subclass may have its own
        adapter = _registered.get(base)
        if adapter is not None:
            return adapter
    if issubclass(kind, np.ndarray):
        return NUMPY
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(kind, torch.Tensor):
        return _TORCH
    jax = sys.modules.get("jax")
    if jax is not None and issubclass(kind, jax.Array) and kind.__name__ == "ArrayImpl":
        return _JAX
    if kind.__name__ == "array" and kind.__module__.startswith("mlx"):
        return _MLX
    return _ARRAY_API


def cuda_road() -> ModuleType:
    """The CUDA arrays' road (``rope_ref.backends.cuda.road``; imports no CuPy).

    Kept in `_CUDA_ROAD` rather than by `functools.cache` and `importlib`, which
    ``torch.compile`` cannot trace.
    """
    if not _CUDA_ROAD:
        from rope_ref.backends.cuda import road  # type: ignore[import-not-found,unused-ignore]

        _CUDA_ROAD.append(road)
    return _CUDA_ROAD[0]


_CUDA_ROAD: list[ModuleType] = []
