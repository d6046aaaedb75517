"""Finding and ending every process a checked target started, on Linux.

A target may start processes that leave the child's process group (``os.setsid()``) or
whose parent has exited. The supervisor gives its child an environment variable holding a
token of its own; every process started from the child inherits it (unless it replaces its
whole environment), and `with_token` finds them in ``/proc``. `descendants` records the
child's process tree while it runs, which catches a process that cleared its environment
while its parent still lived. Elsewhere than Linux both find nothing and the process
group alone is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

__all__ = ["TOKEN_VARIABLE", "descendants", "kill", "with_token"]

#: The environment variable that carries the check's token to every process it starts.
TOKEN_VARIABLE = "ROPE_REF_CHECK_TOKEN"

#: A process as ``(pid, start time in clock ticks)``: a pid reused later is not the same one.
Process = tuple[int, int]

_PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time)`` of `pid`, or None when it is gone or unreadable."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> set[Process]:
    """Every living process under `root` (children, grandchildren, ...)."""
    parents: dict[int, list[Process]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            parents.setdefault(stat[0], []).append((pid, stat[1]))
    found: set[Process] = set()
    todo = [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child[0])
    return found


def with_token(token: str) -> set[Process]:
    """Every living process whose environment holds ``TOKEN_VARIABLE=token``."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found: set[Process] = set()
    for pid in _pids():
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:  # another user's process, or gone
            continue
        stat = _stat(pid)
        if stat is not None and needle in environ.split(b"\0"):
            found.add((pid, stat[1]))
    return found


def kill(processes: set[Process]) -> None:
    """SIGKILL each process that still is the one recorded (same pid, same start time)."""
    for pid, start in processes:
        stat = _stat(pid)
        if stat is not None and stat[1] == start and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
