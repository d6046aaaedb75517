"""RopeSpec.from_hf against the installed transformers package's own RoPE code.

For random configs of every HF rope_type (current and legacy formats, config dicts and
config objects) and several seq_len values, `rr.inv_freq` and `rr.attention_factor` must
equal HF's ``ROPE_INIT_FUNCTIONS``, and `rr.apply_rope_qk` must equal HF's rotary modules
followed by ``apply_rotary_pos_emb``.

Tolerances. HF builds inverse frequencies, angles and cos/sin in float32; rope_ref in
float64. With u = 2^-24 (float32 unit roundoff):

- ``theta_j = b ** -e_j`` with the exponent ``e_j = 2j/d`` rounded to float32 (relative
  error u) is off by ``|ln theta_j| u`` relatively, plus a few roundings (pow, division,
  the base rounded to float32, a factor or a scaling division): ``(|ln theta_j| + 8) u``.
- Blends add the float32 error of their weight times the gap between their ends: YaRN's
  ramp (<= 4u absolute) times ``|theta_j - theta_j / s|``; Llama 3's smooth factor
  ``(L0 / wavelength - lf) / (hf - lf)`` (<= 4u hf / (hf - lf) absolute) likewise.
- Angles ``p * theta_j`` in float32 add ``u`` relatively; cos/sin add ``u``, the attention
  factor ``u`` more; the rotation (done here in float64) then moves each output by at most
  ``a * (|d phi| + 3u) * (|x_a| + |x_b|)``.

Attention factors are Python floats on both sides and must agree to 4 float64 ulp.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from tests._helpers import host

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
llama = pytest.importorskip("transformers.models.llama.modeling_llama")
gpt_neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")

transformers.logging.set_verbosity_error()  # HF logs (not warns) about odd but valid configs

U32 = 2.0**-24
EPS64 = 2.0**-52
TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")
SEEDS = range(12)


# --- random configs ------------------------------------------------------------------------


def random_config(rng: np.random.Generator, rope_type: str) -> dict[str, Any]:
    """A config.json-style dict (current ``rope_parameters`` format) of the given type."""
    head_dim = int(rng.choice([16, 24, 32, 64, 96, 128]))
    fraction = 1.0 if rope_type == "proportional" else float(rng.choice([1.0, 1.0, 0.5, 0.25]))
    if int(head_dim * fraction) % 2 or int(head_dim * fraction) < 4:
        fraction = 1.0
    max_pos = int(rng.choice([2048, 4096, 8192, 32768]))
    params: dict[str, Any] = {
        "rope_type": rope_type,
        "rope_theta": float(10 ** rng.uniform(2, 7)),
    }
    if fraction != 1.0:
        params["partial_rotary_factor"] = fraction
    original = max_pos // int(rng.choice([1, 2, 4, 8]))
    factor = float(rng.uniform(1.0, 32.0))
    n_pairs = int(head_dim * fraction) // 2
    if rope_type in ("linear", "dynamic"):
        params["factor"] = factor
    elif rope_type == "yarn":
        params.update(factor=factor, original_max_position_embeddings=original)
        _maybe(rng, params, beta_fast=float(rng.choice([16.0, 32.0, 64.0])))
        _maybe(rng, params, beta_slow=float(rng.choice([1.0, 2.0])))
        _maybe(rng, params, truncate=bool(rng.integers(2)))
        choice = rng.integers(3)
        if choice == 1:
            params.update(mscale=float(rng.uniform(0.5, 1.5)), mscale_all_dim=1.0)
        elif choice == 2:
            params["attention_factor"] = float(rng.uniform(0.8, 1.5))
    elif rope_type == "longrope":
        params["short_factor"] = rng.uniform(1.0, 4.0, n_pairs).tolist()
        params["long_factor"] = rng.uniform(1.0, 64.0, n_pairs).tolist()
        params["original_max_position_embeddings"] = original
        _maybe(rng, params, factor=factor)
        _maybe(rng, params, attention_factor=float(rng.uniform(0.8, 1.5)))
    elif rope_type == "llama3":
        low = float(rng.uniform(0.5, 2.0))
        params.update(
            factor=factor,
            original_max_position_embeddings=original,
            low_freq_factor=low,
            high_freq_factor=low + float(rng.uniform(0.5, 6.0)),
        )
    elif rope_type == "proportional":
        params["partial_rotary_factor"] = float(rng.choice([0.25, 0.5, 0.75, 1.0]))
        _maybe(rng, params, factor=factor)
    return {
        "hidden_size": 4 * head_dim,
        "num_attention_heads": 4,
        "head_dim": head_dim,
        "max_position_embeddings": max_pos,
        "rope_parameters": params,
    }


def _maybe(rng: np.random.Generator, params: dict[str, Any], **entry: Any) -> None:
    if rng.integers(2):
        params.update(entry)


def legacy(config: dict[str, Any]) -> dict[str, Any]:
    """The same config in the legacy format: top-level rope_theta, rope_scaling, partial."""
    params = dict(config["rope_parameters"])
    out = {k: v for k, v in config.items() if k != "rope_parameters"}
    out["rope_theta"] = params.pop("rope_theta")
    if "partial_rotary_factor" in params and params["rope_type"] != "proportional":
        out["partial_rotary_factor"] = params.pop("partial_rotary_factor")
    params["type"] = params.pop("rope_type")
    out["rope_scaling"] = None if params["type"] == "default" else params
    return out


def hf_config(config: dict[str, Any], cls: Any = None) -> Any:
    return (cls or transformers.LlamaConfig)(**copy.deepcopy(config))


def seq_lens(config: dict[str, Any]) -> list[int | None]:
    params = config["rope_parameters"]
    original = params.get("original_max_position_embeddings", config["max_position_embeddings"])
    max_pos = config["max_position_embeddings"]
    return [None, 1, original, original + 1, max_pos, 2 * max_pos + 7]


# --- tolerances ----------------------------------------------------------------------------


def inv_freq_tol(spec: rr.RopeSpec) -> np.ndarray:
    """Absolute tolerance per pair for HF's float32 inverse frequencies (module docstring)."""
    theta = rr.inv_freq(spec, seq_len=1.0)  # any length: the bound below does not depend on it
    plain = rr.inv_freq(rr.RopeSpec(spec.head_dim, rotary_dim=spec.rotary_dim, base=spec.base))
    return _tol_for(spec, theta, plain)


