r"""Context-extension rules for `rope_ref.RopeSpec.scaling`.

Each rule is a frozen, hashable, validated dataclass. It rescales the default inverse
frequencies :math:`\theta_j = b^{-2j/d}` (in float64) and states the attention factor that
multiplies cos and sin.

=================  ===================  ==============================================
rule               HF ``rope_type``     :math:`\theta'_j`
=================  ===================  ==============================================
`Linear`           ``linear``           :math:`\theta_j / s`
`NTKAware`         (none in HF 5.x)     :math:`\theta_j\,s^{-2j/(d-2)}`
`NTKScaling`       ``ntk`` (vLLM)       :math:`\theta_j\,s^{-((j+1)/(d/2))^\beta}`
`DynamicNTK`       ``dynamic``          NTK with a base that grows with `seq_len`
`YaRN`             ``yarn``             ramp between :math:`\theta_j/s` and :math:`\theta_j`
`Llama3`           ``llama3``           three wavelength bands
`LongRoPE`         ``longrope``         :math:`\theta_j / e_j`, short or long :math:`e`
`Proportional`     ``proportional``     :math:`\theta_j / s` for the first pairs, 0 after
`AttentionScale`   (none)               :math:`\theta_j`, cos and sin times :math:`m`
`Chain`            (none)               several rules in turn
=================  ===================  ==============================================

Examples
--------
>>> import rope_ref as rr
>>> spec = rr.RopeSpec(head_dim=128, scaling=rr.scaling.YaRN(4.0, original_max_position=4096))
>>> round(rr.attention_factor(spec), 4)
1.1386
"""

from rope_ref.scaling._attention import AttentionScale
from rope_ref.scaling._chain import Chain
from rope_ref.scaling._linear import Linear
from rope_ref.scaling._llama3 import Llama3
from rope_ref.scaling._longrope import LongRoPE
from rope_ref.scaling._ntk import DynamicNTK, NTKAware
from rope_ref.scaling._ntk_scaling import NTKScaling
from rope_ref.scaling._proportional import Proportional
from rope_ref.scaling._yarn import YaRN, yarn_mscale

__all__ = [
    "AttentionScale",
    "Chain",
    "DynamicNTK",
    "Linear",
    "Llama3",
    "LongRoPE",
    "NTKAware",
    "NTKScaling",
    "Proportional",
    "YaRN",
    "yarn_mscale",
]
