"""`rope-ref bench --preset oracle`: the oracle kit at the speed its users feel.

Four measurements, each on NumPy float32 data:

- a passing `assert_rope_close` (a correct float32 result, ``seq_axis=1``, positions
  ``arange(S) + 1000``) beside the float64 reference apply of the same case, at the shapes
  (2, 16, 4, 64), (1, 128, 8, 128) and (1, 1024, 32, 128), as a ratio (the two timed in
  turn in each round; the smallest shape, a fraction of a millisecond, in 25 times the
  rounds), and in rounds of their own the same with the check kept on the NumPy passes
  (``ROPE_REF_ORACLE_NUMBA=0``);
- the first passing check of a fresh process at (1, 128, 8, 128), by default (with Numba
  installed: its import and the loading of the cached comparison loop) and on the NumPy
  passes;
- a failing check with its diagnosis (the result one position off) at (1, 128, 8, 128);
- a user's Hypothesis property test: `rope_cases` and `assert_rope_close` on a correct
  result, 200 examples, in examples per second;
- `rope-ref check` of a correct function (the target in a child process, as the command
  runs it), 100 examples, in examples per second.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ORACLE_PRESETS", "correct_rope", "run_oracle"]

#: The preset's name, and the shapes of its passing and failing comparisons.
ORACLE_PRESETS: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "oracle": ((2, 16, 4, 64), (1, 128, 8, 128), (1, 1024, 32, 128)),
}
#: Examples of the property test and of the check.
PROPERTY_EXAMPLES, CHECK_EXAMPLES = 200, 100
#: How many times more rounds the smallest shape gets (each of its calls is short).
SMALL_ROUNDS = 25


def correct_rope(x: Any, positions: Any) -> Any:
    """A correct RoPE (rope_ref's own): the target the preset's `rope-ref check` runs."""
    import rope_ref as rr

    return rr.apply_rope(x, rr.RopeSpec(head_dim=x.shape[-1]), positions)


def _median(fn: Callable[[], object], rounds: int) -> float:
    return _interleaved([fn], rounds)[0]


def _interleaved(fns: list[Callable[[], object]], rounds: int) -> list[float]:
    """The median time of each of `fns`, one call of each per round, in turn.

    On a shared machine a burst of load then slows every function of the round alike, so
    their ratio holds where medians taken one after the other would drift apart.
    """
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, spent in zip(fns, times, strict=True):
            began = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - began)
    return [statistics.median(spent) for spent in times]


def _comparisons(shape: tuple[int, int, int, int], rounds: int) -> dict[str, Any]:
    import rope_ref as rr
    from rope_ref.testing import assert_rope_close, rope_report

    spec = rr.RopeSpec(head_dim=shape[-1])
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    p = np.arange(shape[1]) + 1000
    y = np.asarray(rr.apply_rope(x, spec, p, seq_axis=1))
    x64 = x.astype(np.float64)

    def reference_apply() -> object:
        return rr.apply_rope(x64, spec, p, seq_axis=1, backend="reference")

    def passing_assert() -> object:
        return assert_rope_close(y, x, spec, p, seq_axis=1)

    reference, passing = _interleaved([reference_apply, passing_assert], rounds)
    # in rounds of their own: a third call in the same rounds changes the other two's times
    numpy_reference, numpy_passes = _interleaved(
        [reference_apply, _on_numpy_passes(passing_assert)], rounds
    )
    row: dict[str, Any] = {
        "shape": list(shape),
        "reference_s": reference,
        "passing_assert_s": passing,
        "ratio": passing / reference,
        "numpy_reference_s": numpy_reference,
        "numpy_passes_s": numpy_passes,
        "numpy_ratio": numpy_passes / numpy_reference,
    }
    if shape[1] == 128:
        wrong = np.asarray(rr.apply_rope(x, spec, p + 1, seq_axis=1))
        row["failing_report_s"] = _median(
            lambda: rope_report(wrong, x, spec, p, seq_axis=1).diagnosis, max(1, rounds // 2)
        )
    return row


def _on_numpy_passes(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn`, run with ``ROPE_REF_ORACLE_NUMBA=0``: every comparison on the NumPy passes."""
    from rope_ref.testing._extremes import OPT_OUT

    def run() -> object:
        saved = os.environ.get(OPT_OUT)
        os.environ[OPT_OUT] = "0"
        try:
            return fn()
        finally:
            if saved is None:
                del os.environ[OPT_OUT]
            else:
                os.environ[OPT_OUT] = saved

    return run


#: The first passing check of a fresh process, timed there (printed in seconds).
_FIRST_CHECK = """
import time
import numpy as np
import rope_ref as rr
from rope_ref.testing import assert_rope_close
spec = rr.RopeSpec(head_dim=128)
x = np.random.default_rng(0).standard_normal((1, 128, 8, 128)).astype(np.float32)
p = np.arange(128) + 1000
y = np.asarray(rr.apply_rope(x, spec, p, seq_axis=1))
began = time.perf_counter()
assert_rope_close(y, x, spec, p, seq_axis=1)
print(time.perf_counter() - began)
"""


def _first_check() -> dict[str, float]:
    """Seconds of the first check of a fresh process: by default, and on the NumPy passes."""
    from rope_ref.testing._extremes import OPT_OUT

    seconds = {}
    for name, value in (("s", None), ("numpy_s", "0")):
        env = {k: v for k, v in os.environ.items() if k != OPT_OUT}
        if value is not None:
            env[OPT_OUT] = value
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_CHECK],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=600,
        )
        seconds[name] = float(done.stdout.strip().splitlines()[-1])
    return seconds


