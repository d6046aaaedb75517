"""`rope-ref check --json` says what the target really does; progress reaches stderr."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

import rope_ref.cli.progress
from rope_ref.cli import main
from tests import check_targets

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # `rope-ref check` imports MODULE from the current directory


def _check_json(capsys, target, *args):
    status = main(["check", f"{TARGETS}:{target}", "--convention", "plain", "--json", *args])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, captured.out  # one JSON object, nothing else on stdout
    return status, json.loads(lines[0]), captured.err


def test_correct_target_is_conformant_in_json(capsys):
    status, data, _ = _check_json(capsys, "correct_half", "--examples", "10")
    assert status == 0
    assert data["exit_status"] == 0
    assert data["verdict"] == "conformant"
    assert data["cause"] is None
    assert data["reproducer"] is None
    assert data["layout"] == "half"
    assert 0 <= data["max_tolerance_share"] <= 1
    assert data["max_error"] >= 0
    assert data["checkable_to"] is None
    assert isinstance(data["precision"], str)


def test_planted_bug_is_reported_in_json(capsys):
    status, data, _ = _check_json(capsys, "sign_flipped", "--examples", "10")
    assert status == 1
    assert data["exit_status"] == 1
    assert data["verdict"] == "mismatch"
    assert data["cause"] == "direction"
    assert data["max_tolerance_share"] > 1
    # The reproducer replays the counterexample: its text names the target.
    assert "sign_flipped" in data["reproducer"]
    with pytest.raises(AssertionError):  # the reproducer replays the failure on its own
        exec(data["reproducer"], {})
    # The planted bug really rotates the other way: (a, b) at angle p goes to
    # (a cos p + b sin p, b cos p - a sin p), the inverse of RoPE's rotation.
    a, b, p = 0.3, -0.7, 5.0
    got = check_targets.sign_flipped(np.array([[[[a, b]]]]), np.array([p]))
    inverse = [a * np.cos(p) + b * np.sin(p), b * np.cos(p) - a * np.sin(p)]
    assert np.allclose(got[0, 0, 0], inverse)


def test_usage_and_import_errors_in_json(capsys):
    status, data, _ = _check_json(capsys, "correct_half", "--examples", "0")
    assert status == 2
    assert data["verdict"] == "usage_error"
    assert "--examples" in data["error"]
    status, data, _ = _check_json(capsys, "no_such_function", "--examples", "1")
    assert status == 2
    assert data["verdict"] == "usage_error"
    assert "no_such_function" in data["error"]


def test_progress_lines_on_stderr_off_a_terminal(capsys, monkeypatch):
    quick = functools.partial(rope_ref.cli.progress.Progress, interval=0.01)
    monkeypatch.setattr(rope_ref.cli.progress, "Progress", quick)
    status = main(["check", f"{TARGETS}:correct_half", "--convention", "plain"])
    err = capsys.readouterr().err
    assert status == 0
    lines = [line for line in err.splitlines() if line.startswith("rope-ref check:")]
    assert len(lines) >= 2, err
    assert "elapsed" in lines[-1]
    assert "calls" in lines[-1]
    assert lines[-1].startswith("rope-ref check: 100%")
