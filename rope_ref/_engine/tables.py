"""`rope_angles` and `rope_cos_sin`: the reference's tables, or correctly rounded ones.

The reference's tables are `rope_ref._core.frequencies`'; ``backend="exact"`` checks the
arguments through them and then loads the exact backend by name (it needs mpmath).
"""

from __future__ import annotations

from rope_ref._core import frequencies
from rope_ref._core.aliases import TABLE_BACKENDS, Array, Role, TableBackend
from rope_ref._core.compat import array_namespace, device, dtype_name
from rope_ref._core.spec import RopeSpec
from rope_ref._core.validation import check_choice
from rope_ref._engine.dispatch import load_backend

__all__ = ["rope_angles", "rope_cos_sin"]

_EXACT_FORMATS = ("float64", "float32", "float16", "bfloat16")


def rope_angles(
    spec: RopeSpec,
    positions: Array,
    seq_len: float | None = None,
    *,
    backend: TableBackend = "reference",
) -> Array:
    r"""Rotation angles :math:`\phi_{p,j} = p\,\theta_j` in float64.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    positions : array_like
        Real positions, any shape (with a trailing axis of ``spec.n_axes`` for multi-axis
        specs). Python numbers and sequences become NumPy arrays.
    seq_len : float, optional
        For length-dependent scalings; defaults to ``max(positions) + 1``.
    backend : {"reference", "exact"}, default "reference"
        ``"reference"``: the float64 product of the position (rounded to float64) and the
        float64 inverse frequency. ``"exact"``: the real angle :math:`p\,\omega_j` (the
        exact value of each position given, the spec's frequency formula as a real
        number) rounded once to float64 (needs mpmath; see the Precision page).

    Returns
    -------
    array
        Shape ``grid + (spec.n_pairs,)`` in the namespace and on the device of `positions`,
        float64. A namespace or device without float64 gets NumPy float64 instead.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.rope_angles(rr.RopeSpec(head_dim=4), [0, 1, 2]).tolist()
    [[0.0, 0.0], [1.0, 0.01], [2.0, 0.02]]

    Past :math:`2^{53}` the position given is not a float64; ``"exact"`` takes its exact
    value, :math:`(2^{53} + 3) / 100`, and rounds once:

    >>> p = [2**53 + 3]
    >>> rr.rope_angles(rr.RopeSpec(head_dim=4), p, backend="exact")[0, 1].item()
    90071992547409.95
    >>> rr.rope_angles(rr.RopeSpec(head_dim=4), p)[0, 1].item()
    90071992547409.97
    """
    backend = check_choice("backend", backend, TABLE_BACKENDS)
    angles = frequencies.rope_angles(spec, positions, seq_len)  # the checks; refuses overflow
    if backend == "reference":
        return angles
    given, resolved = frequencies.given_positions(spec, positions, seq_len)
    exact = load_backend("exact").angles(spec, given, resolved)
    return array_namespace(angles).asarray(exact, device=device(angles))


def rope_cos_sin(
    spec: RopeSpec,
    positions: Array,
    dtype: object = None,
    seq_len: float | None = None,
    *,
    role: Role | None = None,
    full: bool = False,
    backend: TableBackend = "reference",
) -> tuple[Array, Array]:
    r"""Cos and sin of the rotation angles, attention factor (and xPos scale) applied.

    Computed in float64 and rounded once to `dtype` (exactly once also for float16 and
    bfloat16, whose casts from float64 go through float32 in PyTorch, JAX and ml_dtypes).

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    positions : array_like
        As for `rope_angles`.
    dtype : dtype, optional
        A real floating dtype of the namespace of `positions` (for NumPy, anything
        `numpy.dtype` reads, such as ``"float32"``); float64 by default (float32 where the
        namespace or device has no float64).
    seq_len : float, optional
        For length-dependent scalings; defaults to ``max(positions) + 1``.
    role : {"query", "key"}, optional
        Required when ``spec.xpos`` is set: queries get the xPos scale, keys its inverse.
    full : bool, default False
        Full-width tables, one value per rotated feature, as HF's ``cos, sin`` are: each
        pair's value at both of its features, so ``concat([c, c])`` for the ``"half"``
        layout (HF's ``rotate_half``) and ``c0, c0, c1, c1, ...`` for ``"interleaved"``.
    backend : {"reference", "exact"}, default "reference"
        ``"reference"``: computed in float64 as above. ``"exact"``: :math:`A\,s\cos\phi`
        and :math:`A\,s\sin\phi` of the real angle :math:`\phi = p\,\omega_j`, with the
        attention factor :math:`A` and xPos scale :math:`s` as real numbers, each rounded
        once (to nearest even) to `dtype`: float64, float32, float16 or bfloat16 (needs
        mpmath; see the Precision page).

    Returns
    -------
    cos, sin : array
        Shape ``grid + (spec.n_pairs,)``, one value per pair (not repeated per feature);
        ``grid + (spec.rotary_dim,)`` with ``full=True``.

    Examples
    --------
    >>> import rope_ref as rr
    >>> cos, sin = rr.rope_cos_sin(rr.RopeSpec(head_dim=2), [0.0])
    >>> cos.tolist(), sin.tolist()
    ([[1.0]], [[0.0]])
    >>> cos, _ = rr.rope_cos_sin(rr.RopeSpec(head_dim=4), [1.0], full=True)
    >>> cos.round(6).tolist()  # cos(1), cos(1/100), then again: HF's width
    [[0.540302, 0.99995, 0.540302, 0.99995]]
    """
    backend = check_choice("backend", backend, TABLE_BACKENDS)
    if backend == "reference":
        return frequencies.rope_cos_sin(spec, positions, dtype, seq_len, role=role, full=full)
    # the reference's checks, and the namespace, device and dtype of the result
    cos, _ = frequencies.rope_cos_sin(spec, positions, dtype, seq_len, role=role, full=full)
    name = dtype_name(cos.dtype)
    if name not in _EXACT_FORMATS:
        msg = (
            "`dtype` must be float64, float32, float16 or bfloat16 with backend='exact' "
            f"(the formats it rounds to); got {name}."
        )
        raise TypeError(msg)
    given, _ = frequencies.given_positions(spec, positions, seq_len)
    host_cos, host_sin = load_backend("exact").cos_sin(spec, given, seq_len, role, name)
    xp = array_namespace(cos)
    cos, sin = frequencies.move_tables(host_cos, host_sin, xp=xp, dev=device(cos), dtype=cos.dtype)
    if full:
        return frequencies.full_width(cos, spec.layout, xp), frequencies.full_width(
            sin, spec.layout, xp
        )
    return cos, sin
