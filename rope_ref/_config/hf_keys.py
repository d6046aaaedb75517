"""Keys `RopeSpec.from_hf` knows; a misspelt one is warned about (an error under strict=True).

A RoPE parameters mapping (``rope_parameters``, ``rope_scaling``, or a mapping nested in one:
a layer type's parameters) holds only RoPE keys, so each key must be known. A config holds
many other keys; there a key is checked only when it names RoPE (it contains "rope",
"rotary" or "theta").
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping

from rope_ref._config.hf_reader import ConfigReader
from rope_ref._config.hf_rules import rule_keys

__all__ = ["CONFIG_KEYS", "PARAMETER_KEYS", "check_known_keys"]

#: Keys of HF's ``RopeParameters`` and of the legacy ``rope_scaling`` format.
PARAMETER_KEYS = frozenset(
    {
        "rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings",
        "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
        "short_factor", "long_factor", "low_freq_factor", "high_freq_factor",
        "partial_rotary_factor", "mrope_section", "mrope_interleaved", "truncate",
        "max_position_embeddings",  # copied in by some transformers configs (Mistral 4)
        "llama_4_scaling_beta",  # Ministral 3: a query temperature, not RoPE
        "use_fope", "num_inv_freq", "fope_sep_head", "fope_init_factor",  # FoPE: refused
    }
)  # fmt: skip
#: Config keys that name RoPE and that from_hf reads (or knows to mean nothing to it).
CONFIG_KEYS = frozenset(
    {
        "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor",
        "rotary_dim", "rotary_pct", "rotary_emb_base", "rope_local_base_freq",
        "qk_rope_head_dim", "rope_interleave", "no_rope_layers", "no_rope_layer_interval",
        "default_theta", "_rope_type_labels", "global_rope_theta", "local_rope_theta",
        "rotary_emb_fraction", "rotary_emb_dim", "rotary_emb_interleaved", "rotary_emb_scale_base",
        "rope_scaling_type", "rope_ratio", "use_rope", "use_rotary", "qk_nope_head_dim",
        "rotary_value", "rope_layers", "rope_type",
        # Other transformers config keys that name RoPE (their families' own settings).
        "compress_rope_theta", "ignore_keys_at_rope_validation", "layer_rope_theta",
        "memory_attention_rope_dropout", "memory_attention_rope_feat_sizes",
        "memory_attention_rope_k_sizes", "memory_attention_rope_theta",
        "num_spatial_rope_pairs_per_axis", "num_uid_rope_pairs", "relation_bias_theta",
        "rope_scaling_layers", "rotary_embedding_base", "spatial_rope_base_frequency",
        "uid_rope_base_frequency", "use_mem_rope", "use_rotary_embedding",
        "default_partial_rotary_factor", "default_rope_type",
    }
)  # fmt: skip
_ROPE_WORDS = ("rope", "rotary", "theta")


def check_known_keys(cfg: ConfigReader, *, strict: bool) -> None:
    """Warn (or, if `strict`, raise ValueError) naming each unknown key and the nearest known.

    Examples
    --------
    >>> from rope_ref._config.hf_reader import ConfigReader
    >>> check_known_keys(ConfigReader({"rope_thetta": 1e4}), strict=True)
    Traceback (most recent call last):
    ...
    ValueError: `config` has an unknown key 'rope_thetta' (did you mean 'rope_theta'?).
    """
    problems = [
        _message(cfg.where, key, CONFIG_KEYS)
        for key in _keys_of(cfg)
        if key not in CONFIG_KEYS and any(word in key.lower() for word in _ROPE_WORDS)
    ]
    labels = set(cfg.strings("_rope_type_labels") or ()) | set(cfg.strings("layer_types") or ())
    parameter_keys = PARAMETER_KEYS | rule_keys()
    for name in ("rope_parameters", "rope_scaling"):
        params = cfg.section(name)
        if params is None:
            continue
        for key in _keys_of(params):
            value = params.raw(key)
            if key in labels or (key not in parameter_keys and isinstance(value, Mapping)):
                nested = params.section(key) if isinstance(value, Mapping) else None
                if nested is not None:  # one layer type's parameters
                    problems += [
                        _message(nested.where, k, parameter_keys)
                        for k in _keys_of(nested)
                        if k not in parameter_keys
                    ]
            elif key not in parameter_keys:
                problems.append(_message(params.where, key, parameter_keys | labels))
    for problem in problems:
        if strict:
            raise ValueError(problem)
        warnings.warn(problem, UserWarning, stacklevel=4)


def _keys_of(reader: ConfigReader) -> list[str]:
    config = reader.config
    keys = config if isinstance(config, Mapping) else vars(config)
    return [key for key in keys if isinstance(key, str)]


def _message(where: str, key: str, known: frozenset[str] | set[str]) -> str:
    nearest = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean {nearest[0]!r}?)" if nearest else " (from_hf ignores it)"
    return f"`{where}` has an unknown key {key!r}{hint}."
