"""Name the most likely cause of a RoPE mismatch by testing alternative explanations.

The checks live in modules by topic (`layout`, `positions`, `features`, `rules`,
`precision`, `frequencies`, `multi_axis`); `checks.CHECKS` holds their order and
`shared` the helpers they share.
"""

from __future__ import annotations

from rope_ref.testing._diagnosis.checks import CHECKS, diagnose
from rope_ref.testing._diagnosis.shared import CAUSES, Diagnosis

__all__ = ["CAUSES", "CHECKS", "Diagnosis", "diagnose"]
