"""Public entry points: the adapter of x's array kind read once, then the engine's runner.

`apply_rope` and `apply_rope_qk` look up the adapter of x's type once
(`rope_ref._engine.kinds.kind_of`) and hand it the call; every adapter's road goes down
to `rope_ref._engine.runner` and never comes back here. The one exception to "hand it
the call" is NumPy's decoding call: the Numba kernel's short road, inline (see
`rope_ref._engine.kinds` for the roads of each kind).
"""

from __future__ import annotations

import numpy as np

from rope_ref._core.aliases import Array, BackendName, Form, Role
from rope_ref._core.laid_out import laid_out_positions
from rope_ref._core.spec import RopeSpec
from rope_ref._engine import runner
from rope_ref._engine.kinds import KIND_BY_TYPE, NUMPY, kind_of

#: `laid_out_positions` stays importable from here (the checker reads it).
__all__ = ["apply_rope", "apply_rope_qk", "laid_out_positions"]


def apply_rope(
    x: Array,
    /,
    spec: RopeSpec | None = None,
    positions: Array | None = None,
    *,
    offset: float = 0,
    seq_axis: int = -2,
    inverse: bool = False,
    seq_len: float | None = None,
    form: Form = "rotate_half",
    backend: BackendName = "reference",
    out: Array | None = None,
    role: Role | None = None,
) -> Array:
    r"""Rotate the features of `x` by their positions: rotary position embedding.

    Parameters
    ----------
    x : array
        Queries or keys, shape ``(..., head_dim)``, real floating dtype, any array-API
        namespace (NumPy, PyTorch, JAX, CuPy, Dask, array-api-strict); MLX arrays too
        (computed on the host, returned as MLX arrays of the same dtype).
    spec : RopeSpec, optional
        The embedding; ``RopeSpec(head_dim=x.shape[-1])`` (LLaMA defaults) when omitted.
    positions : array_like, optional
        Real positions. ``None`` means ``arange(x.shape[seq_axis])``. A 1-D array of length
        ``x.shape[seq_axis]`` is laid along `seq_axis`; HF-style ``(batch, seq)`` ids are
        read along axis 0 and `seq_axis` (never against the trailing axes when seq and
        heads happen to match; when they could also be a right-aligned grid, e.g. batch ==
        heads with `seq_axis` last, it raises: write ``positions[:, None, :]``); any other
        grid must broadcast to ``x.shape[:-1]`` (per-batch position ids, packed
        sequences, left padding). Multi-axis specs take a trailing axis of
        ``spec.n_axes``; positions of shape ``(n_axes,)`` for ``n_axes`` tokens could be
        one position per token or one for all, and raise.
    offset : float, default 0
        Added to every position (e.g. the KV-cache length while decoding): exactly for
        integers while the sum fits int64, else in float64; an overflow is a ValueError
        (see the Precision page).
    seq_axis : int, default -2
        Axis of `x` that indexes tokens; used when `positions` is None, 1-D or
        ``(batch, seq)``, and checked always (it must name an axis other than the last).
        -2 reads HF's ``(batch, heads, seq, head_dim)``; ``(batch, seq, heads, head_dim)``
        (torchtune, flash-attn) needs -3. A 4-D `x` without `seq_axis` is not a warning:
        both orders are common and the shape cannot tell them apart, but positions whose
        length fits another axis raise, naming the axis to pass.
    inverse : bool, default False
        Apply the transpose :math:`R^\top` (angles negated), which undoes the rotation and
        is what a backward pass applies to gradients. With an attention factor or xPos
        scale :math:`a \ne 1` the transpose keeps the scale, :math:`(aR)^\top = aR^\top`,
        as flash-attn's ``conjugate`` and vLLM's ``inverse`` do.
    seq_len : float, optional
        Sequence length for length-dependent scalings; defaults to ``max(positions) + 1``.
        A KV cache needs it explicitly, so that cached keys and new queries share one set
        of frequencies.
    form : {"rotate_half", "complex", "matrix"}, default "rotate_half"
        How the reference backend computes the rotation; all three agree to rounding.
    backend : {"reference", "numba", "cupy", "auto", "exact"}, default "reference"
        ``"reference"`` rotates in float64 and rounds once. ``"numba"`` takes NumPy
        arrays, PyTorch CPU tensors (autograd and ``torch.compile`` included) and JAX CPU
        arrays, on views of their memory. ``"cupy"`` takes CuPy arrays, PyTorch CUDA
        tensors (autograd and ``torch.compile`` included) and JAX GPU arrays. ``"auto"``
        picks a kernel for those (numba or cupy) when installed and when it takes x's
        dtype, else the reference. ``"exact"`` returns the real-number RoPE rounded once
        to x's dtype (correctly rounded; needs mpmath; see the Precision page).
    out : array, optional
        Output buffer for kernel backends; may be `x` itself (in-place).
    role : {"query", "key"}, optional
        Required when ``spec.xpos`` is set.

    Returns
    -------
    array
        Same namespace, device, dtype and shape as `x`.

    Raises
    ------
    TypeError
        If `x` is not a real floating array, or `positions`/`spec` have the wrong type.
    ValueError
        If shapes or values do not fit; the message names the parameter.
    ModuleNotFoundError
        If a kernel backend's optional dependency is missing.

    See Also
    --------
    apply_rope_qk : queries and keys in one call.
    rope_cos_sin : the tables used here.

    Notes
    -----
    For pair :math:`j` at position :math:`p`, with :math:`\phi = p\,\theta_j`,

    .. math::
        \begin{pmatrix} a' \\ b' \end{pmatrix} =
        \begin{pmatrix} \cos\phi & -\sin\phi \\ \sin\phi & \cos\phi \end{pmatrix}
        \begin{pmatrix} a \\ b \end{pmatrix},

    so that :math:`\langle R_m q, R_n k\rangle` depends on :math:`n - m` only [1]_.

    References
    ----------
    .. [1] J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding",
       arXiv:2104.09864 (2021).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> x = xp.ones((3, 4), dtype=xp.float64)       # 3 tokens, head_dim 4
    >>> y = rr.apply_rope(x)                         # positions 0, 1, 2
    >>> float(xp.max(xp.abs(rr.apply_rope(y, inverse=True) - x))) < 1e-15
    True
    >>> rr.apply_rope(x, positions=xp.asarray([5, 6, 7]), offset=-5)[0, :]
    Array([1., 1., 1., 1.], dtype=array_api_strict.float64)
    """
    if type(x) is np.ndarray:  # NumPy, the kind of the decoding calls timed in µs
        # the host road's short roads, inline: a decoding call is ~3 µs, a call frame 0.1 µs
        # of it; `runner.short_road_kernel` is the one predicate (`runner.short_road` too)
        kernel = runner.short_road_kernel(x, form, backend, role, out)
        if kernel is not None:
            if positions is None:
                result = runner.numpy_kernel_call(kernel, x, spec, offset, seq_axis, inverse,
                                                  seq_len, out)  # fmt: skip
            elif type(positions) is np.ndarray:
                result = runner.numpy_ids_call(kernel, x, spec, positions, offset, seq_axis,
                                               inverse, seq_len, out)  # fmt: skip
            else:
                result = None
            if result is not None:
                return result
        kind = NUMPY
    else:  # the adapter of x's array kind, looked up once by type (`kind_of`'s table, inline)
        kind = KIND_BY_TYPE.get(type(x)) or kind_of(x)
    return kind.apply(x, spec=spec, positions=positions, offset=offset, seq_axis=seq_axis,
                      inverse=inverse, seq_len=seq_len, form=form, backend=backend, out=out,
                      role=role)  # fmt: skip


