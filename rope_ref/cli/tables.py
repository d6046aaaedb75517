"""Tables of the commands, laid out by rich: fitted to the terminal, whole elsewhere.

On a terminal a table is as wide as the terminal at most: the columns marked `wrap`
(settings, notes, diagnoses) wrap inside their cells, the others keep their values whole.
Off a terminal (a pipe, a file) and with ``--wide`` every row stays on one line.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "format_table", "print_table", "table_width"]

#: The width of a table with no limit (off a terminal, or --wide).
UNLIMITED = 100_000


@dataclasses.dataclass(frozen=True)
class Column:
    """A column: its header, its alignment, and whether its cells may wrap to fit."""

    header: str
    align: Literal["left", "right"] = "left"
    wrap: bool = False


def table_width(*, wide: bool = False, stream: TextIO | None = None) -> int | None:
    """The terminal's width when `stream` (default stdout) is one and not `wide`, else None."""
    stream = sys.stdout if stream is None else stream
    if wide or not stream.isatty():
        return None
    return shutil.get_terminal_size().columns


def format_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int | None = None
) -> list[str]:
    """The lines of the table, at most `width` characters wide (None: no limit).

    Examples
    --------
    >>> cols = [Column("peer"), Column("settings", wrap=True), Column("error", "right")]
    >>> for line in format_table(cols, [("HF", "rope_type=yarn factor=4", "0.27")], width=28):
    ...     print(line)
    peer  settings         error
    ────────────────────────────
    HF    rope_type=yarn    0.27
          factor=4
    """
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for i, column in enumerate(columns):
        longest = max([len(column.header)] + [len(row[i]) for row in rows])
        table.add_column(
            column.header,
            justify=column.align,
            no_wrap=not column.wrap,
            overflow="fold" if column.wrap else "ellipsis",
            min_width=None if column.wrap else longest,  # whole values; the wrapping gives
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    console = Console(
        file=out,
        width=UNLIMITED if width is None else width,
        color_system=None,
        highlight=False,
        legacy_windows=False,
    )
    console.print(table)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def print_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    wide: bool = False,
    stream: TextIO | None = None,
) -> None:
    """Print the table on `stream` (default stdout), fitted as `table_width` says."""
    stream = sys.stdout if stream is None else stream
    for line in format_table(columns, rows, width=table_width(wide=wide, stream=stream)):
        print(line, file=stream)
