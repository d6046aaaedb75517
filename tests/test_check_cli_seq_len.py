"""`rope-ref check --seq-len`: a length-dependent rule checked at an engine's configured length.

The targets (tests/check_targets_lengths.py) write dynamic NTK out in NumPy from its
formula: one fixed at the configured length 131072 (as vLLM fixes it from max_model_len),
one that takes the length as a keyword.
"""

from __future__ import annotations

import pytest

from tests._helpers import REPO, run_check
from tests.check_targets_lengths import HF_CONFIG

TARGETS = "tests.check_targets_lengths"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def test_without_seq_len_the_diagnosis_names_the_configured_length(capsys):
    status, out = run_check(capsys, f"{TARGETS}:dynamic_ntk_at_131072", "--hf-config", HF_CONFIG)
    assert status == 1, out
    assert "diagnosis: seq_len\n" in out
    assert "the result follows dynamic NTK at the length 131072" in out
    assert "pass seq_len=131072" in out


def test_with_seq_len_the_configured_length_passes(capsys):
    argv = ["--hf-config", HF_CONFIG, "--seq-len", "131072"]
    status, out = run_check(capsys, f"{TARGETS}:dynamic_ntk_at_131072", *argv)
    assert status == 0, out
    assert "scaling DynamicNTK(factor=4.0, max_position=8192), attention factor 1, seq_len " in out


def test_a_target_that_takes_seq_len_receives_it(capsys):
    """At 131072 the oracle's base is not the one of the positions' length: the target
    passes only if it was handed the same length."""
    argv = ["--hf-config", HF_CONFIG, "--seq-len", "131072"]
    status, out = run_check(capsys, f"{TARGETS}:dynamic_ntk_by_seq_len", *argv)
    assert status == 0, out


def test_the_reproducer_carries_the_length(capsys):
    argv = ["--hf-config", HF_CONFIG, "--seq-len", "65536"]
    status, out = run_check(capsys, f"{TARGETS}:dynamic_ntk_at_131072", *argv)
    assert status == 1, out
    assert "pass seq_len=131072" in out
    assert ", seq_len=65536.0)" in out  # assert_rope_close in the snippet


def test_the_tables_of_a_table_convention_are_built_at_the_length(capsys):
    """transformers' apply_rotary_pos_emb applies the tables it is handed: at --seq-len
    they are built at that length, so the oracle and the tables agree."""
    from rope_ref.cli import main

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    argv = ["--hf-config", HF_CONFIG, "--seq-len", "131072", "--examples", "5"]
    target = "transformers.models.llama.modeling_llama:apply_rotary_pos_emb"
    status = main(["check", target, "--convention", "hf", *argv])
    out = capsys.readouterr().out
    assert status == 0, out


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_a_length_below_one_or_not_finite_is_a_usage_error(capsys, value):
    from rope_ref.cli import main

    argv = ["--convention", "plain", "--seq-len", value]
    status = main(["check", f"{TARGETS}:dynamic_ntk_by_seq_len", *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert f"--seq-len must be a finite length of at least 1; got {float(value)!r}." in err


def test_the_json_verdict_states_the_length_used(capsys):
    import json

    from rope_ref.cli import main

    argv = ["--convention", "plain", "--hf-config", HF_CONFIG, "--examples", "5", "--json"]
    status = main(["check", f"{TARGETS}:dynamic_ntk_at_131072", *argv, "--seq-len", "131072"])
    given = json.loads(capsys.readouterr().out)
    assert status == 0, given
    assert given["seq_len"] == 131072.0
    status = main(["check", f"{TARGETS}:dynamic_ntk_at_131072", *argv])
    not_given = json.loads(capsys.readouterr().out)
    assert status == 1, not_given
    assert "seq_len" in not_given
    assert not_given["seq_len"] is None
    assert not_given["cause"] == "seq_len"
