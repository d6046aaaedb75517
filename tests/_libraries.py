"""Helpers of the tests of `rope-ref survey`'s library drivers (tests/test_survey_<lib>.py)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

from rope_ref.cli.survey.libraries import LIBRARY_GROUPS
from rope_ref.cli.survey.peers import Group
from rope_ref.cli.survey.run import Row, survey

#: Positions the tests probe up to: past 2**11 and 2**14, quick to build.
MAX_POSITION = 20000


def require(package: str) -> Group:
    """The driver group of `package`, or skip the test saying why it cannot run here."""
    group = next(g for g in LIBRARY_GROUPS if g.package == package)
    reason = group.missing()
    if reason is not None:
        pytest.skip(reason)
    return group


def rows(package: str, max_position: int = MAX_POSITION) -> dict[str, Row]:
    """The survey's rows of `package`, by their settings."""
    require(package)
    return {r.settings: r for r in survey(max_position, only=(package,))}


def driver(name: str) -> Any:
    """The driver module ``rope_ref.cli.survey.<name>``."""
    return importlib.import_module(f"rope_ref.cli.survey.{name}")


def rotate_pairs(x: np.ndarray, angles: np.ndarray, *, interleaved: bool) -> np.ndarray:
    """Rotate the pairs of float64 `x` (..., 2n) by `angles` (..., n): the textbook formula."""
    n = angles.shape[-1]
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :n], x[..., n:])
    c, s = np.cos(angles), np.sin(angles)
    first, second = a * c - b * s, b * c + a * s
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = first, second
    else:
        out[..., :n], out[..., n:] = first, second
    return out
