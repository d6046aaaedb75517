"""`rope-ref check` runs its target in a child process it controls: exiting, hanging,
swallowing the timer, ignoring SIGALRM, or any of these at import, never gives a pass."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rope_ref.cli import main

REPO = Path(__file__).resolve().parent.parent
TARGETS = "tests.check_targets"
FAST = ["--examples", "5", "--timeout", "0.5"]
KILLED_AFTER = 1.5 * 0.5 + 1.0  # the hard limit for --timeout 0.5


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def _check(capsys, *argv):
    start = time.monotonic()
    status = main(["check", *argv, "--convention", "plain", *FAST])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    return status, out, time.monotonic() - start


def test_os_exit_zero_in_the_call_fails(capsys):
    status, out, _ = _check(capsys, f"{TARGETS}:os_exit_zero")
    assert status == 1, out
    assert (
        "FAIL: the checked process ended before the check finished (exit status 0) "
        "during a call of the target" in out
    )


@pytest.mark.parametrize(
    ("source", "during"),
    [
        ("import os\nos._exit(0)\n", "exit status 0) while importing the target"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed by SIGKILL"),
    ],
)
def test_a_module_that_ends_the_process_at_import_fails(capsys, tmp_path, source, during):
    module = tmp_path / "ends_on_import.py"
    module.write_text(source)
    status, out, _ = _check(capsys, f"{module}:rope")
    assert status == 1, out
    assert during in out


@pytest.mark.parametrize("target", ["swallows_the_timeout", "ignores_the_alarm", "hangs"])
def test_a_call_that_outlives_the_limit_is_killed(capsys, target):
    status, out, seconds = _check(capsys, f"{TARGETS}:{target}")
    assert status == 1, out
    assert "did not return within 0.5 s" in out
    assert seconds < KILLED_AFTER + 10


def test_a_result_returned_after_the_limit_is_a_timeout(capsys):
    status, out, _ = _check(capsys, f"{TARGETS}:late_but_correct")
    assert status == 1, out
    assert "FAIL: the checked function did not return within 0.5 s" in out


@pytest.mark.parametrize(
    "source",
    [
        "import time\nwhile True:\n    time.sleep(0.05)\n",
        "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n"
        "    except BaseException:\n        pass\n",
        "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(60)\n",
    ],
    ids=["sleeps", "swallows", "ignores-alarm"],
)
def test_a_module_that_hangs_at_import_is_killed(capsys, tmp_path, source):
    module = tmp_path / "hangs_on_import.py"
    module.write_text(source)
    status, out, seconds = _check(capsys, f"{module}:rope")
    assert status == 1, out
    assert "FAIL: importing the target did not return within 0.5 s" in out
    assert seconds < KILLED_AFTER + 10


@pytest.mark.parametrize(
    ("target", "raised"),
    [
        ("raises_keyboard_interrupt", "KeyboardInterrupt"),
        ("raises_generator_exit", "GeneratorExit"),
    ],
)
def test_targets_raising_base_exceptions_fail_without_a_traceback(capsys, target, raised):
    status, out, _ = _check(capsys, f"{TARGETS}:{target}")
    assert status == 1, out
    assert f"FAIL: the checked function raised {raised}" in out


def test_a_target_closing_stdout_is_checked_as_usual(capsys):
    status, out, _ = _check(capsys, f"{TARGETS}:closes_stdout")
    assert status == 0, out
    assert "OK: conformant" in out


def test_processes_the_target_leaves_behind_neither_block_nor_survive(
    capsys, tmp_path, monkeypatch
):
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("ROPE_REF_TEST_PIDFILE", str(pidfile))
    status, out, seconds = _check(capsys, f"{TARGETS}:leaves_a_sleeper")
    assert status == 0, out
    assert seconds < 30  # the sleepers hold the channel open for 60 s
    time.sleep(0.5)
    for pid in map(int, pidfile.read_text().split()):
        assert _state(pid) in ("gone", "Z", "X")  # killed (a zombie until init reaps it)


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat")
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc here")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
