"""Run a `rope-ref check` with its target in a child process that the checker controls.

The target is imported and called only in the child (`rope_ref.cli.check.child`), which
returns each call's results as data (`rope_ref.cli.check.wire`). Everything that decides the
verdict runs here, in the parent: the search, the oracle (from the parent's own copy of the
spec and of the inputs, rebuilt from each case's seed), the comparison and the diagnosis.
A reply that is not well-formed data ends the check with "no verdict".

The parent kills the child's process group, and every process that carries the check's
token or was seen under the child (`rope_ref.cli.check.reap`), when an import or a call of
the target outlives `hard_limit` seconds and when the check ends; a target that sleeps
past the timer, swallows its exception, ignores the signal or starts a process in a new
session cannot run on. Ctrl-C stops the child and ends the check with no verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
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

from rope_ref._core.spec import RopeSpec
from rope_ref.cli.check import reap as _reap
from rope_ref.cli.check.cases import CheckConfig
from rope_ref.cli.check.child import Job, write_message
from rope_ref.cli.check.conventions import (
    SPEC_FIELDS,
    Case,
    OutputError,
    Returned,
    TargetError,
    TargetTimeoutError,
)
from rope_ref.cli.check.engine import Report, check
from rope_ref.cli.check.wire import MAX_REPLY_BYTES, ReplyError, decode_results, labels_of

__all__ = ["Outcome", "hard_limit", "run_supervised"]

#: Most bytes of the child's output quoted when it dies.
_TAIL = 2000
#: Seconds between two looks for the processes under the child.
_SCAN_EVERY = 0.5
#: Seconds the child may stay silent outside a call (building inputs, reading results)
#: before the check ends with no verdict; at least the hard limit of a call.
IDLE_S = 60.0


@dataclass(frozen=True)
class Outcome:
    """How the check ended: ``kind`` is report, usage, import_failed, failed or interrupted."""

    kind: str
    report: Report | None = None
    message: str = ""


class _Ended(BaseException):
    """The child ended, was killed or sent what is not data: no verdict (`message` says why).

    A BaseException, so that neither the engine nor Hypothesis takes it for a failure.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def hard_limit(timeout: float) -> float:
    """Seconds an import or a call may run before the child is killed.

    The polite limit `timeout`, then half as much again and a second to report it.
    """
    return 1.5 * timeout + 1.0


def run_supervised(
    target: str, cfg: CheckConfig, on_return: Callable[[], None] | None = None
) -> Outcome:
    """Check ``MODULE:FUNCTION`` `target` under `cfg`, the target in a child process.

    `on_return`, when given, is called each time a call of the target returns (progress).
    """
    timeout = cfg.calling.timeout or 60.0
    token = secrets.token_hex(16)
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as log:
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "rope_ref.cli.check.child", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                pass_fds=(write_fd,),
                start_new_session=True,
                env={**os.environ, _reap.TOKEN_VARIABLE: token},
            )
        finally:
            os.close(write_fd)
        link = _Link(child, read_fd, hard_limit(timeout), on_return)
        try:
            return _supervise(link, target, cfg, timeout, log)
        except KeyboardInterrupt:  # the user's Ctrl-C: stop the child, no verdict
            link.abandoned = True
            return Outcome("interrupted", message="interrupted: no verdict")
        finally:
            link.close(token)


def _supervise(
    link: _Link, target: str, cfg: CheckConfig, timeout: float, log: IO[bytes]
) -> Outcome:
    try:
        link.send(Job(target=target, calling=cfg.calling))
        imported = link.reply(("imported", "usage", "import_failed"))
        if imported["event"] != "imported":
            return Outcome(imported["event"], message=str(imported.get("message", "")))
        keywords = imported.get("keywords")
        n_positional = imported.get("n_positional")
        two_inputs = cfg.calling.convention == "complex" and n_positional == 3
        report = check(_Remote(link, labels_of(cfg.calling.convention, two_inputs)), cfg)
    except _Ended as ended:
        link.abandoned = True
        return Outcome("failed", message=ended.message)
    except _Killed as killed:
        what = "importing the target" if killed.phase == "import" else "the checked function"
        return Outcome(
            "failed",
            message=f"{what} did not return within {timeout:g} s and kept running past the "
            f"limit (it ignored or swallowed the timer); killed after {hard_limit(timeout):g} s",
        )
    except _Gone as gone:
        with contextlib.suppress(subprocess.TimeoutExpired):
            link.child.wait(timeout=5.0)  # its end of the pipe closes just before it exits
        return Outcome("failed", message=_gone_message(gone, link.child.poll(), _tail(log)))
    if report.counterexample is not None:
        report.reproducer = _reproducer(target, cfg, report, keywords, two_inputs)
    return Outcome("report", report=report)


def _reproducer(
    target: str, cfg: CheckConfig, report: Report, keywords: object, two_inputs: bool
) -> list[str]:
    from rope_ref.cli.check.reproducer import reproducer

    assert report.counterexample is not None
    names = ("spec", *SPEC_FIELDS, "seq_len")
    taken = tuple(k for k in names if isinstance(keywords, list) and k in keywords)
    spec: RopeSpec = dataclasses.replace(cfg.spec, layout=report.layout)  # type: ignore[arg-type]
    return reproducer(target, cfg, spec, report.counterexample, taken, two_inputs)


