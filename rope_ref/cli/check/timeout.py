"""Calling checked code with a time limit.

In the main thread of a POSIX process the limit is an interval timer whose signal raises
`TargetTimeoutError` inside the call, so a target stuck in Python code (a loop, a sleep,
a lock) is interrupted and nothing keeps running afterwards. Elsewhere the call runs in a
daemon thread that is abandoned when the limit passes. A call that returns after the
limit (it swallowed the timer's exception, or ignored the signal) is a timeout as well.

This is the polite limit: `rope-ref check` runs its target in a child process whose
supervisor kills it when a call outlives the limit (see `rope_ref.cli.check.supervise`);
`set_call_monitor` is how the child tells it when calls start and end.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["TargetTimeoutError", "call_with_timeout", "set_call_monitor"]

_monitors: list[Callable[[str], None]] = []


def set_call_monitor(monitor: Callable[[str], None] | None) -> None:
    """Have `monitor` told ``"call"`` before and ``"return"`` after each checked call."""
    _monitors[:] = [] if monitor is None else [monitor]


def _notify(event: str) -> None:
    for monitor in _monitors:
        monitor(event)


class TargetTimeoutError(BaseException):
    """The checked callable did not return within the limit.

    A BaseException, so that the target's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the call did not return within {seconds:g} s")
        self.seconds = seconds


def call_with_timeout(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float | None
) -> Any:
    """``fn(*args, **kwargs)``, raising `TargetTimeoutError` after `seconds` (None: no limit)."""
    _notify("call")
    try:
        if seconds is None:
            return fn(*args, **kwargs)
        if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
            return _with_timer(fn, args, kwargs, seconds)
        return _with_thread(fn, args, kwargs, seconds)
    finally:
        _notify("return")


def _with_timer(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float
) -> Any:
    def expire(signum: int, frame: object) -> None:
        raise TargetTimeoutError(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    start = time.monotonic()
    pending, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        value = fn(*args, **kwargs)
        if time.monotonic() - start > seconds:  # the alarm was swallowed or ignored
            raise TargetTimeoutError(seconds)
        return value
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending > 0:  # someone else's alarm (e.g. pytest-timeout): give back what is left
            left = max(pending - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def _with_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float
) -> Any:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    worker = threading.Thread(target=run, daemon=True, name="rope-ref-check-target")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TargetTimeoutError(seconds)
    if "error" in box:
        raise box["error"]
    return box.get("value")
