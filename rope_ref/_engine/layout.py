"""Moving between the "half" and "interleaved" layouts: activations and q/k weights."""

from __future__ import annotations

from rope_ref._core.aliases import LAYOUTS, Array, Layout
from rope_ref._core.compat import device
from rope_ref._core.defaults import default_spec
from rope_ref._core.reference import half_index_of_interleaved
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_choice, check_int
from rope_ref._engine.runner import check_x, resolve_spec

__all__ = ["convert_layout", "feature_order", "permute_weights"]


def feature_order(spec: RopeSpec, src: Layout, dst: Layout) -> list[int]:
    """Indices ``order`` with ``converted = x[..., order]`` moving `src` layout to `dst`.

    Only the rotary slice moves; other features keep their place.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.feature_order(rr.RopeSpec(head_dim=6), "interleaved", "half")
    [0, 2, 4, 1, 3, 5]
    """
    spec = check_spec(spec)
    src = check_choice("src", src, LAYOUTS)
    dst = check_choice("dst", dst, LAYOUTS)
    n, start = spec.n_pairs, spec.rotary_start
    half_of = half_index_of_interleaved(n)  # interleaved i -> half half_of[i]
    if src == dst:
        inner = list(range(2 * n))
    elif src == "interleaved":  # half feature h takes interleaved feature i with half_of[i] = h
        inner = [0] * (2 * n)
        for i, h in enumerate(half_of):
            inner[h] = i
    else:
        inner = half_of
    return [*range(start), *(start + i for i in inner), *range(spec.rotary_stop, spec.head_dim)]


def convert_layout(
    x: Array,
    /,
    spec: RopeSpec | None = None,
    *,
    src: Layout = "interleaved",
    dst: Layout = "half",
) -> Array:
    """Reorder the rotary features of `x` from layout `src` to layout `dst`.

    ``apply_rope(convert_layout(x, spec), half_spec)`` equals
    ``convert_layout(apply_rope(x, interleaved_spec), spec)``: rotation commutes with the
    conversion, which is how checkpoints move between Meta/GPT-J and NeoX/HF conventions.

    Parameters
    ----------
    x : array
        Shape ``(..., head_dim)``.
    spec : RopeSpec, optional
        Gives head_dim, rotary_dim and rotary_start (its `layout` is not used).
    src, dst : {"half", "interleaved"}
        Layout of `x` and of the result.

    Returns
    -------
    array
        A permuted copy of `x` (same namespace, device, dtype and shape).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> rr.convert_layout(xp.asarray([0.0, 1.0, 2.0, 3.0]))
    Array([0., 2., 1., 3.], dtype=array_api_strict.float64)
    """
    xp = check_x(x, "x")
    spec = resolve_spec(spec, x)
    order = xp.asarray(feature_order(spec, src, dst), device=device(x))
    return xp.take(x, order, axis=-1)


def permute_weights(
    w: Array,
    /,
    *,
    n_heads: int,
    spec: RopeSpec | None = None,
    src: Layout = "interleaved",
    dst: Layout = "half",
) -> Array:
    """Permute the output rows of a q or k projection from layout `src` to `dst`.

    With ``w2 = permute_weights(w, ...)``, half RoPE on ``x @ w2.T`` gives the same
    attention logits as interleaved RoPE on ``x @ w.T``. This is the permutation HF's
    ``convert_llama_weights_to_hf.py`` applies to Meta checkpoints; for k under grouped-query
    attention pass the number of key/value heads.

    Parameters
    ----------
    w : array
        Weight of shape ``(n_heads * head_dim, in_features)``, or a bias of shape
        ``(n_heads * head_dim,)``.
    n_heads : int
        Heads in `w` (key/value heads for a GQA k projection).
    spec : RopeSpec, optional
        Per-head embedding; defaults to ``RopeSpec(head_dim=w.shape[0] // n_heads)``.
        Partial rotary permutes only the rotary slice of each head.
    src, dst : {"half", "interleaved"}
        Layout the rows are in, and the one wanted.

    Returns
    -------
    array
        Row-permuted copy of `w`.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> import rope_ref as rr
    >>> bias = xp.asarray([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    >>> rr.permute_weights(bias, n_heads=2)
    Array([0., 2., 1., 3., 4., 6., 5., 7.], dtype=array_api_strict.float64)
    """
    xp = check_x(w, "w")
    n_heads = check_int("n_heads", n_heads, minimum=1)
    if w.ndim > 2 or w.shape[0] % n_heads:
        msg = (
            f"`w` must be (n_heads * head_dim, in_features) or (n_heads * head_dim,) with "
            f"n_heads = {n_heads}; got shape {tuple(w.shape)}."
        )
        raise ValueError(msg)
    head_dim = w.shape[0] // n_heads
    spec = default_spec(head_dim, "w", tuple(w.shape)) if spec is None else check_spec(spec)
    if spec.head_dim != head_dim:
        msg = (
            f"`spec` must be a RopeSpec with head_dim = w.shape[0] // n_heads = {head_dim}; "
            f"got {spec!r}."
        )
        raise ValueError(msg)
    order = feature_order(spec, src, dst)
    rows = [h * head_dim + i for h in range(n_heads) for i in order]
    return xp.take(w, xp.asarray(rows, device=device(w)), axis=0)