def _property_test() -> dict[str, Any]:
    from hypothesis import HealthCheck, given, settings

    import rope_ref as rr
    from rope_ref.testing import assert_rope_close
    from rope_ref.testing.strategies import rope_cases

    @settings(
        max_examples=PROPERTY_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(rope_cases(dtypes=["float32"]))
    def property_test(case: Any) -> None:
        out = rr.apply_rope(case.x, case.spec, case.positions)
        assert_rope_close(out, case.x, case.spec, case.positions)

    began = time.perf_counter()
    property_test()
    seconds = time.perf_counter() - began
    return {"examples": PROPERTY_EXAMPLES, "s": seconds, "per_s": PROPERTY_EXAMPLES / seconds}


def _check_command() -> dict[str, Any]:
    import rope_ref as rr
    from rope_ref.cli.check.cases import CheckConfig
    from rope_ref.cli.check.conventions import Calling
    from rope_ref.cli.check.supervise import run_supervised

    cfg = CheckConfig(
        calling=Calling(convention="plain", dtype="float32", timeout=60.0),
        spec=rr.RopeSpec(head_dim=64),
        layout="half",
        max_position=32768,
        examples=CHECK_EXAMPLES,
    )
    began = time.perf_counter()
    outcome = run_supervised(f"{__name__}:correct_rope", cfg)
    seconds = time.perf_counter() - began
    report = outcome.report
    examples = 0 if report is None else report.examples
    verdict = outcome.kind if report is None else report.status
    return {"examples": examples, "s": seconds, "per_s": examples / seconds, "verdict": verdict}


def _rounds_for(shape: tuple[int, int, int, int], rounds: int) -> int:
    """Rounds at `shape`: 25 times more below 2**14 elements, a quarter past 128 tokens."""
    if math.prod(shape) < 2**14:
        return SMALL_ROUNDS * rounds
    return rounds if shape[1] <= 128 else max(1, rounds // 4)


def run_oracle(args: argparse.Namespace) -> int:
    """Time the oracle preset; print a table (or JSON with ``--json``)."""
    from rope_ref.cli.bench.machine import machine_description

    rounds = max(1, min(args.rounds, 20))
    rows = [_comparisons(shape, _rounds_for(shape, rounds)) for shape in ORACLE_PRESETS["oracle"]]
    first = _first_check()
    prop = _property_test()
    command = _check_command()
    result = {
        "comparisons": rows,
        "first_check": first,
        "property_test": prop,
        "check": command,
        "rounds": rounds,
    }
    if args.json:
        print(json.dumps({"machine": machine_description(), "results": [result]}, indent=2))
        return 0
    print(
        f"oracle preset: median of {rounds} interleaved rounds ({SMALL_ROUNDS * rounds} at "
        "(2, 16, 4, 64), a quarter at 1024 tokens)"
    )
    print(
        f"  {'shape':<18} {'reference':>10} {'passing assert':>15} {'ratio':>7} "
        f"{'numpy passes':>13} {'ratio':>7} {'failing':>10}"
    )
    for row in rows:
        failing = row.get("failing_report_s")
        print(
            f"  {','.join(map(str, row['shape'])):<18} {row['reference_s'] * 1e3:>8.3g}ms "
            f"{row['passing_assert_s'] * 1e3:>13.3g}ms {row['ratio']:>6.2f}x "
            f"{row['numpy_passes_s'] * 1e3:>11.3g}ms {row['numpy_ratio']:>6.2f}x "
            + ("" if failing is None else f"{failing * 1e3:>8.3g}ms")
        )
    print(
        f"  first check of a process, (1, 128, 8, 128): {first['s']:.2f} s "
        f"({first['numpy_s']:.2f} s on the NumPy passes)"
    )
    print(
        f"  property test (rope_cases + assert_rope_close): {prop['examples']} examples in "
        f"{prop['s']:.2f} s = {prop['per_s']:.0f} examples/s"
    )
    print(
        f"  rope-ref check (plain, correct): {command['examples']} examples in "
        f"{command['s']:.2f} s = {command['per_s']:.1f} examples/s ({command['verdict']})"
    )
    return 0
