"""The second probe: bad and odd inputs to rope_ref's public API, each run in a child process.

Every case is one call of the public API (or the `rope-ref` command) with an input chosen to
break it, and what the error policy (``docs/api.md``, ``docs/cli.md``) says it must give: a
TypeError/ValueError naming the parameter (and, where stated, the value received), or a value,
which is checked against formulas written in the probe (a float64 NumPy RoPE with
frequencies from mpmath, per-pair norms, orthogonality). Each case runs in a child forked from
this process (numpy, torch, jax and rope_ref are imported once), under a time limit and an
address-space cap, and is classified:

- ``error-ok``: TypeError/ValueError naming the parameter (CLI: exit 2, one ``error:`` line);
- ``value-ok``: a result, checked right;
- ``crash``: another exception type, a signal, MemoryError, a traceback from the CLI;
- ``hang``: past the time limit;
- ``leak``: an input or global state (NumPy error state and print options, ``jax_enable_x64``,
  torch's default dtype, threads and grad mode, warning filters, ``os.environ``, ``sys.stdout``,
  random states, signal handlers, ``sys.path``, live threads) changed;
- ``wrong``: a wrong value, a result where an error was due, or an error naming the wrong
  parameter or not showing the value received.

Run ``python tools/probe/second_probe.py`` (``-k TEXT`` selects cases by name, ``--cases FILE``
runs the cases a JSON list names by ``"func: name"``, ``-j N`` runs N children at once,
``--json FILE`` writes every outcome). ``tests/test_probe.py`` runs it as one test per case.

The probe lives in this directory: ``_expect.py`` (cases, expectations, inputs and the
independent formulas), ``_cli.py`` (running the command), the ``cases_*.py`` modules (the cases,
by the function or area they probe; importing one adds its cases to the table) and ``_run.py``
(the children, the classification, the report). This file imports them and runs the cases.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from _expect import CASES, Case
from _run import report, run_all

# the case modules, in the order their cases are run and reported
CASE_MODULES = (
    "cases_apply",
    "cases_tables",
    "cases_spec",
    "cases_hf",
    "cases_functions",
    "cases_testing",
    "cases_values",
    "cases_more",
    "cases_attention",
    "cases_cli",
)
for module in CASE_MODULES:
    importlib.import_module(module)


def case_id(c: Case) -> str:
    """The name a case is selected and reported by: ``"func: name"`` (unique)."""
    return f"{c.func}: {c.name}"


def main() -> int:
    """Run the cases asked for; exit status 1 if any is a finding."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "-k", default="", help="run only cases whose function or name contains this"
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="children at once (default 2)")
    parser.add_argument("--json", help="write every outcome to this file")
    parser.add_argument("--cases", help='run the cases this JSON list names ("func: name")')
    args = parser.parse_args()
    cases = [c for c in CASES if args.k in case_id(c)]
    if args.cases:
        with open(args.cases) as f:
            wanted = set(json.load(f))
        unknown = wanted - {case_id(c) for c in CASES}
        if unknown:
            parser.error(f"--cases names unknown cases: {sorted(unknown)[:5]}")
        cases = [c for c in cases if case_id(c) in wanted]
    done = run_all(cases, args.jobs)
    done.sort(key=lambda d: CASES.index(d[0]))
    report(done)
    if args.json:
        rows = [
            {"func": c.func, "name": c.name, "category": cat, "note": note}
            for c, cat, note, _ in done
        ]
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(cat in ("error-ok", "value-ok") for _, cat, _, _ in done) else 1


if __name__ == "__main__":
    sys.exit(main())
