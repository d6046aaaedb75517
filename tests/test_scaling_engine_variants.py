"""The frequency variants vLLM and ggml ship, against their own formulas written in float64.

- vLLM's ``rope_type: "ntk"`` (``NTKScalingRotaryEmbedding._compute_inv_freq``): the base
  times the factor, every frequency divided by ``factor ** (2 / d)``; with ``mixed_b`` the
  base is kept and pair ``j`` is divided by ``exp(a (j + 1) ** mixed_b)``,
  ``a = ln(factor) / (d / 2) ** mixed_b``.
- Hunyuan's ``dynamic`` with ``alpha`` (``DynamicNTKAlphaRotaryEmbedding``): the base
  ``b * alpha ** (d / (d - 2))``.
- ggml's partial YaRN (``rope_yarn`` in ``ggml-cpu/ops.cpp``): ``ext_factor`` between 0 and
  1 weighs YaRN's ramp, ``theta = theta_interp (1 - ramp_mix) + theta_extrap ramp_mix``,
  ``ramp_mix = ext_factor * (1 - clip((i0 / 2 - low) / max(0.001, high - low), 0, 1))``, and
  cos and sin carry ``attn_factor * (1 + 0.1 ln(1 / freq_scale))`` whatever ``ext_factor``;
  with ``freq_factors`` the extrapolated angle is divided by them and the ramp stays that
  of ``freq_base``.

Each is checked in the reference, through ``RopeSpec.from_hf`` of the config the engine
reads, in the Numba kernel (general and offset roads) and in ``backend="exact"``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import rope_ref as rr
from rope_ref.scaling import NTKAware, NTKScaling, YaRN
from rope_ref.scaling._facts import exact_form

D = 64


def vllm_ntk_inv_freq(base: float, d: int, factor: float, mixed_b: float | None) -> np.ndarray:
    """vLLM's ``NTKScalingRotaryEmbedding._compute_inv_freq``, in float64."""
    scaled_base = base * (factor if mixed_b is None else 1.0)
    inv_freq = 1.0 / scaled_base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    if mixed_b is None:
        return inv_freq / factor ** (2 / d)
    a = math.log(factor) / (d / 2) ** mixed_b
    lambda_1_m = np.exp(a * np.arange(1, d // 2 + 1, dtype=np.float64) ** mixed_b)
    return inv_freq / lambda_1_m


def hunyuan_inv_freq(base: float, d: int, alpha: float) -> np.ndarray:
    """vLLM's ``DynamicNTKAlphaRotaryEmbedding`` (and HF's Hunyuan), in float64."""
    scaled_base = base * alpha ** (d / (d - 2))
    return 1.0 / scaled_base ** (np.arange(0, d, 2, dtype=np.float64) / d)


def ggml_yarn_angles(
    p: np.ndarray,
    *,
    n_dims: int,
    freq_base: float,
    freq_scale: float,
    ext_factor: float,
    n_ctx_orig: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    attn_factor: float = 1.0,
    freq_factors: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """ggml's ``rope_yarn`` angles ``(positions, pairs)`` and magnitude, in float64."""

    def corr_dim(n_rot: float) -> float:
        return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(freq_base))

    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_dims - 1.0, math.ceil(corr_dim(beta_slow)))
    i0 = np.arange(0, n_dims, 2, dtype=np.float64)
    theta_scale = freq_base ** (-2.0 / n_dims)
    theta_extrap = p[:, None].astype(np.float64) * theta_scale ** (i0 / 2)
    if freq_factors is not None:
        theta_extrap = theta_extrap / freq_factors
    theta_interp = freq_scale * theta_extrap
    theta, mscale = theta_interp, attn_factor
    if ext_factor != 0.0:
        y = (i0 / 2 - low) / max(0.001, high - low)
        ramp_mix = (1.0 - np.clip(y, 0.0, 1.0)) * ext_factor
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    return theta, mscale


def rotate_half(x: np.ndarray, angles: np.ndarray, magnitude: float) -> np.ndarray:
    """NeoX-style rotation (pairs j, j + d/2) of x ``(..., seq, d)`` by ``(seq, d/2)`` angles."""
    n = angles.shape[-1]
    a, b = x[..., :n], x[..., n : 2 * n]
    c, s = magnitude * np.cos(angles), magnitude * np.sin(angles)
    return np.concatenate([a * c - b * s, a * s + b * c, x[..., 2 * n :]], axis=-1)


# ---- vLLM's ntk ------------------------------------------------------------------------------


@pytest.mark.parametrize("mixed_b", [None, 0.5, 1.0, 2.0, 3.7])
@pytest.mark.parametrize(
    ("base", "d", "factor"), [(1e6, 64, 4.0), (10000.0, 6, 2.5), (500.0, 2, 8)]
)
def test_vllm_ntk_frequencies_are_vllms(mixed_b, base, d, factor):
    spec = rr.RopeSpec(d, base=base, scaling=NTKScaling(factor, mixed_b=mixed_b))
    want = vllm_ntk_inv_freq(base, d, factor, mixed_b)
    np.testing.assert_allclose(rr.inv_freq(spec), want, rtol=1e-14, atol=0)
    assert rr.attention_factor(spec) == 1.0


def test_vllm_ntk_is_read_and_written_as_vllm_spells_it():
    config = {
        "hidden_size": 4 * D,
        "num_attention_heads": 4,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_theta": 1e6, "rope_type": "ntk", "factor": 4.0, "mixed_b": 0.5},
    }
    spec = rr.RopeSpec.from_hf(config)
    assert spec.scaling == NTKScaling(4.0, mixed_b=0.5)
    np.testing.assert_allclose(rr.inv_freq(spec), vllm_ntk_inv_freq(1e6, D, 4.0, 0.5), rtol=1e-14)
    written = spec.to_hf()["rope_parameters"]
    assert isinstance(written, dict)
    assert written["rope_type"] == "ntk"
    assert written["mixed_b"] == 0.5
    assert rr.RopeSpec.from_hf({"head_dim": D, "rope_parameters": written}) == spec
    fixed = dict(config, rope_parameters={"rope_theta": 1e6, "rope_type": "ntk", "factor": 4.0})
    assert rr.RopeSpec.from_hf(fixed).scaling == NTKScaling(4.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"factor": 0.0}, "`factor` must be positive; got 0.0"),
        ({"factor": 2.0, "mixed_b": -1.0}, "`mixed_b` must be positive; got -1.0"),
        ({"factor": 2.0, "mixed_b": 100.0}, "`mixed_b` must be at most 64; got 100.0"),
        ({"factor": 2.0, "mixed_b": float("nan")}, "`mixed_b` must be finite"),
    ],
)
def test_vllm_ntk_refuses_bad_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NTKScaling(**kwargs)


