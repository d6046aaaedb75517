"""Where the worst element of a comparison is: its index, position, pair, angle and error."""

from __future__ import annotations

import numpy as np

from rope_ref.testing._compare import Comparison

__all__ = ["describe_worst"]


def _axis_names(ndim: int, seq_axis: int) -> list[str]:
    lead = [i for i in range(ndim - 1) if i != seq_axis]
    names = ["batch", "head"] if len(lead) == 2 else ["batch"] if len(lead) == 1 else []
    labels = [f"axis {i}" for i in range(ndim)]
    for i, name in zip(lead, names or [f"axis {i}" for i in lead], strict=True):
        labels[i] = name
    labels[seq_axis] = "seq"
    labels[-1] = "feature"
    return labels


def describe_worst(c: Comparison) -> str:
    """The worst element of `c`: where it is, its position, pair and angle, and its error."""
    s = c.setup
    spec = s.spec
    index = c.worst
    if not index:
        return "the result is empty"
    labels = _axis_names(s.x.ndim, s.seq_axis % s.x.ndim)
    where = ", ".join(f"{label} {i}" for label, i in zip(labels, index, strict=True))
    feature = index[-1]
    row = index[:-1]
    position = s.grid[row]
    pos_text = ", ".join(f"{v:.10g}" for v in np.atleast_1d(position))
    if spec.rotary_start <= feature < spec.rotary_stop:
        k = feature - spec.rotary_start
        n = spec.n_pairs
        if spec.layout == "half":
            pair, partners = k % n, (k % n, k % n + n)
        else:
            pair, partners = k // 2, (2 * (k // 2), 2 * (k // 2) + 1)
        angle = float(s.angles_at(row)[pair])
        first, second = (spec.rotary_start + f for f in partners)
        what = (
            f"pair {pair} (features {first} and {second}, layout {spec.layout!r}), "
            f"position {pos_text}, angle {angle:.6g} rad"
        )
    else:
        what = f"a pass-through feature (outside [{spec.rotary_start}, {spec.rotary_stop}))"
    err, tol = c.error[index], c.tolerance[index]
    ratio = f"{err / tol:.3g} x the tolerance {tol:.3g}" if tol > 0 else f"tolerance {tol:.3g}"
    return (
        f"{where}: {what}; actual {c.actual[index]:.8g}, expected {c.expected[index]:.8g}, "
        f"|error| {err:.3g} = {ratio}"
    )
