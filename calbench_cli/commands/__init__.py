"""Sub-commands of ``calbench``; one module each, registered by ``calbench_cli.cli``.

Shared helpers for commands live here: :class:`UserError` (a mistake the user can fix:
printed as one line, exit code 2) and the database location.
"""

from __future__ import annotations

import argparse
import os
import sys


class UserError(Exception):
    """A user mistake; the CLI prints ``calbench: error: <message>`` and exits non-zero."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose error line is redacted (``engine.redact``): argparse echoes
    the offending argument ("invalid int value: '<the key>'"), which may be a key typed in
    the wrong place.  Sub-command parsers made by ``add_subparsers`` are of this class too."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        from engine.redact import redact

        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {redact(message)}\n")


def require_terminal(what: str) -> None:
    """Refuse to start a full-screen app without a terminal (it would wait for ever).

    A browser session (textual-serve sets ``TEXTUAL_DRIVER`` to its web driver) has no tty
    and needs none.
    """
    import sys

    if os.environ.get("TEXTUAL_DRIVER"):
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError(f"{what} needs an interactive terminal, but standard input or output is not one")


def seed_arg(text: str) -> int:
    """``--seed N``: a whole number, 0 or more (as ``seed:N`` in a task reference)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: a whole number, 0 or more") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid seed {n}: a seed is 0 or more (as in seed:N)")
    return n


def add_db_option(parser) -> None:
    parser.add_argument("--db", metavar="PATH", default=None,
                        help="SQLite database (default: $CALBENCH_DB, else the platform's user data directory)")


def existing_db(arg: str | None) -> str:
    """The database path, which must exist (reading commands never create an empty database)."""
    path = db_path(arg)
    if path == ":memory:" or path.startswith("file:"):
        return path
    where = "--db" if arg else ("$CALBENCH_DB" if os.environ.get("CALBENCH_DB") else "the default location")
    if not os.path.exists(os.path.expanduser(path)):
        raise UserError(f"no save database at {path} ({where}); play or run games first, or pass --db PATH")
    if os.path.isfile(os.path.expanduser(path)) and os.path.getsize(os.path.expanduser(path)) == 0:
        # SQLite would take an empty file for an empty database and a reading command would
        # write its tables into it (issue 35); whatever it is, it holds no games
        raise UserError(f"{path} ({where}) is an empty file (0 bytes), not a save database; check the path")
    return path


def reading_db(arg: str | None) -> str | None:
    """The database a reading command lists (``games``, ``export --all``): one the user named
    (--db or $CALBENCH_DB) must exist (``typo.db`` is one line, exit 2); the default one may be
    missing yet (None: nothing saved so far)."""
    if arg or os.environ.get("CALBENCH_DB"):
        return existing_db(arg)
    path = db_path(None)
    return path if os.path.exists(path) else None


def check_db(path: str) -> None:
    """Open the database at ``path`` once and close it: a file that is not a usable save
    database (garbage, text, truncated, from a newer CalBench, a directory) becomes one
    line before a full-screen app starts."""
    async def nothing(store):
        return None

    with_store(path, nothing)


def with_store(path: str, coro_fn):
    """Open the store at ``path``, return ``await coro_fn(store)``, close it.

    Store problems (no such game, a database from a newer version, ...) become one-line
    :class:`UserError`s.
    """
    from saves.store import StoreError, on_store

    try:
        return on_store(path, coro_fn)
    except StoreError as exc:
        raise UserError(str(exc)) from None


def db_path(arg: str | None) -> str:
    """--db, else $CALBENCH_DB, else calbench.db in the platform's user data directory.

    A path given by the user must not be a directory, and its folder must exist: a typo
    in --db is reported, never answered by creating folders and an empty database.
    """
    given = arg or os.environ.get("CALBENCH_DB")
    if given:
        where = "--db" if arg else "$CALBENCH_DB"
        if given == ":memory:" or given.startswith("file:"):
            return given
        path = os.path.expanduser(given)
        if os.path.isdir(path):
            raise UserError(f"{given} ({where}) is a directory, not a save database file")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise UserError(f"{given} ({where}): the folder {parent} does not exist; create it first "
                            "or choose another path")
        return given
    from platformdirs import user_data_dir

    d = user_data_dir("calbench", appauthor=False)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "calbench.db")


def game_options(args) -> tuple[str, ...]:
    """What every command that plays games reads alike: ``--max-turns`` checked and
    ``--channel`` read (``engine.channels.parse_channels``: aliases, ``every``, the
    engine's channel order), as one-line errors.  Returns the channels.  (Not through the
    app's settings module: a headless command loads nothing of the terminal app.)"""
    if args.max_turns < 1:
        raise UserError("--max-turns must be at least 1")
    from engine.channels import ChannelError, parse_channels

    try:
        return parse_channels(args.channel)
    except ChannelError as exc:
        raise UserError(str(exc)) from None