def _tol_for(spec: rr.RopeSpec, theta: np.ndarray, plain: np.ndarray) -> np.ndarray:
    rule = spec.scaling
    big = np.maximum(theta, plain)
    with np.errstate(divide="ignore"):
        tol = np.where(big > 0, (np.abs(np.log(np.where(big > 0, big, 1.0))) + 8) * U32 * big, 0)
    if isinstance(rule, rr.scaling.YaRN):
        tol = tol + 4 * U32 * plain * abs(1 - 1 / rule.factor)
    if isinstance(rule, rr.scaling.Llama3):
        width = rule.high_freq_factor / (rule.high_freq_factor - rule.low_freq_factor)
        tol = tol + 4 * U32 * width * plain * abs(1 - 1 / rule.factor)
    return tol


def assert_inv_freq_matches(spec: rr.RopeSpec, hf_inv: Any, seq_len: int | None) -> None:
    ours = rr.inv_freq(spec, seq_len=seq_len)
    theirs = host(hf_inv).astype(np.float64)
    plain = rr.inv_freq(rr.RopeSpec(spec.head_dim, rotary_dim=spec.rotary_dim, base=spec.base))
    tol = _tol_for(spec, ours, plain)
    assert theirs.shape == ours.shape
    excess = np.abs(ours - theirs) - tol
    assert np.all(excess <= 0), (spec, seq_len, np.max(excess), ours, theirs)


# --- inv_freq and attention_factor ---------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rope_type", TYPES)
def test_inv_freq_and_attention_factor_match_hf_init_functions(rope_type, seed):
    config = random_config(np.random.default_rng([seed, TYPES.index(rope_type)]), rope_type)
    hf = hf_config(config)
    spec = rr.RopeSpec.from_hf(config)
    assert rr.RopeSpec.from_hf(hf) == spec  # a config object reads the same
    assert rr.RopeSpec.from_hf(legacy(config)) == spec  # and so does the legacy format
    assert rr.RopeSpec.from_hf(hf.to_dict()) == spec  # and HF's own serialization
    for seq_len in seq_lens(config):
        if rope_type == "default":  # Llama's ignores partial_rotary_factor; GPT-NeoX's reads it
            inv, factor = gpt_neox.GPTNeoXRotaryEmbedding.compute_default_rope_parameters(hf)
        else:
            inv, factor = rope_utils.ROPE_INIT_FUNCTIONS[rope_type](hf, "cpu", seq_len=seq_len)
        assert_inv_freq_matches(spec, inv, seq_len)
        ours = rr.attention_factor(spec, seq_len=seq_len)
        assert ours == pytest.approx(float(factor), rel=4 * EPS64, abs=0)


