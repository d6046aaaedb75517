"""RoPE bugs that shipped in real projects, reproduced in a few lines of plain NumPy/PyTorch.

Each reproduction is a module-level function ``fn(x, positions)`` (x of shape (batch,
heads, seq, head_dim)), so `rope-ref check` can import it as ``tests.test_diagnosis_shipped:fn``.
Each case asserts the cause `diagnose` names at the survey's probe positions, a snippet of
the message that makes the fix actionable (the parameter or recipe named), that
`assert_rope_close` names the same cause, and, where the spec has a `--hf-config` form, that
`rope-ref check` at its defaults names the same cause too. The frequencies and rotations are
written out here (float64 formulas of the papers and of HF's code), never taken from rope_ref.

The score these cases give is the one recorded in docs/testing.md (diagnoses section).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref import scaling
from rope_ref.cli import main
from rope_ref.testing import assert_rope_close, diagnose
from tests._helpers import REPO
from tests._independent import rotate_pairs

D = 64
#: The survey's probe: small positions, powers of two and their neighbours, and 20000.
PROBE = np.unique(
    np.array([0, 1, 2, 3, 7, *[2**k + d for k in (8, 11, 14) for d in (-1, 0, 1)], 20000])
)


#: names of the reproductions written in torch: their tests skip where torch is absent
TORCH_RECIPES: set[str] = set()


def _needs_torch(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    TORCH_RECIPES.add(fn.__name__)
    return fn


def _skip_without_torch(fn: Callable[..., np.ndarray]) -> None:
    if fn.__name__ in TORCH_RECIPES:
        pytest.importorskip("torch")


def _inv(base: float, d: int = D, over: float | None = None) -> np.ndarray:
    """``base ** (-2j / over)`` for the d/2 pairs, float64 (`over` defaults to d)."""
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / (over or d))


def _turn(x: np.ndarray, angles: np.ndarray, layout: str = "half") -> np.ndarray:
    """x turned by per-position `angles` (seq, n), rounded to x's dtype."""
    return rotate_pairs(x.astype(np.float64), angles, layout).astype(x.dtype)


def _p(positions: Any) -> np.ndarray:
    return np.asarray(positions, dtype=np.float64)[:, None]


# --- the reproductions --------------------------------------------------------------------------


def llama3_factors_swapped(x, positions):
    """Llama 3 (HF's where-form) called with low_freq_factor=4, high_freq_factor=1."""
    inv = _inv(500000.0, x.shape[-1])
    factor, context, low, high = 8.0, 8192, 4.0, 1.0
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > context / low, inv / factor, inv)
    smooth = (context / wavelen - low) / (high - low)
    medium = ~(wavelen < context / high) & ~(wavelen > context / low)
    inv = np.where(medium, (1 - smooth) * out / factor + smooth * out, out)
    return _turn(x, _p(positions) * inv)


@_needs_torch
def inv_freq_in_float16(x, positions):
    """``1 / base ** (arange(0, d, 2, dtype=float16) / d)``: the power and reciprocal in float16."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float16) / d))
    angles = torch.from_numpy(np.asarray(positions, np.float32))[:, None] * inv.float()
    return _turn(x, angles.double().numpy())


def ntk_without_exponent(x, positions):
    """NTK-aware with ``base * s`` in place of ``base * s ** (d / (d - 2))``."""
    return _turn(x, _p(positions) * _inv(10000.0 * 4.0, x.shape[-1]))


def dynamic_ntk_length_off_by_one(x, positions):
    """Dynamic NTK (factor 2, 2048) with ``seq_len = max position`` (HF: max position + 1)."""
    d = x.shape[-1]
    seq_len = max(float(np.max(positions)), 2048.0)
    base = 10000.0 * (2.0 * seq_len / 2048 - 1.0) ** (d / (d - 2))
    return _turn(x, _p(positions) * _inv(base, d))


def _per_feature(x, positions, table, rotate):
    """``x * cos + rotate(x) * sin`` with one angle per feature (``positions * table``)."""
    angles = _p(positions) * table
    xf = x.astype(np.float64)
    return (xf * np.cos(angles) + rotate(xf) * np.sin(angles)).astype(x.dtype)


def _rotate_half(x):
    n = x.shape[-1] // 2
    return np.concatenate([-x[..., n:], x[..., :n]], axis=-1)


def _rotate_interleaved(x):
    return np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)


def half_table_interleaved_rotation(x, positions):
    """A ``cat(freqs, freqs)`` table applied with the interleaved rotation (spec: half)."""
    table = np.concatenate([_inv(10000.0, x.shape[-1])] * 2)
    return _per_feature(x, positions, table, _rotate_interleaved)


def interleaved_table_half_rotation(x, positions):
    """A ``repeat_interleave(freqs, 2)`` table applied with rotate_half (spec: interleaved)."""
    table = np.repeat(_inv(10000.0, x.shape[-1]), 2)
    return _per_feature(x, positions, table, _rotate_half)


@_needs_torch
def angles_in_bfloat16(x, positions):
    """HF before PR #29285: ``positions @ inv_freq`` under bf16 autocast."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    p = torch.from_numpy(np.asarray(positions, np.float32))
    angles = (p[:, None].bfloat16() * inv.bfloat16()).float()
    return _turn(x, angles.double().numpy())


