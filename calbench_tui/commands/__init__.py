"""Sub-commands of ``calbench``; one module each, registered by ``calbench_tui.cli``.

Shared helpers for commands live here: :class:`UserError` (a mistake the user can fix:
printed as one line, exit code 2) and the database location.
"""

from __future__ import annotations

import os


class UserError(Exception):
    """A user mistake; the CLI prints ``calbench: error: <message>`` and exits non-zero."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def require_terminal(what: str) -> None:
    """Refuse to start a full-screen app without a terminal (it would wait for ever)."""
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError(f"{what} needs an interactive terminal, but standard input or output is not one")


def add_db_option(parser) -> None:
    parser.add_argument("--db", metavar="PATH", default=None,
                        help="SQLite database (default: $CALBENCH_DB, else the platform's user data directory)")


def with_store(path: str, coro_fn):
    """Open the store at ``path``, return ``await coro_fn(store)``, close it.

    Store problems (no such game, a database from a newer version, ...) become one-line
    :class:`UserError`s.
    """
    import asyncio

    from saves.store import Store, StoreError

    async def main():
        store = await Store.open(path)
        try:
            return await coro_fn(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except StoreError as exc:
        raise UserError(str(exc)) from None


def db_path(arg: str | None) -> str:
    """--db, else $CALBENCH_DB, else calbench.db in the platform's user data directory."""
    if arg:
        return arg
    env = os.environ.get("CALBENCH_DB")
    if env:
        return env
    from platformdirs import user_data_dir

    d = user_data_dir("calbench", appauthor=False)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "calbench.db")