def apply_rope_qk(
    q: Array,
    k: Array,
    /,
    spec: RopeSpec | None = None,
    positions: Array | None = None,
    *,
    k_positions: Array | None = None,
    offset: float = 0,
    seq_axis: int = -2,
    inverse: bool = False,
    seq_len: float | None = None,
    form: Form = "rotate_half",
    backend: BackendName = "reference",
) -> tuple[Array, Array]:
    """Rotate queries and keys with one set of frequencies.

    Parameters
    ----------
    q, k : array
        Queries and keys, shape ``(..., head_dim)``; they may differ in sequence length and
        number of heads (GQA).
    spec : RopeSpec, optional
        As for `apply_rope`.
    positions : array_like, optional
        Query positions. When both `positions` and `k_positions` are None, keys get
        ``offset + arange(k_len)`` and queries the *last* ``q_len`` of those positions
        (decoding against a KV cache); when only `positions` is given, keys share it.
    k_positions : array_like, optional
        Key positions.
    offset, seq_axis, inverse, form, backend
        As for `apply_rope`.
    seq_len : float, optional
        Shared by queries and keys; defaults to ``max(all positions) + 1``, so that
        length-dependent scalings rotate both with the same frequencies.

    Returns
    -------
    q_rot, k_rot : array

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> q = xp.ones((1, 4), dtype=xp.float64)          # one new query token
    >>> k = xp.ones((5, 4), dtype=xp.float64)          # five cached keys
    >>> q2, k2 = rr.apply_rope_qk(q, k)                # q at position 4
    >>> bool(xp.all(q2 == k2[4:, :]))
    True
    """
    return kind_of(q).apply_qk(q, k, spec=spec, positions=positions, k_positions=k_positions,
                               offset=offset, seq_axis=seq_axis, inverse=inverse,
                               seq_len=seq_len, form=form, backend=backend)  # fmt: skip
