"""Diagnoses of how features are paired: direction, layout, xPos role, table layout."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from rope_ref._core.aliases import Layout, Role
from rope_ref._core.frequencies import rope_cos_sin
from rope_ref.testing._compare import F64, Comparison, tolerance
from rope_ref.testing._diagnosis.focus import explains_by, focus, with_spec
from rope_ref.testing._diagnosis.shared import Diagnosis, explains, full_width

__all__ = ["direction_or_layout", "table_layout"]


def direction_or_layout(c: Comparison) -> Diagnosis | None:
    s = c.setup
    spec = s.spec
    other: Layout = "interleaved" if spec.layout == "half" else "half"
    swapped = dataclasses.replace(spec, layout=other)
    pairs = {
        "half": "(j, j + n/2) (GPT-NeoX / HF rotate_half)",
        "interleaved": "(2j, 2j + 1) (GPT-J / Meta complex / RoFormer)",
    }
    swapped_role = _xpos_role_swapped(c)
    if swapped_role is not None:
        return swapped_role
    if explains(c, s.oracle(inverse=not s.inverse)):
        return Diagnosis(
            "direction",
            "the result is the inverse rotation (every angle negated): sin has the wrong "
            "sign, or rotate_half returns (x2, -x1) instead of (-x2, x1).",
        )
    if explains(c, s.oracle(spec=swapped), spec=swapped):
        return Diagnosis(
            "layout",
            f"the result pairs features {pairs[other]}, but the spec's layout "
            f"{spec.layout!r} pairs {pairs[spec.layout]}; use layout={other!r} in the spec, "
            "or permute the q/k weights (rope_ref.permute_weights).",
        )
    if explains(c, s.oracle(spec=swapped, inverse=not s.inverse), spec=swapped):
        return Diagnosis(
            "layout",
            f"the result pairs features {pairs[other]} and also rotates the other way; "
            f"the spec's layout is {spec.layout!r}.",
        )
    return _read_and_written(c)


def _read_and_written(c: Comparison) -> Diagnosis | None:
    """Pairs read in one layout and written in another (DeepSeek MLA), or not, unlike the spec.

    Tried: every (layout, output_layout) whose read or written layout differs from the
    spec's, except the plain swap `direction_or_layout` tries first.
    """
    s = c.setup
    spec = s.spec
    want = (spec.layout, spec.written_layout)
    layouts: tuple[Layout, Layout] = ("half", "interleaved")
    for read, written in itertools.product(layouts, repeat=2):
        if (read, written) == want or read == written == _other(spec.layout):
            continue
        try:
            alt = dataclasses.replace(spec, layout=read, output_layout=written)
        except ValueError:
            continue
        if explains_by(c, with_spec(alt), spec=alt):
            fix = f"layout={read!r}" + (f", output_layout={written!r}" if read != written else "")
            mla = _MLA if ("interleaved", "half") in ((read, written), want) else ""
            return Diagnosis(
                "layout",
                f"the result reads pairs in the {read!r} layout and writes them in the "
                f"{written!r} layout; the spec reads {want[0]!r} and writes {want[1]!r}. "
                f"{mla}Use {fix} in the spec if "
                "that is the model's convention, or fix the permutation of the result.",
            )
    return None


def _other(layout: str) -> str:
    return "interleaved" if layout == "half" else "half"


_MLA = (
    "(DeepSeek MLA's rotary part reads interleaved pairs and writes them half: "
    "layout='interleaved', output_layout='half'.) "
)


def _xpos_role_swapped(c: Comparison) -> Diagnosis | None:
    """An xPos query scaled like a key, or a key like a query."""
    s = c.setup
    if s.spec.xpos is None or s.role is None:
        return None
    other: Role = "query" if s.role == "key" else "key"
    if not explains(c, dataclasses.replace(s, role=other).oracle()):
        return None
    sign = {"query": "+", "key": "-"}
    return Diagnosis(
        "xpos_role",
        f"the {s.role} was scaled like a {other}: xPos scales queries by "
        "zeta^(+p / scale_base) and keys by zeta^(-p / scale_base); this result carries "
        f"zeta^({sign[other]}p / scale_base). Pass the {s.role}'s role (or the inverse "
        "scale) to the function that scales it.",
    )


_TABLE = {
    "half": "cat(freqs, freqs) (transformers, rotate_half)",
    "interleaved": "repeat_interleave(freqs, 2) (Meta, GPT-J, timm, diffusers' use_real)",
}


_ROTATION = {
    "half": "rotate_half, pairs (j, j + n/2)",
    "interleaved": "pairs (2j, 2j + 1)",
}


def _rotated_partner(x: F64, layout: str) -> F64:
    """``rotate_half(x)`` for "half"; ``(-x1, x0, -x3, x2, ...)`` for "interleaved"."""
    if layout == "half":
        n = x.shape[-1] // 2
        return np.concatenate([-x[..., n:], x[..., :n]], axis=-1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return out


def table_layout(c: Comparison) -> Diagnosis | None:
    """A full-width cos/sin table built for one layout, applied with the other rotation."""
    spec = c.setup.spec
    if spec.xpos is not None or spec.n_pairs < 2:
        return None
    small = focus(c)
    for table, rotation in (("interleaved", "half"), ("half", "interleaved")):
        if small is not c and not _table_fits(small, table, rotation):
            continue
        if _table_fits(c, table, rotation):
            return Diagnosis(
                "table_layout",
                f"a cos/sin table built for the {table!r} layout ({_TABLE[table]}) was "
                f"applied with the {rotation!r} rotation ({_ROTATION[rotation]}); the spec's "
                f"layout is {spec.layout!r}: build the table as {_TABLE[spec.layout]} and "
                f"rotate {_ROTATION[spec.layout]}.",
            )
    return None


def _table_fits(c: Comparison, table: str, rotation: str) -> bool:
    """Whether the result is x rotated with a `table`-layout table and `rotation` pairs."""
    s = c.setup
    spec = s.spec
    cos, sin = (
        np.asarray(t, dtype=np.float64) for t in rope_cos_sin(spec, s.grid, None, s.seq_len)
    )
    sl = slice(spec.rotary_start, spec.rotary_stop)
    xr = s.x[..., sl]
    sign = -1.0 if s.inverse else 1.0
    alt = s.x.copy()
    alt[..., sl] = xr * full_width(cos, table) + sign * _rotated_partner(xr, rotation) * full_width(
        sin, table
    )
    return explains(c, alt, tol=_both_pairings_tolerance(c, alt))


def _both_pairings_tolerance(c: Comparison, alt: F64) -> F64:
    """The model's tolerance with each feature's pair norm taken in either layout.

    A table of one layout applied with the other rotation mixes each feature with a
    partner of the other pairing: its rounding scales with that pair's norm, which the
    spec's own pairing does not see (a float64 result then fails by rounding alone).
    """
    s = c.setup
    if c.model is None:
        return c.tolerance
    other: Layout = "interleaved" if s.spec.layout == "half" else "half"
    swapped = dataclasses.replace(s.spec, layout=other, output_layout=None)
    alt_setup = dataclasses.replace(s, spec=swapped)
    wider = tolerance(alt_setup, alt, c.model, c.model.eps)
    return np.asarray(np.maximum(c.tolerance, wider), dtype=np.float64)
