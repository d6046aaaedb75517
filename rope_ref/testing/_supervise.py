"""Run a `rope-ref check` in a child process that the checker controls.

The target is imported and called only in the child (`rope_ref.testing._child`). The
parent reads the child's events, and kills the child's whole process group when an import
or a call of the target outlives `hard_limit` seconds, so a target that sleeps past the
timer, swallows its exception or ignores the signal cannot run on. Only a report that
carries the job's token, followed by exit status 0, is a verdict: a target that exits the
process (``os._exit(0)``, ``sys.exit`` from a thread, a crash) gets "the process ended".
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from rope_ref.testing._check import Report
from rope_ref.testing._check_cases import CheckConfig
from rope_ref.testing._child import Job

__all__ = ["Outcome", "hard_limit", "run_supervised"]

#: Most bytes of the child's output quoted when it dies.
_TAIL = 2000


@dataclass(frozen=True)
class Outcome:
    """How the child ended: ``kind`` is report, usage, import_failed or failed."""

    kind: str
    report: Report | None = None
    message: str = ""


def hard_limit(timeout: float) -> float:
    """Seconds an import or a call may run before the child is killed.

    The polite limit `timeout`, then half as much again and a second to report it.
    """
    return 1.5 * timeout + 1.0


def run_supervised(
    target: str, cfg: CheckConfig, on_return: Callable[[], None] | None = None
) -> Outcome:
    """Check ``MODULE:FUNCTION`` `target` under `cfg` in a child process.

    `on_return`, when given, is called each time a call of the target returns (progress).
    """
    timeout = cfg.calling.timeout or 60.0
    job = Job(target=target, config=cfg, token=secrets.token_hex(16))
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as log:
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "rope_ref.testing._child", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        try:
            _send_job(child, job)
            events, killed = _watch(read_fd, child, hard_limit(timeout), on_return)
        except KeyboardInterrupt:  # the user's Ctrl-C: stop the child, no verdict
            _kill(child)
            return Outcome("failed", message="interrupted: no verdict")
        finally:
            os.close(read_fd)
            _stop(child)
        return _outcome(events, killed, child.returncode, job, timeout, _tail(log))


def _send_job(child: subprocess.Popen[bytes], job: Job) -> None:
    assert child.stdin is not None
    try:
        child.stdin.write(pickle.dumps(job))
        child.stdin.close()
    except OSError:  # the child died before reading: its exit status tells
        pass


_FINAL = ("usage", "import_failed", "crash", "report")


def _watch(
    fd: int,
    child: subprocess.Popen[bytes],
    limit: float,
    on_return: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Read the child's events until its verdict, the channel's end or its exit.

    The child is killed when an import or a call of the target outlives `limit`.
    """
    events: list[dict[str, Any]] = []
    buffer = b""
    busy_since: float | None = time.monotonic()  # importing counts as a call
    while True:
        now = time.monotonic()
        if busy_since is not None and now - busy_since >= limit:
            _kill(child)
            return events, _busy_with(events)
        exited = child.poll() is not None
        wait = 0.0 if exited else 0.2
        if busy_since is not None:
            wait = min(wait, max(busy_since + limit - now, 0.0))
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            if exited:  # gone, and nothing left to read (a grandchild may hold the pipe)
                return events, None
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return events, None
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            event = _parse(line)
            events.append(event)
            kind = event.get("event")
            if kind in _FINAL:
                return events, None
            if kind in ("call", "import"):
                busy_since = time.monotonic()
            elif kind in ("return", "imported"):
                busy_since = None
                if kind == "return" and on_return is not None:
                    on_return()


def _parse(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {"event": "garbled"}
    return event if isinstance(event, dict) else {"event": "garbled"}


def _busy_with(events: list[dict[str, Any]]) -> str:
    """``import``, ``call`` or ``between``: what the child was doing at its last event."""
    last = next((e["event"] for e in reversed(events) if e.get("event") in _PHASES), "import")
    return {"import": "import", "call": "call"}.get(last, "between")


_PHASES = ("import", "imported", "call", "return")


def _kill(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()
    child.wait()


def _stop(child: subprocess.Popen[bytes]) -> None:
    """Wait for the child (kill it after 5 s); end what the target left in its group."""
    try:
        child.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        _kill(child)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


def _tail(log: IO[bytes]) -> str:
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(size - _TAIL, 0))
    text = log.read().decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else ""


def _outcome(
    events: list[dict[str, Any]],
    killed: str | None,
    status: int | None,
    job: Job,
    timeout: float,
    tail: str,
) -> Outcome:
    if killed is not None:
        what = "importing the target" if killed == "import" else "the checked function"
        return Outcome(
            "failed",
            message=f"{what} did not return within {timeout:g} s and kept running past the "
            f"limit (it ignored or swallowed the timer); killed after {hard_limit(timeout):g} s",
        )
    final = events[-1] if events else {}
    kind = final.get("event")
    if status == 0 and kind in ("usage", "import_failed", "crash"):
        message = str(final.get("message", ""))
        return Outcome("failed" if kind == "crash" else kind, message=message)
    if status == 0 and kind == "report" and final.get("token") == job.token:
        report = pickle.loads(base64.b64decode(final["data"]))
        return Outcome("report", report=report)
    phase = _busy_with(events) if events else "import"
    during = {
        "import": "while importing the target",
        "call": "during a call of the target",
        "between": "between calls of the target",
    }
    how = f"exit status {status}" if status is None or status >= 0 else _signal_name(-status)
    said = f"; its last output: {tail}" if tail else ""
    return Outcome(
        "failed",
        message=f"the checked process ended before the check finished ({how}) "
        f"{during[phase]}: the target ended the process (os._exit, sys.exit in a thread, "
        f"a crash){said}",
    )


def _signal_name(number: int) -> str:
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"
