"""Multi-axis RoPE with an explicit pair-to-axis map (``section_order=`` a tuple).

The expected rotations are float64 formulas written here from the engines' own code: Ernie
4.5-VL's and Bailing's ``h, w, h, w, ..., t`` order (vLLM ``Ernie4_5_VLRotaryEmbedding``,
``BailingMRotaryEmbedding.select_cos_sin``), openPangu's greedy order (vLLM
``MRotaryEmbeddingInterleaved.get_mrope_interleaved_id_list``) and ggml's IMROPE sector
rule (``ggml_mrope_cache_init``) with its fourth position.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rope_ref as rr


def ernie_axes(h: int, w: int, t: int) -> list[int]:
    """Ernie 4.5-VL / Bailing: pairs below h + w alternate h (1), w (2); the tail is t (0)."""
    assert h == w
    return [1 if j % 2 == 0 else 2 for j in range(h + w)] + [0] * t


def openpangu_axes(sections: list[int]) -> list[int]:
    """vLLM's get_mrope_interleaved_id_list, transcribed (force_last for three sections)."""
    a, b, c = (*sections, 0) if len(sections) == 2 else sections
    force_last = len(sections) == 3
    if force_last:
        a -= 1
    counts = {0: a, 1: b, 2: c}
    placed = dict.fromkeys(counts, 0)
    rem = dict(counts)
    seq, last = [], None
    for _ in range(a + b + c):
        cands = [k for k in rem if rem[k] > 0 and k != last] or [k for k in rem if rem[k] > 0]
        best = min(cands, key=lambda k: (placed[k] / counts[k], k))
        seq.append(best)
        placed[best] += 1
        rem[best] -= 1
        last = best
    if force_last:
        seq.append(0)
    return seq


def imrope_axes(sections: tuple[int, int, int, int], n_pairs: int) -> list[int]:
    """ggml_mrope_cache_init with is_imrope: sector % 3 picks t, h, w while they last, else e."""
    total = sum(sections)
    axes = []
    for i in range(n_pairs):
        sector = i % total
        if sector % 3 == 1 and sector < 3 * sections[1]:
            axes.append(1)
        elif sector % 3 == 2 and sector < 3 * sections[2]:
            axes.append(2)
        elif sector % 3 == 0 and sector < 3 * sections[0]:
            axes.append(0)
        else:
            axes.append(3)
    return axes


