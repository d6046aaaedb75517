"""How each transformers model family applies RoPE: data, keyed by ``model_type``.

A config states the RoPE's numbers (base, scaling, partial rotation); how the model's code
applies them — which features pair, in which order the result is written, which key holds
the rotated head size, which layers rotate at all — is in the family's modeling code. Each
entry here records that, with the transformers file and function it was read from. A
model type without an entry gets `DEFAULT` (HF's ``rotate_half``, ``head_dim`` or
``hidden_size // num_attention_heads``), which also reads the keys that mean the same in
every family that has them (``qk_rope_head_dim``, ``rope_interleave``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rope_ref._core.aliases import Layout, SectionOrder

__all__ = ["DEFAULT", "FAMILIES", "Family", "family_of"]


@dataclass(frozen=True)
class Family:
    """How one model family applies RoPE (see the module docstring)."""

    #: The transformers file and function the entry was read from.
    source: str
    #: Which features pair: ``(j, j + n)`` ("half", ``rotate_half``) or ``(2j, 2j + 1)``.
    layout: Layout = "half"
    #: The order the rotated pairs are written in, when it differs from `layout`.
    output_layout: Layout | None = None
    #: Config flag that, when true, reads interleaved pairs and writes them in half order.
    interleave_flag: str | None = "rope_interleave"
    #: The flag's value when the config does not give it (the HF config class's default).
    interleave_default: bool = False
    #: Keys holding the rotated head size, first present wins (before ``head_dim``).
    head_dim_keys: tuple[str, ...] = ("qk_rope_head_dim",)
    #: The family's own names of (hidden_size, num_attention_heads): HF's attribute_map
    #: aliases, each read where the common name is absent.
    size_keys: tuple[tuple[str, str], ...] = ()
    #: Key of the head count the model's rotary modules really use, read before
    #: ``num_attention_heads`` (Moonshine's encoder overwrites the config's head count).
    heads_key: str | None = None
    #: HF rounds ``hidden_size // num_attention_heads`` down when they do not divide.
    floor_division: bool = False
    #: An odd ``int(head_dim * partial_rotary_factor)`` = d is kept, as HF's
    #: ``arange(0, d, 2) / d`` does: (d + 1) // 2 pairs at ``base ** (-2j / d)``.
    odd_rotary_dim: bool = False
    #: The rotated features are the last ``rotary_dim`` of the head (``[nope | rope]``).
    rotary_at_end: bool = False
    #: Key holding the number of rotated features (GPT-J's ``rotary_dim``).
    rotary_dim_key: str | None = None
    #: Legacy names of ``partial_rotary_factor`` and ``rope_theta`` in raw configs. A family
    #: with a legacy fraction key reads it in place of a top-level ``partial_rotary_factor``
    #: (its config class never reads that one), and `fraction_default` when both are absent.
    fraction_keys: tuple[str, ...] = ()
    fraction_default: float = 1.0
    base_keys: tuple[str, ...] = ()
    #: Keys of `rope_parameters` that each hold one RoPE, where the family's config class
    #: declares them (``_rope_type_labels``, absent from its config.json).
    rope_type_labels: tuple[str, ...] = ()
    #: Legacy key of the sliding-window layers' base (their RoPE has no scaling).
    local_base_key: str | None = None
    #: With `local_base_key`: the layer types a raw config's one set of parameters is split
    #: into, (the layers that take the parameters, the local layers at that base).
    layer_labels: tuple[str, str] | None = None
    #: With `layer_labels`: the key of the layer pattern and its default, from which HF
    #: builds ``layer_types`` when absent (every n-th layer takes the first label).
    layer_pattern: tuple[str, int] | None = None
    #: HF rope types the family's configs name for another: (written, meant).
    rope_type_renames: tuple[tuple[str, str], ...] = ()
    #: Default ``mrope_section`` of the family's text rotary module, and its order.
    sections: tuple[int, ...] | None = None
    section_order: SectionOrder = "chunked"
    #: The family's own pair-to-axis order, read from its sections (`hf_mrope.pair_map`):
    #: ``"ernie"`` (``h, w, h, w, ..., t``).
    pair_map: str | None = None
    #: Per-layer list whose entry 0 marks a layer without RoPE (1: RoPE), and the interval
    #: key from which HF builds it when absent (every n-th layer without RoPE).
    rope_layers_key: str | None = None
    rope_layers_interval_key: str | None = None
    #: Why a config of this family has no RoPE at all (ALiBi), or when: a flag key.
    no_rope: str | None = None
    no_rope_flag: str | None = None
    #: Why `RopeSpec` cannot state this family's rotation (from_hf refuses, saying so).
    refused: str | None = None
    #: Flags (``section.key`` for a nested one) that, when true, mean ALiBi biases and no
    #: RoPE, in any family: ``alibi`` and MPT's ``attn_config.alibi``.
    alibi_flags: tuple[str, ...] = ("alibi", "attn_config.alibi")


DEFAULT = Family("transformers/models/llama/modeling_llama.py: rotate_half")

_EVERY_TWO: Layout = "interleaved"
#: Gemma 3 (``Gemma3TextConfig``): ``full_attention`` takes the parameters (scaling
#: included), ``sliding_attention`` plain RoPE at ``rope_local_base_freq``.
_GEMMA3_LABELS = ("full_attention", "sliding_attention")
_GLM = "transformers/models/glm/modeling_glm.py: rotate_half (x[..., 0::2], x[..., 1::2])"
_COHERE = "transformers/models/cohere/modeling_cohere.py: rotate_half (x[..., ::2], x[..., 1::2])"
_COMPLEX = "apply_rotary_emb: torch.view_as_complex(x.reshape(..., -1, 2)) * freqs_cis"
_QWEN3_VL = "modeling_{}.py: Qwen3-VL apply_interleaved_mrope, mrope_section default"
_MLA = "transformers/models/{0}/modeling_{0}.py: apply_rotary_pos_emb_interleave, always called"

FAMILIES: dict[str, Family] = {
    # Pairs (2j, 2j + 1), half order never written.
    "cohere": Family(_COHERE, layout=_EVERY_TWO),
    "cohere2": Family(_COHERE.replace("cohere", "cohere2"), layout=_EVERY_TWO),
    "cohere2_moe": Family(_COHERE.replace("cohere", "cohere2_moe"), layout=_EVERY_TWO),
    "glm": Family(_GLM, layout=_EVERY_TWO),
    "glm4": Family(_GLM.replace("glm", "glm4"), layout=_EVERY_TWO),
    "glm4v": Family(
        "transformers/models/glm4v/modeling_glm4v.py: rotate_half_llm, mrope_section default",
        layout=_EVERY_TWO,
        sections=(8, 12, 12),
    ),
    "glm4v_moe": Family(
        "transformers/models/glm4v_moe/modeling_glm4v_moe.py: rotate_half_llm",
        layout=_EVERY_TWO,
        sections=(8, 12, 12),
        floor_division=True,
    ),
    "glm_ocr": Family(
        "transformers/models/glm_ocr/modeling_glm_ocr.py: rotate_half_llm, mrope_section",
        layout=_EVERY_TWO,
        sections=(8, 12, 12),
    ),
    "glm4_moe": Family(
        "transformers/models/glm4_moe/modeling_glm4_moe.py: Glm4MoeAttention.head_dim "
        "(hidden_size // num_attention_heads, rounded down); "
        "Glm4MoeRotaryEmbedding.compute_default_rope_parameters (arange(0, dim, 2) / dim)",
        floor_division=True,
        odd_rotary_dim=True,
    ),
    "helium": Family(
        "transformers/models/helium/modeling_helium.py: rotate_half", layout=_EVERY_TWO
    ),
    "blt": Family("transformers/models/blt/modeling_blt.py: rotate_half", layout=_EVERY_TWO),
    "ernie4_5": Family(
        "transformers/models/ernie4_5/modeling_ernie4_5.py: rotate_half", layout=_EVERY_TWO
    ),
    "ernie4_5_moe": Family(
        "transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py: rotate_half",
        layout=_EVERY_TWO,
    ),
    "moonshine": Family(
        "transformers/models/moonshine/modeling_moonshine.py: rotate_half; MoonshineAttention "
        "sets config.num_attention_heads (attribute_map: decoder_num_attention_heads) to "
        "encoder_num_attention_heads before either rotary module is built",
        layout=_EVERY_TWO,
        heads_key="encoder_num_attention_heads",
    ),
    "moonshine_streaming": Family(
        "transformers/models/moonshine_streaming/modeling_moonshine_streaming.py: rotate_half",
        layout=_EVERY_TWO,
    ),
    "openai_privacy_filter": Family(
        "transformers/models/openai_privacy_filter/modeling_openai_privacy_filter.py: "
        "apply_rotary_pos_emb",
        layout=_EVERY_TWO,
    ),
    "pe_audio": Family(
        "transformers/models/pe_audio/modeling_pe_audio.py: rotate_half", layout=_EVERY_TWO
    ),
    "llama4": Family(
        f"transformers/models/llama4/modeling_llama4.py: {_COMPLEX}; no_rope_layers",
        layout=_EVERY_TWO,
        rope_layers_key="no_rope_layers",
        rope_layers_interval_key="no_rope_layer_interval",
    ),
    "llama4_text": Family(
        f"transformers/models/llama4/modeling_llama4.py: {_COMPLEX}; no_rope_layers",
        layout=_EVERY_TWO,
        rope_layers_key="no_rope_layers",
        rope_layers_interval_key="no_rope_layer_interval",
    ),
    "deepseek_v2": Family(
        f"transformers/models/deepseek_v2/modeling_deepseek_v2.py: {_COMPLEX}", layout=_EVERY_TWO
    ),
    "gptj": Family(
        "transformers/models/gptj/modeling_gptj.py: rotate_every_two on "
        "query[..., :rotary_dim]; GPTJConfig.attribute_map",
        layout=_EVERY_TWO,
        size_keys=(("n_embd", "n_head"),),
        rotary_dim_key="rotary_dim",
    ),
    "codegen": Family(
        "transformers/models/codegen/modeling_codegen.py: rotate_every_two on "
        "query[..., :rotary_dim]; CodeGenConfig.attribute_map",
        layout=_EVERY_TWO,
        size_keys=(("n_embd", "n_head"),),
        rotary_dim_key="rotary_dim",
    ),
    # Pairs (2j, 2j + 1) read, written in half order, whatever rope_interleave says.
    **{
        name: Family(_MLA.format(name), layout=_EVERY_TWO, output_layout="half")
        for name in ("bailing_hybrid", "glm_moe_dsa", "longcat_flash", "mistral_large4")
    },
    "deepseek_v4": Family(
        "transformers/models/deepseek_v4/modeling_deepseek_v4.py: apply_rotary_pos_emb "
        "(rotate_half on x[..., 0::2], x[..., 1::2] of the trailing rope slice); two RoPEs, "
        "rope_parameters 'main' and 'compress'",
        layout=_EVERY_TWO,
        head_dim_keys=(),
        interleave_flag=None,
        rotary_at_end=True,
        rope_type_labels=("main", "compress"),
    ),
    # Multi-latent attention whose HF config class defaults rope_interleave to True: a
    # config without the key reads interleaved pairs, as HF does.
    **{
        name: Family(
            f"transformers/models/{name}/configuration_{name}.py: rope_interleave = True",
            interleave_default=True,
        )
        for name in ("axk1", "deepseek_v3", "glm4_moe_lite", "mistral4", "sarvam_mla", "youtu")
    },
    # Sub-configs of models whose rotary module is built from them.
    **{
        name: Family("transformers/models/blt/modeling_blt.py: rotate_half", layout=_EVERY_TWO)
        for name in (
            "blt_local_encoder",
            "blt_local_decoder",
            "blt_global_transformer",
            "blt_patcher",
        )
    },
    "pe_audio_encoder": Family(
        "transformers/models/pe_audio/modeling_pe_audio.py: rotate_half", layout=_EVERY_TWO
    ),
    # The video towers rotate q.reshape(..., -1, 1, 2) by stack_freqs(cos, sin): pairs
    # (2j, 2j + 1) at the first half of the cos/sin tables.
    "pe_video_encoder": Family(
        "transformers/models/pe_video/modeling_pe_video.py: apply_rotary_pos_emb, stack_freqs",
        layout=_EVERY_TWO,
    ),
    "pe_audio_video_encoder": Family(
        "transformers/models/pe_audio_video/modeling_pe_audio_video.py: apply_rotary_pos_emb, "
        "stack_freqs",
        layout=_EVERY_TWO,
    ),
    # Head sizes and legacy keys.
    "gpt_neox": Family(
        "transformers/models/gpt_neox/configuration_gpt_neox.py: rotary_pct (default 0.25), "
        "rotary_emb_base",
        fraction_keys=("rotary_pct",),
        fraction_default=0.25,
        base_keys=("rotary_emb_base",),
    ),
    "gpt_neox_japanese": Family(
        "transformers/models/gpt_neox_japanese/configuration_gpt_neox_japanese.py: rotary_pct, "
        "rotary_emb_base",
        fraction_keys=("rotary_pct",),
        base_keys=("rotary_emb_base",),
    ),
    "jetmoe": Family(
        "transformers/models/jetmoe/configuration_jetmoe.py: attribute_map head_dim -> kv_channels",
        head_dim_keys=("kv_channels",),
    ),
    "zamba2": Family(
        "transformers/models/zamba2/configuration_zamba2.py: attribute_map head_dim -> "
        "attention_head_dim (2 * hidden_size // num_attention_heads)",
        head_dim_keys=("attention_head_dim",),
    ),
    "dbrx": Family(
        "transformers/models/dbrx/configuration_dbrx.py: attribute_map hidden_size -> d_model, "
        "num_attention_heads -> n_heads",
        size_keys=(("d_model", "n_heads"),),
    ),
    "gemma3_text": Family(
        "transformers/models/gemma3/configuration_gemma3.py: rope_local_base_freq -> "
        "sliding_attention rope_theta; rope_scaling -> full_attention",
        local_base_key="rope_local_base_freq",
        layer_labels=_GEMMA3_LABELS,
        layer_pattern=("sliding_window_pattern", 6),
    ),
    "gemma3": Family(
        "transformers/models/gemma3/configuration_gemma3.py: rope_local_base_freq",
        local_base_key="rope_local_base_freq",
        layer_labels=_GEMMA3_LABELS,
        layer_pattern=("sliding_window_pattern", 6),
    ),
    "t5gemma2": Family(
        "transformers/models/t5gemma2/configuration_t5gemma2.py: rope_local_base_freq",
        local_base_key="rope_local_base_freq",
        layer_labels=_GEMMA3_LABELS,
        layer_pattern=("sliding_window_pattern", 6),
    ),
    "smollm3": Family(
        "transformers/models/smollm3/configuration_smollm3.py: no_rope_layers (0: no RoPE)",
        rope_layers_key="no_rope_layers",
        rope_layers_interval_key="no_rope_layer_interval",
    ),
    # M-RoPE defaults of text rotary modules.
    "qwen2_vl": Family(
        "transformers/models/qwen2_vl/modeling_qwen2_vl.py: mrope_section default",
        sections=(16, 24, 24),
    ),
    "qwen2_5_vl": Family(
        "transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py: mrope_section default",
        sections=(16, 24, 24),
    ),
    "qwen2_5_omni": Family(
        "transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py: mrope_section default",
        sections=(16, 24, 24),
    ),
    "paddleocr_vl": Family(
        "transformers/models/paddleocr_vl/modeling_paddleocr_vl.py: mrope_section default",
        sections=(16, 24, 24),
    ),
    **{
        name: Family(
            _QWEN3_VL.format(name),
            sections=sections,
            section_order="interleaved",
            # Qwen3OmniMoeThinkerTextAttention: hidden_size // num_attention_heads.
            floor_division=name == "qwen3_omni_moe",
        )
        for name, sections in {
            "qwen3_vl": (24, 20, 20),
            "qwen3_vl_moe": (24, 20, 20),
            "qwen3_omni_moe": (24, 20, 20),
            "qwen3_5": (11, 11, 10),
            "qwen3_5_moe": (11, 11, 10),
            "qwen4_exp": (11, 11, 10),
            "cosmos3": (24, 20, 20),
            "cosmos3_edge": (24, 20, 20),
        }.items()
    },
    "hy_v4_vl": Family(
        "transformers/models/hy_v4_vl/modeling_hy_v4_vl.py: rotate_half, interleaved M-RoPE; "
        "configuration_hy_v4_vl.py: HYV4VLTextConfig sets mrope_section [12, 10, 10]",
        layout=_EVERY_TWO,
        sections=(12, 10, 10),
        section_order="interleaved",
    ),
    "phi3": Family(
        "transformers/models/phi3/configuration_phi3.py: Phi3Config.__post_init__ "
        "(rope_type 'yarn' -> 'longrope')",
        rope_type_renames=(("yarn", "longrope"),),
    ),
    # No RoPE, or none that a RopeSpec states.
    "mpt": Family(
        "transformers/models/mpt/modeling_mpt.py: build_mpt_alibi_tensor",
        no_rope="MPT adds ALiBi biases to the attention scores; it has no RoPE",
    ),
    "bloom": Family(
        "transformers/models/bloom/modeling_bloom.py: build_alibi_tensor",
        no_rope="Bloom adds ALiBi biases to the attention scores; it has no RoPE",
    ),
    "jamba": Family(
        "transformers/models/jamba/modeling_jamba.py: JambaAttention (no position embedding)",
        no_rope="Jamba's attention layers use no position encoding (its Mamba layers order)",
    ),
    "nemotron_h": Family(
        "transformers/models/nemotron_h/modeling_nemotron_h.py: NemotronHAttention "
        "(no position embedding)",
        no_rope="Nemotron-H's attention layers use no position encoding",
    ),
    "falcon": Family(
        "transformers/models/falcon/modeling_falcon.py: FalconAttention (alibi=True)",
        no_rope="this Falcon config sets alibi=true: ALiBi biases, no RoPE",
        no_rope_flag="alibi",
    ),
    **{
        name: Family(
            "transformers/models/ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py: "
            "rotate_half_text (x[..., 0::2], x[..., 1::2]), "
            "Ernie4_5_VLMoeTextRotaryEmbedding.recomposition_frequencies (h, w, h, w, ..., t), "
            "mrope_section default [22, 22, 20]",
            layout=_EVERY_TWO,
            sections=(22, 22, 20),
            pair_map="ernie",
        )
        for name in ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text")
    },
    "nanochat": Family(
        "transformers/models/nanochat/modeling_nanochat.py: rotate_half returns (x2, -x1)",
        refused=(
            "model_type 'nanochat' rotates by the negated angles (its rotate_half returns "
            "(x2, -x1)); read the config without model_type and apply the spec with "
            "inverse=True"
        ),
    ),
}


def family_of(model_type: str | None) -> Family:
    """The entry of `model_type`, else `DEFAULT`.

    Examples
    --------
    >>> from rope_ref._config.families import family_of
    >>> family_of("cohere").layout, family_of("llama").layout
    ('interleaved', 'half')
    """
    return FAMILIES.get(model_type or "", DEFAULT)
