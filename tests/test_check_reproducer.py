"""The reproducer a failing `rope-ref check` prints, under every calling convention.

Each planted target fails the check; the printed snippet, run in a fresh Python, must call
the target the same way and fail with an AssertionError naming the cause the check named.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rope_ref.cli import main

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"
HEADER = "  reproduce it (paste into Python, from the directory you ran this in):\n"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def _check(capsys, target, *argv):
    status = main(["check", f"{TARGETS}:{target}", *argv, "--examples", "10"])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out


@pytest.mark.parametrize(
    ("target", "argv"),
    [
        ("hf_rotate_half_wrong_sign", ["--convention", "hf", "--positions", "rows"]),
        ("flash_in_place_sign_flipped", ["--convention", "cos_sin", "--in-place"]),
        ("meta_conjugate", ["--convention", "complex", "--layout", "interleaved"]),
        ("litgpt_interleaved_rotation", ["--convention", "full", "--positions", "rows"]),
        ("megatron_interleaved_rotation", ["--convention", "freqs", "--dtype", "float64"]),
        ("off_by_one_in_place", ["--convention", "plain", "--in-place", "--axes", "bshd"]),
    ],
)
def test_the_reproducer_calls_the_target_as_the_check_did_and_fails_the_same_way(
    capsys, target, argv
):
    pytest.importorskip("torch")
    status, out = _check(capsys, target, *argv)
    assert status == 1, out
    cause = re.search(r"^  diagnosis: (\w+)$", out, re.MULTILINE)
    assert cause is not None, out
    parts = out.split(HEADER)
    assert len(parts) == 2, out
    snippet = "\n".join(line.removeprefix("    ") for line in parts[1].splitlines())
    run = subprocess.run(
        [sys.executable, "-"], input=snippet, capture_output=True, text=True, cwd=REPO, check=False
    )
    assert run.returncode == 1, snippet + run.stdout + run.stderr
    assert "AssertionError" in run.stderr, snippet + run.stderr
    assert f"Likely cause: {cause.group(1)}" in run.stderr, snippet + run.stderr


def test_a_conformant_target_prints_no_reproducer(capsys):
    pytest.importorskip("torch")
    status, out = _check(capsys, "flash_in_place", "--convention", "cos_sin", "--in-place")
    assert status == 0, out
    assert "reproduce it" not in out
