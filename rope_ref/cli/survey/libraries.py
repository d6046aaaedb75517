"""The survey's libraries beyond the model zoos: one driver module each, in this order."""

from __future__ import annotations

from rope_ref.cli.survey import litgpt
from rope_ref.cli.survey.peers import Group

__all__ = ["LIBRARY_GROUPS"]

LIBRARY_GROUPS: tuple[Group, ...] = (litgpt.GROUP,)