@pytest.mark.parametrize("seed", range(4))
def test_legacy_hf_config_objects_read_like_current_ones(seed):
    for rope_type in TYPES[1:]:
        config = random_config(np.random.default_rng([99, seed, TYPES.index(rope_type)]), rope_type)
        old = hf_config(legacy(config))
        spec = rr.RopeSpec.from_hf(config)
        assert rr.RopeSpec.from_hf(old) == spec
        inv, factor = rope_utils.ROPE_INIT_FUNCTIONS[rope_type](old, "cpu", seq_len=None)
        assert_inv_freq_matches(spec, inv, None)
        assert rr.attention_factor(spec) == pytest.approx(float(factor), rel=4 * EPS64, abs=0)


# --- apply_rope against HF's rotary modules ------------------------------------------------


def _rotation_tol(spec: rr.RopeSpec, x: Any, position_ids: Any, seq_len: float) -> np.ndarray:
    """Per-element tolerance, shape of x (batch, heads, seq, head_dim), half layout.

    Pair j at position p: ``a * (p * rel_j + 3u) * (|x_j| + |x_{j+n}|)`` on both of its
    features (module docstring); pass-through features are copied exactly.
    """
    theta = rr.inv_freq(spec, seq_len=seq_len)
    plain = rr.inv_freq(rr.RopeSpec(spec.head_dim, rotary_dim=spec.rotary_dim, base=spec.base))
    rel = _tol_for(spec, theta, plain) + U32 * theta
    p = np.abs(host(position_ids).astype(np.float64))[:, None, :, None]  # (batch, 1, seq, 1)
    a = rr.attention_factor(spec, seq_len=seq_len)
    xa = np.abs(host(x))
    n = spec.n_pairs
    per_pair = a * (p * rel + 3 * U32) * (xa[..., :n] + xa[..., n : 2 * n])
    tol = np.zeros(xa.shape)
    tol[..., :n] = per_pair
    tol[..., n : 2 * n] = per_pair
    return tol


