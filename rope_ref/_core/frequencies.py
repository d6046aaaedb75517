"""Inverse frequencies, angles and cos/sin tables, all built in float64."""

from __future__ import annotations

import decimal
import functools
import math
import sys
from typing import Any

import array_api_compat
import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import ROLES, Array, ArrayNamespace, Role
from rope_ref._core.compat import (
    all_finite,
    array_namespace,
    device,
    dtype_name,
    finite_or_raise,
    has_float64,
    host_namespace,
    is_real_floating,
    to_numpy,
)
from rope_ref._core.positions import as_positions
from rope_ref._core.rounding import FORMATS16, round_once, to_grid
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_bool, check_choice, check_real, check_size

__all__ = [
    "attention_factor",
    "check_seq_len",
    "check_table_size",
    "full_width",
    "given_positions",
    "inferred_seq_len",
    "inv_freq",
    "max_plus_one",
    "move_tables",
    "pair_axes",
    "rope_angles",
    "rope_cos_sin",
    "tables",
]


def inv_freq(spec: RopeSpec, seq_len: float | None = None) -> NDArray[np.float64]:
    r"""Inverse frequencies :math:`\theta_j` of every rotated pair, in float64.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    seq_len : float, optional
        Sequence length seen by length-dependent scalings (dynamic NTK, LongRoPE); ignored
        by everything else.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(spec.n_pairs,)``: ``spec.freqs`` if given, else
        :math:`b^{-2j/d}` with :math:`b` = ``spec.base`` and :math:`d` = ``spec.rotary_dim``,
        then rescaled by ``spec.scaling``.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.inv_freq(rr.RopeSpec(head_dim=4)).tolist()
    [1.0, 0.01]
    """
    check_spec(spec)
    seq_len = check_seq_len(seq_len)
    d = spec._rotary_dim
    if spec.freqs is not None:  # the rule, if any, takes them as its input
        theta = np.array(spec.freqs, dtype=np.float64)
    else:
        theta = np.array(_default_inv_freq(spec.base, d), dtype=np.float64)
    if spec.scaling is None:
        return theta
    scaled = np.asarray(
        spec.scaling.inv_freq(theta, base=spec.base, rotary_dim=d, seq_len=seq_len),
        dtype=np.float64,
    )
    if scaled.shape != theta.shape:
        msg = (
            f"`spec.scaling` must give {spec.n_pairs} finite inverse frequencies; "
            f"got shape {scaled.shape}."
        )
        raise ValueError(msg)
    bad = np.flatnonzero(~np.isfinite(scaled))
    if bad.size:
        msg = (
            f"`spec.scaling` must give {spec.n_pairs} finite inverse frequencies; got "
            f"{scaled[bad].tolist()} at pairs {bad.tolist()} (from {spec.scaling!r})."
        )
        raise ValueError(msg)
    return scaled


# Decimal digits of the first try at each inverse frequency (doubled until it settles).
FIRST_DIGITS = 50


