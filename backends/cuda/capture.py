"""Inside a CUDA graph capture, a call the kernel cannot take directly is an error.

The general path checks arguments and copies on the host, which a capture cannot record:
run inside one, it would half-run and end in an obscure CUDA error. `refuse` raises a
RuntimeError instead, saying why this call leaves the kernel's short road and what to
change; outside a capture it does nothing. Importing this module imports no CuPy.
"""

from __future__ import annotations

from typing import Any

from rope_ref._core.spec import RopeSpec

from .arrays import Arrays
from .tables import MAX_BYTES, length_dependent

__all__ = ["TAKES", "reason", "refuse"]

#: What a capture takes.
TAKES = (
    "A capture takes: positions on the device (an array of x's kind, int32, int64, float32 "
    "or float64) with an integer offset, or positions None with an integer offset >= 0 whose "
    "rows fit the device table cache (64 MiB of cos and sin); no xPos or sections; an "
    "explicit seq_len for a length-dependent scaling; out= x itself or an array of x's "
    "shape and dtype apart from it; layouts the kernel reads in place. Change the call to "
    "one of those, or make it before or after the capture."
)


def refuse(arrays: Arrays, x: Any, why: str) -> None:
    """RuntimeError saying `why` while `x`'s stream is capturing a CUDA graph.

    Examples
    --------
    >>> import numpy as np
    >>> from rope_ref.backends.cuda.arrays import HostStandIn
    >>> host = HostStandIn(launch=print)
    >>> refuse(host, np.zeros(4), "no reason")  # not capturing: nothing happens
    >>> host.capture = True
    >>> refuse(host, np.zeros(4), "its positions are on the host")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: this call cannot run inside a CUDA graph capture: its positions are on ...
    """
    if arrays.usable(x) and arrays.capturing(arrays.stream(x)):
        msg = (
            f"this call cannot run inside a CUDA graph capture: {why}; the general path "
            f"would check and copy on the host, which a capture cannot record. {TAKES}"
        )
        raise RuntimeError(msg)


def reason(
    x: Any, spec: object, positions: Any, offset: object, seq_axis: object, seq_len: object
) -> str:
    """Why a call of ``apply_rope`` on `x` leaves the short road, as far as it can tell.

    Examples
    --------
    >>> import numpy as np
    >>> reason(np.zeros((3, 8)), None, [0, 1, 2], 0, -2, None)
    "its positions are not an array of x's kind on its device: pass them as one"
    """
    if isinstance(spec, RopeSpec):
        if spec.xpos is not None or spec.sections is not None:
            return "its spec has xPos or sections, whose tables the general path builds"
        if length_dependent(spec) and seq_len is None:
            return "its scaling depends on the length and no seq_len is given: pass seq_len"
    if positions is not None:
        if type(positions) is not type(x):
            return "its positions are not an array of x's kind on its device: pass them as one"
        return "its positions, offset, layout or another argument need the general path"
    if type(offset) is not int or offset < 0:
        return (
            f"offset={offset!r} is not an integer >= 0: pass the positions as a device "
            "array for these positions"
        )
    length = _length(x, seq_axis)
    n_pairs = spec.n_pairs if isinstance(spec, RopeSpec) else x.shape[-1] // 2
    item = 8 if "float64" in str(x.dtype) else 4
    rows = MAX_BYTES // (2 * max(1, n_pairs) * item)
    if length is not None and offset + length > rows:
        return (
            f"positions {offset}..{offset + length - 1} run past the {rows} rows of the "
            "device table cache: pass the positions as a device array (the kernel computes "
            "rows past the cache)"
        )
    return "its layout or another argument needs the general path (copies or checks)"


def _length(x: Any, seq_axis: object) -> int | None:
    try:
        return int(x.shape[seq_axis])
    except (IndexError, TypeError):
        return None