class _Remote:
    """The engine's `Caller`: a call of the target in the child, its results as data."""

    def __init__(self, link: _Link, labels: tuple[tuple[str, ...], ...]) -> None:
        self.link = link
        self.labels = labels

    def __call__(self, case: Case, spec: RopeSpec) -> list[Returned]:
        self.link.send((case, spec))
        answer = self.link.reply(("result", "raised", "output_error", "timeout"))
        kind = answer["event"]
        message = str(answer.get("message", ""))
        if kind == "raised":
            raise TargetError(RuntimeError(message), description=message)
        if kind == "output_error":
            raise OutputError(message)
        if kind == "timeout":
            seconds = answer.get("seconds")
            raise TargetTimeoutError(float(seconds) if isinstance(seconds, int | float) else 0.0)
        try:
            return decode_results(answer.get("outputs"), self.labels)
        except ReplyError as err:
            msg = f"the checked process sent a malformed result ({err}): no verdict"
            raise _Ended(msg) from None


class _Killed(BaseException):
    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


class _Gone(BaseException):
    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


_PHASES = ("import", "imported", "call", "return", "reading", "read")
_BUSY = ("import", "call", "reading")


class _Link:
    """The pipes to the child: requests on its stdin, events from its descriptor."""

    def __init__(
        self,
        child: subprocess.Popen[bytes],
        fd: int,
        limit: float,
        on_return: Callable[[], None] | None,
    ) -> None:
        self.child = child
        self.fd = fd
        self.limit = limit
        self.on_return = on_return
        self.buffer = b""
        self.phase = "import"
        self.busy_since: float | None = time.monotonic()  # importing counts as a call
        self.seen: set[_reap.Process] = set()
        self.scanned = 0.0
        self.abandoned = False  # True: the child is killed at the end, not waited for
        self.heard = time.monotonic()  # when the child last sent an event

    def send(self, message: object) -> None:
        assert self.child.stdin is not None
        with contextlib.suppress(OSError):  # the child is gone: its events tell how
            write_message(self.child.stdin, message)
        self.heard = time.monotonic()

    def reply(self, kinds: tuple[str, ...]) -> dict[str, Any]:
        """The next event of one of `kinds`; `_Killed`, `_Gone` or `_Ended` otherwise."""
        while True:
            for line in self._lines():
                event = _parse(line)
                kind = event.get("event")
                if kind in kinds:
                    return event
                if kind in _PHASES:  # a sign of progress (garbage is none)
                    self.heard = time.monotonic()
                if kind == "crash":
                    msg = f"the checker's child failed: {event.get('message', '')}"
                    raise _Ended(msg)
                self._note(kind)

    def _note(self, kind: object) -> None:
        if kind in _PHASES:
            self.phase = str(kind)
        if kind in _BUSY:
            self.busy_since = time.monotonic()
        elif kind in ("imported", "return", "read"):
            self.busy_since = None
            if kind == "return" and self.on_return is not None:
                self.on_return()

    def _lines(self) -> list[bytes]:
        """The next complete lines from the child, waiting for them."""
        while b"\n" not in self.buffer:
            now = time.monotonic()
            if now - self.scanned >= _SCAN_EVERY:
                self.seen |= _reap.descendants(self.child.pid)
                self.scanned = now
            if self.busy_since is not None and now - self.busy_since >= self.limit:
                self.abandoned = True
                raise _Killed("import" if self.phase == "import" else "call")
            silent = max(self.limit, IDLE_S)
            if self.busy_since is None and now - self.heard >= silent:
                self.abandoned = True
                msg = f"the checked process stopped answering (silent for {silent:g} s): no verdict"
                raise _Ended(msg)
            exited = self.child.poll() is not None
            wait = 0.0 if exited else 0.2
            if self.busy_since is not None:
                wait = min(wait, max(self.busy_since + self.limit - now, 0.0))
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                if exited:  # gone, and nothing left to read (a grandchild may hold the pipe)
                    raise _Gone(self.phase)
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise _Gone(self.phase)
            self.buffer += chunk
            if len(self.buffer) > MAX_REPLY_BYTES:
                msg = "the checked process sent a reply past the size limit: no verdict"
                raise _Ended(msg)
        *lines, self.buffer = self.buffer.split(b"\n")
        return lines

    def close(self, token: str) -> None:
        """End the child, its process group and every process of the check; close the pipes."""
        self.seen |= _reap.descendants(self.child.pid)  # while the child lives: its tree whole
        with contextlib.suppress(OSError):
            os.close(self.fd)
        if self.child.stdin is not None:
            with contextlib.suppress(OSError):
                self.child.stdin.close()  # the child's end of requests: it exits
        if not self.abandoned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(timeout=5.0)
        self.seen |= _reap.descendants(self.child.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, signal.SIGKILL)
        for _ in range(3):  # a process may start another while they are ended
            _reap.kill(self.seen | _reap.with_token(token))
            self.seen = set()
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()


def _parse(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {"event": "garbled"}
    return event if isinstance(event, dict) else {"event": "garbled"}


def _tail(log: IO[bytes]) -> str:
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(size - _TAIL, 0))
    text = log.read().decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else ""


def _gone_message(gone: _Gone, status: int | None, tail: str) -> str:
    during = {
        "import": "while importing the target",
        "call": "during a call of the target",
        "reading": "while its result was read",
    }.get(gone.phase, "between calls of the target")
    how = f"exit status {status}" if status is None or status >= 0 else _signal_name(-status)
    said = f"; its last output: {tail}" if tail else ""
    return (
        f"the checked process ended before the check finished ({how}) {during}: the target "
        f"ended the process (os._exit, sys.exit in a thread, a crash){said}"
    )


def _signal_name(number: int) -> str:
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"
