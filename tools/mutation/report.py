"""Score of Cosmic Ray sessions, and each survivor with its diff.

Usage: ``python report.py SESSION.sqlite... [--diffs]``
"""

from __future__ import annotations

import collections
import sqlite3
import sys

RESULTS = """select s.module_path, s.start_pos_row, s.operator_name, r.test_outcome, r.diff
from work_results r join mutation_specs s on s.job_id = r.job_id
where r.worker_outcome != 'SKIPPED' order by s.start_pos_row, s.start_pos_col"""


def report(path: str, *, diffs: bool) -> str:
    """One line of counts for the session at ``path``, then its survivors."""
    with sqlite3.connect(path) as db:
        rows = db.execute(RESULTS).fetchall()
        pending = db.execute(
            "select count(*) from work_items w left join work_results r on r.job_id = w.job_id"
            " where r.job_id is null"
        ).fetchone()[0]
    count = collections.Counter(outcome for _, _, _, outcome, _ in rows)
    module = rows[0][0] if rows else path
    lines = [f"{module}: {len(rows)} run, {count['KILLED']} killed, "
             f"{count['SURVIVED']} survived, {pending} pending"]  # fmt: skip
    for _, row, operator, outcome, diff in rows:
        if outcome == "SURVIVED":
            changed = [
                x for x in diff.splitlines() if x[:1] in "+-" and x[:3] not in ("+++", "---")
            ]
            lines.append(f"  line {row} {operator.removeprefix('core/')}: "
                         + " | ".join(x.strip() for x in changed))  # fmt: skip
            if diffs:
                lines.append(diff)
    return "\n".join(lines)


if __name__ == "__main__":
    paths = [a for a in sys.argv[1:] if a != "--diffs"]
    for session in paths:
        sys.stdout.write(report(session, diffs="--diffs" in sys.argv) + "\n")