def test_vllm_ntk_without_a_factor_is_refused_by_from_hf():
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "ntk", "mixed_b": 0.5}}
    with pytest.raises(ValueError, match="`factor`"):
        rr.RopeSpec.from_hf(config)


# ---- Hunyuan's alpha -------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1000.0, 2.0])
def test_hunyuan_alpha_is_read_as_its_fixed_ntk_base(alpha):
    config = {
        "model_type": "hunyuan_v1_dense",
        "hidden_size": 4 * D,
        "num_attention_heads": 4,
        "max_position_embeddings": 32768,
        "rope_scaling": {"type": "dynamic", "alpha": alpha, "factor": 1.0},
        "rope_theta": 10000.0,
    }
    spec = rr.RopeSpec.from_hf(config)
    assert spec.scaling == NTKAware(alpha)
    np.testing.assert_allclose(
        rr.inv_freq(spec), hunyuan_inv_freq(10000.0, D, alpha), rtol=1e-13, atol=0
    )
    with pytest.raises(ValueError, match="rope_type"):  # HF has no type for it to write
        spec.to_hf()


def test_hunyuan_alpha_must_be_positive():
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "dynamic", "alpha": -2.0}}
    with pytest.raises(ValueError, match="alpha"):
        rr.RopeSpec.from_hf(config)


# ---- ggml's partial YaRN ---------------------------------------------------------------------


@pytest.mark.parametrize("ext_factor", [1.0, 0.5, 0.25, 1e-3])
@pytest.mark.parametrize(
    ("freq_scale", "n_ctx_orig", "base"), [(0.25, 32768, 1e4), (0.125, 4096, 5e5)]
)
def test_partial_yarn_is_ggmls(ext_factor, freq_scale, n_ctx_orig, base):
    p = np.array([0, 1, 7, 300, 4095, 70000])
    want, magnitude = ggml_yarn_angles(
        p, n_dims=D, freq_base=base, freq_scale=freq_scale, ext_factor=ext_factor,
        n_ctx_orig=n_ctx_orig,
    )  # fmt: skip
    rule = YaRN(1 / freq_scale, n_ctx_orig, ext_factor=ext_factor)
    spec = rr.RopeSpec(D, base=base, scaling=rule)
    np.testing.assert_allclose(rr.rope_angles(spec, p), want, rtol=1e-13, atol=1e-12)
    assert rr.attention_factor(spec) == pytest.approx(magnitude, rel=1e-15)


