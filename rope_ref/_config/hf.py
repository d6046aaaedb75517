"""Hugging Face transformers configs <-> `RopeSpec` (``RopeSpec.from_hf`` / ``to_hf``).

The converters `RopeSpec` loads on first use, one module per direction:

- `rope_ref._config.hf_read`: a config -> one spec (``from_hf``);
- `rope_ref._config.hf_per_layer`: a config -> one spec per layer (``from_hf_layers``);
- `rope_ref._config.hf_write`: a spec -> config keys (``to_hf``);

with what they share: the rope_type table (`rope_ref._config.hf_rules`), the model families
(`rope_ref._config.families`), the layer-type and head-size readings (``hf_layers``,
``hf_head``) and HF's precedence of keys (``hf_precedence``).
"""

from __future__ import annotations

from rope_ref._config.hf_per_layer import spec_of_layer, specs_per_layer
from rope_ref._config.hf_read import spec_from_hf
from rope_ref._config.hf_write import spec_to_hf

__all__ = ["spec_from_hf", "spec_of_layer", "spec_to_hf", "specs_per_layer"]