def _module_and_apply(config: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Llama for full rotary; GPT-NeoX (which slices the rotary part) for partial."""
    fraction = config["rope_parameters"].get("partial_rotary_factor", 1.0)
    if fraction == 1.0 or config["rope_parameters"]["rope_type"] == "proportional":
        hf = hf_config(config)
        return hf, llama.LlamaRotaryEmbedding(hf), llama.apply_rotary_pos_emb
    hf = hf_config(config, transformers.GPTNeoXConfig)
    return hf, gpt_neox.GPTNeoXRotaryEmbedding(hf), gpt_neox.apply_rotary_pos_emb


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rope_type", TYPES)
def test_apply_rope_matches_hf_rotary_module_and_apply_rotary_pos_emb(rope_type, seed):
    rng = np.random.default_rng([7, seed, TYPES.index(rope_type)])
    config = random_config(rng, rope_type)
    params = config["rope_parameters"]
    original = params.get("original_max_position_embeddings", config["max_position_embeddings"])
    gen = torch.Generator().manual_seed(seed)
    D, S = config["head_dim"], 6
    for top in (S - 1, original + 3, 2 * config["max_position_embeddings"] + 11):
        hf, module, apply = _module_and_apply(config)  # fresh: dynamic modules keep state
        spec = rr.RopeSpec.from_hf(hf)
        position_ids = torch.tensor(
            [[top - S + 1 + i for i in range(S)], [top - i for i in range(S)]]
        )
        q = torch.randn(2, 4, S, D, dtype=torch.float64, generator=gen)
        k = torch.randn(2, 2, S, D, dtype=torch.float64, generator=gen)
        cos, sin = module(q, position_ids)
        q_hf, k_hf = apply(q, k, cos, sin)
        q_rr, k_rr = rr.apply_rope_qk(q, k, spec, position_ids[:, None, :])
        for ours, theirs, x in ((q_rr, q_hf, q), (k_rr, k_hf, k)):
            tol = _rotation_tol(spec, x, position_ids, top + 1.0)
            excess = np.abs(host(ours) - host(theirs)) - tol
            assert np.all(excess <= 0), float(np.max(excess))


# --- to_hf ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("rope_type", TYPES)
def test_to_hf_round_trips_and_hf_accepts_it(rope_type, seed):
    config = random_config(np.random.default_rng([3, seed, TYPES.index(rope_type)]), rope_type)
    spec = rr.RopeSpec.from_hf(config)
    written = spec.to_hf(max_position_embeddings=config["max_position_embeddings"])
    again = rr.RopeSpec.from_hf(written)
    for seq_len in seq_lens(config):
        np.testing.assert_array_equal(rr.inv_freq(again, seq_len), rr.inv_freq(spec, seq_len))
        assert rr.attention_factor(again, seq_len) == rr.attention_factor(spec, seq_len)
    assert (
        rr.RopeSpec.from_hf(again.to_hf(max_position_embeddings=config["max_position_embeddings"]))
        == again
    )
    # HF reads what to_hf wrote into the same numbers.
    hf = hf_config({"hidden_size": 4 * spec.head_dim, "num_attention_heads": 4, **written})
    if rope_type != "default":
        inv, factor = rope_utils.ROPE_INIT_FUNCTIONS[rope_type](hf, "cpu", seq_len=None)
        assert_inv_freq_matches(spec, inv, None)
        assert rr.attention_factor(spec) == pytest.approx(float(factor), rel=4 * EPS64)


def test_real_world_configs():
    llama31 = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    }
    spec = rr.RopeSpec.from_hf(llama31)
    assert spec.scaling == rr.scaling.Llama3(8.0, 8192, 1.0, 4.0)
    assert (spec.head_dim, spec.rotary_dim, spec.base) == (128, 128, 500000.0)
    phi3 = {  # Phi-3-mini-128k: "su" is LongRoPE's old name, L0 sits at the top level
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48},
    }
    expected = math.sqrt(1 + math.log(131072 / 4096) / math.log(4096))
    for config in (
        phi3,
        transformers.Phi3Config(
            **{
                **phi3,
                "rope_scaling": {
                    "type": "longrope",
                    "short_factor": [1.0] * 48,
                    "long_factor": [2.0] * 48,
                    "original_max_position_embeddings": 1024,
                },
            }
        ),
    ):  # the top-level value wins, as in HF
        spec = rr.RopeSpec.from_hf(config)
        assert isinstance(spec.scaling, rr.scaling.LongRoPE)
        assert spec.scaling.original_max_position == 4096
        assert rr.attention_factor(spec) == pytest.approx(expected, rel=1e-15)
    hf_phi3 = transformers.Phi3Config(
        **{
            **phi3,
            "rope_scaling": {
                "type": "longrope",
                "short_factor": [1.0] * 48,
                "long_factor": [2.0] * 48,
                "original_max_position_embeddings": 1024,
            },
        }
    )
    _, factor = rope_utils.ROPE_INIT_FUNCTIONS["longrope"](hf_phi3, "cpu")
    assert factor == pytest.approx(expected, rel=1e-15)
    gpt_oss_like = {
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
    }
    rule = rr.RopeSpec.from_hf(gpt_oss_like).scaling
    assert isinstance(rule, rr.scaling.YaRN)
    assert rule.truncate is False


def test_nested_per_layer_parameters_need_a_layer_type():
    config = {
        "head_dim": 32,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        },
    }
    full = rr.RopeSpec.from_hf(config, layer_type="full_attention")
    assert full.scaling == rr.scaling.Linear(8.0)
    assert full.base == 1e6
    assert rr.RopeSpec.from_hf(config, layer_type="sliding_attention").scaling is None
    with pytest.raises(ValueError, match=r"`layer_type` must be one of 'full_attention'"):
        rr.RopeSpec.from_hf(config)


def test_from_hf_and_to_hf_errors():
    with pytest.raises(ValueError, match=r"`config` must give head_dim"):
        rr.RopeSpec.from_hf({"rope_theta": 1e4})
    with pytest.raises(ValueError, match=r"`rope_type` must be one of"):
        rr.RopeSpec.from_hf({"head_dim": 8, "rope_parameters": {"rope_type": "fancy"}})
    with pytest.raises(ValueError, match=r"`partial_rotary_factor` must give an even"):
        rr.RopeSpec.from_hf({"head_dim": 10, "partial_rotary_factor": 0.5})
    with pytest.raises(TypeError, match=r"`config` must be a config mapping"):
        rr.RopeSpec.from_hf(b"config.json")
    with pytest.raises(ValueError, match=r"`config` path 'no/such/config.json' does not exist"):
        rr.RopeSpec.from_hf("no/such/config.json")  # a string is a path
    with pytest.raises(ValueError, match=r"layout='interleaved'"):
        rr.RopeSpec(head_dim=8, layout="interleaved").to_hf()
    with pytest.raises(ValueError, match=r"`spec.scaling` must be a rule with a HF rope_type"):
        rr.RopeSpec(head_dim=8, scaling=rr.scaling.NTKAware(2.0)).to_hf()
    with pytest.raises(ValueError, match=r"`max_position_embeddings` must equal"):
        rr.RopeSpec(head_dim=8, scaling=rr.scaling.DynamicNTK(2.0, 64)).to_hf(
            max_position_embeddings=128
        )
