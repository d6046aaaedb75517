"""Progress of long commands, on stderr: a live bar on a terminal, plain lines elsewhere.

On a terminal, rich draws ``label ━━━━━╸━━━━ 40% 0:00:12 0:00:18 detail`` (elapsed, then
the estimate of the time left) and leaves the finished bar in place. Elsewhere (a pipe, a
CI log) a line ``label: 40% (elapsed 12 s, about 18 s left) detail`` is printed every
`interval` seconds (by a timer, also while one step takes long), and one when the work
ends, so that a long run is never silent.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as _RichProgress

__all__ = ["Progress", "duration"]


class Progress:
    """One unit of long work, `total` steps, reported on `stream` (default stderr).

    Use as a context manager; `update` sets how much is done, `advance` adds to it. With
    ``total=None`` the amount of work is unknown: the bar pulses and the lines give the
    elapsed time and the detail only.

    Examples
    --------
    >>> import io
    >>> log = io.StringIO()  # not a terminal: plain lines
    >>> with Progress("rope-ref demo", total=4, stream=log) as bar:
    ...     bar.advance(detail="first")
    ...     bar.update(4, detail="all")
    >>> print(log.getvalue().strip().splitlines()[-1].split(" (")[0])
    rope-ref demo: 100%
    """

    def __init__(
        self,
        label: str,
        *,
        total: float | None = 1.0,
        stream: TextIO | None = None,
        interval: float = 10.0,
        terminal: bool | None = None,
    ) -> None:
        self.label, self.interval = label, interval
        self.total = None if total is None else max(float(total), 1e-300)
        self.stream = sys.stderr if stream is None else stream
        self.live = self.stream.isatty() if terminal is None else terminal
        self.completed, self.detail = 0.0, ""
        self._start = time.monotonic()
        self._last_line = self._start
        self._rich = _RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(file=self.stream, force_terminal=self.live or None),
            disable=not self.live,
        )
        self._task = self._rich.add_task(label, total=self.total, detail="")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="rope-ref progress", daemon=True)

    def __enter__(self) -> Progress:
        self._rich.start()
        if not self.live:
            self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._rich.stop()
        self._stop.set()
        if self._timer.is_alive():
            self._timer.join()
        if not self.live and kind is None:
            self.detail = "done" if self.total is None else self.detail
            self._line(time.monotonic())

    def update(self, completed: float, *, detail: str | None = None) -> None:
        """Set the steps done to `completed` (clipped to the total), with a `detail`."""
        self.completed = max(float(completed), 0.0)
        if self.total is not None:
            self.completed = min(self.completed, self.total)
        if detail is not None:
            self.detail = detail
        self._rich.update(self._task, completed=self.completed, detail=self.detail)
        self._maybe_line()

    def advance(self, steps: float = 1.0, *, detail: str | None = None) -> None:
        """Add `steps` to the steps done."""
        self.update(self.completed + steps, detail=detail)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval / 4):
            self._maybe_line()

    def _maybe_line(self) -> None:
        with self._lock:
            now = time.monotonic()
            if not self.live and now - self._last_line >= self.interval:
                self._last_line = now
                self._line(now)

    def _line(self, now: float) -> None:
        elapsed = now - self._start
        timing, done = f"elapsed {duration(elapsed)}", ""
        if self.total is not None:
            share = self.completed / self.total
            done = f" {share:.0%}"
            if 0 < share < 1:
                timing += f", about {duration(elapsed * (1 - share) / share)} left"
        detail = f" {self.detail}" if self.detail else ""
        print(f"{self.label}:{done} ({timing}){detail}", file=self.stream, flush=True)


def duration(seconds: float) -> str:
    """A duration for people: ``"12 s"``, ``"3 min 05 s"``, ``"1 h 02 min"``.

    Examples
    --------
    >>> duration(12.3), duration(185), duration(3725)
    ('12 s', '3 min 05 s', '1 h 02 min')
    """
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