@_needs_torch
def bfloat16_cos_sin_cache(x, positions):
    """gpt-neox #1003 / vLLM #863: float32 angles, cos/sin cached in bfloat16, math in float32."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angles = torch.from_numpy(np.asarray(positions, np.float32))[:, None] * inv
    emb = torch.cat([angles, angles], dim=-1)
    cos, sin = emb.cos().bfloat16().float(), emb.sin().bfloat16().float()
    t = torch.from_numpy(x.astype(np.float32))
    half = torch.cat([-t[..., d // 2 :], t[..., : d // 2]], dim=-1)
    return (t * cos + half * sin).numpy()


@_needs_torch
def positions_in_bfloat16(x, positions):
    """candle #3520 / Megatron #535: the positions themselves held in bfloat16."""
    import torch

    p = torch.from_numpy(np.asarray(positions, np.float32)).bfloat16().double().numpy()
    return _turn(x, p[:, None] * _inv(10000.0, x.shape[-1]))


def yarn_attention_factor_dropped(x, positions):
    """vLLM #48621: YaRN's frequencies right, its attention factor 0.1 ln s + 1 dropped."""
    d = x.shape[-1]
    inv = _inv(10000.0, d)
    factor, context = 4.0, 4096

    def dim(rotations: float) -> float:
        return d * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(10000.0))

    low, high = max(math.floor(dim(32.0)), 0), min(math.ceil(dim(1.0)), d - 1)
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0, 1)
    inv = inv / factor * ramp + inv * (1 - ramp)
    return _turn(x, _p(positions) * inv)


def yarn_always_truncated(x, positions):
    """vLLM #27722: YaRN's correction range floored and ceiled although truncate=False."""
    return yarn_attention_factor_dropped(x, positions) * np.float32(0.1 * math.log(4.0) + 1.0)


