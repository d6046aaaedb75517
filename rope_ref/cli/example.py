"""`rope-ref example`: the 4-token, d = 4 worked example, absolute PE beside RoPE."""

from __future__ import annotations

import json

import numpy as np

from rope_ref._core.frequencies import rope_angles
from rope_ref._core.sinusoidal import sinusoidal_embedding
from rope_ref._core.spec import RopeSpec
from rope_ref._engine.api import apply_rope
from rope_ref.cli.tables import Column, print_table

__all__ = ["run_example"]

TOKENS = np.array(
    [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
)


def _row(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v: .6f}" for v in values) + "]"


def run_example(*, json_output: bool = False, wide: bool = False) -> int:
    """Print the example (as JSON with `json_output`); return the exit status (0).

    Examples
    --------
    >>> run_example(json_output=True)  # doctest: +ELLIPSIS
    {
      "d": 4,
      ...
    0
    """
    spec = RopeSpec(head_dim=4, layout="interleaved")  # pairs (x0, x1), (x2, x3), as the seed
    positions = np.arange(4)
    pe = sinusoidal_embedding(positions, 4)
    angles = rope_angles(spec, positions)
    rotated = apply_rope(TOKENS, spec, positions)
    q = k = TOKENS[2]
    pairs = ((0, 1), (5, 6), (100, 101), (0, 3), (7, 10))
    scores = []
    for m, n in pairs:
        qm, kn = apply_rope(np.stack([q, k]), spec, np.array([m, n]))
        scores.append((m, n, float(qm @ kn)))
    if json_output:
        report = {
            "d": 4,
            "base": spec.base,
            "layout": spec.layout,
            "tokens": TOKENS.tolist(),
            "sinusoidal_pe": pe.tolist(),
            "angles": angles.tolist(),
            "rotated": rotated.tolist(),
            "relative_scores": [{"m": m, "n": n, "score": s} for m, n, s in scores],
        }
        print(json.dumps(report, indent=2))
        return 0
    print("Four tokens, d = 4, base 10000: theta_i = pos / 10000^(2i/d), i.e. pos and pos/100.\n")
    print(
        "Absolute sinusoidal PE, added to the token: PE(pos) = "
        "[sin(pos), cos(pos), sin(pos/100), cos(pos/100)]"
    )
    columns = [Column("pos", "right")]
    columns += [Column(h, wrap=True) for h in ("token", "PE(pos)", "token + PE")]
    rows = [(str(p), _row(TOKENS[p]), _row(pe[p]), _row(TOKENS[p] + pe[p])) for p in positions]
    print_table(columns, rows, wide=wide)
    print("\nRoPE, rotating each pair by its angle (interleaved pairs, as in RoFormer):")
    columns = [Column("pos", "right")]
    columns += [Column(h, wrap=True) for h in ("angles", "token", "rotated")]
    rows = [(str(p), _row(angles[p]), _row(TOKENS[p]), _row(rotated[p])) for p in positions]
    print_table(columns, rows, wide=wide)
    print("\nRelative position: <R_m q, R_n k> depends only on n - m (q = k = token 2):")
    for m, n, score in scores:
        print(f"  m = {m:>3}, n = {n:>3}, n - m = {n - m}:  score = {score: .12f}")
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
