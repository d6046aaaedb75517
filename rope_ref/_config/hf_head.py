"""The head size RoPE sees in a HF config: a family's keys, head_dim, or hidden // heads."""

from __future__ import annotations

from rope_ref._config.families import Family
from rope_ref._config.hf_layers import per_layer_value
from rope_ref._config.hf_reader import ConfigReader

__all__ = ["head_dim_of"]


def head_dim_of(
    layer: ConfigReader | None, cfg: ConfigReader, family: Family, rope_type: str
) -> tuple[int, str, str]:
    """The head size RoPE sees, the key it was read from, and where (for error messages)."""
    for reader in [r for r in (layer, cfg) if r is not None]:
        for key in (*family.head_dim_keys, "head_dim"):
            head_dim = per_layer_value(reader, key)
            if head_dim is not None:
                return head_dim, key, reader.where
    head_dim, origin = _head_dim_from_sizes(cfg, family, vision=rope_type == "axial")
    return head_dim, "hidden_size", origin


def _head_dim_from_sizes(cfg: ConfigReader, family: Family, *, vision: bool) -> tuple[int, str]:
    """``hidden // heads``, each read as HF's ``attribute_map`` reads it, and where from.

    A family's own name (``n_embd``, ``n_head``) is an alias of the common one, which wins
    when both are given.
    """
    hidden_key = "embed_dim" if vision and cfg.has("embed_dim") else "hidden_size"
    hidden_key, hidden = _first_given(cfg, [hidden_key, *(h for h, _ in family.size_keys)])
    first = [] if family.heads_key is None else [family.heads_key]
    heads_key, heads = _first_given(
        cfg, [*first, "num_attention_heads", *(n for _, n in family.size_keys)]
    )
    if hidden is None or heads is None:
        msg = (
            "`config` must give head_dim, or hidden_size and num_attention_heads; "
            f"got head_dim=None, {hidden_key}={hidden!r}, num_attention_heads={heads!r} "
            f"({cfg.where})."
        )
        raise ValueError(msg)
    if hidden % heads and not family.floor_division:
        requirement = f"a multiple of num_attention_heads ({heads}) when head_dim is absent"
        cfg.fail(hidden_key, requirement, hidden, ValueError)
    return hidden // heads, f"{hidden_key}={hidden} // {heads_key}={heads} in {cfg.where}"


def _first_given(cfg: ConfigReader, keys: list[str]) -> tuple[str, int | None]:
    """The first of `keys` that `cfg` gives, and its integer value (the first key if none)."""
    for key in keys:
        value = cfg.integer(key)
        if value is not None:
            return key, value
    return keys[0], None