def partial_rotary_over_head_dim(x, positions):
    """pie #603: partial RoPE (32 of 64) with exponents over head_dim, not rotary_dim."""
    d = x.shape[-1]
    inv = _inv(10000.0, d // 2, over=d)
    return _turn(x, _p(positions) * inv)


def partial_rotary_applied_twice(x, positions):
    """vLLM #30384: partial_rotary_factor 0.5 applied to a rotary_dim already scaled."""
    d = x.shape[-1] // 4
    return _turn(x, _p(positions) * _inv(10000.0, d))


def padded_positions_ignored(x, positions):
    """transformers #22161: arange positions used where the caller passed its own."""
    return _turn(x, _p(np.arange(len(positions))) * _inv(10000.0, x.shape[-1]))


def meta_interleaved_for_hf_half(x, positions):
    """transformers #25199: Meta's interleaved RoPE run on HF's (half-layout) weights."""
    return _turn(x, _p(positions) * _inv(10000.0, x.shape[-1]), "interleaved")


def proportional_exponents_over_pH(x, positions):
    """Proportional RoPE (p = 0.25) with exponents over p * H instead of H."""
    d = x.shape[-1]
    k = int(0.25 * d // 2)
    inv = np.zeros(d // 2)
    inv[:k] = _inv(10000.0, 2 * k, over=0.25 * d)
    return _turn(x, _p(positions) * inv)


def flux_ladders_wrong_base(x, positions):
    """Flux's per-axis ladders (4, 14, 14 pairs) built with theta=1000 for every axis."""
    pairs = (4, 14, 14)
    ladder = np.concatenate([_inv(1000.0, 2 * s) for s in pairs])
    axis = np.repeat(np.arange(3), pairs)
    angles = np.asarray(positions, np.float64)[:, axis] * ladder
    return _turn(x, angles, "interleaved")


@_needs_torch
def flux_table_in_bfloat16(x, positions):
    """Flux's per-axis cos/sin table cast to the model's bfloat16, the rotation in float32."""
    import torch

    pairs = (4, 14, 14)
    ladder = np.concatenate([_inv(10000.0, 2 * s) for s in pairs])
    axis = np.repeat(np.arange(3), pairs)
    angles = np.repeat(np.asarray(positions, np.float64)[:, axis] * ladder, 2, axis=-1)
    cos = torch.from_numpy(np.cos(angles)).bfloat16().double().numpy()
    sin = torch.from_numpy(np.sin(angles)).bfloat16().double().numpy()
    xf = x.astype(np.float64)
    return (xf * cos + _rotate_interleaved(xf) * sin).astype(x.dtype)


def qwen3_vl_chunked_through_interleaved(x, positions):
    """A chunked (16, 24, 24) M-RoPE model run through Qwen3-VL's interleaved apply."""
    d = x.shape[-1]
    n = d // 2
    inv = _inv(1000000.0, d)
    axis = np.zeros(n, dtype=int)  # apply_interleaved_mrope: h at 1, 4, ...; w at 2, 5, ...
    axis[1 : 3 * 24 : 3] = 1
    axis[2 : 3 * 24 : 3] = 2
    angles = np.asarray(positions, np.float64)[:, axis] * inv
    return _turn(x, angles)


# --- the same code without the bug (no false alarm) --------------------------------------------


def llama3_right(x, positions):
    """Llama 3 (HF's where-form) with low_freq_factor=1, high_freq_factor=4."""
    inv = _inv(500000.0, x.shape[-1])
    factor, context, low, high = 8.0, 8192, 1.0, 4.0
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > context / low, inv / factor, inv)
    smooth = (context / wavelen - low) / (high - low)
    medium = ~(wavelen < context / high) & ~(wavelen > context / low)
    inv = np.where(medium, (1 - smooth) * out / factor + smooth * out, out)
    return _turn(x, _p(positions) * inv)


def ntk_right(x, positions):
    d = x.shape[-1]
    return _turn(x, _p(positions) * _inv(10000.0 * 4.0 ** (d / (d - 2)), d))


def dynamic_ntk_right(x, positions):
    d = x.shape[-1]
    seq_len = max(float(np.max(positions)) + 1.0, 2048.0)
    base = 10000.0 * (2.0 * seq_len / 2048 - 1.0) ** (d / (d - 2))
    return _turn(x, _p(positions) * _inv(base, d))


def half_table_half_rotation(x, positions):
    table = np.concatenate([_inv(10000.0, x.shape[-1])] * 2)
    return _per_feature(x, positions, table, _rotate_half)


def interleaved_table_interleaved_rotation(x, positions):
    table = np.repeat(_inv(10000.0, x.shape[-1]), 2)
    return _per_feature(x, positions, table, _rotate_interleaved)


@_needs_torch
def float32_recipe(x, positions):
    """HF's recipe: inv_freq from an int64 arange, angles, cos and sin in float32."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angles = torch.from_numpy(np.asarray(positions, np.float32))[:, None] * inv
    emb = torch.cat([angles, angles], dim=-1)
    t = torch.from_numpy(x.astype(np.float32))
    half = torch.cat([-t[..., d // 2 :], t[..., : d // 2]], dim=-1)
    return (t * emb.cos() + half * emb.sin()).numpy()


def yarn_right(x, positions):
    """YaRN's frequencies and its attention factor 0.1 ln s + 1 on cos and sin."""
    return yarn_attention_factor_dropped(x, positions) * np.float32(0.1 * math.log(4.0) + 1.0)


def partial_rotary_right(x, positions):
    d = x.shape[-1]
    return _turn(x, _p(positions) * _inv(10000.0, d // 2))


def proportional_right(x, positions):
    d = x.shape[-1]
    k = int(0.25 * d // 2)
    inv = np.zeros(d // 2)
    inv[:k] = _inv(10000.0, d)[:k]
    return _turn(x, _p(positions) * inv)


def flux_ladders_right(x, positions):
    pairs = (4, 14, 14)
    ladder = np.concatenate([_inv(10000.0, 2 * s) for s in pairs])
    axis = np.repeat(np.arange(3), pairs)
    angles = np.asarray(positions, np.float64)[:, axis] * ladder
    return _turn(x, angles, "interleaved")


# --- the cases ----------------------------------------------------------------------------------


def _hf(**rope: Any) -> dict[str, Any]:
    return {"head_dim": D, "rope_parameters": {"rope_theta": 10000.0, **rope}}


@dataclass(frozen=True)
class Shipped:
    """One shipped bug: its reproduction, the spec it should meet, what must be named."""

    fn: Callable[..., np.ndarray]
    spec: rr.RopeSpec
    cause: str
    snippet: str
    hf: dict[str, Any] | None = None  # the spec as `rope-ref check --hf-config` takes it
    positions: np.ndarray | None = None


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
MROPE_POSITIONS = np.stack([PROBE, PROBE // 3 % 97, PROBE // 4 % 98], axis=-1)
FLUX_POSITIONS = np.stack([PROBE % 5, PROBE // 3 % 97, PROBE // 4 % 98], axis=-1)

SHIPPED: dict[str, Shipped] = {
    "llama3-factors-swapped": Shipped(
        llama3_factors_swapped,
        rr.RopeSpec(D, base=500000.0, scaling=scaling.Llama3(8.0, original_max_position=8192)),
        "scaling",
        "swapped",
        hf={"head_dim": D, "rope_parameters": {"rope_theta": 500000.0, **LLAMA3}},
    ),
    "inv-freq-in-float16": Shipped(
        inv_freq_in_float16, rr.RopeSpec(D), "precision", "float16", hf=_hf()
    ),
    "ntk-without-exponent": Shipped(
        ntk_without_exponent,
        rr.RopeSpec(D, scaling=scaling.NTKAware(4.0)),
        "scaling",
        "exponent",
    ),
    "dynamic-ntk-length-off-by-one": Shipped(
        dynamic_ntk_length_off_by_one,
        rr.RopeSpec(D, scaling=scaling.DynamicNTK(2.0, max_position=2048)),
        "scaling",
        "off by -1",
    ),
    "half-table-interleaved-rotation": Shipped(
        half_table_interleaved_rotation,
        rr.RopeSpec(D),
        "table_layout",
        "cat(freqs, freqs)",
        hf=_hf(),
    ),
    "interleaved-table-half-rotation": Shipped(
        interleaved_table_half_rotation,
        rr.RopeSpec(D, layout="interleaved"),
        "table_layout",
        "rotate_half",
    ),
    "angles-in-bfloat16": Shipped(
        angles_in_bfloat16, rr.RopeSpec(D), "precision", "bfloat16", hf=_hf()
    ),
    "bfloat16-cos-sin-cache": Shipped(
        bfloat16_cos_sin_cache, rr.RopeSpec(D), "precision", "rounded once", hf=_hf()
    ),
    "positions-in-bfloat16": Shipped(
        positions_in_bfloat16, rr.RopeSpec(D), "precision", "bfloat16", hf=_hf()
    ),
    "yarn-attention-factor-dropped": Shipped(
        yarn_attention_factor_dropped,
        rr.RopeSpec(D, scaling=scaling.YaRN(4.0, original_max_position=4096)),
        "attention_factor",
        "",
        hf=_hf(**YARN),
    ),
    "yarn-always-truncated": Shipped(
        yarn_always_truncated,
        rr.RopeSpec(D, scaling=scaling.YaRN(4.0, original_max_position=4096, truncate=False)),
        "scaling",
        "truncate",
        hf=_hf(**YARN, truncate=False),
    ),
    "partial-rotary-over-head-dim": Shipped(
        partial_rotary_over_head_dim, rr.RopeSpec(D, rotary_dim=D // 2), "frequencies", "64"
    ),
    "partial-rotary-applied-twice": Shipped(
        partial_rotary_applied_twice, rr.RopeSpec(D, rotary_dim=D // 2), "rotary_dim", "16"
    ),
    "padded-positions-ignored": Shipped(
        padded_positions_ignored, rr.RopeSpec(D), "positions", "", hf=_hf()
    ),
    "meta-interleaved-for-hf-half": Shipped(
        meta_interleaved_for_hf_half, rr.RopeSpec(D), "layout", "interleaved", hf=_hf()
    ),
    "proportional-exponents-over-pH": Shipped(
        proportional_exponents_over_pH,
        rr.RopeSpec(D, scaling=scaling.Proportional(0.25)),
        "scaling",
        "not partial_rotary_factor * rotary_dim",
    ),
    "flux-ladders-wrong-base": Shipped(
        flux_ladders_wrong_base,
        rr.RopeSpec(
            D,
            layout="interleaved",
            freqs=rr.axial_freqs((4, 14, 14)),
            sections=(4, 14, 14),
        ),
        "frequencies",
        "1000",
        positions=FLUX_POSITIONS,
    ),
    "flux-table-in-bfloat16": Shipped(
        flux_table_in_bfloat16,
        rr.RopeSpec(
            D,
            layout="interleaved",
            freqs=rr.axial_freqs((4, 14, 14)),
            sections=(4, 14, 14),
        ),
        "precision",
        "rounded once to bfloat16",
        positions=FLUX_POSITIONS,
    ),
    "qwen3-vl-chunked-through-interleaved": Shipped(
        qwen3_vl_chunked_through_interleaved,
        rr.RopeSpec(D, base=1000000.0, sections=(8, 12, 12)),
        "sections",
        "interleaved",
        positions=MROPE_POSITIONS,
    ),
}


def _x(rows: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1.0, 1.0, (1, 2, rows, D)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_bug_is_named_with_its_cause(name):
    case = SHIPPED[name]
    _skip_without_torch(case.fn)
    p = PROBE if case.positions is None else case.positions
    x = _x(len(p))
    y = case.fn(x.copy(), p.copy())
    found = diagnose(y, x, case.spec, p)
    assert found is not None, f"{name}: the shipped bug passed"
    assert found.cause == case.cause, f"{name}: {found}"
    assert case.snippet in found.message, f"{name}: {found}"
    with pytest.raises(AssertionError) as raised:
        assert_rope_close(y, x, case.spec, positions=p)
    assert f"Likely cause: {case.cause}:" in str(raised.value), f"{name}: {raised.value}"


CLI_CASES = sorted(n for n, c in SHIPPED.items() if c.hf is not None)


@pytest.mark.parametrize("name", CLI_CASES)
def test_rope_ref_check_names_the_same_cause(name, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    case = SHIPPED[name]
    _skip_without_torch(case.fn)
    target = f"tests.test_diagnosis_shipped:{case.fn.__name__}"
    config = json.dumps(case.hf)
    status = main(["check", target, "--convention", "plain", "--hf-config", config, "--json"])
    verdict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert status == 1, verdict
    assert verdict["cause"] == case.cause, verdict


POSITION_SETS = {
    "0..8": np.arange(9),
    "probe": PROBE,
    "0..32768 by 512": np.arange(0, 32769, 512),
    "5000, 12000, 30000": np.array([5000, 12000, 30000]),
}


@pytest.mark.parametrize("where", sorted(POSITION_SETS))
@pytest.mark.parametrize("name", sorted(n for n, c in SHIPPED.items() if c.positions is None))
def test_the_cause_does_not_change_with_the_positions_checked(name, where):
    case = SHIPPED[name]
    _skip_without_torch(case.fn)
    p = POSITION_SETS[where]
    x = _x(len(p))
    found = diagnose(case.fn(x.copy(), p.copy()), x, case.spec, p)
    if found is not None:  # a small bug may pass where its error is under the model's
        assert found.cause == case.cause, f"{name} at {where}: {found}"
        assert case.snippet in found.message, f"{name} at {where}: {found}"


@pytest.mark.parametrize("seed", range(6))
def test_a_bfloat16_cache_at_large_angles_is_not_named_float16(seed):
    """Where float32 angles make the model loose, a float16 table fits too; the closer wins."""
    _skip_without_torch(bfloat16_cos_sin_cache)
    p = np.array([5000, 12000, 30000])
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, (1, 1, len(p), D)).astype(np.float32)
    found = diagnose(bfloat16_cos_sin_cache(x, p), x, rr.RopeSpec(D), p)
    assert found is not None
    assert found.cause == "precision", found
    assert "rounded once to bfloat16" in found.message, found


CORRECT: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "llama3": (llama3_right, "llama3-factors-swapped"),
    "ntk": (ntk_right, "ntk-without-exponent"),
    "dynamic-ntk": (dynamic_ntk_right, "dynamic-ntk-length-off-by-one"),
    "half-table-half-rotation": (half_table_half_rotation, "half-table-interleaved-rotation"),
    "interleaved-table-interleaved-rotation": (
        interleaved_table_interleaved_rotation,
        "interleaved-table-half-rotation",
    ),
    "float32-recipe": (float32_recipe, "angles-in-bfloat16"),
    "yarn": (yarn_right, "yarn-attention-factor-dropped"),
    "partial-rotary": (partial_rotary_right, "partial-rotary-over-head-dim"),
    "proportional": (proportional_right, "proportional-exponents-over-pH"),
    "flux-ladders": (flux_ladders_right, "flux-ladders-wrong-base"),
}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_the_same_code_without_the_bug_passes(name):
    fn, buggy = CORRECT[name]
    _skip_without_torch(fn)
    case = SHIPPED[buggy]
    sets = [case.positions] if case.positions is not None else list(POSITION_SETS.values())
    for p in sets:
        x = _x(len(p))
        assert diagnose(fn(x.copy(), p.copy()), x, case.spec, p) is None, f"{name} at {p[:4]}"
