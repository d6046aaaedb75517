"""`rope-ref bench --preset oracle`: the check on the NumPy passes, and a process's first check."""

from __future__ import annotations

import os

from rope_ref.cli.bench.oracle import _comparisons, _first_check, _on_numpy_passes
from rope_ref.testing._extremes import OPT_OUT


def test_each_row_times_the_numpy_passes_beside_a_reference_of_their_own():
    row = _comparisons((1, 8, 2, 16), 2)
    assert row["ratio"] == row["passing_assert_s"] / row["reference_s"] > 0
    assert row["numpy_ratio"] == row["numpy_passes_s"] / row["numpy_reference_s"] > 0


def test_the_numpy_passes_are_asked_for_only_during_the_call():
    before = os.environ.get(OPT_OUT)
    seen = _on_numpy_passes(lambda: os.environ.get(OPT_OUT))()
    assert seen == "0"
    assert os.environ.get(OPT_OUT) == before


def test_the_first_check_of_a_process_is_timed_both_ways():
    first = _first_check()
    assert first["s"] > 0
    assert first["numpy_s"] > 0
