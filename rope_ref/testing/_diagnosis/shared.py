"""What a diagnosis is, and the helpers its checks share: alternative oracles, tests."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from rope_ref._core.aliases import Layout
from rope_ref._core.compat import host_namespace
from rope_ref._core.frequencies import attention_factor
from rope_ref._core.reference import rotate, split_pairs
from rope_ref._core.spec import RopeSpec
from rope_ref.testing._compare import F64, Comparison, Setup, tolerance

__all__ = [
    "CAUSES",
    "COMMON_BASES",
    "Diagnosis",
    "explains",
    "failing_pairs",
    "fmt",
    "full_width",
    "oracle_from_angles",
    "oracle_with_freqs",
    "pair_angles",
    "ranges",
    "rotary_mask",
    "row_failed",
    "row_p",
    "wrap",
]

#: Every cause `diagnose` can name, with what it means.
CAUSES: dict[str, str] = {
    "dtype": "the result is in another dtype than the one asked for (a downcast or upcast)",
    "not_checkable": "positions past what the dtype's error model can check (not a pass)",
    "non-finite": "NaN or infinity in the result",
    "zeros": "the result is zero where it must not be (input overwritten or output unwritten)",
    "direction": "rotation direction/sign (sin negated: the inverse rotation)",
    "layout": "pairing layout (half vs interleaved), as read or as written",
    "offset": "position offset (positions shifted by a constant)",
    "positions": "positions not used as given (per-row or arbitrary positions ignored)",
    "identity": "identity (no rotation) beyond a position range",
    "rotary_dim": "wrong rotated features (rotary_dim / rotary_start)",
    "attention_factor": "attention factor (scale of cos/sin) missing, doubled or wrong",
    "precision": "precision (positions, inverse frequencies, angles or cos/sin rounded low)",
    "scaling": "wrong or missing scaling rule (family, factor, context length or a parameter)",
    "seq_len": "a length-dependent rule at another length (an engine's configured maximum "
    "length, e.g. vLLM's max_model_len): pass seq_len",
    "sections": "multi-axis (M-RoPE) mistake: sections, section order, axis order, 1-D",
    "frequencies": "wrong frequencies (base, exponent, rotary_dim, a per-axis ladder's base)",
    "xpos_role": "an xPos query scaled like a key, or a key like a query",
    "table_layout": "a cos/sin table built for one layout applied with the other rotation",
    "position_precision": "positions rounded by the implementation (a float32 grid)",
    "position_range": "wrong beyond a position range (table wrap-around or clamping)",
    "unknown": "no single known cause explains the mismatch",
}

#: Bases to try when the frequencies are off.
COMMON_BASES = (10000.0, 500000.0, 1000000.0, 1000.0, 100000.0)


@dataclass(frozen=True)
class Diagnosis:
    """The most likely cause of a mismatch: a key of `CAUSES` and an explanation.

    Examples
    --------
    >>> from rope_ref.testing import Diagnosis
    >>> str(Diagnosis("direction", "the result is the inverse rotation"))
    'direction: the result is the inverse rotation'
    """

    cause: str
    message: str

    def __str__(self) -> str:
        return f"{self.cause}: {self.message}"


def explains(
    c: Comparison,
    alt: F64,
    *,
    tol: F64 | None = None,
    spec: RopeSpec | None = None,
    grid: F64 | None = None,
    slack: float = 2.0,
) -> bool:
    """Whether the result equals `alt` within `slack` times the tolerance.

    With `spec` or `grid`, the tolerance is the model's for that spec or those positions
    (other features rotate, other angles are larger): an alternative is judged by its own
    error model, never by the one of the angles it replaces.
    """
    if tol is None:
        tol = c.tolerance
        if (spec is not None or grid is not None) and c.model is not None:
            alt_setup = dataclasses.replace(
                c.setup,
                spec=c.setup.spec if spec is None else spec,
                grid=c.setup.grid if grid is None else grid,
            )
            tol = tolerance(alt_setup, alt, c.model, c.model.eps)
    return bool(np.all(np.abs(c.actual - alt) <= slack * tol))


def rotary_mask(spec: RopeSpec) -> np.ndarray:
    """Mask over the features: whether the spec rotates each."""
    mask = np.zeros(spec.head_dim, dtype=bool)
    mask[spec.rotary_start : spec.rotary_stop] = True
    return mask


def full_width(table: F64, layout: str) -> F64:
    """A per-pair table spread over the pair's two features in `layout`."""
    if layout == "half":
        return np.concatenate([table, table], axis=-1)
    return np.repeat(table, 2, axis=-1)


