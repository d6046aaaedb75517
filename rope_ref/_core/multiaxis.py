"""Multi-axis RoPE helpers: axial frequencies, patch position grids, M-RoPE position ids."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.frequencies import _default_inv_freq
from rope_ref._core.spec import MAX_HEAD_DIM
from rope_ref._core.validation import check_choice, check_int, check_real, check_size

__all__ = ["axial_freqs", "mrope_positions", "patch_positions"]

_KINDS: tuple[Literal["lang", "pixel"], ...] = ("lang", "pixel")
_POSITION_KINDS: tuple[Literal["index", "pixel"], ...] = ("index", "pixel")


def axial_freqs(
    sections: Sequence[int],
    *,
    base: float = 10000.0,
    kind: Literal["lang", "pixel"] = "lang",
    max_freq: float = 10.0,
) -> tuple[float, ...]:
    r"""Inverse frequencies of axial RoPE: each axis restarts the frequency ladder.

    Pass the result as ``RopeSpec(freqs=...)`` together with ``sections=sections`` (chunked
    order): axis :math:`a` then rotates its own block of :math:`s_a` pairs as an ordinary
    RoPE of dimension :math:`2 s_a`. This is the 2-D RoPE of vision transformers (the axial
    RoPE of HF's Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision towers, with ``sections=(d/4,
    d/4)`` for head size :math:`d`) and rotary-embedding-torch's ``get_axial_freqs``.
    M-RoPE (Qwen-VL text models) instead runs one ladder over all pairs: leave `freqs`
    unset there.

    Parameters
    ----------
    sections : sequence of int
        Pairs per axis, :math:`s_a \ge 1`.
    base : float, default 10000.0
        Frequency base :math:`b > 1` of the ``"lang"`` ladder.
    kind : {"lang", "pixel"}, default "lang"
        ``"lang"``: :math:`b^{-2j/(2 s_a)}` for :math:`j < s_a`. ``"pixel"``:
        rotary-embedding-torch's ``freqs_for="pixel"``, :math:`\pi` times :math:`s_a`
        evenly spaced values from 1 to ``max_freq / 2``, for positions in :math:`[-1, 1]`
        (``patch_positions(..., kind="pixel")``).
    max_freq : float, default 10.0
        Highest pixel frequency (``"pixel"`` only); positive.

    Returns
    -------
    tuple of float
        ``sum(sections)`` inverse frequencies, axis by axis.

    Raises
    ------
    ValueError
        If `sections` is empty or holds a non-positive size, `base` is not greater than 1,
        `max_freq` is not positive, or `kind` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> rr.axial_freqs((2, 2), base=100.0)
    (1.0, 0.1, 1.0, 0.1)
    >>> spec = rr.RopeSpec(head_dim=8, freqs=rr.axial_freqs((2, 2)), sections=(2, 2))
    >>> grid = rr.patch_positions((2, 3))           # 6 patches, (row, column) each
    >>> rr.apply_rope(np.ones((6, 8)), spec, grid).shape
    (6, 8)
    """
    kind = check_choice("kind", kind, _KINDS)
    sizes = _check_sizes("sections", sections)
    if sum(sizes) > MAX_HEAD_DIM // 2:
        msg = (
            f"`sections` must hold at most {MAX_HEAD_DIM // 2:,} pairs in all (RopeSpec's "
            f"head_dim is at most {MAX_HEAD_DIM:,}); got {sum(sizes):,}."
        )
        raise ValueError(msg)
    if kind == "pixel":
        top = check_real("max_freq", max_freq)
        if top <= 0.0:
            msg = f"`max_freq` must be positive; got {top!r}."
            raise ValueError(msg)
        if not math.isfinite(top / 2.0 * math.pi):
            msg = (
                "`max_freq` must keep the highest frequency, pi * max_freq / 2, finite in "
                f"float64 (at most {sys.float_info.max / math.pi * 2.0:.6g}); got {top!r}."
            )
            raise ValueError(msg)
        ladders = [np.linspace(1.0, top / 2.0, s) * math.pi for s in sizes]
        return tuple(float(f) for ladder in ladders for f in ladder)
    b = check_real("base", base)
    if b <= 1.0:
        msg = f"`base` must be greater than 1; got {b!r}."
        raise ValueError(msg)
    return tuple(f for s in sizes for f in _default_inv_freq(b, 2 * s))


def patch_positions(
    shape: Sequence[int],
    *,
    kind: Literal["index", "pixel"] = "index",
    merge_size: int = 1,
) -> NDArray[np.int64] | NDArray[np.float64]:
    """Positions of the patches of an image ``(H, W)`` or video ``(T, H, W)``, one row each.

    Parameters
    ----------
    shape : sequence of int
        Patches along each axis, e.g. ``(H, W)`` or ``(T, H, W)``.
    kind : {"index", "pixel"}, default "index"
        ``"index"``: integer coordinates ``0 .. n - 1`` per axis. ``"pixel"``: ``n`` evenly
        spaced values in ``[-1, 1]`` (rotary-embedding-torch's pixel positions).
    merge_size : int, default 1
        Order the tokens block by block over ``merge_size x merge_size`` blocks of the last
        two axes, as the Qwen-VL vision towers do before merging patches (HF's
        ``get_vision_position_ids``). 1 is plain row-major order.

    Returns
    -------
    numpy.ndarray
        Shape ``(prod(shape), len(shape))``: int64 for ``"index"``, float64 for ``"pixel"``.
        With ``merge_size=1``, ``reshape(*shape, len(shape))`` gives the grid.

    Raises
    ------
    ValueError
        If a size is not positive, or the last two sizes are not multiples of
        `merge_size`.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.patch_positions((2, 2)).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> rr.patch_positions((2, 4), merge_size=2)[:4].tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> rr.patch_positions((3,), kind="pixel").ravel().tolist()
    [-1.0, 0.0, 1.0]
    """
    kind = check_choice("kind", kind, _POSITION_KINDS)
    sizes = _check_sizes("shape", shape)
    merge = check_int("merge_size", merge_size, minimum=1)
    check_size("`shape`", "positions", (math.prod(sizes), len(sizes)))
    axes: list[np.ndarray] = (
        [np.linspace(-1.0, 1.0, n) for n in sizes]
        if kind == "pixel"
        else [np.arange(n, dtype=np.int64) for n in sizes]
    )
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    if merge > 1:
        grid = _block_major(grid, sizes, merge)
    return grid.reshape(-1, len(sizes))


def _block_major(grid: np.ndarray, sizes: tuple[int, ...], merge: int) -> np.ndarray:
    if len(sizes) < 2 or sizes[-1] % merge or sizes[-2] % merge:
        msg = f"`merge_size` must divide the last two sizes of shape {sizes}; got {merge}."
        raise ValueError(msg)
    *lead, h, w = sizes
    blocks = grid.reshape(*lead, h // merge, merge, w // merge, merge, len(sizes))
    n = len(lead)
    order = (*range(n), n, n + 2, n + 1, n + 3, n + 4)
    return blocks.transpose(order)


def mrope_positions(
    segments: Sequence[int | Sequence[int]], *, merge_size: int = 1, axes: int = 3
) -> NDArray[np.int64]:
    """M-RoPE position ids ``(t, h, w)`` of a sequence of text runs and images or videos.

    A text run of ``n`` tokens gets ``start + arange(n)`` on all three axes; an image or
    video of ``(T, H, W)`` patches gets ``T * (H // m) * (W // m)`` tokens with coordinates
    ``start + (t, h, w)`` (``m`` = `merge_size`). Every segment starts at
    ``max(previous positions) + 1`` (0 for the first). Use them with
    ``RopeSpec(sections=...)`` (Qwen2/2.5-VL chunked, Qwen3-VL interleaved). A spec with
    more axes (a pair map with ggml's fourth position ``e``, as IMROPE's) takes ``axes=``
    its ``position_axes``: the columns past ``(t, h, w)`` are 0 for every token, as
    llama.cpp fills ``e`` for text and images alike.

    Parameters
    ----------
    segments : sequence
        In order: an int (a run of that many text tokens, possibly 0) or a ``(T, H, W)``
        triple of patch counts (before merging, like HF's ``image_grid_thw``).
    merge_size : int, default 1
        Spatial merge of the vision tower (2 for Qwen2-VL); must divide ``H`` and ``W``.
    axes : int, default 3
        Columns of the result, at least 3: ``(t, h, w)`` then zeros (ggml's ``e``).

    Returns
    -------
    numpy.ndarray
        int64, shape ``(n_tokens, axes)``. During decoding, the next token's position is
        ``positions.max() + 1`` on every axis; ``positions.max() + 1 - n_tokens`` is HF's
        ``rope_deltas``.

    Raises
    ------
    ValueError
        If a text run is negative, a grid is not three positive sizes, `merge_size`
        does not divide ``H`` and ``W``, or `axes` is below 3 or above 32768.
    TypeError
        If `segments` is not a sequence of ints and triples, or `merge_size` or `axes` is
        not an integer.

    Notes
    -----
    HF transformers 5.x (``Qwen2VLModel.get_rope_index``) advances by
    ``max(H, W) // m`` after a vision segment instead of ``max + 1``; the two agree
    unless a video has more frames than rows and columns (``T > max(H, W) // m``), where
    HF's next segment overlaps the video's last temporal positions. HF 4.x used
    ``max + 1``, as here. Qwen2.5-VL additionally spaces video frames by a time interval,
    and Qwen3-VL splits videos into one-frame grids separated by timestamp text; build
    those sequences segment by segment.

    Examples
    --------
    >>> import rope_ref as rr
    >>> rr.mrope_positions([2, (1, 2, 2), 1]).tolist()
    [[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 3, 2], [2, 3, 3], [4, 4, 4]]
    >>> rr.mrope_positions([2, (1, 2, 2)], axes=4).tolist()  # ggml's IMROPE: e = 0
    [[0, 0, 0, 0], [1, 1, 1, 0], [2, 2, 2, 0], [2, 2, 3, 0], [2, 3, 2, 0], [2, 3, 3, 0]]
    """
    merge = check_int("merge_size", merge_size, minimum=1)
    n_axes = check_int("axes", axes, minimum=3)
    if n_axes > MAX_HEAD_DIM // 2:  # a spec has at most one axis per pair
        msg = f"`axes` must be at most {MAX_HEAD_DIM // 2} (one per pair); got {n_axes}."
        raise ValueError(msg)
    if isinstance(segments, str | bytes) or not isinstance(segments, Sequence | np.ndarray):
        msg = (
            "`segments` must be a sequence of ints (text runs) and (T, H, W) triples; "
            f"got {segments!r}."
        )
        raise TypeError(msg)
    blocks: list[NDArray[np.int64]] = []
    start = tokens = 0
    for segment in segments:
        if isinstance(segment, int | np.integer) and not isinstance(segment, bool):
            count = check_int("segments", segment, minimum=0)
            tokens += count
            check_size("`segments`", "positions", (tokens, n_axes))
            block = np.repeat(np.arange(count, dtype=np.int64)[:, None], 3, axis=1)
        else:
            block, tokens = _vision_block(segment, merge, tokens, n_axes)
        block = block + start
        blocks.append(block)
        if len(block):
            start = int(block.max()) + 1
    ids = np.concatenate(blocks, axis=0) if blocks else np.zeros((0, 3), dtype=np.int64)
    if n_axes == 3:
        return ids
    return np.concatenate([ids, np.zeros((len(ids), n_axes - 3), dtype=np.int64)], axis=1)


def _vision_block(
    segment: object, merge: int, tokens: int, n_axes: int
) -> tuple[NDArray[np.int64], int]:
    """The positions of one (T, H, W) segment, and `tokens` counting them too."""
    if isinstance(segment, str) or not isinstance(segment, Sequence | np.ndarray):
        msg = f"`segments` must hold ints (text runs) or (T, H, W) triples; got {segment!r}."
        raise TypeError(msg)
    t, h, w = _check_sizes("segments", segment, length=3)
    if h % merge or w % merge:
        msg = f"`merge_size` must divide the grid's H and W ({h}, {w}); got {merge}."
        raise ValueError(msg)
    tokens += t * (h // merge) * (w // merge)
    check_size("`segments`", "positions", (tokens, n_axes))
    grid = np.stack(
        np.meshgrid(np.arange(t), np.arange(h // merge), np.arange(w // merge), indexing="ij"),
        axis=-1,
    )
    return grid.reshape(-1, 3).astype(np.int64), tokens


def _check_sizes(name: str, sizes: object, *, length: int | None = None) -> tuple[int, ...]:
    if isinstance(sizes, str) or not isinstance(sizes, Sequence | np.ndarray):
        msg = f"`{name}` must be a sequence of positive integers; got {sizes!r}."
        raise TypeError(msg)
    values = tuple(check_int(name, s, minimum=1) for s in sizes)
    if not values or (length is not None and len(values) != length):
        want = "at least one size" if length is None else f"{length} sizes"
        msg = f"`{name}` must have {want}; got {tuple(sizes)!r}."
        raise ValueError(msg)
    return values
