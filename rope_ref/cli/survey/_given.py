"""Survey entries whose library fixes the positions itself (grids, float32 coordinates)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rope_ref.cli.survey.peers import Entry

__all__ = ["GivenEntry", "InexpressibleError", "inexpressible"]


@dataclass(frozen=True)
class GivenEntry(Entry):
    """An entry called at the positions the library computes (`given`), not at a probe.

    `given` returns the position sets; each is handed to `run` and to the oracle as it is,
    so a grid the library rounds to float32 is compared at the float32 values it used.
    """

    given: Callable[[int], list[np.ndarray]] = field(default=lambda _: [])
    role: Literal["query", "key"] | None = None  # for xPos: which side `run` rotates

    def position_sets(self, max_position: int) -> list[np.ndarray]:
        """The library's own positions, at most `max_position` along any axis."""
        return self.given(max_position)


class InexpressibleError(Exception):
    """Raised by an entry whose RoPE variant rope_ref cannot state yet; its row is skipped."""


def inexpressible(why: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A runner that skips its row, saying `why`."""

    def run(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        raise InexpressibleError(why)

    return run
