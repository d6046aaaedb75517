"""`rope-ref check`: subcommands of the command line."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to `commands`."""
