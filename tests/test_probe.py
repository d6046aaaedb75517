"""The second probe (tools/probe) as a pytest suite: one test per case.

The probe's 1,000-odd cases call rope_ref's public API (and the `rope-ref` command) with bad
and odd inputs, each in a child process under a time limit and a memory cap, and check the
error or the value against the error policy and formulas of their own
(``tools/probe/second_probe.py`` says how). Here the cases pytest selected run in one probe
run (a subprocess, ``-j`` the CPU count), once per session, and each test asserts its
case's outcome: ``error-ok`` or ``value-ok``. A known fault is an ``xfail(strict=True)``
naming it, so that fixing it turns the test red until the mark is removed.

The probe needs the full set-up (PyTorch, JAX, transformers, Dask, array-api-strict,
ml_dtypes, mpmath); without it the module is skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).resolve().parent.parent / "tools" / "probe"
NEEDS = ("torch", "jax", "transformers", "dask", "array_api_strict", "ml_dtypes", "mpmath")
#: Faults the probe finds today that are not fixed yet: case -> why (xfail, strict).
KNOWN_FAULTS: dict[str, str] = {}
#: Longest probe run (s): about 0.3 to 2 s per case and child, by how busy the cores are.
RUN_TIMEOUT_S = 3600


def _case_ids() -> list[str]:
    """Every case of the probe, as ``"func: name"``, in the probe's order."""
    if str(PROBE) not in sys.path:
        sys.path.insert(0, str(PROBE))
    probe = importlib.import_module("second_probe")
    return [probe.case_id(c) for c in probe.CASES]


_missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
if _missing:
    pytest.skip(
        f"the probe needs the full set-up ({', '.join(_missing)} missing)", allow_module_level=True
    )
CASE_IDS = _case_ids()


def _param(case: str) -> Any:
    if case in KNOWN_FAULTS:
        return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAULTS[case]))
    return case


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: Any) -> dict[str, list[str]]:
    """(category, note) of every probe case this session selected, from one probe run."""
    wanted = [
        item.callspec.params["case"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.path == Path(__file__)
        and item.originalname == "test_probe_case"
    ]
    folder = tmp_path_factory.mktemp("probe")
    (folder / "cases.json").write_text(json.dumps(wanted), encoding="utf-8")
    command = [
        sys.executable,
        str(PROBE / "second_probe.py"),
        "--cases", str(folder / "cases.json"),
        "--json", str(folder / "outcomes.json"),
        "-j", str(max(2, os.cpu_count() or 2)),
    ]  # fmt: skip
    run = subprocess.run(
        command,
        cwd=PROBE,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert run.returncode in (0, 1), f"the probe failed (exit {run.returncode}): {run.stderr}"
    rows = json.loads((folder / "outcomes.json").read_text(encoding="utf-8"))
    return {f"{row['func']}: {row['name']}": [row["category"], row["note"]] for row in rows}


def test_the_probe_has_its_cases():
    assert len(CASE_IDS) >= 1000
    assert len(set(CASE_IDS)) == len(CASE_IDS)
    assert set(KNOWN_FAULTS) <= set(CASE_IDS)
    # the probe run selects cases by name: no name may hold what changes between runs
    assert not [case for case in CASE_IDS if re.search(r" at 0x[0-9a-fA-F]+", case)]


@pytest.mark.parametrize("case", [_param(case) for case in CASE_IDS])
def test_probe_case(case: str, outcomes: dict[str, list[str]]) -> None:
    category, note = outcomes[case]
    assert category in ("error-ok", "value-ok"), f"[{category}] {note}"
