"""The `rope-ref` command line, run as a user would."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import pytest

from rope_ref._cli import main


def test_verify_passes_and_reports_every_check(capsys):
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "0 failed" in out
    for check in (
        "position 0 is identity",
        "relative position",
        "inverse undoes",
        "form matrix = rotate_half",
        "layouts commute",
        "partial rotary pass-through",
    ):
        assert check in out


def test_verify_json_lists_numpy_checks(capsys):
    assert main(["verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    numpy_checks = [c for c in report["checks"] if c["namespace"] == "numpy"]
    assert {c["dtype"] for c in numpy_checks} == {"float32", "float64"}
    assert all(c["passed"] and c["error"] <= c["tolerance"] for c in report["checks"])


def test_verify_fails_when_a_check_fails(monkeypatch, capsys):
    from rope_ref._error_model import tolerance

    monkeypatch.setattr("rope_ref._verify.tolerance", lambda *a, **k: -1.0 * tolerance(*a, **k))
    assert main(["verify"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_example_prints_the_correct_numbers(capsys):
    assert main(["example"]) == 0
    out = capsys.readouterr().out
    # pos 1: [0, 1, 0, 1] rotates to [-sin 1, cos 1, -sin 0.01, cos 0.01]
    row = [-math.sin(1), math.cos(1), -math.sin(0.01), math.cos(0.01)]
    assert "[" + ", ".join(f"{v: .6f}" for v in row) + "]" in out
    # sinusoidal PE at pos 3: [sin 3, cos 3, sin 0.03, cos 0.03]
    pe = [math.sin(3), math.cos(3), math.sin(0.03), math.cos(0.03)]
    assert "[" + ", ".join(f"{v: .6f}" for v in pe) + "]" in out


def test_console_script_is_installed():
    exe = shutil.which("rope-ref")
    if exe is None:
        pytest.skip("rope-ref is not on PATH (package not installed)")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    assert "verify" in result.stdout
    bad = subprocess.run([exe, "frobnicate"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "invalid choice" in bad.stderr


def test_module_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "rope_ref._cli", "example"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "RoPE" in result.stdout
