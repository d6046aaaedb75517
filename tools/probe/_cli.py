"""The ``rope-ref`` command for the second probe's cases: one run, and what a usage error is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
from _expect import TIMEOUT_S, Expect


@dataclass(frozen=True)
class CliResult:
    """Exit status, stdout and stderr of one ``rope-ref`` run."""

    code: int
    out: str
    err: str


def cli(*argv: str) -> CliResult:
    """Run ``python -m rope_ref ARGV`` in /tmp, capturing its streams and exit status."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run(
        [sys.executable, "-m", "rope_ref", *argv],
        capture_output=True,
        text=True,
        cwd="/tmp",
        env=env,
        timeout=TIMEOUT_S - 2,
        check=False,
    )
    return CliResult(run.returncode, run.stdout, run.stderr)


def usage_error(option: str, got: str | None = None) -> Expect:
    """Exit 2, no traceback, and an error line that names `option` (and `got`)."""

    def check(result: CliResult, inputs: list[np.ndarray]) -> None:
        text = result.err.strip()
        assert "Traceback" not in text, f"traceback: {text[-300:]}"
        assert result.code == 2, f"exit {result.code}; stderr {text[-300:]!r}"
        line = text.splitlines()[-1] if text else ""
        if '"verdict"' in result.out:  # --json: the error is in the JSON verdict
            line = json.loads(result.out)["error"] or ""
        line = line.replace(",", "")  # 99,999 shows 99999
        assert option in line, f"error line does not name {option}: {line!r}"
        assert got is None or got.replace(",", "") in line, (
            f"error line does not show {got!r}: {line!r}"
        )

    return Expect(check=check, passing="error-ok")
