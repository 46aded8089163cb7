"""The save database's errors: one line the user can act on, never a traceback."""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Something about the save database the user can act on; the message says what."""


class GameNotFound(StoreError, LookupError):
    """No saved game matches the id (or prefix) given."""


class DamagedRow(StoreError):
    """A stored value that cannot be read back (edited by hand, a damaged file): one line
    naming the game and the column, never a traceback (issue 24 item 13)."""


def _damaged(game_id: Any, what: str, why: str) -> DamagedRow:
    from engine.inputs import printable

    return DamagedRow(f"the save database is damaged: game {printable(game_id, 40)}'s {what} {why}; "
                      "export the other games, or restore the database from a copy")
