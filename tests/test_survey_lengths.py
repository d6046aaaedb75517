"""The engines' length-dependent rows run without their configured length: `seq_len` named.

vLLM builds dynamic NTK and LongRoPE once, from ``max_model_len``; llama.cpp picks
LongRoPE's long factors by ``n_ctx``. The survey compares those rows at the configured
length; run at the positions' own length instead (what a user who forgets ``seq_len`` gets),
each position set that fails must be diagnosed ``seq_len`` with the configured length as
the fix, and nothing else. The engines' own modules are called (the survey drivers'
runners), so the planted mistake is the real one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rope_ref.cli.survey.run import check_entry
from tests._libraries import MAX_POSITION, driver, require


def _bare(group: str, start: str):
    """The driver's entry whose settings start with `start`, with its seq_len dropped."""
    entry: Any = next(e for e in require(group).entries() if e.settings.startswith(start))
    assert entry.seq_len is not None  # compared at the configured length in the survey
    return entry, dataclasses.replace(entry, seq_len=None)


def _assert_named(entry, bare, length: int, max_position: int = MAX_POSITION) -> None:
    assert all(r.ok for r in check_entry(entry, max_position))
    reports = check_entry(bare, max_position)
    failing = [r for r in reports if not r.ok]
    assert failing, "the rule at the positions' length must differ from the engine's"
    for report in failing:
        assert report.diagnosis is not None
        assert report.diagnosis.cause == "seq_len", report.diagnosis
        assert f"seq_len={length}" in report.diagnosis.message, report.diagnosis


#: Positions below LongRoPE's original length (4096 in both rows), where the positions' own
#: length picks the short factors and the engines the long ones.
SHORT = 4000


@pytest.mark.parametrize(
    ("start", "max_position"), [("DynamicNTKScaling", MAX_POSITION), ("Phi3LongRoPE", SHORT)]
)
def test_vllm_rows_without_the_configured_length_name_it(start: str, max_position: int) -> None:
    require("vllm")
    entry, bare = _bare("vllm", start)
    _assert_named(entry, bare, driver("vllm").MAX_MODEL_LEN, max_position)


def test_ggml_longrope_row_without_n_ctx_names_it() -> None:
    require("ggml-python")
    entry, bare = _bare("ggml-python", "NEOX, LongRoPE long factors")
    _assert_named(entry, bare, driver("ggml").N_CTX, SHORT)
