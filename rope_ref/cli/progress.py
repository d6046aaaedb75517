"""A one-line progress bar on stderr for long command-line runs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """Redraws ``label [#####.....] 40% detail`` in place, at most every `interval` seconds.

    Silent unless `stream` (default stderr) is a terminal or `force` is set; `close` ends
    the line.
    """

    def __init__(
        self,
        label: str,
        *,
        width: int = 30,
        interval: float = 0.1,
        stream: TextIO | None = None,
        force: bool = False,
    ) -> None:
        self.label, self.width, self.interval = label, width, interval
        self.stream = sys.stderr if stream is None else stream
        self.enabled = force or self.stream.isatty()
        self._last = -float("inf")
        self._drawn = False

    def update(self, fraction: float, detail: str = "", *, now: bool = False) -> None:
        """Show `fraction` (clipped to [0, 1]) of the work done, with `detail` after it."""
        if not self.enabled:
            return
        moment = time.monotonic()
        if not now and moment - self._last < self.interval:
            return
        self._last = moment
        done = min(max(fraction, 0.0), 1.0)
        filled = round(done * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done:4.0%} {detail}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Finish the line (if anything was drawn)."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
