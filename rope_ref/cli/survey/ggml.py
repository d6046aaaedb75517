"""llama.cpp's ggml: ``ggml_rope_ext`` through ggml-python, on the CPU backend.

A tensor ``[head_dim, n_head, n_tokens]`` (ggml lists the fastest axis first: NumPy's
``(n_tokens, n_head, head_dim)``) is rotated at int32 positions ``[n_tokens]``; the batch
is laid along the tokens. Mode ``NORMAL`` (0) pairs ``(2j, 2j + 1)``, ``NEOX`` (2) pairs
``(j, j + n_dims / 2)``; ``n_dims`` below the head size rotates the first features only.
ggml's angle for pair ``j`` is ``p * freq_base ** (-2j / n_dims) / c_j`` (``c`` the optional
frequency factors), times ``freq_scale``; with ``ext_factor`` the fast pairs keep the
unscaled angle along YaRN's ramp between the correction dimensions of ``n_ctx_orig``,
``beta_fast`` and ``beta_slow``, and cos and sin are multiplied by ``attn_factor`` (times
``1 + 0.1 ln(1 / freq_scale)`` under YaRN).

The frequency factors are built as llama.cpp's converter (``convert_hf_to_gguf.py``) writes
them into a GGUF: Llama 3.1's from its rule in float64, LongRoPE's the checkpoint's list.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rope_ref import scaling as rules
from rope_ref._core.multiaxis import axial_freqs
from rope_ref._core.spec import RopeSpec
from rope_ref.cli.survey._given import inexpressible
from rope_ref.cli.survey.peers import HEAD_DIM, Entry, Group, _quiet_import

__all__ = ["GROUP", "GgmlEntry", "imrope_axes", "llama3_factors"]

NORMAL, NEOX, MROPE, VISION, IMROPE = 0, 2, 8, 24, 40
#: The context length LongRoPE's row is configured for (llama.cpp's ``n_ctx``).
N_CTX = 131072
_LONG = tuple(1.0 + 0.5 * j for j in range(HEAD_DIM // 2))
_SHORT = tuple(1.0 + 0.05 * j for j in range(HEAD_DIM // 2))


@dataclass(frozen=True)
class GgmlEntry(Entry):
    """An entry run in `dtype`, compared at `seq_len` where the rule takes one."""

    dtype: str = "float32"
    seq_len: int | None = None


@dataclass(frozen=True)
class Rope:
    """The arguments of one ``ggml_rope_ext`` call."""

    mode: int = NORMAL
    n_dims: int = HEAD_DIM
    freq_base: float = 10000.0
    freq_scale: float = 1.0
    ext_factor: float = 0.0
    attn_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    n_ctx_orig: int = 0
    factors: tuple[float, ...] | None = None
    dtype: str = "float32"
    sections: tuple[int, int, int, int] | None = None  # ggml_rope_multi's (t, h, w, e)


def imrope_axes(sections: tuple[int, int, int, int], n_pairs: int) -> tuple[int, ...]:
    """The position axis (t, h, w, e = 0..3) of each pair under ggml's IMROPE.

    ``ggml_mrope_cache_init``: pair ``j`` is in sector ``j % sum(sections)``; a sector
    ``s`` follows h where ``s % 3 == 1`` and ``s < 3 * sections[1]``, w where ``s % 3 ==
    2`` and ``s < 3 * sections[2]``, t where ``s % 3 == 0`` and ``s < 3 * sections[0]``,
    and e (the fourth position) everywhere else.

    Examples
    --------
    >>> imrope_axes((2, 1, 1, 1), 5)  # sector 4: 4 % 3 == 1 but 4 >= 3 * 1
    (0, 1, 2, 0, 3)
    """
    total = sum(sections)
    axes = []
    for j in range(n_pairs):
        sector = j % total
        picked = [a for a in (1, 2, 0) if sector % 3 == a and sector < 3 * sections[a]]
        axes.append(picked[0] if picked else 3)
    return tuple(axes)


def llama3_factors(
    base: float, dim: int, factor: float, low: float, high: float, old_context: int
) -> tuple[float, ...]:
    """Llama 3.1's frequency factors, as ``convert_hf_to_gguf.py`` computes them.

    Parameters
    ----------
    base, dim : float, int
        ``rope_theta`` and the rotated features.
    factor, low, high, old_context : float, float, float, int
        ``rope_scaling``'s ``factor``, ``low_freq_factor``, ``high_freq_factor`` and
        ``original_max_position_embeddings``.

    Returns
    -------
    tuple of float
        One divisor per pair: 1 for the fast pairs, `factor` for the slow ones.

    Examples
    --------
    >>> f = llama3_factors(500000.0, 64, 8.0, 1.0, 4.0, 8192)
    >>> len(f), f[0], f[-1]
    (32, 1.0, 8.0)
    """
    out = []
    for j in range(dim // 2):
        wavelength = 2 * math.pi * base ** (2 * j / dim)
        if wavelength < old_context / high:
            out.append(1.0)
        elif wavelength > old_context / low:
            out.append(factor)
        else:
            smooth = (old_context / wavelength - low) / (high - low)
            out.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return tuple(out)


def rope_ext(x: np.ndarray, positions: np.ndarray, rope: Rope) -> np.ndarray:
    """``ggml_rope_ext`` of `x` ``(n_tokens, n_head, head_dim)`` at int32 `positions`.

    With ``rope.sections``, ``ggml_rope_multi``: `positions` is ``(n_tokens, k)``, the
    first ``k`` of the t, h, w and e positions (2 <= k <= 4; the others are 0), and is
    passed as ggml lays it out, the four one after the other.
    """
    n = x.shape[0]
    if rope.sections is None:
        fits, expected = positions.shape == (n,), f"{(n,)}"
    else:
        fits = positions.ndim == 2 and positions.shape[0] == n and 2 <= positions.shape[1] <= 4
        expected = f"({n}, 2 to 4)"
    if not fits:  # ggml would abort the process
        msg = f"`positions` must have shape {expected} for x of {x.shape}; got {positions.shape}"
        raise ValueError(msg)
    ggml = _quiet_import("ggml")
    utils = _quiet_import("ggml.utils")
    size = 16 * 1024 * 1024 + 4 * x.nbytes + 8 * positions.size
    ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=size, mem_buffer=None))
    try:
        a = utils.from_numpy(np.ascontiguousarray(x, dtype=rope.dtype), ctx)
        if rope.sections is not None:
            axes = np.zeros((4, positions.shape[0]), dtype=np.int32)
            axes[: positions.shape[1]] = positions.T
            positions = axes.ravel()
        b = utils.from_numpy(positions.astype(np.int32), ctx)
        factors = None if rope.factors is None else np.asarray(rope.factors, np.float32)
        c = None if factors is None else utils.from_numpy(factors, ctx)
        tail = (
            rope.mode,
            rope.n_ctx_orig,
            rope.freq_base,
            rope.freq_scale,
            rope.ext_factor,
            rope.attn_factor,
            rope.beta_fast,
            rope.beta_slow,
        )
        if rope.sections is None:
            out = ggml.ggml_rope_ext(ctx, a, b, c, rope.n_dims, *tail)
        else:
            sections = (ctypes.c_int * 4)(*rope.sections)
            out = ggml.ggml_rope_multi(ctx, a, b, c, rope.n_dims, sections, *tail)
        graph = ggml.ggml_new_graph(ctx)
        ggml.ggml_build_forward_expand(graph, out)
        ggml.ggml_graph_compute_with_ctx(ctx, graph, 1)
        return np.array(utils.to_numpy(out)).reshape(x.shape)  # ggml drops trailing 1s
    finally:
        ggml.ggml_free(ctx)


def make_runner(rope: Rope) -> Any:
    """A survey runner: the batch laid along the tokens, ``[head_dim, n_head, n_tokens]``."""

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        b, h, s, d = x.shape
        tokens = np.swapaxes(x, 1, 2).reshape(b * s, h, d)
        ids = np.tile(p, b) if p.ndim == 1 else np.tile(p, (b, 1))  # M-RoPE: (tokens, axes)
        y = rope_ext(tokens, ids, rope)
        return np.swapaxes(y.reshape(b, s, h, d), 1, 2)

    return run


def _yarn_scale(factor: float) -> float:
    return 1.0 + 0.1 * math.log(factor)


def _cases() -> list[tuple[str, Rope, RopeSpec | str, int | None]]:
    llama3 = llama3_factors(500000.0, HEAD_DIM, 8.0, 1.0, 4.0, 8192)
    long_scale = math.sqrt(1 + math.log(N_CTX / 4096) / math.log(4096))
    yarn = Rope(NEOX, freq_scale=0.25, ext_factor=1.0, n_ctx_orig=32768)
    return [
        ("NORMAL, freq_base=10000", Rope(), RopeSpec(HEAD_DIM, layout="interleaved"), None),
        ("NEOX, freq_base=10000", Rope(NEOX), RopeSpec(HEAD_DIM, layout="half"), None),
        (
            "NEOX, n_dims=32 (partial), freq_base=500000",
            Rope(NEOX, n_dims=32, freq_base=500000.0),
            RopeSpec(HEAD_DIM, rotary_dim=32, base=500000.0, layout="half"),
            None,
        ),
        (
            "NORMAL, freq_scale=0.25 (linear 4)",
            Rope(freq_scale=0.25),
            RopeSpec(HEAD_DIM, scaling=rules.Linear(4.0), layout="interleaved"),
            None,
        ),
        (
            "NEOX, YaRN: freq_scale=0.25, ext_factor=1, n_ctx_orig=32768, beta 32/1",
            yarn,
            RopeSpec(HEAD_DIM, scaling=rules.YaRN(4.0, 32768), layout="half"),
            None,
        ),
        (
            "NEOX, YaRN as above, attn_factor=0.8",
            dataclasses.replace(yarn, attn_factor=0.8),
            RopeSpec(
                HEAD_DIM,
                scaling=rules.YaRN(4.0, 32768, attention_factor=0.8 * _yarn_scale(4.0)),
                layout="half",
            ),
            None,
        ),
        (
            "NEOX, YaRN ext_factor=0.5 (partial YaRN)",
            dataclasses.replace(yarn, ext_factor=0.5),
            RopeSpec(HEAD_DIM, scaling=rules.YaRN(4.0, 32768, ext_factor=0.5), layout="half"),
            None,
        ),
        (
            "NORMAL, freq_base=500000, Llama 3.1 frequency factors (8, 1, 4, 8192)",
            Rope(freq_base=500000.0, factors=llama3),
            RopeSpec(
                HEAD_DIM,
                base=500000.0,
                scaling=rules.Llama3(8.0, 8192, 1.0, 4.0),
                layout="interleaved",
            ),
            None,
        ),
        (
            f"NEOX, LongRoPE long factors, attn_factor={long_scale:.4f} (n_ctx={N_CTX}, "
            "n_ctx_orig=4096)",
            Rope(NEOX, factors=_LONG, attn_factor=long_scale, n_ctx_orig=4096),
            RopeSpec(
                HEAD_DIM, scaling=rules.LongRoPE(_SHORT, _LONG, 4096, N_CTX / 4096), layout="half"
            ),
            N_CTX,
        ),
        (
            "MROPE, sections=(8, 12, 12, 0) (Qwen2-VL), freq_base=1e6",
            Rope(MROPE, freq_base=1e6, sections=(8, 12, 12, 0)),
            RopeSpec(HEAD_DIM, base=1e6, sections=(8, 12, 12)),
            None,
        ),
        (
            "IMROPE, sections=(11, 11, 10, 0), freq_base=1e6",
            Rope(IMROPE, freq_base=1e6, sections=(11, 11, 10, 0)),
            RopeSpec(HEAD_DIM, base=1e6, sections=(11, 11, 10), section_order="interleaved"),
            None,
        ),
        (
            "IMROPE, sections=(12, 10, 10, 0) (Qwen3-VL's proportions): pair 31 follows e",
            Rope(IMROPE, freq_base=1e6, sections=(12, 10, 10, 0)),
            RopeSpec(HEAD_DIM, base=1e6, section_order=imrope_axes((12, 10, 10, 0), 32)),
            None,
        ),
        (
            "VISION, n_dims=32, sections=(16, 16, 0, 0) (Qwen2-VL's vision tower)",
            Rope(VISION, n_dims=HEAD_DIM // 2, sections=(16, 16, 0, 0)),
            RopeSpec(HEAD_DIM, freqs=axial_freqs((16, 16)), sections=(16, 16)),
            None,
        ),
        ("NORMAL, float16", Rope(dtype="float16"), RopeSpec(HEAD_DIM, layout="interleaved"), None),
        ("NEOX, float16", Rope(NEOX, dtype="float16"), RopeSpec(HEAD_DIM, layout="half"), None),
    ]


def _entries() -> Iterator[Entry]:
    for settings, rope, spec, seq_len in _cases():
        if isinstance(spec, str):
            yield GgmlEntry("ggml ggml_rope_ext", settings, RopeSpec(HEAD_DIM), inexpressible(spec))
            continue
        yield GgmlEntry(
            "ggml ggml_rope_ext",
            settings,
            spec,
            make_runner(rope),
            dtype=rope.dtype,
            seq_len=seq_len,
        )


GROUP = Group("ggml-python", ("ggml",), "pip install ggml-python (builds ggml)", _entries)
