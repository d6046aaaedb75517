"""The spec keys of the PyTorch custom operators: a bounded registry, safe across threads.

A spec is neither a tensor nor a number, so ``rope_ref::apply_rope`` and
``rope_ref::apply_rope_qk`` take an integer key that this registry maps back to the spec
(by value: equal specs share a key). The registry keeps the `MAX_SPECS` specs used most
recently; a key is never reused, so a key whose spec has left can only be refused, never
read as another spec. Two kinds of key stay for the life of the process:

- keys handed out while ``torch.compile`` traces a call: the compiled graph holds the key
  as a constant (one entry per spec that a compiled step uses);
- nothing else: a saved backward keeps the spec itself and asks for a key again, and a
  key handed to the operator is looked up on the same thread right away (the last key
  each thread was given is remembered, so a spec evicted in between by other threads is
  still found).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

from rope_ref._core.spec import RopeSpec

__all__ = ["MAX_SPECS", "key_of", "size", "spec_of"]

#: The most specs kept for eager calls (least recently used leave first).
MAX_SPECS = 64

_keys: OrderedDict[RopeSpec | None, int] = OrderedDict()
_by_key: dict[int, RopeSpec | None] = {}
#: Keys baked into compiled graphs: kept for the life of the process.
_pinned: dict[int, RopeSpec | None] = {}
_counter = itertools.count()
_lock = threading.Lock()
_last = threading.local()


def key_of(spec: RopeSpec | None, *, pin: bool) -> int:
    """The key of `spec` (hashable: the caller checked), registered if new.

    `pin`: keep the key for the life of the process (a compiled graph holds it).

    Examples
    --------
    >>> import rope_ref as rr
    >>> key = key_of(rr.RopeSpec(8), pin=False)
    >>> key_of(rr.RopeSpec(8), pin=False) == key, spec_of(key) == rr.RopeSpec(8)
    (True, True)
    """
    with _lock:
        key = _keys.get(spec)
        if key is None:
            key = _keys[spec] = next(_counter)
            _by_key[key] = spec
            while len(_keys) > MAX_SPECS:
                _, old = _keys.popitem(last=False)
                del _by_key[old]
        else:
            _keys.move_to_end(spec)
        if pin:
            _pinned[key] = spec
    _last.entry = (key, spec)
    return key


def spec_of(key: int) -> RopeSpec | None:
    """The spec of `key`; RuntimeError when it has left the registry."""
    for table in (_by_key, _pinned):
        try:
            return table[key]
        except KeyError:
            pass
    last = getattr(_last, "entry", None)
    if last is not None and last[0] == key:
        return last[1]  # type: ignore[no-any-return]
    msg = (
        f"`spec_key` {key} is not registered: only the {MAX_SPECS} specs used most "
        "recently keep their keys; ask `key_of` for a key right before the call."
    )
    raise RuntimeError(msg)


def size() -> int:
    """How many specs the registry holds (eager and pinned together)."""
    with _lock:
        return len(_by_key.keys() | _pinned.keys())
