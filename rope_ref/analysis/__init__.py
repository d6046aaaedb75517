r"""RoPE's theory made executable: long-term decay, discrimination and the base bound.

Functions of the frequencies alone (no learned weights), in NumPy float64:

- `decay_bound`: RoFormer's long-term-decay curve, the mean of :math:`|S_j|` with
  :math:`S_j = \sum_{i<j} e^{\mathrm{i} m \theta_i}`.
- `discrimination`: :math:`B_m = \sum_i \cos(m\theta_i)`, how much more attention a
  similar key gets than a random one at distance :math:`m` (the base-bound argument).
- `base_lower_bound`: the smallest base with :math:`B_m \ge 0` for every distance in a
  context.
- `wavelengths` and `full_turn_pairs`: which pairs turn fully within a context.

The derivations are on the Theory page of the documentation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rope_ref._core.compat import is_array, to_numpy
from rope_ref._core.frequencies import inv_freq
from rope_ref._core.spec import MAX_HEAD_DIM, RopeSpec, check_spec
from rope_ref._core.validation import (
    check_bool,
    check_callable,
    check_int,
    check_not_masked,
    check_real,
)
from rope_ref.analysis._bound import (
    MAX_DIM,
    check_size,
    log_base_ceiling,
    smallest_feasible_log_base,
)

__all__ = [
    "base_lower_bound",
    "decay_bound",
    "discrimination",
    "full_turn_pairs",
    "wavelengths",
]

_CHUNK = 1 << 18  # values per (distances, d/2) temporary in decay_bound and discrimination


def _check_dim(dim: object, maximum: int = MAX_HEAD_DIM, why: str = "as RopeSpec.head_dim") -> int:
    value = check_int("dim", dim, minimum=2)
    if value % 2:
        msg = f"`dim` must be even; got {value}."
        raise ValueError(msg)
    if value > maximum:
        msg = f"`dim` must be at most {maximum} ({why}); got {value}."
        raise ValueError(msg)
    return value


def _check_base(base: object) -> float:
    value = check_real("base", base)
    if value <= 1.0:
        msg = f"`base` must be greater than 1; got {value!r}."
        raise ValueError(msg)
    return value


def _distances(distances: object) -> NDArray[np.float64]:
    check_not_masked("distances", distances)
    array = to_numpy(distances) if is_array(distances) else np.asarray(distances)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        msg = f"`distances` must be real numbers; got dtype {array.dtype}."
        raise TypeError(msg)
    result = array.astype(np.float64)
    if not np.all(np.isfinite(result)):
        msg = "`distances` must be finite; got a non-finite value."
        raise ValueError(msg)
    return result


def _theta(dim: int, base: float) -> NDArray[np.float64]:
    return np.asarray(inv_freq(RopeSpec(head_dim=dim, base=base)), dtype=np.float64)


def decay_bound(
    dim: int, distances: ArrayLike, *, base: float = 10000.0, normalize: bool = True
) -> NDArray[np.float64]:
    r"""RoFormer's long-term-decay curve at relative distances `distances`.

    With :math:`\theta_i = b^{-2i/d}` and :math:`S_j = \sum_{i=0}^{j-1} e^{\mathrm{i} m
    \theta_i}`, the inner product of rotated queries and keys is bounded by
    :math:`\max_i |h_{i+1} - h_i| \sum_{j=1}^{d/2} |S_j|` (Abel summation), so the mean
    :math:`\frac{2}{d}\sum_{j=1}^{d/2} |S_j|` measures how the attainable score shrinks
    with the distance :math:`m`.

    Parameters
    ----------
    dim : int
        Rotary dimension :math:`d` (even); there are :math:`d/2` pairs.
    distances : array_like
        Relative distances :math:`m` (real), any shape.
    base : float, default 10000.0
        Frequency base :math:`b > 1`.
    normalize : bool, default True
        Divide by the value at distance 0, :math:`(d/2 + 1)/2` (there :math:`|S_j| = j`),
        so that the curve starts at exactly 1. ``False`` gives the plain mean, the scale of
        RoFormer's figure (32.5 at distance 0 for :math:`d = 128`).

    Returns
    -------
    numpy.ndarray
        float64, the shape of `distances`; even in the distance (:math:`|S_j|` is).

    See Also
    --------
    discrimination : the sum of cosines behind the base bound.

    Notes
    -----
    The curve decays *on average*: it oscillates, and each :math:`|S_j| \le j` keeps it at
    most 1 (normalized). The bound holds for any queries and keys; actual scores can be
    much smaller.

    References
    ----------
    J. Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021),
    section 3.4.3.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.analysis.decay_bound(128, [0, 1]).round(4).tolist()
    [1.0, 0.9704]
    >>> float(rr.analysis.decay_bound(128, 0, normalize=False))
    32.5
    """
    dim = _check_dim(dim)
    base = _check_base(base)
    normalize = check_bool("normalize", normalize)
    m = _distances(distances)
    theta = _theta(dim, base)
    flat = m.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    rows = max(1, _CHUNK // theta.size)
    for start in range(0, flat.size, rows):
        phases = np.multiply.outer(flat[start : start + rows], theta)
        partial = np.cumsum(np.cos(phases), axis=-1), np.cumsum(np.sin(phases), axis=-1)
        out[start : start + rows] = np.hypot(*partial).mean(axis=-1)
    if normalize:
        out /= (dim // 2 + 1) / 2
    return out.reshape(m.shape)


def discrimination(dim: int, distances: ArrayLike, *, base: float = 10000.0) -> NDArray[np.float64]:
    r""":math:`B_m = \sum_{i=0}^{d/2-1} \cos(m\theta_i)`: attention to similar tokens.

    For random queries :math:`q` and keys :math:`k` with i.i.d. components of variance
    :math:`\sigma^2`, and a key :math:`k^* = q + \varepsilon` similar to the query
    (zero-mean noise), the expected advantage of the similar key at distance :math:`m` is
    :math:`\mathbb{E}[q^\top R_m k^*] - \mathbb{E}[q^\top R_m k] = 2\sigma^2 B_m`. Where
    :math:`B_m < 0` the model would on average attend *less* to a similar token than to a
    random one.

    Parameters
    ----------
    dim : int
        Rotary dimension :math:`d` (even).
    distances : array_like
        Relative distances :math:`m` (real), any shape.
    base : float, default 10000.0
        Frequency base :math:`b > 1`.

    Returns
    -------
    numpy.ndarray
        float64, the shape of `distances`. :math:`B_0 = d/2`; :math:`|B_m| \le d/2`.

    See Also
    --------
    base_lower_bound : the smallest base keeping :math:`B_m \ge 0` over a context.

    References
    ----------
    X. Men et al., "Base of RoPE Bounds Context Length" (2024).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.analysis.discrimination(128, [0, 1000]).round(3).tolist()
    [64.0, 10.178]
    """
    dim = _check_dim(dim)
    base = _check_base(base)
    m = _distances(distances)
    theta = _theta(dim, base)
    flat = m.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    rows = max(1, _CHUNK // theta.size)
    for start in range(0, flat.size, rows):
        out[start : start + rows] = np.cos(
            np.multiply.outer(flat[start : start + rows], theta)
        ).sum(axis=-1)
    return out.reshape(m.shape)


def base_lower_bound(
    dim: int, context_length: int, *, progress: Callable[[float], None] | None = None
) -> float:
    r"""Smallest base :math:`b` with :math:`B_m(b) \ge 0` for every integer :math:`m \le L`.

    :math:`B_m(b) = \sum_{i=0}^{d/2-1} \cos(m\,b^{-2i/d})` is `discrimination`. The bases
    that satisfy every constraint do **not** form an interval (some bases above the answer
    fail again), so bisection can return a wrong value; this function returns the true
    smallest one.

    Parameters
    ----------
    dim : int
        Rotary dimension :math:`d`: even, from 2 to 1024.
    context_length : int
        :math:`L \ge 0`; the distances checked are :math:`0, 1, \dots, L`. At most
        :math:`2^{28} / (d/2)` (4,194,304 for :math:`d = 128`): beyond that the search
        takes more than about a minute (see Limits in the API reference).
    progress : callable, optional
        Called now and then with the base below which every base has been proven to fail
        (it grows toward the answer), e.g. to draw a progress bar.

    Returns
    -------
    float
        The smallest feasible base, to rounding (violations smaller than the float64
        rounding bound :math:`64\,\epsilon\,(d/2)\,L` count as zero). 1.0 when every
        base works (:math:`L \le 1`).

    Raises
    ------
    ValueError
        If no base works (with ``dim == 2`` the only term is :math:`\cos m`, and
        :math:`\cos 2 < 0`), or if `dim` or `context_length` is beyond the limits above
        (refused before any work, naming the limit).
    TypeError
        If `progress` is neither None nor callable.

    Notes
    -----
    In :math:`t = \ln b` the search walks upward from a base known to fail. At each point
    it finds some violated :math:`m`, then moves along that :math:`B_m` toward its next zero in
    steps that a bound on :math:`|B_m''|` proves cannot jump over a zero; the first point
    with no violation is the answer, and every point below it has been shown to fail. One
    evaluation of all :math:`B_m` is a chunked matrix product. Results are cached, and a
    context :math:`L` starts from the answer for :math:`\lfloor L/2\rfloor` (a base that
    fails there fails for :math:`L` too). The Theory page of the documentation has the
    details and timings.

    References
    ----------
    X. Men et al., "Base of RoPE Bounds Context Length" (2024).

    Examples
    --------
    >>> import rope_ref as rr
    >>> b = rr.analysis.base_lower_bound(128, 1024)
    >>> round(b, 1)
    4293.4
    >>> bool(rr.analysis.discrimination(128, range(1025), base=b).min() >= -1e-9)
    True
    """
    dim, length = check_bound_size(dim, context_length)
    report = None
    callback = check_callable("progress", progress)
    if callback is not None:

        def report(log_base: float, share: float) -> None:
            del share  # the command line's progress bar reads it
            callback(math.exp(log_base))

    log_base = smallest_feasible_log_base(dim, length, report)
    return 1.0 if log_base == 0.0 else log_base_ceiling(log_base)


def check_bound_size(dim: object, context_length: object) -> tuple[int, int]:
    """`dim` and `context_length` of `base_lower_bound`, checked (limits included)."""
    dim = _check_dim(dim, MAX_DIM, "the search's cost grows with it; rotary dims in use are <= 512")
    length = check_int("context_length", context_length, minimum=0)
    check_size(dim, length)
    return dim, length


def wavelengths(spec: RopeSpec, *, seq_len: float | None = None) -> NDArray[np.float64]:
    r"""Wavelength :math:`\lambda_j = 2\pi/\theta_j` of every pair, in tokens.

    Uses the inverse frequencies after scaling (`rope_ref.inv_freq`), so interpolated or
    YaRN-scaled specs give their stretched wavelengths.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    seq_len : float, optional
        Sequence length for length-dependent scalings (dynamic NTK, LongRoPE).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(spec.n_pairs,)``; ``inf`` for a zero frequency.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.analysis.wavelengths(rr.RopeSpec(head_dim=4)).round(2).tolist()
    [6.28, 628.32]
    """
    theta = inv_freq(check_spec(spec), seq_len)
    with np.errstate(divide="ignore"):
        result: NDArray[np.float64] = (2.0 * np.pi) / theta
    return result


def full_turn_pairs(
    spec: RopeSpec, context_length: int, *, seq_len: float | None = None
) -> NDArray[np.bool_]:
    r"""Which pairs turn through a full circle within a context of `context_length` tokens.

    The largest distance in a context of :math:`L` tokens is :math:`L - 1`, so pair
    :math:`j` sees every angle when :math:`(L - 1)\,\theta_j \ge 2\pi`, i.e.
    :math:`\lambda_j \le L - 1`. Pairs that do not (the low frequencies) never see their
    angles wrap during training, which is what position interpolation and YaRN's ramp
    (ratio :math:`L/\lambda_j`) reason about.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    context_length : int
        :math:`L \ge 1`, in tokens.
    seq_len : float, optional
        For length-dependent scalings, as in `wavelengths`.

    Returns
    -------
    numpy.ndarray
        bool, shape ``(spec.n_pairs,)``.

    Examples
    --------
    >>> import rope_ref as rr
    >>> spec = rr.RopeSpec(head_dim=128)
    >>> int(rr.analysis.full_turn_pairs(spec, 4096).sum())
    46
    """
    length = check_int("context_length", context_length, minimum=1)
    # the largest distance, as a float64 bound (beyond float64 every wavelength is shorter)
    largest = float(length - 1) if length <= 2**1023 else math.inf
    result: NDArray[np.bool_] = wavelengths(spec, seq_len=seq_len) <= largest
    return result
