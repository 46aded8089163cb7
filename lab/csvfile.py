"""Every CSV file CalBench writes goes through here: cells a spreadsheet would run as a
formula are neutralised (issue 35, 3).

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula
to Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)`` in a pool id, ``@SUM(...)`` in a
chat message).  OWASP's rule (CSV injection): such a cell is written with a single quote in
front, ``'=HYPERLINK(...)``; a spreadsheet shows the text, and the quote tells a reader the
cell was neutralised.

Only text is changed: numbers are numbers, whether given as ``int`` / ``float`` or as the
text of one (``-3``, ``-0.25``, ``+1e-05`` — how the report formats its floats), so a
negative figure stays a figure.  Reading back with pandas: numeric columns come back as
numbers, as before; a text cell that was neutralised comes back with its quote
(``"'=HYPERLINK(...)"``) — to restore the original, drop one leading ``'`` where it is
followed by one of ``= + - @``, a tab or a carriage return (the study codebook says so).
"""

from __future__ import annotations

import csv
import io
import re
from typing import IO, Any, Iterable, Sequence

__all__ = ["FORMULA_START", "safe_cell", "write_rows", "write_dicts"]

#: The first characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.I)


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: text that would start a formula gets a leading ``'``; numbers
    (and text that is exactly a number) are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def write_rows(fh: IO[str], columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
               lineterminator: str = "\n") -> None:
    """A header of ``columns``, then each row (a sequence of cells), every cell through
    :func:`safe_cell` (the header too: a group column may be named by the user)."""
    # The rows are written ending in "\r\n", so a cell holding a carriage return is quoted (with
    # a "\n" line end Python's writer leaves it bare and the file no longer parses), then each
    # line is given ``lineterminator``.
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    for row in ([safe_cell(c) for c in columns], *([safe_cell(v) for v in r] for r in rows)):
        buf.seek(0)
        buf.truncate()
        w.writerow(row)
        fh.write(buf.getvalue()[:-2] + lineterminator)


def write_dicts(fh: IO[str], columns: Sequence[str], rows: Iterable[dict[str, Any]], *,
                lineterminator: str = "\r\n") -> None:
    """A header of ``columns``, then each row (a mapping of column to cell; a key that is not a
    column is an error, a missing one an empty cell), every cell through :func:`safe_cell`."""
    w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="raise", lineterminator=lineterminator)
    w.writerow({c: safe_cell(c) for c in columns})
    for row in rows:
        w.writerow({k: safe_cell(v) for k, v in row.items()})
