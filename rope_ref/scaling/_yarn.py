"""YaRN: NTK-by-parts interpolation with an attention temperature."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.validation import check_real
from rope_ref.scaling._checks import (
    check_bool,
    check_context_length,
    check_divisor,
    check_optional_positive,
    check_optional_real,
    check_positive,
    set_field,
)

__all__ = ["YaRN", "yarn_mscale"]


def _check_ext_factor(value: object) -> float:
    """The ``ext_factor`` of ggml: a real number in (0, 1]."""
    result = check_real("ext_factor", value)
    if not 0.0 < result <= 1.0:
        msg = (
            "`ext_factor` must be in (0, 1] (ggml's ext_factor = 0 is no YaRN: use "
            f"rope_ref.scaling.Linear); got {result!r}."
        )
        raise ValueError(msg)
    return result


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    r"""YaRN's temperature term: :math:`0.1\,m \ln s + 1` for :math:`s > 1`, else 1.

    Raises
    ------
    TypeError
        If `factor` (or, for :math:`s > 1`, `mscale`) is not a real number.
    ValueError
        If `factor` is not finite and positive, or (for :math:`s > 1`) `mscale` is not
        finite.

    Examples
    --------
    >>> from rope_ref.scaling import yarn_mscale
    >>> yarn_mscale(1.0), round(yarn_mscale(4.0), 6)
    (1.0, 1.138629)
    """
    factor = check_positive("factor", factor)
    if factor <= 1.0:  # 1 whatever `mscale`, as HF's get_mscale
        return 1.0
    return 0.1 * check_real("mscale", mscale) * math.log(factor) + 1.0


@dataclass(frozen=True, init=False, repr=False)
class YaRN:
    r"""YaRN: interpolate low frequencies, keep high ones, ramp in between.

    Parameters
    ----------
    factor : float
        Context-extension factor :math:`s > 0`.
    original_max_position : int
        :math:`L_0`, the pre-training context length (HF
        ``original_max_position_embeddings``).
    beta_fast, beta_slow : float, default 32.0 and 1.0
        Rotation counts over :math:`L_0` that bound the ramp: pairs turning more than
        `beta_fast` times keep their frequency, pairs turning fewer than `beta_slow` times
        are interpolated. Positive.
    mscale, mscale_all_dim : float, optional
        DeepSeek-style temperature: when both are non-zero the attention factor is
        ``yarn_mscale(s, mscale) / yarn_mscale(s, mscale_all_dim)`` (HF's ``get_mscale``
        ratio), which must come out finite and positive.
    attention_factor : float, optional
        Explicit attention factor (positive); overrides the two above.
    truncate : bool, default True
        Round the ramp's ends outwards to whole pair indices (floor/ceil). GPT-OSS sets
        ``truncate: false``.
    ext_factor : float, default 1.0
        ggml's ``ext_factor``, in :math:`(0, 1]`: the weight of YaRN's ramp. 1 is YaRN; below
        1 (llama.cpp's partial YaRN) the fast pairs keep only that share of their
        unscaled frequency and the rest is interpolated. ggml's ``ext_factor = 0`` turns
        YaRN off (no ramp, no temperature): that is `Linear`, not this rule.

    Raises
    ------
    ValueError
        If a number is not finite, or `factor`, `original_max_position`, `beta_fast`,
        `beta_slow` or `attention_factor` is not positive, or `factor` is so small that
        the inverse frequencies divided by it overflow, or (without `attention_factor`)
        `mscale` and `mscale_all_dim` give an attention factor that is zero, negative or
        not finite, or `ext_factor` is not in (0, 1]; the message names the field.
    TypeError
        If `truncate` is not a bool.

    Notes
    -----
    With :math:`d` = `rotary_dim` and base :math:`b`, the ramp's ends are the pair indices
    whose wavelength fits :math:`\beta` turns in :math:`L_0`,

    .. math::
        c(\beta) = \frac{d \ln\bigl(L_0 / (2\pi\beta)\bigr)}{2 \ln b}, \qquad
        lo = \max(\lfloor c(\beta_{fast}) \rfloor, 0), \quad
        hi = \min(\lceil c(\beta_{slow}) \rceil, d - 1)

    (no floor/ceil when `truncate` is False; :math:`hi` is raised by 0.001 when it equals
    :math:`lo`). With :math:`r_j = \mathrm{clip}((j - lo)/(hi - lo), 0, 1)`,

    .. math::
        \theta'_j = \theta_j \Bigl(\frac{r_j}{s} + 1 - r_j\Bigr).

    With `ext_factor` :math:`e < 1` the unscaled share of pair :math:`j` is
    :math:`k_j = e\,(1 - r_j)` and :math:`\theta'_j = \theta_j \bigl((1 - k_j)/s + k_j\bigr)`:
    ggml's ``rope_yarn`` (its ``ramp_mix``). The attention factor does not depend on
    :math:`e`, as in ggml.

    The attention factor :math:`a` = `attention_factor`, else the mscale ratio, else
    :math:`0.1 \ln s + 1` (1 for :math:`s \le 1`), multiplies cos and sin, so attention
    logits carry :math:`a^2`. All of this is HF's ``_compute_yarn_parameters``, including
    the clamp of :math:`hi` to :math:`d - 1` rather than :math:`d/2 - 1`.

    Where peers differ (see the variants pages): vLLM's ``deepseek_yarn``, mlx-lm and ggml
    always floor/ceil (they ignore ``truncate=False``); mlx-lm ignores an explicit
    ``attention_factor`` and scales the input ``x`` instead of cos/sin; ggml also multiplies
    the factor into cos/sin but computes :math:`1 + 0.1\ln(1/\text{freq\_scale})` without the
    :math:`s \le 1` clamp, and guards the ramp with ``max(0.001, hi - lo)``; DeepSeek models
    multiply ``yarn_mscale(s, mscale_all_dim) ** 2`` into the softmax scale, outside RoPE.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rule = rr.scaling.YaRN(4.0, original_max_position=4096)
    >>> spec = rr.RopeSpec(head_dim=128, scaling=rule)
    >>> round(rr.attention_factor(spec), 6)
    1.138629
    >>> theta, plain = rr.inv_freq(spec), rr.inv_freq(rr.RopeSpec(head_dim=128))
    >>> float(theta[0] / plain[0]), float(theta[-1] / plain[-1])
    (1.0, 0.25)
    """

    #: Its frequencies and attention factor do not depend on seq_len.
    length_dependent: ClassVar[bool] = False
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "yarn"

    factor: float
    original_max_position: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor_value: float | None = None
    truncate: bool = True
    ext_factor: float = 1.0

    def __init__(
        self,
        factor: float,
        original_max_position: int,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        mscale: float | None = None,
        mscale_all_dim: float | None = None,
        attention_factor: float | None = None,
        truncate: bool = True,
        ext_factor: float = 1.0,
    ) -> None:
        set_field(self, "factor", check_divisor("factor", factor))
        set_field(
            self,
            "original_max_position",
            check_context_length("original_max_position", original_max_position),
        )
        set_field(self, "beta_fast", check_positive("beta_fast", beta_fast))
        set_field(self, "beta_slow", check_positive("beta_slow", beta_slow))
        set_field(self, "mscale", check_optional_real("mscale", mscale))
        set_field(self, "mscale_all_dim", check_optional_real("mscale_all_dim", mscale_all_dim))
        set_field(
            self,
            "attention_factor_value",
            check_optional_positive("attention_factor", attention_factor),
        )
        set_field(self, "truncate", check_bool("truncate", truncate))
        set_field(self, "ext_factor", _check_ext_factor(ext_factor))
        self._check_mscale_ratio()

    def _check_mscale_ratio(self) -> None:
        """The mscale ratio (when it applies) must be a finite positive attention factor."""
        if self.attention_factor_value is not None or not (self.mscale and self.mscale_all_dim):
            return
        top = yarn_mscale(self.factor, self.mscale)
        bottom = yarn_mscale(self.factor, self.mscale_all_dim)
        ratio = top / bottom if bottom != 0.0 else math.inf
        if not (math.isfinite(ratio) and ratio > 0.0):
            msg = (
                "`mscale` and `mscale_all_dim` must give a finite positive attention factor "
                f"yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim); got "
                f"mscale={self.mscale!r}, mscale_all_dim={self.mscale_all_dim!r} with "
                f"factor={self.factor!r}: {top!r} / {bottom!r}."
            )
            raise ValueError(msg)

    def __repr__(self) -> str:
        fields = {
            "factor": self.factor,
            "original_max_position": self.original_max_position,
            "beta_fast": self.beta_fast,
            "beta_slow": self.beta_slow,
            "mscale": self.mscale,
            "mscale_all_dim": self.mscale_all_dim,
            "attention_factor": self.attention_factor_value,
            "truncate": self.truncate,
        }
        if self.ext_factor != 1.0:  # YaRN's own reprs stay as they were
            fields["ext_factor"] = self.ext_factor
        return "YaRN(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"

    def correction_range(self, *, base: float, rotary_dim: int) -> tuple[float, float]:
        """The ramp's ends ``(lo, hi)`` in pair indices, as HF computes them.

        Examples
        --------
        >>> import rope_ref as rr
        >>> rr.scaling.YaRN(4.0, 4096).correction_range(base=10000.0, rotary_dim=128)
        (20, 46)
        """

        def index(turns: float) -> float:
            length = self.original_max_position / (turns * 2.0 * math.pi)
            return rotary_dim * math.log(length) / (2.0 * math.log(base))

        lo, hi = index(self.beta_fast), index(self.beta_slow)
        if self.truncate:
            lo, hi = math.floor(lo), math.ceil(hi)
        return max(lo, 0), min(hi, rotary_dim - 1)

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        r"""Return :math:`\theta_j (r_j / s + 1 - r_j)`."""
        lo, hi = self.correction_range(base=base, rotary_dim=rotary_dim)
        if lo == hi:
            hi += 0.001  # HF's guard against a zero-width ramp
        j = np.arange(rotary_dim // 2, dtype=np.float64)
        ramp = np.clip((j - lo) / (hi - lo), 0.0, 1.0)
        theta = np.asarray(inv_freq, dtype=np.float64)
        if self.ext_factor != 1.0:
            ramp = 1.0 - self.ext_factor * (1.0 - ramp)  # the interpolated share
        return theta / self.factor * ramp + theta * (1.0 - ramp)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return the factor multiplied into cos and sin (see Notes)."""
        if self.attention_factor_value is not None:
            return self.attention_factor_value
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(
                self.factor, self.mscale_all_dim
            )
        return yarn_mscale(self.factor)
