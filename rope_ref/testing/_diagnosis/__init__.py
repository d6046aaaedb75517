"""Name the most likely cause of a RoPE mismatch by testing alternative explanations.

The checks live in modules by topic: `basic` (the result as a whole), `layout`,
`positions`, `features` (rotated range, attention factor), `rules` and `rule_fits`
(scaling rules and their parameters), `lengths` (a length-dependent rule at an engine's
configured length), `precision` and `recipes` (low-precision recipes
rebuilt exactly), `frequencies`, `ladders` (per-axis ``freqs=``), `multi_axis` (M-RoPE),
`drift` and `unknown` (what is known when nothing explains it). `checks.CHECKS` holds their
order and `shared` the helpers they share (`Diagnosis`, `CAUSES`, the rotated mask,
`full_width`, the alternative oracles and `explains`).
"""

from __future__ import annotations

from rope_ref.testing._diagnosis.checks import CHECKS, diagnose
from rope_ref.testing._diagnosis.shared import CAUSES, Diagnosis

__all__ = ["CAUSES", "CHECKS", "Diagnosis", "diagnose"]
