"""The conformance table of ``survey.md``, from recorded ``rope-ref survey --json`` output.

The survey is not run at build time (it needs the peers installed and takes a minute):
``docs/data/survey.json`` holds what ``rope-ref survey --json`` printed, with the versions
of the packages it ran against, and this module turns it into CSV tables.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _angles(row: dict) -> str:
    if row["precision"] is None:
        return "-"
    return f"{row['precision']} ({row['max_angle_error']:.1e} rad)"


def survey_table(report: dict, path: Path) -> None:
    """One row per peer and setting: verdict, error / tolerance, angle precision, cause."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["peer", "version", "settings", "verdict", "error / tolerance",
                      "angle precision", "diagnosis or reason"])
        for row in report["rows"]:
            out.writerow([row["peer"], row["version"], row["settings"], row["verdict"],
                          _ratio(row["max_ratio"]), _angles(row), row["diagnosis"] or ""])


def environment_table(report: dict, path: Path) -> None:
    """The packages the survey ran against."""
    env = report["environment"]
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["package", "version"])
        out.writerow(["python", env["python"]])
        for name, version in env["packages"].items():
            out.writerow([name, version])


def make(outdir: Path) -> list[Path]:
    """Write ``survey.csv`` and ``survey_environment.csv`` into `outdir`."""
    report = json.loads((DATA / "survey.json").read_text(encoding="utf-8"))
    written = []
    for name, writer in (("survey.csv", survey_table),
                         ("survey_environment.csv", environment_table)):
        path = outdir / name
        writer(report, path)
        written.append(path)
    return written
