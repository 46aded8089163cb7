"""Texts from files and databases, made safe to print on a terminal (issue 24, items 11, 15).

Ids, labels, model names and paths come from files a user was handed and from save
databases anyone may have edited.  Printed raw, an escape sequence in a task id retitles
the terminal or hides a line, a carriage return overwrites one, ``[/]`` breaks Rich's
markup (a traceback), and a 50,000-character id makes a table take minutes to lay out.
Everything the command line prints that came from outside goes through one helper,
:func:`engine.inputs.printable` (control characters dropped, long ids elided), here in
the three shapes the printing code needs.
"""

from __future__ import annotations

from typing import Any

from engine.inputs import SHOW_ID_CHARS, printable

__all__ = ["plain", "markup", "cell", "safe_table", "SHOW_ID_CHARS"]


def plain(value: Any, width: int | None = None) -> str:
    """For ``print``: control characters dropped; elided to ``width`` characters if given."""
    return printable(value, width)


def markup(value: Any, width: int | None = None) -> str:
    """For a Rich markup string (``console.print(f"... {markup(x)} ...")``): also escaped,
    so ``[bold]`` or ``[/]`` in a value is shown as typed."""
    from rich.markup import escape

    return escape(printable(value, width))


def cell(value: Any, width: int | None = None, style: str = "") -> Any:
    """For a Rich table cell: a ``Text`` (never read as markup)."""
    from rich.text import Text

    return Text(printable(value, width), style=style)


def safe_table(*args: Any, **kwargs: Any) -> Any:
    """A Rich ``Table`` whose string cells are shown as plain text (control characters
    dropped, never read as markup, ids of more than 4x``SHOW_ID_CHARS`` characters elided);
    pass a ``rich.text.Text`` for a styled cell."""
    from rich.table import Table

    class SafeTable(Table):
        def add_row(self, *renderables: Any, **kw: Any) -> None:
            super().add_row(*[cell(r, 4 * SHOW_ID_CHARS) if isinstance(r, str) else r for r in renderables], **kw)

    return SafeTable(*args, **kwargs)
