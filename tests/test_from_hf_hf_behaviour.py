"""RopeSpec.from_hf does what transformers' own config classes and rotary modules do.

Each case runs the installed transformers on the same config: where HF's rotary module
fails, from_hf refuses; where it builds a RoPE, from_hf states the same one (inverse
frequencies compared with the module's, rotations with its apply function).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import rope_ref as rr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
llama = pytest.importorskip("transformers.models.llama.modeling_llama")
gpt_neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")

transformers.logging.set_verbosity_error()  # HF logs (not warns) about the odd configs here

U32 = 2.0**-24


def hf_inv_freq(module) -> np.ndarray:
    return module.inv_freq.double().numpy()


def rr_inv_freq(spec: rr.RopeSpec) -> np.ndarray:
    return np.asarray(rr.inv_freq(spec), dtype=np.float64)


# --- a null rope_type ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": None, "factor": 4.0},
        {"type": None, "factor": 4.0},
        {"rope_type": None},
        {"rope_type": None, "type": "linear", "factor": 4.0},
    ],
)
def test_null_rope_type_is_refused_as_hf_refuses_it(scaling):
    raw = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2}
    config = transformers.LlamaConfig(rope_scaling=dict(scaling), **raw)
    with pytest.raises(KeyError):  # HF: ROPE_INIT_FUNCTIONS[None]
        llama.LlamaRotaryEmbedding(config)
    key = "rope_type" if "rope_type" in scaling else "type"
    for given in ({**raw, "rope_scaling": dict(scaling)}, {**raw, "rope_parameters": scaling}):
        with pytest.raises(ValueError, match=rf"`{key}` must be .*; got None \(config\.rope_"):
            rr.RopeSpec.from_hf(given)


def test_absent_rope_type_is_still_default():
    raw = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2}
    spec = rr.RopeSpec.from_hf({**raw, "rope_scaling": {"rope_theta": 5e5}})
    assert spec.scaling is None
    assert spec.base == 5e5


# --- rotary_pct, partial_rotary_factor, rotary_emb_base, rope_theta ------------------------

NEOX = {"model_type": "gpt_neox", "hidden_size": 256, "num_attention_heads": 4}


@pytest.mark.parametrize(
    ("extra", "ignored"),
    [
        ({}, None),
        ({"rotary_pct": 0.5}, None),
        ({"rotary_pct": 0.5, "partial_rotary_factor": 0.5}, None),
        ({"rotary_pct": 0.5, "partial_rotary_factor": 0.25}, "partial_rotary_factor"),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
        ({"rotary_pct": 1.0, "rope_theta": 5e5}, "rope_theta"),
        ({"rotary_pct": 1.0, "rope_theta": 5e5, "rotary_emb_base": 2e4}, "rope_theta"),
        (
            {"rotary_pct": 0.5, "rope_parameters": {"rope_type": "default",
                                                    "partial_rotary_factor": 0.25}},
            "rotary_pct",
        ),
    ],
)  # fmt: skip
def test_gpt_neox_keys_are_taken_as_hf_takes_them(extra, ignored):
    config = {**NEOX, **extra}
    module = gpt_neox.GPTNeoXRotaryEmbedding(transformers.GPTNeoXConfig.from_dict(config))
    expected = hf_inv_freq(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = rr.RopeSpec.from_hf(config)
    assert spec.rotary_dim == 2 * expected.size
    got = rr_inv_freq(spec)
    assert np.allclose(got, expected, rtol=(np.abs(np.log(got)) + 8) * U32, atol=0)
    messages = [str(w.message) for w in caught]
    if ignored is None:
        assert messages == []
    else:
        assert len(messages) == 1
        assert messages[0].startswith(f"`{ignored}` = ")
        assert "is ignored" in messages[0]
        with pytest.raises(ValueError, match=f"`{ignored}` = .* is ignored"):
            rr.RopeSpec.from_hf(config, strict=True)


def test_a_fraction_given_twice_warns_naming_the_value_taken():
    config = {
        "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "partial_rotary_factor": 0.5,
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25},
    }  # fmt: skip
    with pytest.warns(UserWarning, match=r"`partial_rotary_factor` = 0.5 \(config\) is ignored"):
        spec = rr.RopeSpec.from_hf(config)
    assert spec.rotary_dim == 16  # int(64 * 0.25): the parameters' value, as HF standardizes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = {**config, "partial_rotary_factor": 0.25}
        assert rr.RopeSpec.from_hf(same).rotary_dim == 16  # one value twice: no warning


# --- vision and audio towers: PE video, PE audio-video --------------------------------------


@pytest.mark.parametrize(
    ("config_class", "module_path"),
    [
        ("PeVideoEncoderConfig", "transformers.models.pe_video.modeling_pe_video"),
        ("PeAudioVideoEncoderConfig", "transformers.models.pe_audio_video.modeling_pe_audio_video"),
    ],
)
def test_pe_towers_rotate_interleaved_pairs_as_their_code_does(config_class, module_path):
    modeling = pytest.importorskip(module_path)
    rotary_class = next(
        getattr(modeling, name) for name in dir(modeling) if name.endswith("EncoderRotaryEmbedding")
    )
    config = getattr(transformers, config_class)(
        hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=1
    )
    for given in (config, config.to_dict()):
        spec = rr.RopeSpec.from_hf(given)
        assert (spec.head_dim, spec.rotary_dim, spec.layout) == (32, 32, "interleaved")
    module = rotary_class(config)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, 40, 32))
    k = rng.standard_normal((1, 2, 40, 32))
    positions = np.arange(40)
    cos, sin = module(torch.from_numpy(q), torch.from_numpy(positions)[None])
    hf_q, hf_k = modeling.apply_rotary_pos_emb(
        torch.from_numpy(q), torch.from_numpy(k), cos.double(), sin.double()
    )
    ours_q, ours_k = rr.apply_rope_qk(q, k, spec, positions=positions)
    # float32 angles up to 39 rad: a few 1e-6 rad; a half-split pairing is off by O(1)
    assert np.max(np.abs(hf_q.numpy() - ours_q)) < 1e-4
    assert np.max(np.abs(hf_k.numpy() - ours_k)) < 1e-4


# --- Moonshine: the heads its model really uses -------------------------------------------


@pytest.mark.parametrize(("encoder_heads", "decoder_heads"), [(8, 8), (4, 8), (8, 4)])
def test_moonshine_reads_the_heads_its_model_uses(encoder_heads, decoder_heads):
    # MoonshineAttention sets config.num_attention_heads (attribute_map: the decoder's) to
    # the encoder's count before either rotary module is built: the model's RoPE is
    # hidden_size // encoder_num_attention_heads, from the config object or its config.json
    sizes = {
        "hidden_size": 128, "intermediate_size": 64,
        "encoder_num_hidden_layers": 1, "decoder_num_hidden_layers": 1,
        "encoder_num_attention_heads": encoder_heads, "encoder_num_key_value_heads": encoder_heads,
        "decoder_num_attention_heads": decoder_heads, "decoder_num_key_value_heads": decoder_heads,
    }  # fmt: skip
    config = transformers.MoonshineConfig(**sizes)
    raw = config.to_dict()
    assert "num_attention_heads" not in raw  # config.json names only the aliases
    specs = [rr.RopeSpec.from_hf(raw), rr.RopeSpec.from_hf(config)]
    model = transformers.MoonshineModel(transformers.MoonshineConfig(**sizes))
    for module in (model.encoder.rotary_emb, model.decoder.rotary_emb):
        expected = hf_inv_freq(module)
        for spec in specs:
            assert spec.head_dim == 128 // encoder_heads
            assert spec.rotary_dim == 2 * expected.size
            got = rr_inv_freq(spec)
            assert np.allclose(got, expected, rtol=(np.abs(np.log(got)) + 8) * U32, atol=0)
