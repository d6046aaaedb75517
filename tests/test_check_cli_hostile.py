"""`rope-ref check` against a careless or hostile target: the verdict stays the checker's.

The target runs in a child process that returns only data; the checker computes the oracle
from its own copy of the spec and the inputs. Each test plants one way a target could
decide its own verdict or outlive the check (found by an adversarial probe) and asserts
that it fails, or is ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rope_ref.cli import main

REPO = Path(__file__).resolve().parent.parent
HOSTILE = "tests.check_targets_hostile"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def _check(capsys, target, *args):
    argv = ["check", f"{HOSTILE}:{target}", "--convention", "plain", "--examples", "5"]
    status = main([*argv, *args])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out


def test_a_target_that_makes_the_oracle_the_identity_fails(capsys):
    status, out = _check(capsys, "patches_the_oracle")
    assert status == 1, out
    assert "FAIL: not conformant" in out
    assert "diagnosis: identity" in out


def test_a_target_that_changes_the_spec_it_is_given_fails(capsys):
    status, out = _check(capsys, "mutates_the_spec")
    assert status == 1, out
    assert "FAIL: not conformant" in out


def test_a_forged_verdict_on_the_channel_is_neither_believed_nor_unpickled(
    capsys, tmp_path, monkeypatch
):
    marker = tmp_path / "unpickled"
    monkeypatch.setenv("ROPE_REF_TEST_MARKER", str(marker))
    status, out = _check(capsys, "forges_the_channel")
    assert status == 1, out
    assert "OK" not in out
    assert not marker.exists()


def test_a_result_whose_dtype_lies_is_judged_by_what_it_stores(capsys):
    status, out = _check(capsys, "float64_says_float32")
    assert status == 1, out
    assert "diagnosis: dtype" in out


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("raises_past_eight_tokens", "raised RuntimeError: too long"),
        ("wrong_shape_past_eight_tokens", "has shape"),
    ],
)
def test_with_max_ulps_a_probe_that_fails_is_not_ignored(capsys, target, says):
    pytest.importorskip("mpmath")
    status, out = _check(capsys, target, "--max-ulps", "4")
    assert status == 1, out
    assert says in out
    assert "(on the probe case)" in out


def test_processes_in_new_sessions_do_not_outlive_the_check(capsys, tmp_path, monkeypatch):
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc here")
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("ROPE_REF_TEST_PIDFILE", str(pidfile))
    status, out = _check(capsys, "starts_a_new_session")
    assert status == 0, out
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


def _wait_for_a_child(pid: int, seconds: float = 60.0) -> None:
    """Return once process `pid` has a child process (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    return
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_ctrl_c_ends_the_check_with_130_and_no_verdict():
    command = [sys.executable, "-m", "rope_ref.cli", "check", "tests.check_targets:hangs"]
    command += ["--convention", "plain", "--timeout", "60"]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait_for_a_child(process.pid)  # the check has started its child: inside the check
    time.sleep(1.0)
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    assert "interrupted" in err
    assert "OK" not in out


def test_a_child_that_stops_answering_ends_the_check_with_no_verdict(capsys, monkeypatch):
    from rope_ref.cli.check import supervise

    monkeypatch.setattr(supervise, "IDLE_S", 3.0)
    began = time.monotonic()
    status, out = _check(capsys, "silences_the_child", "--timeout", "1")
    assert status == 1, out
    assert "stopped answering" in out
    assert time.monotonic() - began < 60
