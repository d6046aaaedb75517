"""The spec a call without one gets: ``RopeSpec(head_dim=x.shape[-1])``, built in one place.

`default_spec` is what the general path uses (an invalid head_dim is a ValueError naming
the array it came from); `cached_default_spec` is what the short roads use (the same spec
object per head_dim, None where the general path must raise).
"""

from __future__ import annotations

import functools

from rope_ref._core.spec import RopeSpec

__all__ = ["cached_default_spec", "default_spec"]


def default_spec(head_dim: int, name: str = "x", shape: tuple[int, ...] | None = None) -> RopeSpec:
    """``RopeSpec(head_dim)`` for ``spec=None``; an error names the array it came from.

    Examples
    --------
    >>> default_spec(64).head_dim
    64
    >>> default_spec(63, "q", (2, 63))
    Traceback (most recent call last):
    ...
    ValueError: `q` must give a valid head_dim when spec is None (head_dim = 63 ...): ...
    """
    try:
        return RopeSpec(head_dim=head_dim)
    except ValueError as err:
        msg = (
            f"`{name}` must give a valid head_dim when spec is None (head_dim = {head_dim} "
            f"from shape {shape}): {err}"
        )
        raise ValueError(msg) from err


@functools.lru_cache(maxsize=64)
def cached_default_spec(head_dim: int) -> RopeSpec | None:
    """`default_spec` of `head_dim`, one object per head_dim; None where it would raise.

    Examples
    --------
    >>> cached_default_spec(64) is cached_default_spec(64), cached_default_spec(63)
    (True, None)
    """
    try:
        return default_spec(head_dim)
    except ValueError:  # e.g. an odd head_dim: the general path says so
        return None