def rotated(x, positions, axes, base, layout):
    """Each pair j turned by positions[..., axes[j]] * base ** (-2j / d), in float64."""
    d = x.shape[-1]
    n = d // 2
    theta = base ** (-np.arange(n, dtype=np.float64) * 2.0 / d)
    angle = positions[..., axes].astype(np.float64) * theta
    if layout == "half":
        a, b = x[..., :n], x[..., n:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    ra = a * np.cos(angle) - b * np.sin(angle)
    rb = b * np.cos(angle) + a * np.sin(angle)
    out = np.empty_like(x)
    if layout == "half":
        out[..., :n], out[..., n:] = ra, rb
    else:
        out[..., 0::2], out[..., 1::2] = ra, rb
    return out


MAPS = {
    "ernie (22, 22, 20)": (ernie_axes(22, 22, 20), 3),
    "bailing (8, 12, 12)": (ernie_axes(12, 12, 8), 3),
    "openpangu (16, 24, 24)": (openpangu_axes([16, 24, 24]), 3),
    "openpangu (32, 32)": (openpangu_axes([32, 32]), 2),
    "imrope (12, 10, 10, 0)": (imrope_axes((12, 10, 10, 0), 32), 4),
    "imrope (11, 11, 10, 0), 40 pairs": (imrope_axes((11, 11, 10, 0), 40), 3),  # sectors wrap
}


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("backend", ["reference", "numba", "exact"])
def test_pair_map_rotates_each_pair_by_its_axis(name, layout, backend):
    axes, n_axes = MAPS[name]
    spec = rr.RopeSpec(2 * len(axes), base=1e6, layout=layout, section_order=axes)
    assert spec.sections == tuple(axes.count(a) for a in range(n_axes))
    rng = np.random.default_rng(len(axes))
    x = rng.standard_normal((3, 9, spec.head_dim))
    positions = rng.integers(0, 5000, size=(9, n_axes))
    got = rr.apply_rope(x, spec, positions, seq_axis=-2, backend=backend)
    want = rotated(x, positions[None], axes, 1e6, layout)
    # The formula's own angle error is about |angle| * eps (angles up to 5000 rad); a pair
    # on the wrong axis is off by order 1.
    np.testing.assert_allclose(got, want, rtol=0, atol=5000 * 1e-14)


def test_imrope_last_pair_follows_the_fourth_position():
    axes = imrope_axes((12, 10, 10, 0), 32)
    assert axes[31] == 3  # the pair HF's Qwen3-VL gives to t
    assert axes.count(3) == 1
    spec = rr.RopeSpec(64, section_order=axes)
    x = np.ones((1, 64))
    moved = rr.apply_rope(x, spec, [[0, 0, 0, 7]])  # only e moves: only pair 31 turns
    turned = np.flatnonzero(np.abs(moved - x).max(axis=0) > 0)
    assert turned.tolist() == [31, 63]


def test_pair_map_rotation_matrix_and_tables_follow_the_map():
    axes = openpangu_axes([2, 3, 3])
    spec = rr.RopeSpec(16, section_order=axes)
    p = np.array([3.0, 5.0, 7.0])
    theta = 10000.0 ** (-np.arange(8) * 2.0 / 16)
    cos, _ = rr.rope_cos_sin(spec, p[None])
    np.testing.assert_allclose(cos[0], np.cos(p[axes] * theta), rtol=0, atol=1e-15)
    np.testing.assert_allclose(rr.pair_axes(spec), axes)


def test_named_maps_are_stored_as_their_names():
    chunked = rr.RopeSpec(12, section_order=[0, 0, 1, 1, 2, 2])
    interleaved = rr.RopeSpec(12, sections=(2, 2, 2), section_order=(0, 1, 2, 0, 1, 2))
    assert chunked == rr.RopeSpec(12, sections=(2, 2, 2))
    assert interleaved.section_order == "interleaved"
    other = rr.RopeSpec(12, section_order=np.array([1, 2, 1, 2, 0, 0]))
    assert other.section_order == (1, 2, 1, 2, 0, 0)
    assert all(type(a) is int for a in other.section_order)
    assert hash(other) == hash(
        rr.RopeSpec(12, sections=(2, 2, 2), section_order=[1, 2, 1, 2, 0, 0])
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"section_order": (0, 1, 0)}, ValueError, r"each of the 4 pairs .*got 3 entries"),
        ({"section_order": (0, 2, 0, 2)}, ValueError, r"axis 1 follows none"),
        ({"section_order": (0, -1, 0, 1)}, ValueError, r"section_order"),
        ({"section_order": (0, 1.5, 0, 1)}, TypeError, r"section_order"),
        ({"section_order": "sideways"}, ValueError, r"section_order.*sideways"),
        ({"section_order": 3}, TypeError, r"section_order.*3"),
        ({"section_order": ((0, 1), (0, 1))}, TypeError, r"section_order"),
        (
            {"section_order": (1, 0, 1, 1), "sections": (2, 2)},
            ValueError,
            r"`sections` must count the pairs of each axis .*\(1, 3\).*got \(2, 2\)",
        ),
    ],
)
def test_bad_pair_maps_are_refused_naming_the_field(kwargs, error, match):
    with pytest.raises(error, match=match):
        rr.RopeSpec(8, **kwargs)


def test_pair_map_positions_need_one_column_per_axis():
    spec = rr.RopeSpec(8, section_order=(0, 1, 2, 3))
    with pytest.raises(ValueError, match="trailing axis of length 4"):
        rr.apply_rope(np.ones((2, 8)), spec, np.zeros((2, 3), dtype=np.int64))


def test_cuda_kernel_refuses_a_pair_map_as_any_multi_axis_spec():
    from backends.cuda.call import _kernel_spec

    spec = rr.RopeSpec(64, section_order=ernie_axes(12, 12, 8))
    assert _kernel_spec(spec, 64, None) is None


@pytest.mark.cuda_host
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cuda_kernel_rotates_by_the_tables_of_a_pair_map(harness, layout):
    axes = imrope_axes((12, 10, 10, 0), 32)
    spec = rr.RopeSpec(64, base=1e6, layout=layout, section_order=axes)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 2, 64))
    positions = rng.integers(0, 3000, size=(5, 1, 4))
    cos, sin = rr.rope_cos_sin(spec, positions)
    (out,) = harness.rotate([(x, cos, sin, None)], layout=layout, rotary_start=0)
    np.testing.assert_allclose(
        out, rotated(x, positions, axes, 1e6, layout), rtol=0, atol=3000 * 1e-14
    )