def test_partial_yarn_with_frequency_factors_is_ggmls():
    """ggml's freq_factors with YaRN: freqs= the divided frequencies, the ramp of the base."""
    factors = 1.0 + 0.25 * np.arange(D // 2)
    p = np.array([0, 3, 2000, 100000])
    want, magnitude = ggml_yarn_angles(
        p, n_dims=D, freq_base=1e4, freq_scale=0.25, ext_factor=0.5, n_ctx_orig=8192,
        freq_factors=factors, attn_factor=0.9,
    )  # fmt: skip
    given = 1e4 ** (-np.arange(0, D, 2) / D) / factors
    rule = YaRN(4.0, 8192, ext_factor=0.5, attention_factor=0.9 * (1 + 0.1 * math.log(4.0)))
    spec = rr.RopeSpec(D, base=1e4, freqs=tuple(given), scaling=rule)
    np.testing.assert_allclose(rr.rope_angles(spec, p), want, rtol=1e-13, atol=1e-12)
    assert rr.attention_factor(spec) == pytest.approx(magnitude, rel=1e-15)


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan")])
def test_ext_factor_outside_zero_to_one_is_refused(bad):
    with pytest.raises(ValueError, match="`ext_factor` must be"):
        YaRN(4.0, 4096, ext_factor=bad)


def test_partial_yarn_is_refused_by_to_hf_and_named_in_its_repr():
    rule = YaRN(4.0, 4096, ext_factor=0.5)
    assert "ext_factor=0.5" in repr(rule)
    assert "ext_factor" not in repr(YaRN(4.0, 4096))
    assert rule != YaRN(4.0, 4096)
    assert hash(rule) != hash(YaRN(4.0, 4096))
    with pytest.raises(ValueError, match=r"ext_factor=0\.5"):
        rr.RopeSpec(8, scaling=rule).to_hf()


# ---- the kernels: Numba (general and offset roads) and exact ------------------------------------

CASES = {
    "ntk": (rr.RopeSpec(D, base=1e6, scaling=NTKScaling(4.0)), vllm_ntk_inv_freq(1e6, D, 4, None)),
    "ntk_mixed": (
        rr.RopeSpec(D, base=1e6, scaling=NTKScaling(4.0, mixed_b=0.5)),
        vllm_ntk_inv_freq(1e6, D, 4.0, 0.5),
    ),
    "alpha": (rr.RopeSpec(D, scaling=NTKAware(1000.0)), hunyuan_inv_freq(1e4, D, 1000.0)),
}


#: ggml's frequency factors of the "freq_factors_yarn" case (a GGUF's rope_freqs).
FREQ_FACTORS = 1.0 + 0.25 * np.arange(D // 2)


def _expected(name: str, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    if name in ("partial_yarn", "freq_factors_yarn"):
        factors = FREQ_FACTORS if name == "freq_factors_yarn" else None
        angles, magnitude = ggml_yarn_angles(
            p, n_dims=D, freq_base=1e4, freq_scale=0.25, ext_factor=0.5, n_ctx_orig=4096,
            freq_factors=factors,
        )  # fmt: skip
    else:
        angles, magnitude = p[:, None] * CASES[name][1], 1.0
    return rotate_half(x.astype(np.float64), angles, magnitude)


SPECS = {name: spec for name, (spec, _) in CASES.items()}
SPECS["partial_yarn"] = rr.RopeSpec(D, scaling=YaRN(4.0, 4096, ext_factor=0.5))
SPECS["freq_factors_yarn"] = rr.RopeSpec(  # freqs= with a rule over them
    D,
    base=1e4,
    freqs=tuple(1e4 ** (-np.arange(0, D, 2) / D) / FREQ_FACTORS),
    scaling=YaRN(4.0, 4096, ext_factor=0.5),
)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_numba_kernel_takes_the_variants(name):
    if rr.available_backends()["numba"] is not None:
        pytest.skip("the numba backend is not installed")
    spec = SPECS[name]
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 3, 40, D)).astype(np.float32)
    p = np.arange(5000, 5040)
    want = _expected(name, x, p)
    general = rr.apply_rope(x, spec, p, backend="numba")
    np.testing.assert_allclose(general, want, atol=2e-5, rtol=0)
    offset = rr.apply_rope(x, spec, offset=5000, backend="numba")  # the short road
    np.testing.assert_array_equal(offset, general)
    one = rr.apply_rope(x[:, :, -1:], spec, offset=5039, backend="numba")  # a decode step
    np.testing.assert_array_equal(one, general[:, :, -1:])


@pytest.mark.parametrize("name", sorted(SPECS))
def test_exact_backend_evaluates_the_variants(name):
    """backend="exact" names each variant's formula and rounds it correctly in float64."""
    spec = SPECS[name]
    assert exact_form(spec.scaling) is not None
    p = np.array([0.0, 1.0, 12345.0])
    cos, _ = rr.rope_cos_sin(spec, p, dtype=np.float64, backend="exact")
    with mpmath.workprec(200):
        for j in (0, 5, 20, D // 2 - 1):
            omega = _real_omega(name, j)
            for t, position in enumerate(p):
                want = float(_real_factor(name) * mpmath.cos(mpmath.mpf(position) * omega))
                assert cos[t, j] == want, (name, j, position)


def _real_omega(name: str, j: int):
    """Each variant's frequency of pair `j` in real numbers (mpmath), from its formula."""
    half = mpmath.mpf(D // 2)
    if name == "alpha":
        base = mpmath.mpf(1e4) * mpmath.mpf(1000) ** (mpmath.mpf(D) / (D - 2))
        return base ** (-mpmath.mpf(2 * j) / D)
    if name in ("partial_yarn", "freq_factors_yarn"):
        theta = mpmath.mpf(1e4) ** (-mpmath.mpf(2 * j) / D)
        given = SPECS[name].freqs
        if given is not None:  # the given float, exactly as given
            theta = mpmath.mpf(given[j])
        low, high = YaRN(4.0, 4096).correction_range(base=1e4, rotary_dim=D)
        ramp = min(max(mpmath.mpf(j - low) / (high - low), 0), 1)
        kept = mpmath.mpf(0.5) * (1 - ramp)
        return theta * ((1 - kept) / 4 + kept)
    theta = mpmath.mpf(1e6) ** (-mpmath.mpf(2 * j) / D)
    mixed_b = 1 if name == "ntk" else mpmath.mpf(0.5)
    return theta * mpmath.mpf(4) ** (-(((j + 1) / half) ** mixed_b))


def _real_factor(name: str):
    yarn = name in ("partial_yarn", "freq_factors_yarn")
    return 1 + mpmath.log(4) / 10 if yarn else mpmath.mpf(1)


def test_exact_backend_takes_a_rule_over_given_frequencies():
    """freqs= with a rule: each given frequency (an exact float) times the rule's real factor."""
    factors = 1.0 + 0.25 * np.arange(D // 2)
    given = tuple(1e4 ** (-np.arange(0, D, 2) / D) / factors)
    spec = rr.RopeSpec(D, base=1e4, freqs=given, scaling=YaRN(4.0, 4096, ext_factor=0.5))
    p = np.array([1.0, 777.0])
    cos, _ = rr.rope_cos_sin(spec, p, dtype=np.float64, backend="exact")
    low, high = YaRN(4.0, 4096).correction_range(base=1e4, rotary_dim=D)
    with mpmath.workprec(200):
        for j in (0, 10, 20, D // 2 - 1):
            ramp = min(max(mpmath.mpf(j - low) / (high - low), 0), 1)
            kept = mpmath.mpf(0.5) * (1 - ramp)
            omega = mpmath.mpf(given[j]) * ((1 - kept) / 4 + kept)
            for t, position in enumerate(p):
                want = float(_real_factor("partial_yarn") * mpmath.cos(position * omega))
                assert cos[t, j] == want, (j, position)
    halved = rr.RopeSpec(4, freqs=(0.75, 0.5), scaling=rr.scaling.Linear(3.0))
    cos, _ = rr.rope_cos_sin(halved, np.array([2.0]), dtype=np.float64, backend="exact")
    with mpmath.workprec(200):
        thirds = [float(mpmath.cos(2 * mpmath.mpf(f) / 3)) for f in (0.75, 0.5)]
    assert cos[0].tolist() == thirds
