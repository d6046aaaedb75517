"""`rope-ref example`: the 4-token, d = 4 worked example, absolute PE beside RoPE."""

from __future__ import annotations

import numpy as np

from rope_ref._core.frequencies import rope_angles
from rope_ref._core.sinusoidal import sinusoidal_embedding
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope

__all__ = ["run_example"]

TOKENS = np.array(
    [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
)


def _row(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v: .6f}" for v in values) + "]"


def run_example() -> int:
    """Print the example; return the exit status (0)."""
    spec = RopeSpec(head_dim=4, layout="interleaved")  # pairs (x0, x1), (x2, x3), as the seed
    positions = np.arange(4)
    pe = sinusoidal_embedding(positions, 4)
    angles = rope_angles(spec, positions)
    rotated = apply_rope(TOKENS, spec, positions)
    print("Four tokens, d = 4, base 10000: theta_i = pos / 10000^(2i/d), i.e. pos and pos/100.\n")
    print(
        "Absolute sinusoidal PE, added to the token: PE(pos) = "
        "[sin(pos), cos(pos), sin(pos/100), cos(pos/100)]"
    )
    print(f"{'pos':>3}  {'token':<46} {'PE(pos)':<46} {'token + PE':<46}")
    for p in positions:
        print(f"{p:>3}  {_row(TOKENS[p]):<46} {_row(pe[p]):<46} {_row(TOKENS[p] + pe[p]):<46}")
    print("\nRoPE, rotating each pair by its angle (interleaved pairs, as in RoFormer):")
    print(f"{'pos':>3}  {'angles':<28} {'token':<46} {'rotated':<46}")
    for p in positions:
        print(f"{p:>3}  {_row(angles[p]):<28} {_row(TOKENS[p]):<46} {_row(rotated[p]):<46}")
    q, k = TOKENS[2], TOKENS[2]
    print("\nRelative position: <R_m q, R_n k> depends only on n - m (q = k = token 2):")
    for m, n in ((0, 1), (5, 6), (100, 101), (0, 3), (7, 10)):
        qm, kn = apply_rope(np.stack([q, k]), spec, np.array([m, n]))
        print(f"  m = {m:>3}, n = {n:>3}, n - m = {n - m}:  score = {float(qm @ kn): .12f}")
    print("\nThree slips to avoid when working this example by hand:")
    print(
        "  - the second pair turns by pos/100 per token, not pos/10000: 10000^(2i/d) with"
        " i = 1, d = 4 is 10000^(1/2) = 100;"
    )
    print(
        "  - a rotated pair is (x0 cos - x1 sin, x0 sin + x1 cos), not (cos, sin): [0, 1] at"
        " pos 1 becomes [-sin 1, cos 1] = [-0.841471, 0.540302];"
    )
    print("  - sin(0.03) = 0.029996 (to six places), not 0.0298.")
    return 0