def test_to_hf_refuses_a_pair_map_no_rope_type_states():
    spec = rr.RopeSpec(8, section_order=(1, 0, 0, 1))
    with pytest.raises(ValueError, match=r"section_order=\(1, 0, 0, 1\) \(a pair-to-axis map"):
        spec.to_hf()
    scaled = rr.RopeSpec(64, section_order=ernie_axes(12, 12, 8), scaling=rr.scaling.Linear(2.0))
    with pytest.raises(ValueError, match=r"a scaling rule with section_order="):
        scaled.to_hf()


@pytest.mark.parametrize(
    ("axes", "params"),
    [
        (
            openpangu_axes([8, 12, 12]),
            {"rope_type": "openpangu", "mrope_section": [8, 12, 12], "mrope_interleaved": True},
        ),
        (ernie_axes(12, 12, 8), {"rope_type": "bailing_mrope", "mrope_section": [8, 12, 12]}),
    ],
)
def test_to_hf_writes_vllm_rope_types_of_their_maps_and_reads_them_back(axes, params):
    spec = rr.RopeSpec(64, base=1e6, section_order=axes)
    written = spec.to_hf()
    assert written["rope_parameters"] == {"rope_theta": 1e6, **params}
    assert rr.RopeSpec.from_hf(written) == spec


@pytest.mark.parametrize(
    ("axes", "named"),
    [
        (ernie_axes(12, 12, 8), "Ernie 4.5-VL's and Bailing's order"),
        (openpangu_axes([8, 12, 12]), "openPangu's order"),
    ],
)
def test_diagnosis_names_an_engine_order_told_as_chunked(axes, named):
    from rope_ref.testing import diagnose

    rng = np.random.default_rng(7)
    grid = np.stack(
        [rng.integers(0, 500, 30), rng.integers(0, 40, 30), rng.integers(0, 60, 30)], -1
    )
    x = rng.standard_normal((30, 64))
    y = rotated(x, grid, axes, 10000.0, "half")  # the engine's rotation, written here
    found = diagnose(y, x, rr.RopeSpec(64, sections=(8, 12, 12)), grid)
    assert found is not None
    assert found.cause == "sections", found
    assert named in found.message
    assert "section_order=<one axis per pair>" in found.message


def test_numba_kernel_rotates_a_pair_map_spec(monkeypatch):
    pytest.importorskip("numba")
    from rope_ref._engine.dispatch import load_backend

    kernel = load_backend("numba")
    calls = []
    original = kernel.rotate

    def spy(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(kernel, "rotate", spy)
    axes = ernie_axes(12, 12, 8)
    spec = rr.RopeSpec(64, layout="interleaved", section_order=axes)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 10, 64)).astype(np.float32)
    p = rng.integers(0, 100, (10, 3))
    y = rr.apply_rope(x, spec, p, backend="numba")
    assert len(calls) == 1  # the kernel, not a fallback
    want = rotated(x.astype(np.float64), p[None, None], axes, 10000.0, "interleaved")
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-4)  # float32 output


@given(
    axes=st.lists(st.integers(0, 3), min_size=1, max_size=12).filter(
        lambda a: set(a) == set(range(max(a) + 1))  # every axis drives a pair
    ),
    seed=st.integers(0, 2**32 - 1),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_any_pair_map_follows_the_formula_and_is_1d_rope_on_text(axes, seed, layout):
    spec = rr.RopeSpec(2 * len(axes), base=500.0, layout=layout, section_order=axes)
    n_axes = max(axes) + 1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, spec.head_dim))
    p = rng.integers(-300, 300, size=(6, n_axes))
    got = rr.apply_rope(x, spec, p)
    np.testing.assert_allclose(got, rotated(x, p, axes, 500.0, layout), rtol=0, atol=1e-11)
    text = np.repeat(p[:, :1], n_axes, axis=1)  # t = h = w = ...: one position per token
    flat = rr.RopeSpec(2 * len(axes), base=500.0, layout=layout)
    np.testing.assert_array_equal(rr.apply_rope(x, spec, text), rr.apply_rope(x, flat, p[:, 0]))
