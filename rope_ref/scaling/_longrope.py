"""LongRoPE (Phi-3 "su"): per-pair rescale factors, short or long by sequence length."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from rope_ref.scaling._checks import (
    check_context_length,
    check_factor_list,
    check_length,
    check_optional_positive,
    set_field,
)

__all__ = ["LongRoPE"]


@dataclass(frozen=True, init=False, repr=False)
class LongRoPE:
    r"""LongRoPE: divide each pair's frequency by its own factor, chosen by `seq_len`.

    Parameters
    ----------
    short_factor, long_factor : sequence of float
        One positive factor per pair (``rotary_dim // 2``; checked when the rule is put
        in a `rope_ref.RopeSpec`).
    original_max_position : int
        :math:`L_0 > 1`: sequences longer than this use `long_factor`.
    factor : float, optional
        The context-extension factor :math:`s`, used only for the default attention factor.
        HF defaults it to ``max_position_embeddings / original_max_position_embeddings``;
        `rope_ref.RopeSpec.from_hf` passes that value.
    attention_factor : float, optional
        Explicit attention factor (positive).

    Raises
    ------
    ValueError
        If a factor is not finite or not positive (or, in the lists, too small to divide
        by: below about 5.6e-309), or `original_max_position` is not
        greater than 1; at `rope_ref.RopeSpec` construction, if a factor list does not have
        ``rotary_dim // 2`` entries.

    Notes
    -----
    With :math:`e = ` `long_factor` if `seq_len` :math:`> L_0` else `short_factor` (also
    when `seq_len` is None),

    .. math::
        \theta'_j = \theta_j / e_j, \qquad
        a = \sqrt{1 + \ln s / \ln L_0} \;(s > 1), \quad a = 1 \;(s \le 1 \text{ or no } s).

    :math:`a` (or `attention_factor`) multiplies cos and sin. Because the factors switch at
    :math:`L_0`, keys cached before the switch and queries after it use different
    frequencies (HF PR #33129 drops the cache when generation crosses :math:`L_0`);
    `rope_ref.rerotate` moves cached keys to the new frequencies exactly.

    Where peers differ is the selection policy: HF chooses per forward pass with
    ``max(position_ids) + 1``; vLLM once at start-up by ``max_model_len > L_0`` (and derives
    the attention factor from ``max_position_embeddings``, ignoring ``factor``); mlx-lm
    always uses ``long_factor`` and scales the input instead of cos/sin; llama.cpp chooses by
    the allocated context size, so short prompts get long factors (llama.cpp #24823).
    rope_ref chooses by the `seq_len` it is given (default ``max(positions) + 1``).

    Examples
    --------
    >>> import rope_ref as rr
    >>> rule = rr.scaling.LongRoPE([1.0, 2.0], [4.0, 8.0], original_max_position=4096, factor=32.0)
    >>> spec = rr.RopeSpec(head_dim=4, scaling=rule)
    >>> rr.inv_freq(spec, seq_len=100).tolist(), rr.inv_freq(spec, seq_len=5000).tolist()
    ([1.0, 0.005], [0.25, 0.00125])
    >>> round(rr.attention_factor(spec), 6)
    1.190238
    """

    #: Its frequencies or attention factor change with seq_len: tables are built per length.
    length_dependent: ClassVar[bool] = True
    #: The formula `backend="exact"` evaluates for this class (not its subclasses).
    exact_form: ClassVar[str] = "longrope"

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position: int
    factor: float | None = None
    attention_factor_value: float | None = None

    def __init__(
        self,
        short_factor: object,
        long_factor: object,
        original_max_position: int,
        factor: float | None = None,
        attention_factor: float | None = None,
    ) -> None:
        short = check_factor_list("short_factor", short_factor)
        long = check_factor_list("long_factor", long_factor)
        if len(short) != len(long):
            msg = (
                f"`long_factor` must have as many entries as short_factor ({len(short)}); "
                f"got {len(long)}."
            )
            raise ValueError(msg)
        set_field(self, "short_factor", short)
        set_field(self, "long_factor", long)
        set_field(
            self,
            "original_max_position",
            check_context_length("original_max_position", original_max_position, minimum=1.0),
        )
        set_field(self, "factor", check_optional_positive("factor", factor))
        set_field(
            self,
            "attention_factor_value",
            check_optional_positive("attention_factor", attention_factor),
        )

    def __repr__(self) -> str:
        return (
            f"LongRoPE(short_factor={list(self.short_factor)!r}, "
            f"long_factor={list(self.long_factor)!r}, "
            f"original_max_position={self.original_max_position!r}, factor={self.factor!r}, "
            f"attention_factor={self.attention_factor_value!r})"
        )

    def check_rotary_dim(self, rotary_dim: int) -> None:
        """Raise ValueError unless each factor list has ``rotary_dim // 2`` entries."""
        check_length("short_factor", self.short_factor, rotary_dim)
        check_length("long_factor", self.long_factor, rotary_dim)

    def uses_long(self, seq_len: float | None) -> bool:
        """Whether `seq_len` selects `long_factor` (``seq_len > original_max_position``)."""
        return seq_len is not None and seq_len > self.original_max_position

    def inv_freq(
        self, inv_freq: NDArray[np.float64], *, base: float, rotary_dim: int, seq_len: float | None
    ) -> NDArray[np.float64]:
        r"""Return :math:`\theta_j / e_j`."""
        self.check_rotary_dim(rotary_dim)
        ext = self.long_factor if self.uses_long(seq_len) else self.short_factor
        return np.asarray(inv_freq, dtype=np.float64) / np.asarray(ext, dtype=np.float64)

    def attention_factor(self, *, seq_len: float | None) -> float:
        """Return the factor multiplied into cos and sin (see Notes)."""
        if self.attention_factor_value is not None:
            return self.attention_factor_value
        if self.factor is None or self.factor <= 1.0:
            return 1.0
        return math.sqrt(1.0 + math.log(self.factor) / math.log(self.original_max_position))
