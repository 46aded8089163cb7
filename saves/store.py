"""The save database: games, their events and per-seat results, in SQLite (DESIGN "Persistence").

One :class:`Store` wraps one aiosqlite connection in WAL mode.  Games are created when
they start (``create_game``), their events arrive through a sink as they happen
(``sink``), and ``finish_game`` stores the final state, the metrics and one
``seat_results`` row per seat.  JSON traces (ours and the paper authors') come in and
go out through ``import_trace`` / ``load_trace``.

This module holds the connection's life (open, set-up, the one write lock, close); each
other concern has its own module in this package:

* ``saves/schema.py``  — the numbered migrations of ``schema.sql`` and their backfills;
* ``saves/codec.py``   — JSON texts (redacted), event rows and the lean event blob;
* ``saves/checks.py``  — what is not a trace, refused in plain words;
* ``saves/traces.py``  — a trace into rows (``prepare_game``) and back (``trace_from_row``);
* ``saves/sinks.py``   — durable event sinks (``Store.sink``);
* ``saves/writes.py``  — games created, reopened, finished, imported, deleted;
* ``saves/queries.py`` — every read (no other package reads ``Store._db``);
* ``saves/claims.py``  — suite claims and live leases.

The "no peeking" policy (a game a person is still playing is not shown) is not here: it
is ``saves/guard.py``, over the traces this store returns.

WAL with ``synchronous=NORMAL`` keeps every committed transaction across a process kill
(only a power cut may lose the last ones); the database is never left corrupt.  API keys
are never written here: every JSON text goes through ``engine.redact.redact`` on its way in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Awaitable, Callable, TypeVar

import aiosqlite

from .claims import Claims
from .errors import GameNotFound, StoreError
from .queries import Queries
from .schema import migrate, refuse_foreign
from .sinks import Sinks, StoreSink
from .writes import GameWrites

T = TypeVar("T")

#: SQLite's busy timeout (ms) on every connection: see ``Store.open``.
BUSY_TIMEOUT_MS = 120_000

__all__ = ["Store", "StoreError", "GameNotFound", "on_store"]


class Store(Sinks, GameWrites, Claims, Queries):
    """The save database.  Open with ``await Store.open(path)`` (``":memory:"`` for tests)."""

    def __init__(self, db: aiosqlite.Connection, path: str) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._sinks: dict[str, list[StoreSink]] = {}

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    async def open(cls, path: str | os.PathLike) -> "Store":
        path = os.fspath(path)
        memory = path == ":memory:" or path.startswith("file::memory:")
        if not memory and not path.startswith("file:"):
            parent = Path(path).expanduser().resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder {parent} for the save database: "
                                 f"{exc.strerror or exc}") from None
            path = str(Path(path).expanduser())
        if not memory and not path.startswith("file:"):
            refuse_foreign(path)  # another program's database: refused before anything is written
        try:
            if not memory:
                # Probe synchronously first: when aiosqlite's own connect fails, its worker
                # thread outlives the event loop and prints a traceback at exit.
                sqlite3.connect(path, uri=path.startswith("file:")).close()
            db = await aiosqlite.connect(path, isolation_level=None, uri=path.startswith("file:"))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the save database {path}: {exc}") from None
        store = cls(db, path)
        try:
            # How long a write waits for another process's: long enough that a lab's many
            # participants starting at once on a loaded host queue up rather than fail
            # ("database is locked" ended sessions at 10 s, issue 34); a crashed writer's lock
            # is released by the system at once, so only a live writer makes anyone wait.
            await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Two processes creating one database at once can be told "database is locked"
            # at once, without the busy timeout (switching to WAL, or SQLite refusing a lock
            # upgrade that could deadlock): the set-up is idempotent, so try it again.
            for attempt in range(8):
                try:
                    await store._set_up(memory)
                    break
                except sqlite3.OperationalError as exc:
                    if attempt == 7 or "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    await asyncio.sleep(0.05 * 2 ** attempt)
        except sqlite3.DatabaseError as exc:
            await db.close()
            raise StoreError(f"{path} is not a usable CalBench database: {exc}") from None
        except BaseException:
            await db.close()
            raise
        return store

    async def _set_up(self, memory: bool) -> None:
        """WAL mode, the connection's pragmas and the migrations (each safe to repeat)."""
        db = self._db
        if not memory:
            async with db.execute("PRAGMA journal_mode = WAL") as cur:
                mode = (await cur.fetchone())[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: SQLite refused WAL mode (journal_mode is {mode})")
        await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("PRAGMA foreign_keys = ON")
        await self._migrate()

    async def close(self) -> None:
        """Flush every open sink, then close the connection (and see its thread end: a
        process may fork next, and a fork should find no other thread running)."""
        try:
            await self._close_sinks()
        finally:
            await self._db.close()
            thread = getattr(self._db, "_thread", None)  # aiosqlite's worker; it stops right after close
            if thread is not None and thread.is_alive():
                thread.join(timeout=2)

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- migrations -----------------------------------------------------------------------
    async def _migrate(self) -> None:
        await migrate(self._db, self._tx, self.path)

    # -- transactions ---------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _tx(self):
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await self._db.execute("ROLLBACK")
                raise
            else:
                await self._db.execute("COMMIT")


def on_store(path: str | Path, fn: Callable[["Store"], Awaitable[T]]) -> T:
    """From synchronous code (a command, a lab call): open the database at ``path``, return
    ``await fn(store)``, close it.  The store's own errors (no such game, a database from a
    newer version, not a database at all) are :class:`StoreError`, one line, raised as they are."""

    async def main() -> T:
        store = await Store.open(path)
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(main())
