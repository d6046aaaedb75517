"""Calling checked code with a time limit.

In the main thread of a POSIX process the limit is an interval timer whose signal raises
`TargetTimeoutError` inside the call, so a target stuck in Python code (a loop, a sleep,
a lock) is interrupted and nothing keeps running afterwards. Elsewhere the call runs in a
daemon thread that is abandoned when the limit passes.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["TargetTimeoutError", "call_with_timeout"]


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
    if seconds is None:
        return fn(*args, **kwargs)
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        return _with_timer(fn, args, kwargs, seconds)
    return _with_thread(fn, args, kwargs, seconds)


def _with_timer(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float
) -> Any:
    def expire(signum: int, frame: object) -> None:
        raise TargetTimeoutError(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    start = time.monotonic()
    pending, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kwargs)
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
