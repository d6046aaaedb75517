"""What `rope-ref check` calls a target with: its configuration, the probe and drawn cases."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check.conventions import TORCH_CONVENTIONS, Calling, Case
from rope_ref.testing._args import CheckArgs

__all__ = ["CheckConfig", "drawn_cases", "probe_case", "probe_positions", "single_case"]

#: Most tokens, batch rows and heads of a drawn case.
MAX_BATCH, MAX_HEADS, MAX_SEQ = 3, 3, 8


@dataclass(frozen=True)
class CheckConfig:
    """What to check and how: the parsed command line."""

    calling: Calling
    spec: RopeSpec
    layout: str  # "auto", "half" or "interleaved"
    max_position: int
    examples: int
    seed: int = 0
    angle_dtype: str | None = None  # "float64": strict, float32-grade angles fail
    position_dtype: str | None = None  # the target rounds its own positions to this dtype
    result_dtype: str | None = None  # results allowed in this dtype (default: the input's)
    max_ulps: float | None = None  # also hold every result to this many ulps

    @property
    def convention(self) -> str:
        """The calling convention's name."""
        return self.calling.convention

    @functools.cached_property
    def judging(self) -> CheckArgs:
        """The checker's keywords every result is compared under (built and checked once)."""
        return CheckArgs(
            angle_dtype=self.model_angle_dtype,
            dtype=self.result_dtype,
            position_dtype=self.position_dtype,
        )

    @property
    def model_angle_dtype(self) -> str | None:
        """Angle precision of the model: exact tables for the table-driven conventions.

        The ``freqs`` convention hands over float32 angles, so its model is float32's.
        """
        exact_tables = self.convention in TORCH_CONVENTIONS and self.convention != "freqs"
        if self.angle_dtype is not None or not exact_tables:
            return self.angle_dtype
        return "float64"


def probe_positions(max_position: int) -> np.ndarray:
    """Positions of the probe: 0..8, the 2^k +- 1 edges, a geometric sweep, the maximum."""
    small = np.arange(min(9, max_position + 1))
    edges = [2**k + d for k in (8, 11, 24) for d in (-1, 0, 1)]
    sweep = np.geomspace(16, max(max_position, 16), 16).round().astype(np.int64)
    values = np.concatenate([small, edges, sweep, [max_position]])
    return np.unique(values[(values >= 0) & (values <= max_position)]).astype(np.int64)


def shape_positions(cfg: CheckConfig, p: np.ndarray, batch: int) -> np.ndarray:
    """1-D positions in the shape the position mode needs (rows, multi-axis)."""
    mode = cfg.calling.positions
    if mode == "offset":  # contiguous: the first position and on
        p = p[0] + np.arange(len(p), dtype=np.int64)
    elif mode == "rows":
        p = np.stack([np.roll(p, (r * len(p)) // 2) for r in range(batch)])
    n_axes = cfg.spec.position_axes
    if n_axes is not None:  # every axis its own positions: t, then shifted h, w, ...
        p = np.stack([p + 3 * a for a in range(n_axes)], axis=-1)
    return p


def probe_case(cfg: CheckConfig, positions: np.ndarray | None = None) -> Case:
    """A deterministic case with many positions (two batch rows, two heads)."""
    p = probe_positions(cfg.max_position) if positions is None else positions
    p = shape_positions(cfg, p, 2)
    seq = p.shape[1] if cfg.calling.per_row else p.shape[0]
    return Case(batch=2, heads=2, seq=seq, positions=p, seed=12345)


def single_case(cfg: CheckConfig, position: int) -> Case:
    """A case of one token at `position` (one batch row, one head)."""
    p = shape_positions(cfg, np.array([position], dtype=np.int64), 1)
    return Case(batch=1, heads=1, seq=1, positions=p, seed=1)


def drawn_cases(cfg: CheckConfig) -> Any:
    """The Hypothesis strategy of cases for `cfg`: sizes, positions per mode, a seed."""
    from hypothesis import strategies as st

    from rope_ref.testing.strategies import positions

    @st.composite
    def cases(draw: st.DrawFn) -> Case:
        batch = draw(st.integers(1, MAX_BATCH))
        heads = draw(st.integers(1, MAX_HEADS))
        seq = draw(st.integers(1, MAX_SEQ))
        mode = cfg.calling.positions
        if mode == "offset":
            start = draw(positions((), min_value=0, max_value=max(cfg.max_position - seq + 1, 0)))
            p = shape_positions(cfg, np.atleast_1d(start) + np.arange(seq), batch)
        else:
            shape = (batch, seq) if mode == "rows" else (seq,)
            n_axes = cfg.spec.position_axes
            shape = shape if n_axes is None else (*shape, n_axes)
            p = draw(positions(shape, min_value=0, max_value=cfg.max_position))
        return Case(batch, heads, seq, p, draw(st.integers(0, 2**32 - 1)))

    return cases()
