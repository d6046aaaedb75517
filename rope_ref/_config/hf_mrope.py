"""M-RoPE orders that configs name without stating them, and what no `RopeSpec` can state.

Some families deal their pairs to the position axes in an order of their own, implied by
``mrope_section`` and the family (or vLLM's ``rope_type``): `pair_map` turns them into the
pair-to-axis map of ``RopeSpec(section_order=...)``. `refuse_fope` refuses Fourier
position embedding (FoPE), whose rotation comes from learned weights, not the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rope_ref._config.families import Family
from rope_ref._config.hf_reader import ConfigReader
from rope_ref._core.spec import RopeSpec

__all__ = ["ernie_axes", "map_parameters", "openpangu_axes", "pair_map", "refuse_fope"]

#: The ``rope_type`` of vLLM's ``MRotaryEmbeddingInterleaved`` (openPangu VL).
OPENPANGU = "openpangu"
#: The ``rope_type`` of vLLM's ``BailingMRotaryEmbedding`` (Ling / Bailing VL).
BAILING = "bailing_mrope"


def ernie_axes(sections: Sequence[int]) -> tuple[int, ...]:
    """Ernie 4.5-VL's (and Bailing's) map: ``h, w, h, w, ...`` then a tail of ``t``.

    `sections` are ``(h, w, t)``, as Ernie's ``mrope_section`` lists them; positions are
    ``(t, h, w)``, so h is axis 1, w axis 2 and t axis 0 (HF
    ``Ernie4_5_VLMoeTextRotaryEmbedding.recomposition_frequencies``, vLLM
    ``Ernie4_5_VLRotaryEmbedding``).

    Examples
    --------
    >>> ernie_axes((2, 2, 3))
    (1, 2, 1, 2, 0, 0, 0)
    """
    h, w, t = sections
    return (*(1 + j % 2 for j in range(h + w)), *([0] * t))


def openpangu_axes(sections: Sequence[int]) -> tuple[int, ...]:
    """The openPangu map (vLLM ``MRotaryEmbeddingInterleaved.get_mrope_interleaved_id_list``).

    Each pair goes to the axis with pairs left that has placed the smallest share of its
    count so far (ties to the lower axis), never the previous pair's axis while another
    has pairs left. With three sections the last pair is kept for axis 0 (``force_last``).

    Examples
    --------
    >>> openpangu_axes((2, 3, 3))
    (0, 1, 2, 1, 2, 1, 2, 0)
    >>> openpangu_axes((2, 2))
    (0, 1, 0, 1)
    """
    counts = [*sections, 0] if len(sections) == 2 else list(sections)
    last_kept = len(sections) == 3
    if last_kept:
        counts[0] -= 1
    placed = [0] * len(counts)
    axes: list[int] = []
    for _ in range(sum(counts)):
        left = [a for a in range(len(counts)) if placed[a] < counts[a]]
        others = [a for a in left if not axes or a != axes[-1]] or left
        best = min(others, key=lambda a: (placed[a] / counts[a], a))
        axes.append(best)
        placed[best] += 1
    return (*axes, 0) if last_kept else tuple(axes)


def pair_map(
    rope_type: str, family: Family, params: ConfigReader, n_pairs: int
) -> tuple[int, ...] | None:
    """The pair-to-axis map the config implies, or None (the named orders apply).

    Ernie 4.5-VL's family (`Family.pair_map`), and vLLM's ``rope_type="openpangu"`` and
    ``"bailing_mrope"``; the sections are the config's ``mrope_section`` (else the
    family's default) and must count ``n_pairs`` pairs.
    """
    kind = rope_type if rope_type in (OPENPANGU, BAILING) else family.pair_map
    if kind is None:
        return None
    given = params.integers("mrope_section")
    if kind == OPENPANGU:
        if given is None or params.flag("mrope_interleaved") is not True:
            requirement = (
                "given, with mrope_interleaved=true, for rope_type 'openpangu' (vLLM's "
                "MRotaryEmbeddingInterleaved refuses it otherwise)"
            )
            params.fail("mrope_section", requirement, given, ValueError)
        if len(given) not in (2, 3) or min(given) < 1 + (len(given) == 3):
            requirement = "2 or 3 positive pair counts (the first at least 2 with 3)"
            params.fail("mrope_section", requirement, list(given), ValueError)
        sections = given
    elif kind == BAILING:  # (t, h, w): Ernie's order, the time section listed first
        if given is None or len(given) != 3 or given[1] != given[2]:
            requirement = (
                "three pair counts (t, h, w) with h == w, for rope_type 'bailing_mrope' "
                "(vLLM's BailingMRotaryEmbedding)"
            )
            params.fail("mrope_section", requirement, given, ValueError)
        sections = (given[1], given[2], given[0])
    else:
        chosen = given if given is not None else family.sections
        if chosen is None or len(chosen) != 3 or chosen[0] != chosen[1]:
            requirement = "three pair counts (h, w, t) with h == w, for Ernie 4.5-VL's order"
            params.fail("mrope_section", requirement, chosen, ValueError)
        sections = chosen
    if sum(sections) != n_pairs:
        requirement = f"pair counts summing to rotary_dim // 2 = {n_pairs}"
        params.fail("mrope_section", requirement, list(given or sections), ValueError)
    return openpangu_axes(sections) if kind == OPENPANGU else ernie_axes(sections)


def map_parameters(spec: RopeSpec) -> dict[str, Any] | None:
    """The ``rope_parameters`` of vLLM's rope type that runs `spec`'s pair map, else None.

    The inverse of `pair_map` for ``rope_type="openpangu"`` and ``"bailing_mrope"``.

    Examples
    --------
    >>> map_parameters(RopeSpec(16, section_order=(0, 1, 2, 1, 2, 1, 2, 0)))
    {'rope_type': 'openpangu', 'mrope_section': [2, 3, 3], 'mrope_interleaved': True}
    """
    order, sections = spec.section_order, spec.sections
    if isinstance(order, str) or sections is None or len(sections) not in (2, 3):
        return None
    if min(sections) >= 1 + (len(sections) == 3) and openpangu_axes(sections) == order:
        return {"rope_type": OPENPANGU, "mrope_section": list(sections), "mrope_interleaved": True}
    if len(sections) == 3 and sections[1] == sections[2]:
        t, h, w = sections
        if ernie_axes((h, w, t)) == order:
            return {"rope_type": BAILING, "mrope_section": [t, h, w]}
    return None


def refuse_fope(params: ConfigReader, cfg: ConfigReader) -> None:
    """ValueError for ``use_fope: true`` (FoPE), in the RoPE parameters or the config."""
    for reader in (params, cfg):
        if reader.flag("use_fope"):
            msg = (
                f"`use_fope` is true ({reader.where}): Fourier position embedding (FoPE, "
                "vLLM's FourierRotaryEmbedding) mixes cos and sin through learned per-head "
                "coefficient matrices (cos_coef, sin_coef) loaded with the weights, so no "
                "RopeSpec states its rotation; rope_ref cannot check it."
            )
            raise ValueError(msg)
