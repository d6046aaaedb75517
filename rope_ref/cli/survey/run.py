"""`rope-ref survey`: every RoPE implementation installed beside rope_ref, against the oracle.

Each entry of `rope_ref.cli.survey.peers.GROUPS` is called on float32 inputs at positions
that reach past the points where 16- and 32-bit floats stop holding integers, and compared
with `rope_ref.testing.rope_report` under the default error model. A row states the
verdict, the largest error as a share of the tolerance, the angle-precision class, and
the diagnosis of a mismatch. A package that is missing gives one skipped row and its
reason; an entry that raises gives an error row.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rope_ref.cli.survey._given import InexpressibleError
from rope_ref.cli.survey.libraries import LIBRARY_GROUPS
from rope_ref.cli.survey.peers import GROUPS, Entry, Group
from rope_ref.cli.survey.positions import position_sets
from rope_ref.testing._report import PRECISION_CLASSES, RopeReport, rope_report

__all__ = ["Row", "survey"]

BATCH, HEADS = 2, 2


@dataclass(frozen=True)
class Row:
    """One line of the survey table."""

    package: str
    version: str
    peer: str
    settings: str
    verdict: str  # "conformant", "NOT conformant", "error", "skipped"
    max_ratio: float | None = None
    precision: str | None = None
    max_angle_error: float | None = None
    diagnosis: str | None = None
    max_ulps: float | None = None  # with ulps=True: distance from the correctly rounded result
    median_ulps: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values."""
        return asdict(self)


def _inputs(entry: Entry, p: np.ndarray, seed: int) -> np.ndarray:
    shape = (BATCH, HEADS, p.shape[0], entry.spec.head_dim)
    dtype = getattr(entry, "dtype", "float32")  # engines' float16 rows draw float16 inputs
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def _worst(reports: list[RopeReport]) -> RopeReport:
    failing = [r for r in reports if not r.ok]
    pool = failing or reports
    return max(pool, key=lambda r: r.max_ratio)


def check_entry(entry: Entry, max_position: int, seed: int = 0) -> list[RopeReport]:
    """The reports of `entry` at each of its position sets."""
    reports = []
    for i, p in enumerate(position_sets(entry, max_position)):
        x = _inputs(entry, p, seed + i)
        y = entry.run(x.copy(), p.copy())
        role = getattr(entry, "role", None)  # xPos entries scale queries or keys
        seq_len = getattr(entry, "seq_len", None)  # an engine's configured length
        inverse = getattr(entry, "inverse", False)  # an engine's inverse rotation
        reports.append(
            rope_report(y, x, entry.spec, p, role=role, seq_len=seq_len, inverse=inverse)
        )
    return reports


def _row(group: Group, version: str, entry: Entry, max_position: int, *, ulps: bool = False) -> Row:
    try:
        reports = check_entry(entry, max_position)
        errors = _ulps(reports) if ulps else None
    except InexpressibleError as why:
        row = (group.package, version, entry.peer, entry.settings, "skipped")
        return Row(*row, diagnosis=str(why))
    except Exception as err:  # a peer that cannot run these inputs is reported, not raised
        return Row(
            group.package,
            version,
            entry.peer,
            entry.settings,
            "error",
            diagnosis=f"{type(err).__name__}: {err}".splitlines()[0][:200],
        )
    worst = _worst(reports)
    grade = max(PRECISION_CLASSES.index(r.precision) for r in reports)
    return Row(
        group.package,
        version,
        entry.peer,
        entry.settings,
        "conformant" if all(r.ok for r in reports) else "NOT conformant",
        max_ratio=max(r.max_ratio for r in reports),
        precision=PRECISION_CLASSES[grade],
        max_angle_error=max(r.max_angle_error for r in reports),
        diagnosis=None if worst.diagnosis is None else str(worst.diagnosis),
        max_ulps=None if errors is None else float(np.max(errors, initial=0.0)),
        median_ulps=None if errors is None else float(np.median(errors)),
    )


def _ulps(reports: list[RopeReport]) -> np.ndarray:
    """Every element's distance from the correctly rounded result, in ulps."""
    from rope_ref.testing._ulps import ulp_errors

    return np.concatenate([ulp_errors(r.comparison).ravel() for r in reports if r.comparison])


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def survey(
    max_position: int = 131071,
    *,
    only: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    ulps: bool = False,
) -> list[Row]:
    """Drive every installed peer through the oracle; one `Row` per entry (or skipped group)."""
    rows: list[Row] = []
    for group in (*GROUPS, *LIBRARY_GROUPS):
        if only is not None and group.package not in only:
            continue
        reason = group.missing()
        if reason is not None:
            rows.append(
                Row(group.package, "", group.package, "not installed", "skipped", diagnosis=reason)
            )
            continue
        version = _version(group.package)
        try:
            entries = list(group.entries())
        except Exception as err:  # the package imports but cannot build its modules
            rows.append(
                Row(
                    group.package,
                    version,
                    group.package,
                    "-",
                    "error",
                    diagnosis=f"{type(err).__name__}: {err}".splitlines()[0][:200],
                )
            )
            continue
        for entry in entries:
            if progress is not None:
                progress(f"{entry.peer} ({entry.settings})")
            rows.append(_row(group, version, entry, max_position, ulps=ulps))
    return rows
