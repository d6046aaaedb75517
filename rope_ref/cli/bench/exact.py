"""`rope-ref bench --preset exact`: the exact backend at the size property tests use.

Times ``apply_rope(x, backend="exact")`` on x of shape (1, 256, 8, 128) float32 at
positions 10**6 .. 10**6 + 255 (the fit for property tests: at most 2 s), beside the
reference backend on the same call. It runs on its own, a few rounds (each takes seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

__all__ = ["EXACT_PRESETS", "run_exact"]

#: The preset: shape (B, S, H, D), dtype, first position.
EXACT_PRESETS: dict[str, tuple[tuple[int, int, int, int], str, int]] = {
    "exact": ((1, 256, 8, 128), "float32", 10**6),
}
#: The budget the preset is held to, in seconds.
BUDGET_S = 2.0


def run_exact(args: argparse.Namespace) -> int:
    """Time the exact preset; print a table (or JSON with ``--json``)."""
    import rope_ref as rr
    from rope_ref.cli.bench.machine import machine_description

    reason = rr.available_backends()["exact"]
    if reason is not None:
        print(f"rope-ref bench: backend 'exact' {reason}")
        return 1
    shape, dtype, start = EXACT_PRESETS["exact"]
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    spec = rr.RopeSpec(head_dim=shape[-1])
    positions = np.arange(start, start + shape[1])
    rounds = max(1, min(args.rounds, 5))
    times: dict[str, list[float]] = {"exact": [], "reference": []}
    for _ in range(rounds):
        for backend, taken in times.items():
            began = time.perf_counter()
            rr.apply_rope(x, spec, positions, seq_axis=-3, backend=backend)  # type: ignore[arg-type]
            taken.append(time.perf_counter() - began)
    medians = {name: statistics.median(t) for name, t in times.items()}
    result: dict[str, Any] = {
        "case": f"{','.join(map(str, shape))} {dtype}, positions {start}..{start + shape[1] - 1}",
        "rounds": rounds,
        "median_s": medians,
        "exact_over_reference": medians["exact"] / medians["reference"],
        "budget_s": BUDGET_S,
        "within_budget": medians["exact"] <= BUDGET_S,
    }
    if args.json:
        print(json.dumps({"machine": machine_description(), "results": [result]}, indent=2))
        return 0
    print(f"exact preset: {result['case']}, median of {rounds} rounds")
    print(f"  {'backend':<10} {'median':>10}")
    for name, value in medians.items():
        print(f"  {name:<10} {value:>9.3f}s")
    verdict = "within" if result["within_budget"] else "OVER"
    print(
        f"  exact / reference = {result['exact_over_reference']:.0f}x; "
        f"{verdict} the {BUDGET_S:g} s budget for property tests"
    )
    return 0
