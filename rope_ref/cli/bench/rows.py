"""What `rope-ref bench` is made of: cases (a shape and dtype) and rows (what is timed).

The rows themselves are defined in `cpu` and `gpu`; `harness` times them over the cases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

__all__ = ["Case", "Impl", "Prepared", "Unavailable"]

#: A prepared call: what is timed.
Prepared = Callable[[], object]


class Unavailable(Exception):  # noqa: N818 - reads as a verdict: raise Unavailable(why)
    """An implementation that cannot run here; the message says why."""


@dataclasses.dataclass(frozen=True)
class Impl:
    """One timed implementation."""

    name: str
    kind: str  # "baseline", "floor", "backend" or "peer"
    prepare: Callable[[np.ndarray], Prepared]
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark shape and dtype.

    Examples
    --------
    >>> Case((1, 4096, 32, 128), "float32").nbytes
    67108864
    """

    shape: tuple[int, int, int, int]
    dtype: str
    #: "cpu", "gpu", or "host" (the GPU path's host work, NumPy stand-ins, no GPU).
    device: str = "cpu"
    #: Queries and keys of this shape each, through `apply_rope_qk`.
    qk: bool = False
    #: Decoding: this many sequences take turns, each call the next token of the next one.
    sequences: int = 0
    #: Heads of the keys when fewer than the queries' (GQA).
    k_heads: int | None = None
    #: Positions given as a device array (decode), rather than ``arange(seq)``.
    device_positions: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes of one array of this case."""
        return int(np.prod(self.shape)) * _itemsize(self.dtype)

    @property
    def moved(self) -> int:
        """Bytes that must move: every input read once, every output written once."""
        if not self.qk:
            return 2 * self.nbytes
        return 2 * self.nbytes * (self.shape[2] + (self.k_heads or self.shape[2])) // self.shape[2]

    @property
    def label(self) -> str:
        """``B x S x H x D dtype``, with ``q+k`` (and key heads) for query-key cases."""
        qk = ""
        if self.qk:
            qk = f" q+k ({self.shape[2]}/{self.k_heads} heads)" if self.k_heads else " q+k"
        where = " positions on device" if self.device_positions else ""
        n = self.sequences
        seqs = f", {n} sequence{'s' if n > 1 else ''} in turn" if n else ""
        return f"{'x'.join(map(str, self.shape))} {self.dtype}{qk}{where} ({self.device}{seqs})"


def _itemsize(name: str) -> int:
    return 2 if name == "bfloat16" else np.dtype(name).itemsize
