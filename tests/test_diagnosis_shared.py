"""The helpers every diagnosis shares: which pairs fail, the alternative oracles, `wrap`.

Every wrong result is built here (one element planted off by 1, or a rotation written in
plain NumPy), and every pair, angle and value checked for is worked out here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pytest
from numpy.typing import NDArray

import rope_ref as rr
from rope_ref.testing import Diagnosis, assert_rope_close, diagnose
from rope_ref.testing._compare import compare, setup
from rope_ref.testing._diagnosis.shared import failing_pairs, oracle_with_freqs, wrap
from tests._independent import rotate_pairs

F64 = NDArray[np.float64]


def _x(shape: tuple[int, ...], seed: int) -> F64:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _inv(d: int, base: float = 10000.0) -> F64:
    return np.asarray(base ** (-np.arange(0, d, 2, dtype=np.float64) / d), dtype=np.float64)


# -- Diagnosis: a public value ------------------------------------------------------------


def test_a_diagnosis_is_an_immutable_hashable_value() -> None:
    """Catches: `Diagnosis` made mutable (it then has no hash: diagnoses can no longer be
    collected in a set or keyed on, and a frozen `RopeReport`'s diagnosis could change)."""
    first = Diagnosis("layout", "pairs (2j, 2j + 1)")
    again = Diagnosis("layout", "pairs (2j, 2j + 1)")
    assert hash(first) == hash(again)
    assert {first, again, Diagnosis("offset", "shifted")} == {again, Diagnosis("offset", "shifted")}
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.cause = "offset"  # type: ignore[misc]
    assert first.cause == "layout"


# -- explains: the tolerance an alternative is judged by ---------------------------------


def test_a_layout_mistake_is_named_under_an_explicit_tolerance() -> None:
    """Catches: the error model of a swapped layout looked up when there is none (an
    explicit rtol/atol replaces it): the diagnosis then raised instead of naming the layout."""
    d, p = 16, np.arange(7) * 3 + 1
    x = _x((p.size, d), 70)
    wrong = rotate_pairs(x, p[:, None] * _inv(d), layout="interleaved")  # pairs (2j, 2j + 1)
    with pytest.raises(AssertionError) as err:
        assert_rope_close(wrong, x, rr.RopeSpec(d), p, atol=1e-9, rtol=0.0)
    last = str(err.value).splitlines()[-1]
    assert last.startswith("Likely cause: layout: the result pairs features (2j, 2j + 1) ")
    assert "explicit tolerance" in str(err.value)


# -- failing_pairs: the pairs a failing element belongs to --------------------------------


@pytest.mark.parametrize(
    ("spec", "inverse", "feature", "pair"),
    [
        # interleaved, features 4..11: pair j is (4 + 2j, 5 + 2j)
        (rr.RopeSpec(16, rotary_dim=8, rotary_start=4, layout="interleaved"), False, 6, 1),
        (rr.RopeSpec(16, rotary_dim=8, rotary_start=4, layout="interleaved"), False, 9, 2),
        (rr.RopeSpec(16, rotary_dim=8, rotary_start=4, layout="interleaved"), False, 4, 0),
        (rr.RopeSpec(16, rotary_dim=8, rotary_start=4, layout="interleaved"), False, 11, 3),
        # half, features 2..9: pair j is (2 + j, 6 + j)
        (rr.RopeSpec(12, rotary_dim=8, rotary_start=2), False, 7, 1),
        (rr.RopeSpec(12, rotary_dim=8, rotary_start=2), False, 4, 2),
        # read half, written interleaved: the result's pairs are (2j, 2j + 1)
        (rr.RopeSpec(8, layout="half", output_layout="interleaved"), False, 5, 2),
        # the inverse reads the interleaved pairs and writes half ones: (j, j + 4)
        (rr.RopeSpec(8, layout="half", output_layout="interleaved"), True, 5, 1),
    ],
    ids=["il-even", "il-odd", "il-first", "il-last", "half-2nd", "half-1st", "out", "inv"],
)
def test_a_failing_element_marks_its_own_pair(
    spec: rr.RopeSpec, inverse: bool, feature: int, pair: int
) -> None:
    """Catches: the rotated width taken as ``stop + start``, the first (or second) element of
    an interleaved pair ignored, or the first elements read from the end: one element planted
    wrong must mark exactly the pair that holds it in the layout the result is written in."""
    rows = 6
    x = _x((rows, spec.head_dim), 71)
    s = setup(x, spec, np.arange(rows) * 5 + 2, inverse=inverse)
    wrong = s.oracle()
    wrong[3, feature] += 1.0
    got = failing_pairs(compare(wrong, s))
    want = np.zeros(spec.n_pairs, dtype=bool)
    want[pair] = True
    assert got.tolist() == want.tolist()


def test_an_unknown_mismatch_names_the_one_failing_interleaved_pair() -> None:
    """Catches: the failing pairs read off the wrong features: the message must name the
    pair of the one element planted wrong (feature 6 of features 4..11, pair (6, 7): pair 1)."""
    spec = rr.RopeSpec(16, rotary_dim=8, rotary_start=4, layout="interleaved")
    p = np.arange(6) * 5 + 2
    x = _x((p.size, 16), 72)
    wrong = np.asarray(rr.apply_rope(x, spec, p), dtype=np.float64)
    wrong[2, 6] += 1.0
    found = diagnose(wrong, x, spec, p)
    assert found is not None
    assert found.cause == "unknown"
    assert found.message.endswith("; only pairs 1 (of 4) differ.")
    assert "failing rows sit at positions 12 to 12; passing rows at 2 to 27" in found.message


# -- oracle_with_freqs: other frequencies, the spec's attention factor --------------------


@dataclass(frozen=True)
class _Quarter:
    """A user-written rule that keeps every frequency and states an attention factor of 1/4."""

    def inv_freq(
        self, inv_freq: F64, *, base: float, rotary_dim: int, seq_len: float | None
    ) -> F64:
        return np.asarray(inv_freq, dtype=np.float64)

    def attention_factor(self, *, seq_len: float | None) -> float:
        return 0.25


@pytest.mark.parametrize(
    ("scaling", "factor"),
    [
        (rr.scaling.AttentionScale(2.0), 2.0),
        (rr.scaling.AttentionScale(1.5), 1.5),
        (_Quarter(), 0.25),
    ],
    ids=["2", "1.5", "0.25"],
)
def test_the_oracle_with_other_frequencies_keeps_the_specs_attention_factor(
    scaling: rr.scaling.AttentionScale | _Quarter, factor: float
) -> None:
    """Catches: the factor skipped when it is 2 (the test was ``!= 1.0``): the rotated
    features (2..9 of 12) are the rotation by the given frequencies times the factor, and the
    others are copied."""
    spec = rr.RopeSpec(12, rotary_dim=8, rotary_start=2, scaling=scaling)
    p = np.arange(5) * 3 + 1
    x = _x((p.size, 12), 73)
    freqs = np.array([0.5, 0.25, 0.0625, 0.01])
    got = oracle_with_freqs(setup(x, spec, p), freqs)
    want = x.copy()
    want[:, 2:10] = factor * rotate_pairs(x[:, 2:10], p[:, None] * freqs)
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-15)
    assert np.array_equal(got[:, [0, 1, 10, 11]], x[:, [0, 1, 10, 11]])


# -- wrap ---------------------------------------------------------------------------------


def test_wrap_returns_angles_from_minus_pi_to_minus_half_pi_exactly() -> None:
    """Catches: pi subtracted instead of added before the modulo. For ``a`` in
    ``[-pi, -pi/2]``, ``a + pi`` is exact (Sterbenz: ``|a|`` is within a factor 2 of pi), and
    so is taking pi off again: such an angle comes back bit for bit. ``a - pi`` is not exact:
    the float just below -2 came back as -2."""
    below_two = math.nextafter(-2.0, -math.inf)
    angles = np.concatenate(
        [
            [-math.pi, below_two, -2.0 - 3 * 2.0**-51, math.nextafter(-3.0, -math.inf)],
            np.random.default_rng(74).uniform(-math.pi, -math.pi / 2, 2000),
        ]
    )
    got = wrap(angles)
    assert got[1] == below_two
    assert np.array_equal(got, angles)
