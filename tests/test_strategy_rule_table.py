"""`scaling_rules` draws every type of the rope-type table, each as its row says.

A rule added through "Adding a rule" (its class and one row with a ``draw``) is drawn
without another edit; the engines' variants (vLLM's ``ntk``, fixed and mixed, Hunyuan's
``alpha``, ggml's partial YaRN) are among the draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import find, given, settings

from rope_ref.scaling import NTKAware, NTKScaling, YaRN
from rope_ref.testing.strategies import rope_specs, scaling_rules

QUICK = settings(max_examples=2000, database=None)


def _drawn(predicate):
    return find(scaling_rules(), predicate, settings=QUICK)


def test_the_engines_variants_are_drawn():
    assert _drawn(lambda r: isinstance(r, NTKScaling) and r.mixed_b is None).factor >= 1.0
    assert _drawn(lambda r: isinstance(r, NTKScaling) and r.mixed_b is not None).mixed_b > 0
    assert isinstance(_drawn(lambda r: isinstance(r, NTKAware)), NTKAware)
    assert _drawn(lambda r: isinstance(r, YaRN) and r.ext_factor < 1.0).ext_factor > 0.0


@dataclass(frozen=True)
class Halving:
    """A toy rule: every frequency halved, times its factor."""

    factor: float

    def inv_freq(self, inv_freq, *, base, rotary_dim, seq_len):
        return np.asarray(inv_freq) / (2.0 * self.factor)

    def attention_factor(self, *, seq_len):
        return 1.0


def test_a_registered_row_is_drawn_without_another_edit():
    from rope_ref._config.hf_rules import HF_RULES, HfRule, register_rule

    register_rule(
        HfRule(
            "toy_drawn",
            Halving,
            lambda inputs: Halving(inputs.given("factor", inputs.factor)),
            draw=lambda d: d.st.builds(Halving, d.factors),
        )
    )
    try:
        rule = _drawn(lambda r: isinstance(r, Halving))
        assert rule.factor >= 1.0
        spec = find(
            rope_specs(scalings=scaling_rules()),
            lambda s: isinstance(s.scaling, Halving),
            settings=QUICK,
        )
        assert spec.scaling is not None
    finally:
        del HF_RULES["toy_drawn"]


@given(rope_specs(scalings=scaling_rules(), freqs=True, sections=False))
@settings(max_examples=60, deadline=None)
def test_a_rule_over_drawn_frequencies_is_the_same_number_in_exact(spec):
    """freqs= with any rule of the table: backend="exact" evaluates the rule over the given
    frequencies, the float64 reference agrees to a few roundings."""
    import importlib

    import mpmath

    import rope_ref as rr

    exact_frequencies = importlib.import_module("rope_ref.backends.exact.frequencies")
    assert spec.freqs is not None
    ctx = mpmath.MPContext()
    ctx.prec = 120
    seq_len = 5000.0
    got = np.array([float(w) for w in exact_frequencies.omegas(ctx, spec, seq_len)])
    want = rr.inv_freq(spec, seq_len)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=repr(spec))
    plain = np.array(spec.freqs)
    if spec.scaling is not None:
        again = spec.scaling.inv_freq(plain, base=spec.base, rotary_dim=spec.rotary_dim,
                                      seq_len=seq_len)  # fmt: skip
        np.testing.assert_array_equal(want, again)  # the rule's input: the given frequencies


def test_freqs_must_be_a_bool():
    import pytest
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="`freqs` must be True or False; got 'yes'"):
        rope_specs(freqs="yes")
