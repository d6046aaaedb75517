"""The explicit rotation matrix R_p, for tests and teaching."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rope_ref._core.aliases import Role
from rope_ref._core.compat import array_namespace
from rope_ref._core.frequencies import tables
from rope_ref._core.positions import as_positions
from rope_ref._core.reference import block_matrix
from rope_ref._core.spec import RopeSpec, check_spec
from rope_ref._core.validation import check_size

__all__ = ["rotation_matrix"]


def rotation_matrix(
    spec: RopeSpec,
    position: float | tuple[float, ...],
    *,
    seq_len: float | None = None,
    role: Role | None = None,
) -> NDArray[np.float64]:
    r"""The block-diagonal matrix :math:`R_p` with ``apply_rope(x) == R_p @ x`` at `position`.

    Parameters
    ----------
    spec : RopeSpec
        The embedding.
    position : float or tuple of float
        One position (one per axis for multi-axis specs).
    seq_len : float, optional
        For length-dependent scalings.
    role : {"query", "key"}, optional
        Required when ``spec.xpos`` is set.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(head_dim, head_dim)``: 2x2 rotation blocks on the pairs of the
        rotary slice, identity elsewhere. Orthogonal with determinant 1, and
        :math:`R_m^\top R_n = R_{n-m}` (for specs without scaling factors).

    Examples
    --------
    >>> import numpy as np
    >>> import rope_ref as rr
    >>> R = rr.rotation_matrix(rr.RopeSpec(head_dim=2), 1.0)
    >>> bool(np.allclose(R, [[np.cos(1), -np.sin(1)], [np.sin(1), np.cos(1)]]))
    True
    """
    spec = check_spec(spec)
    check_size(
        "`spec.head_dim`",
        "a rotation matrix",
        (spec.head_dim, spec.head_dim),
        hint=": rotate with apply_rope, which builds no matrix",
    )
    p = as_positions(position, name="position", n_axes=spec.position_axes)
    if p.ndim != (0 if spec.sections is None else 1):
        msg = f"`position` must be a single position ({spec.n_axes} value(s)); got shape {p.shape}."
        raise ValueError(msg)
    xp = array_namespace(p)
    cos, sin = tables(spec, p, xp=xp, seq_len=seq_len, role=role)
    block = np.asarray(block_matrix(cos, sin, layout=spec.layout, xp=xp), dtype=np.float64)
    matrix = np.eye(spec.head_dim, dtype=np.float64)
    matrix[spec.rotary_start : spec.rotary_stop, spec.rotary_start : spec.rotary_stop] = block
    return matrix
