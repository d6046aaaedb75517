r"""Reference attention with RoPE: softmax attention and RoPE in linear attention.

Both take arrays of any array-API namespace (NumPy, PyTorch, JAX, CuPy, Dask,
array-api-strict), compute in float64 where the namespace has it, and round once to the
result dtype of the inputs. They are references for tests and teaching, not fast kernels.

Shapes: ``q`` is ``(..., q_len, head_dim)``, ``k`` is ``(..., k_len, head_dim)`` and ``v``
is ``(..., k_len, v_dim)``, with broadcastable leading axes. Positions follow
`rope_ref.apply_rope_qk`: by default keys sit at ``0 .. k_len - 1`` and queries at the last
``q_len`` of those; with `positions` given, queries and keys share it. ``causal=True``
lets query ``i`` see keys ``0 .. i + k_len - q_len`` (sequence order, queries aligned with
the newest keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, TypeAlias

from rope_ref._core.aliases import Array, ArrayNamespace
from rope_ref._core.compat import array_namespace, compute_dtype, device, is_real_floating
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_bool, check_choice
from rope_ref._engine.api import apply_rope_qk

__all__ = ["linear_attention", "softmax_attention"]

#: Named feature maps of `linear_attention`.
FeatureMap: TypeAlias = Literal["elu1", "relu"]
FEATURE_MAPS: tuple[FeatureMap, ...] = ("elu1", "relu")


def _inputs(
    q: Array, k: Array, v: Array, spec: RopeSpec | None, *, causal: bool
) -> tuple[ArrayNamespace, RopeSpec, Array, Array, Array, object]:
    """Validate; return the namespace, the spec, q/k/v in the compute dtype, the out dtype."""
    check_bool("causal", causal)
    xp = array_namespace(q, k, v, name="q, k, v")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if not is_real_floating(xp, a.dtype):
            msg = f"`{name}` must have a real floating dtype; got {a.dtype}."
            raise TypeError(msg)
        if a.ndim < 2:
            msg = f"`{name}` must have at least 2 axes (tokens, features); got shape {a.shape}."
            raise ValueError(msg)
    spec = RopeSpec(head_dim=q.shape[-1]) if spec is None else check_spec(spec)
    if q.shape[-1] != spec.head_dim or k.shape[-1] != spec.head_dim:
        msg = (
            f"`q` and `k` must have head_dim = {spec.head_dim} features; got shapes "
            f"{tuple(q.shape)} and {tuple(k.shape)}."
        )
        raise ValueError(msg)
    if v.shape[-2] != k.shape[-2]:
        msg = f"`v` must have one row per key ({k.shape[-2]}); got shape {tuple(v.shape)}."
        raise ValueError(msg)
    out_dtype = xp.result_type(q, k, v)
    work = compute_dtype(xp, device(q))
    if causal and q.shape[-2] > k.shape[-2]:
        msg = (
            f"`q` must not have more tokens than `k` when causal=True; got {q.shape[-2]} "
            f"queries and {k.shape[-2]} keys."
        )
        raise ValueError(msg)
    return xp, spec, xp.astype(q, work), xp.astype(k, work), xp.astype(v, work), out_dtype


def _causal_mask(xp: ArrayNamespace, q_len: int, k_len: int, dev: object) -> Array:
    """``mask[i, j]``: query i may see key j (keys up to ``i + k_len - q_len``)."""
    rows = xp.arange(q_len, device=dev)[:, None] + (k_len - q_len)
    return xp.arange(k_len, device=dev)[None, :] <= rows


def softmax_attention(
    q: Array,
    k: Array,
    v: Array,
    /,
    spec: RopeSpec | None = None,
    positions: Array | None = None,
    *,
    causal: bool = False,
) -> Array:
    r"""Scaled dot-product attention on RoPE-rotated queries and keys.

    :math:`o_m = \sum_n a_{mn} v_n` with :math:`a_{mn} = \operatorname{softmax}_n\big(
    (R_m q_m)^\top (R_n k_n)/\sqrt{d}\big)`; the score depends on positions only through
    :math:`n - m`.

    Parameters
    ----------
    q, k, v : array
        Queries ``(..., q_len, head_dim)``, keys ``(..., k_len, head_dim)`` and values
        ``(..., k_len, v_dim)``, real floating, one namespace.
    spec : RopeSpec, optional
        The embedding; ``RopeSpec(head_dim=q.shape[-1])`` when omitted.
    positions : array_like, optional
        Token positions shared by queries and keys (as in `rope_ref.apply_rope_qk`).
    causal : bool, default False
        Mask keys after each query (in sequence order, queries aligned with the last keys).

    Returns
    -------
    array
        ``(..., q_len, v_dim)`` in the result dtype of the inputs; computed in float64
        where available.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> q = k = xp.ones((3, 4), dtype=xp.float64)
    >>> v = xp.reshape(xp.arange(3, dtype=xp.float64), (3, 1))
    >>> out = rr.attention.softmax_attention(q, k, v, causal=True)
    >>> float(out[0, 0])  # the first token sees only itself
    0.0
    """
    xp, spec, qw, kw, vw, out_dtype = _inputs(q, k, v, spec, causal=causal)
    q_rot, k_rot = apply_rope_qk(qw, kw, spec, positions)
    scores = (q_rot @ xp.matrix_transpose(k_rot)) / math.sqrt(spec.head_dim)
    if k.shape[-2] == 0:  # no keys, so no queries (apply_rope_qk saw to it): an empty result
        return xp.astype(scores @ vw, out_dtype)
    if causal:
        mask = _causal_mask(xp, q.shape[-2], k.shape[-2], device(q))
        scores = xp.where(mask, scores, xp.asarray(-xp.inf, dtype=scores.dtype, device=device(q)))
    scores = scores - xp.max(scores, axis=-1, keepdims=True)
    weights = xp.exp(scores)
    weights = weights / xp.sum(weights, axis=-1, keepdims=True)
    return xp.astype(weights @ vw, out_dtype)


def _feature_map(
    feature_map: FeatureMap | Callable[[Array], Array], xp: ArrayNamespace
) -> Callable[[Array], Array]:
    if callable(feature_map):
        return feature_map
    name = check_choice("feature_map", feature_map, FEATURE_MAPS)
    if name == "elu1":  # elu(x) + 1: x + 1 for x > 0, exp(x) otherwise; always positive
        return lambda x: xp.where(x > 0, x + 1, xp.exp(xp.minimum(x, xp.zeros_like(x))))
    return lambda x: xp.maximum(x, xp.zeros_like(x))


def linear_attention(
    q: Array,
    k: Array,
    v: Array,
    /,
    spec: RopeSpec | None = None,
    positions: Array | None = None,
    *,
    feature_map: FeatureMap | Callable[[Array], Array] = "elu1",
    causal: bool = False,
) -> Array:
    r"""RoPE in linear attention (RoFormer eq. 19): rotate the numerator only.

    .. math::

        o_m = \frac{\sum_n \big(R_m\,\phi(q_m)\big)^\top \big(R_n\,\phi(k_n)\big)\,v_n}
                   {\sum_n \phi(q_m)^\top \phi(k_n)}

    The rotation goes into the numerator only; the denominator keeps the unrotated, positive
    features, so it cannot vanish (rotated products can be negative). Computed in
    :math:`O(S)`: the numerator is :math:`(R_m\phi(q_m))^\top \sum_n R_n\phi(k_n)v_n^\top`
    by associativity, and for ``causal=True`` the sums are prefix sums over keys. No
    ``(q_len, k_len)`` matrix is formed; memory is ``O(k_len * head_dim * v_dim)``.

    Parameters
    ----------
    q, k, v : array
        As for `softmax_attention`.
    spec : RopeSpec, optional
        The embedding; ``RopeSpec(head_dim=q.shape[-1])`` when omitted.
    positions : array_like, optional
        Token positions shared by queries and keys (as in `rope_ref.apply_rope_qk`).
    feature_map : {"elu1", "relu"} or callable, default "elu1"
        :math:`\phi`, applied to each feature: ``"elu1"`` is :math:`\mathrm{elu}(x) + 1`
        (Katharopoulos et al.), ``"relu"`` is :math:`\max(x, 0)` (the denominator can then
        be 0, giving inf or nan); a callable maps an array to one of the same shape.
    causal : bool, default False
        Each query sums over keys up to its own (queries aligned with the last keys).

    Returns
    -------
    array
        ``(..., q_len, v_dim)`` in the result dtype of the inputs.

    References
    ----------
    J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021),
    eq. (19); A. Katharopoulos et al., "Transformers are RNNs" (2020).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> q = k = xp.zeros((3, 4), dtype=xp.float64)   # elu(0) + 1 = 1 for every feature
    >>> v = xp.reshape(xp.arange(3, dtype=xp.float64), (3, 1))
    >>> out = rr.attention.linear_attention(q, k, v, causal=True)
    >>> [round(float(out[i, 0]), 4) for i in range(3)]  # (8 + 2cos 1 + 2cos 0.01) / 12
    [0.0, 0.5, 0.9234]
    """
    xp, spec, qw, kw, vw, out_dtype = _inputs(q, k, v, spec, causal=causal)
    phi = _feature_map(feature_map, xp)
    fq, fk = phi(qw), phi(kw)
    fq_rot, fk_rot = apply_rope_qk(fq, fk, spec, positions)
    if causal:
        return xp.astype(_causal_linear(xp, fq, fk, fq_rot, fk_rot, vw), out_dtype)
    kv = xp.matrix_transpose(fk_rot) @ vw  # (..., head_dim, v_dim)
    k_sum = xp.sum(fk, axis=-2)  # (..., head_dim), unrotated
    numerator = fq_rot @ kv
    denominator = xp.sum(fq * k_sum[..., None, :], axis=-1)
    return xp.astype(numerator / denominator[..., None], out_dtype)


def _causal_linear(
    xp: ArrayNamespace, fq: Array, fk: Array, fq_rot: Array, fk_rot: Array, v: Array
) -> Array:
    """Prefix-sum form: state ``sum_{n <= m} R_n phi(k_n) v_n^T`` for every key m."""
    q_len, k_len = fq.shape[-2], fk.shape[-2]
    outer = fk_rot[..., :, :, None] * v[..., :, None, :]  # (..., k_len, head_dim, v_dim)
    state = xp.cumulative_sum(outer, axis=-3)[..., k_len - q_len :, :, :]
    k_sums = xp.cumulative_sum(fk, axis=-2)[..., k_len - q_len :, :]
    numerator = (fq_rot[..., :, None, :] @ state)[..., 0, :]
    denominator = xp.sum(fq * k_sums, axis=-1)
    return numerator / denominator[..., None]