@functools.lru_cache(maxsize=256)
def _default_inv_freq(base: float, rotary_dim: int) -> tuple[float, ...]:
    """Correctly rounded ``base ** (-2j / rotary_dim)``.

    In float64, ``-2j / d`` is itself rounded when d is not a power of two, which costs up
    to a few ulp after ``pow``. Here the power is taken in decimal arithmetic on the exact
    binary value of `base` and the exact rational exponent. ``ln``, ``*``, ``/`` and ``exp``
    each round once to `digits` digits, so the value is within a relative
    ``(|x| + 1) * 10**(2 - digits)`` of the exact power (``x`` the exponent of ``e``); where
    that interval holds a float64 rounding boundary, the frequency is taken again with twice
    the digits (Ziv's strategy). Every result is the exact power rounded once. The loop ends:
    a float64 midpoint is a dyadic rational with an odd numerator above 1, which no power
    of a dyadic `base` with rational exponent in (-1, 0] can equal.
    """
    _refuse_tracing()
    result: dict[int, float] = {}
    pending = list(range(rotary_dim // 2))
    digits = FIRST_DIGITS
    while pending:
        with decimal.localcontext() as context:
            context.prec = digits
            log_base = decimal.Decimal(base).ln()
            relative = decimal.Decimal(10) ** (2 - digits)
            unsettled = []
            for j in pending:
                x = log_base * (-2 * j) / rotary_dim
                power = x.exp()
                margin = power * (abs(x) + 1) * relative
                low, high = float(power - margin), float(power + margin)
                if low == high:
                    result[j] = low
                else:
                    unsettled.append(j)
        pending, digits = unsettled, 2 * digits
    return tuple(result[j] for j in range(rotary_dim // 2))


def _refuse_tracing() -> None:
    """RuntimeError while ``torch.compile`` traces: the tables are host work it cannot trace.

    Dynamo traces the body of a cached function even when the cache holds the value;
    this says what to do instead of failing on ``decimal.localcontext``. A compiled step
    without ``fullgraph=True`` breaks the graph here and runs the call eagerly.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.compiler.is_compiling():
        msg = (
            "rope_ref's reference path builds its float64 tables on the host (correctly "
            "rounded inverse frequencies in decimal arithmetic), which torch.compile cannot "
            "trace: under torch.compile, call apply_rope / apply_rope_qk with "
            "backend='auto' (the kernels' custom operators, one node per call)."
        )
        raise RuntimeError(msg)


def attention_factor(spec: RopeSpec, seq_len: float | None = None) -> float:
    """Factor multiplied into cos and sin: 1.0 unless the scaling rule sets one.

    YaRN and LongRoPE scale attention logits by multiplying cos and sin (so both q and k)
    by this factor; plain RoPE and the other rules leave it at 1.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    seq_len : float, optional
        Sequence length, for length-dependent rules.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the rule's factor is not finite or not positive (a user-written rule, or a
        chain whose product underflows to 0).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.attention_factor(rr.RopeSpec(head_dim=64))
    1.0
    """
    check_spec(spec)
    seq_len = check_seq_len(seq_len)
    if spec.scaling is None:
        return 1.0
    name = "spec.scaling.attention_factor()"
    factor = check_real(name, spec.scaling.attention_factor(seq_len=seq_len))
    if factor <= 0.0:  # 0 erases the rotated features, a negative one turns them by pi
        msg = f"`{name}` must be positive (it multiplies cos and sin); got {factor!r}."
        raise ValueError(msg)
    return factor


def pair_axes(spec: RopeSpec) -> NDArray[np.intp]:
    """Position axis that drives each pair (all zeros unless `spec.sections` is set).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.pair_axes(rr.RopeSpec(head_dim=12, sections=(2, 2, 2))).tolist()
    [0, 0, 1, 1, 2, 2]
    >>> spec = rr.RopeSpec(head_dim=12, sections=(2, 2, 2), section_order="interleaved")
    >>> rr.pair_axes(spec).tolist()
    [0, 1, 2, 0, 1, 2]
    """
    check_spec(spec)
    if spec.sections is None:
        return np.zeros(spec.n_pairs, dtype=np.intp)
    if not isinstance(spec.section_order, str):  # a pair-to-axis map
        return np.asarray(spec.section_order, dtype=np.intp)
    n_axes = len(spec.sections)
    if spec.section_order == "chunked":
        return np.repeat(np.arange(n_axes, dtype=np.intp), spec.sections)
    axes = np.zeros(spec.n_pairs, dtype=np.intp)
    for axis, size in enumerate(spec.sections[1:], start=1):
        axes[axis : n_axes * size : n_axes] = axis
    return axes


def rope_angles(spec: RopeSpec, positions: Array, seq_len: float | None = None) -> Array:
    """The reference's `rope_ref.rope_angles`: float64 products of float64 positions."""
    given, pxp, _, _ = _float64_positions(positions, spec)
    check_table_size(spec, given, "angles")
    p = pxp.astype(given, pxp.float64)
    theta = inv_freq(spec, _resolve_seq_len(spec, p, seq_len, pxp))
    return _angles(spec, p, theta, xp=pxp)  # refuses overflow


def rope_cos_sin(
    spec: RopeSpec,
    positions: Array,
    dtype: object = None,
    seq_len: float | None = None,
    *,
    role: Role | None = None,
    full: bool = False,
) -> tuple[Array, Array]:
    """The reference's `rope_ref.rope_cos_sin`: float64 tables rounded once to `dtype`."""
    full = check_bool("full", full)
    p, pxp, xp, dev = _float64_positions(positions, spec)
    dtype = _check_dtype(dtype, xp)
    cos, sin = tables(spec, p, xp=pxp, seq_len=seq_len, role=role)
    if pxp is not xp:
        cos, sin = move_tables(cos, sin, xp=xp, dev=dev, dtype=dtype)
    else:
        out_dtype = xp.float64 if dtype is None else dtype
        cos, sin = round_once(cos, out_dtype, xp=xp), round_once(sin, out_dtype, xp=xp)
    if full:
        return full_width(cos, spec.layout, xp), full_width(sin, spec.layout, xp)
    return cos, sin


def given_positions(
    spec: RopeSpec, positions: Array, seq_len: float | None
) -> tuple[NDArray[Any], float | None]:
    """Host positions as given (validated, not rounded to float64), and the resolved seq_len.

    What correctly rounded tables are computed from.
    """
    given, pxp, _, _ = _float64_positions(positions, spec)
    p = pxp.astype(given, pxp.float64)
    return np.asarray(to_numpy(given)), _resolve_seq_len(spec, p, seq_len, pxp)


def full_width(table: Array, layout: str, xp: ArrayNamespace) -> Array:
    """One value per rotated feature: each pair's value at both of the pair's features."""
    if layout == "half":
        return xp.concat((table, table), axis=-1)
    doubled = xp.stack((table, table), axis=-1)
    return xp.reshape(doubled, (*table.shape[:-1], 2 * table.shape[-1]))


def _check_dtype(dtype: object, xp: ArrayNamespace) -> object:
    """None, or `dtype` if it is a real floating dtype of `xp`; else TypeError naming it."""
    if dtype is None:
        return None
    try:
        if array_api_compat.is_numpy_namespace(xp):
            dtype = np.dtype(dtype)  # type: ignore[call-overload]
        real = is_real_floating(xp, dtype)  # bfloat16 included
    except (TypeError, AttributeError, ValueError, SyntaxError):  # not a dtype of it at all
        real = False
    if not real:
        msg = (
            f"`dtype` must be a real floating dtype of {xp.__name__} (tables are cos and "
            f"sin values); got {dtype!r}."
        )
        raise TypeError(msg)
    return dtype


def tables(
    spec: RopeSpec,
    positions: Array,
    *,
    xp: ArrayNamespace,
    seq_len: float | None,
    role: Role | None,
) -> tuple[Array, Array]:
    """Float64 cos/sin, attention factor and xPos scale applied, of validated `positions`.

    `xp` must support float64 on the device of `positions`; callers on a device without it
    build the tables with NumPy and move them with `move_tables`.
    """
    check_table_size(spec, positions, "cos/sin tables")
    p = xp.astype(positions, xp.float64)
    seq_len = _resolve_seq_len(spec, p, seq_len, xp)
    angles = _angles(spec, p, inv_freq(spec, seq_len), xp=xp)
    factor = attention_factor(spec, seq_len)
    cos, sin = xp.cos(angles), xp.sin(angles)
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    if spec.xpos is None:
        if role is not None:
            check_choice("role", role, ROLES)
        return cos, sin
    scale = _xpos_scale(spec, p, seq_len, role, xp=xp)
    return cos * scale, sin * scale


def check_table_size(spec: RopeSpec, positions: Array, what: str) -> None:
    """Refuse, before any work, tables of more values than `check_size` allows."""
    grid = tuple(positions.shape) if spec.sections is None else tuple(positions.shape[:-1])
    check_size(
        "`positions` and `spec.head_dim`",
        what,
        (*(math.nan if n is None else n for n in grid), spec.n_pairs),
        hint=": pass the positions in chunks",
    )


def move_tables(
    cos: Array, sin: Array, *, xp: ArrayNamespace, dev: object, dtype: object = None
) -> tuple[Array, Array]:
    """Move host float64 tables to `xp` on `dev`, rounding once to `dtype` (float32)."""
    target = xp.float32 if dtype is None else dtype
    name = dtype_name(target)

    def move(table: Array) -> Array:
        host = np.asarray(table, dtype=np.float64)
        if name in FORMATS16:  # onto the 16-bit grid here: the cast below is then exact
            host = to_grid(host, name, xp=host_namespace())
        return xp.asarray(host, device=dev, dtype=target)

    return move(cos), move(sin)


def _angles(spec: RopeSpec, p: Array, theta: NDArray[np.float64], *, xp: ArrayNamespace) -> Array:
    inv = xp.asarray(theta, device=device(p))
    with np.errstate(over="ignore", invalid="ignore"):  # reported below, naming `positions`
        if spec.sections is None:
            angles = p[..., None] * inv
        else:
            angles = xp.take(p, xp.asarray(pair_axes(spec), device=device(p)), axis=-1) * inv
    overflow = (
        "`positions` times the inverse frequencies overflow float64 (every angle "
        "position * inv_freq must be finite); got "
    )
    top_freq = f"inv_freq up to {float(np.max(theta)):.6g}."
    if all_finite(angles, xp) is False:
        msg = f"{overflow}|positions| up to {float(xp.max(xp.abs(p))):.6g} and {top_freq}"
        raise ValueError(msg)
    return finite_or_raise(angles, xp, overflow + top_freq)  # lazy: checked when computed


def _xpos_scale(
    spec: RopeSpec, p: Array, seq_len: float | None, role: Role | None, *, xp: ArrayNamespace
) -> Array:
    xpos = spec.xpos
    assert xpos is not None  # the caller checked
    if role is None:
        msg = "`role` must be 'query' or 'key' when spec.xpos is set; got None."
        raise ValueError(msg)
    role = check_choice("role", role, ROLES)
    if seq_len is None:
        seq_len = max_plus_one(p, xp)
    if spec.sections is not None:
        p = p[..., 0]
    log_zeta = xp.asarray(np.log(xpos.zeta(spec._rotary_dim)), device=device(p))
    power = (p[..., None] - xpos.center(seq_len)) / xpos.scale_base
    sign = 1.0 if role == "query" else -1.0
    with np.errstate(over="ignore"):  # reported below, naming `positions`
        scale = xp.exp((sign * power) * log_zeta)
    if all_finite(scale, xp) is False:
        msg = (
            "`positions` lie too far from the xPos centre for float64: the scale "
            "zeta ** ((position - centre) / scale_base) overflows; got |positions| up to "
            f"{float(xp.max(xp.abs(p))):.6g}, centre {xpos.center(seq_len):.6g} and "
            f"scale_base {xpos.scale_base:.6g}."
        )
        raise ValueError(msg)
    return scale


def _resolve_seq_len(
    spec: RopeSpec, p: Array, seq_len: float | None, xp: ArrayNamespace
) -> float | None:
    seq_len = check_seq_len(seq_len)
    if seq_len is not None or spec.scaling is None:
        return seq_len
    return inferred_seq_len(max_plus_one(p, xp))


def inferred_seq_len(top: float) -> float:
    """`top` (max(positions) + 1) as the seq_len of a call that gave none, if positive."""
    if top <= 0.0:
        msg = (
            "`seq_len` is inferred as max(positions) + 1 when it is omitted and spec.scaling "
            f"is set, and must be positive; got `positions` up to {top - 1.0!r}. Pass "
            "`seq_len` explicitly."
        )
        raise ValueError(msg)
    return top


def max_plus_one(p: Array, xp: ArrayNamespace) -> float:
    if math.prod(p.shape) == 0:
        return 1.0
    try:
        return float(xp.max(p)) + 1.0
    except Exception as err:  # a traced (jit/grad) array has no value to read
        msg = (
            "`seq_len` must be given explicitly when positions cannot be read "
            f"(got a {type(p).__name__})."
        )
        raise ValueError(msg) from err


def check_seq_len(seq_len: object) -> float | None:
    if seq_len is None:
        return None
    value = check_real("seq_len", seq_len)
    if value <= 0.0:
        msg = f"`seq_len` must be positive; got {value!r}."
        raise ValueError(msg)
    return value


def _float64_positions(
    positions: Array, spec: RopeSpec
) -> tuple[Array, ArrayNamespace, ArrayNamespace, object]:
    """Validated positions in a namespace with float64 (NumPy on the host if need be).

    Returns the positions, their namespace, and the namespace and device they came from.
    """
    check_spec(spec)
    p = as_positions(positions, n_axes=spec.position_axes)
    xp, dev = array_namespace(p, name="positions"), device(p)
    if has_float64(xp, dev):
        return p, xp, xp, dev
    return to_numpy(p), host_namespace(), xp, dev
