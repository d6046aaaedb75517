"""One call of ``apply_rope`` / ``apply_rope_qk`` as a value: what the general path carries.

The short roads take a call's arguments as plain parameters (a decoding call costs about
3 µs); once they decline it, the adapters of the array kinds and the runner
(`rope_ref._engine.runner`) put the arguments into one `Call` and their steps (the
checks, the tables, the cache key, the kernel's launch of queries and keys) read the
fields they need, by name, from it; a step that checks a field hands on a new value with
the checked field (`Call.but`), never a changed one. It is a typed ``NamedTuple``
(immutable, built in about 0.25 µs; a frozen dataclass with slots took 1.1 µs).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rope_ref._core.aliases import BackendName, Form, Role
from rope_ref._core.spec import RopeSpec

__all__ = ["Call"]


class Call(NamedTuple):
    """The arguments of one call besides the arrays rotated, as given (then as checked).

    Examples
    --------
    >>> call = Call(offset=5)
    >>> call.seq_axis, call.offset, call.backend
    (-2, 5, 'reference')
    >>> call.but(offset=0).offset
    0
    """

    spec: RopeSpec | None = None
    positions: Any = None
    offset: float = 0
    seq_axis: int = -2
    inverse: bool = False
    seq_len: float | None = None
    form: Form = "rotate_half"
    backend: BackendName = "reference"
    out: Any = None
    role: Role | None = None
    #: apply_rope_qk's key positions (None: as `positions`, or the keys' own defaults).
    k_positions: Any = None

    def but(self, **changes: Any) -> Call:
        """The same call with `changes` (a new value: a `Call` is never changed)."""
        return self._replace(**changes)
