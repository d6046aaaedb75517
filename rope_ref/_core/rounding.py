"""Rounding float64 values once to float16 or bfloat16, in any array-API namespace.

A float64 to 16-bit cast goes through float32 in PyTorch, JAX and ml_dtypes (NumPy's own
float16 cast is direct), and rounding twice is not rounding once: ``1 + 2**-8 + 2**-30``
is above the bfloat16 tie ``1 + 2**-8``, so it rounds up to ``1 + 2**-7``, but float32
first rounds it onto the tie, which then rounds to even, ``1``. The reference backend
promises one rounding, so it rounds in float64 onto the 16-bit grid itself (exactly:
the grid spacing is a power of two) and then casts a value that every cast keeps.
"""

from __future__ import annotations

import numpy as np

from rope_ref._core.aliases import Array, ArrayNamespace
from rope_ref._core.compat import dtype_name

__all__ = ["FORMATS16", "round_once", "to_grid"]

#: Fraction bits and exponent of the smallest normal number of each 16-bit format.
FORMATS16: dict[str, tuple[int, int]] = {"float16": (10, -14), "bfloat16": (7, -126)}


def round_once(a: Array, dtype: object, *, xp: ArrayNamespace) -> Array:
    """`a` cast to `dtype`, rounded once to nearest even also for 16-bit targets.

    Examples
    --------
    >>> import ml_dtypes
    >>> import numpy as np
    >>> import array_api_compat.numpy as xp
    >>> a = np.array([1 + 2**-8 + 2**-30])
    >>> float(a.astype(ml_dtypes.bfloat16)[0]), float(round_once(a, ml_dtypes.bfloat16, xp=xp)[0])
    (1.0, 1.0078125)
    """
    name = dtype_name(dtype)
    with np.errstate(over="ignore"):  # past the largest finite value: +-inf, as IEEE rounds
        if a.dtype != xp.float64 or name not in FORMATS16:
            return xp.astype(a, dtype)
        return xp.astype(to_grid(a, name, xp=xp), dtype)


def to_grid(a: Array, name: str, *, xp: ArrayNamespace) -> Array:
    """Float64 `a` rounded to nearest even onto the grid of the 16-bit format `name`.

    Each finite non-zero value has exponent ``e = floor(log2|a|)`` (raised to the smallest
    normal exponent for subnormals) and grid spacing ``2**(e - fraction_bits)``; dividing
    by a power of two is exact and `round` rounds half to even, so the only rounding is the
    one wanted. Values past the largest finite number come out as a power of two that every
    cast sends to infinity; zeros, infinities and NaN are returned as they are.

    Examples
    --------
    >>> import numpy as np
    >>> import array_api_compat.numpy as xp
    >>> to_grid(np.array([1 + 2**-11, 1 + 3 * 2**-11, 65519.0, 65520.0]), "float16", xp=xp)
    array([1.00000000e+00, 1.00195312e+00, 6.55040000e+04, 6.55360000e+04])
    >>> to_grid(np.array([1 + 2**-8, 1 + 2**-8 + 2**-30]), "bfloat16", xp=xp).tolist()
    [1.0, 1.0078125]
    """
    fraction_bits, min_exponent = FORMATS16[name]
    regular = xp.isfinite(a) & (a != 0)
    magnitude = xp.where(regular, xp.abs(a), xp.ones_like(a))
    e = xp.floor(xp.log2(magnitude))
    e = xp.where(2.0**e > magnitude, e - 1, e)  # log2 rounded up to the next power of two
    e = xp.where(magnitude / 2.0**e >= 2, e + 1, e)
    e = xp.clip(e, min=float(min_exponent))
    spacing = 2.0 ** (e - fraction_bits)
    return xp.where(regular, xp.round(a / spacing) * spacing, a)
