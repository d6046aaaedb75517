"""A passing check computes the oracle and the angle grid once, whoever reads them.

The counts are of calls into the engine from the checker's modules: the reference
rotation (`apply_rope`) and the angle grid (`rope_angles`). A passing `assert_rope_close`
or `rope_report` (its worst element, precision class and angle error read too) makes one
of each; the diagnosis runs only on a failure.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import numpy as np
import pytest

import rope_ref as rr
from rope_ref.testing import assert_rope_close, rope_report

COUNTED = ("apply_rope", "rope_angles")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the calls of `COUNTED` made from every loaded module of rope_ref.testing."""
    counter: Counter[str] = Counter()
    for name, module in list(sys.modules.items()):
        if not name.startswith("rope_ref.testing") or module is None:
            continue
        for attr in COUNTED:
            original = vars(module).get(attr)
            if callable(original):
                monkeypatch.setattr(module, attr, _counting(attr, original, counter))
    return counter


def _counting(name: str, fn: Any, counter: Counter[str]) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        counter[name] += 1
        return fn(*args, **kwargs)

    return counted


def _case(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, rr.RopeSpec, np.ndarray]:
    spec = rr.RopeSpec(head_dim=shape[-1])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    p = np.arange(shape[1]) + 1000
    y = np.asarray(rr.apply_rope(x, spec, p, seq_axis=1))
    return y, x, spec, p


@pytest.mark.parametrize("shape", [(2, 16, 4, 64), (1, 32, 8, 128)])
def test_a_passing_assert_rotates_once_and_builds_the_angles_once(calls, shape):
    y, x, spec, p = _case(shape)
    calls.clear()
    assert_rope_close(y, x, spec, p, seq_axis=1)
    assert calls == Counter({"apply_rope": 1, "rope_angles": 1})


def test_a_passing_report_read_whole_rotates_once_and_builds_the_angles_once(calls):
    y, x, spec, p = _case((2, 16, 4, 64))
    calls.clear()
    report = rope_report(y, x, spec, p, seq_axis=1)
    assert report.ok
    assert report.worst.startswith("batch")
    assert report.precision == "float64-grade"
    assert report.max_angle_error >= 0.0
    assert report.diagnosis is None
    assert calls == Counter({"apply_rope": 1, "rope_angles": 1})


def test_only_a_failure_runs_the_diagnosis(calls):
    y, x, spec, p = _case((1, 8, 2, 16))
    y = y.copy()
    y[0, 3, 1, 2] += 0.5
    calls.clear()
    report = rope_report(y, x, spec, p, seq_axis=1)
    assert not report.ok
    assert report.diagnosis is not None
    assert calls["apply_rope"] > 1  # the diagnosis tries other oracles


def test_a_passing_assert_checks_each_array_once(monkeypatch):
    from rope_ref.testing import _compare

    y, x, spec, p = _case((2, 16, 4, 64))
    checked: list[str] = []
    original = _compare.check_array

    def counted(name: str, a: object) -> str:
        checked.append(name)
        return original(name, a)

    monkeypatch.setattr(_compare, "check_array", counted)
    assert_rope_close(y, x, spec, p, seq_axis=1)
    assert sorted(checked) == ["actual", "x"]