def failing_pairs(c: Comparison) -> np.ndarray:
    """Mask over the pairs: whether any element of the pair fails anywhere."""
    spec = c.setup.spec
    width = spec.rotary_stop - spec.rotary_start
    sl = c.failed[..., spec.rotary_start : spec.rotary_stop].reshape(-1, width)
    per_feature = np.any(sl, axis=0)
    n = spec.n_pairs
    if _layouts(c.setup)[1] == "half":  # the failures are of the written features
        return np.asarray(per_feature[:n] | per_feature[n:])
    return np.asarray(per_feature[0::2] | per_feature[1::2])


def row_failed(c: Comparison) -> np.ndarray:
    return np.asarray(np.any(c.failed, axis=-1))


def row_p(s: Setup) -> F64:
    return np.abs(s.row_positions)


def fmt(value: float) -> str:
    return f"{value:.6g}"


def pair_angles(s: Setup, y: F64) -> tuple[F64, F64]:
    """Angle that turns each input pair into the pair of `y`, and the pair norms."""
    spec = s.spec
    sl = slice(spec.rotary_start, spec.rotary_stop)
    read, written = _layouts(s)
    a, b = split_pairs(s.x[..., sl], layout=read)
    a2, b2 = split_pairs(y[..., sl], layout=written)
    return np.arctan2(a * b2 - b * a2, a * a2 + b * b2), np.hypot(a, b)


def _layouts(s: Setup) -> tuple[Layout, Layout]:
    """The layouts pairs are read and written in (the inverse reads the written one)."""
    if s.inverse:
        return s.spec.written_layout, s.spec.layout
    return s.spec.layout, s.spec.written_layout


def wrap(angle: F64) -> F64:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def freqs_spec(spec: RopeSpec, freqs: F64) -> RopeSpec:
    return RopeSpec(
        spec.head_dim,
        rotary_dim=spec.rotary_dim,
        rotary_start=spec.rotary_start,
        layout=spec.layout,
        output_layout=spec.output_layout,
        freqs=tuple(float(f) for f in freqs),
        sections=spec.sections,
        section_order=spec.section_order,
    )


def oracle_with_freqs(s: Setup, freqs: F64) -> F64:
    """The oracle with custom frequencies, keeping the spec's attention factor."""
    y = s.oracle(spec=freqs_spec(s.spec, freqs))
    factor = attention_factor(s.spec, s.seq_len)
    if factor != 1.0:
        mask = rotary_mask(s.spec)
        y[..., mask] *= factor
    return y


def oracle_from_angles(s: Setup, angles: F64) -> F64:
    """Rotate x by the given angles (shape ``x.shape[:-1] + (n_pairs,)``), float64."""
    factor = attention_factor(s.spec, s.seq_len)
    cos, sin = np.cos(angles) * factor, np.sin(angles) * factor
    return np.asarray(
        rotate(
            s.x,
            cos,
            sin,
            layout=s.spec.layout,
            rotary_start=s.spec.rotary_start,
            inverse=s.inverse,
            xp=host_namespace(),
            output_layout=s.spec.output_layout,
        )
    )


def ranges(idx: list[int]) -> str:
    """``0-3, 7, 9-11`` for a sorted list of indices."""
    parts: list[str] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ", ".join(parts)
