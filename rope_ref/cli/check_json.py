"""The verdict of `rope-ref check` as one JSON object (``--json``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["outcome_json"]


def outcome_json(target: str, outcome: Any, exit_status: int, seq_len: float | None = None) -> str:
    """One line of JSON for the supervised check's `outcome` of `target`.

    Keys: ``target``, ``seq_len`` (the length given with ``--seq-len``, null when none was
    given), ``verdict`` (``conformant``, ``mismatch``, ``error``,
    ``not_checkable``, or the supervisor's failure kind when there is no report),
    ``exit_status``, and with a report ``examples``, ``layout``, ``max_error``,
    ``max_tolerance_share``, ``max_ulps`` (the largest over the examples and the probe;
    null without ``--max-ulps``), ``precision``,
    ``max_angle_error``, ``checkable_to``,
    ``cause`` and ``diagnosis`` (or null), ``counterexample``, ``worst``, ``error``,
    ``details`` and ``reproducer`` (the Python text, or null).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> failed = SimpleNamespace(kind="import_failed", message="no module x", report=None)
    >>> outcome_json("x:f", failed, 1)
    '{"target": "x:f", "seq_len": null, "verdict": "import_failed", "error": "no module x", \
"exit_status": 1}'
    """
    report = outcome.report
    if report is None:
        data: dict[str, Any] = {"target": target, "seq_len": seq_len, "verdict": outcome.kind}
        data["error"] = outcome.message
    else:
        diagnosis = report.diagnosis
        case = report.counterexample
        data = {
            "target": target,
            "seq_len": seq_len,
            "verdict": report.status,
            "examples": report.examples,
            "layout": report.layout,
            "max_error": report.max_error,
            "max_tolerance_share": report.max_ratio,
            "max_ulps": report.max_ulps,
            "precision": report.precision,
            "max_angle_error": report.max_angle_error,
            "checkable_to": report.checkable_to,
            "cause": None if diagnosis is None else diagnosis.cause,
            "diagnosis": None if diagnosis is None else diagnosis.message,
            "counterexample": None if case is None else case.describe(),
            "worst": report.worst,
            "error": report.error,
            "details": list(report.details),
            "reproducer": "\n".join(report.reproducer) if report.reproducer else None,
        }
    data["exit_status"] = exit_status
    return json.dumps(data)
