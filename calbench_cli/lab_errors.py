"""The one-line errors of the lab calls a command makes, as the command line's :class:`UserError`.

A command is ``argparse → one lab call → print``; the lab (and the store under it) raises
its own one-line error types, which this turns into ``calbench: error: <line>``, exit 2::

    with one_line(ArchiveError):
        games = archive.list_games(path)
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .commands import UserError


@contextmanager
def one_line(*errors: type[BaseException]) -> Iterator[None]:
    """Raise :class:`UserError` (the same words) for ``errors`` and the store's ``StoreError``."""
    from saves.errors import StoreError

    try:
        yield
    except (StoreError, *errors) as exc:
        raise UserError(str(exc)) from None
