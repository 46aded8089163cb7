"""The save database's schema: numbered forward migrations read from ``schema.sql``, the
backfills some of them need, and the refusal of another program's SQLite file.

``Store.open`` applies the missing migrations in order (:func:`migrate`), each in its own
write transaction, so two processes opening one new database at once both end up with the
same schema."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any, Awaitable, Callable

import aiosqlite

from engine.trace import cost_mode_of_row, headline

from .codec import _loads, _now
from .errors import StoreError
from .traces import _INSERT_SEAT, _seat_rows

_MIGRATION_HEADER = re.compile(r"^--\s*migration\s+(\d+)\s*:\s*(.*)$", re.MULTILINE)


def _split_statements(sql: str) -> list[str]:
    """Split a script into statements (comments kept inside; semicolons in comments are fine)."""
    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        if not buf and line.lstrip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def load_migrations(text: str | None = None) -> list[tuple[int, str, list[str]]]:
    """``[(version, title, statements), ...]`` from schema.sql, checked to be 1, 2, 3, ..."""
    if text is None:
        # beside this module (the package is installed as files, never zipped): not through
        # importlib.resources, whose import alone is ~20 ms of every process that opens a store
        text = Path(__file__).with_name("schema.sql").read_text(encoding="utf-8")
    heads = list(_MIGRATION_HEADER.finditer(text))
    steps = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        steps.append((int(m.group(1)), m.group(2).strip(), _split_statements(text[m.end():end])))
    versions = [v for v, _, _ in steps]
    if versions != list(range(1, len(steps) + 1)):
        raise RuntimeError(f"schema.sql migrations must be numbered 1, 2, 3, ... (found {versions})")
    return steps


MIGRATIONS = load_migrations()
SCHEMA_VERSION = MIGRATIONS[-1][0]


# -- backfills run after a migration step, inside its transaction -----------------------------

async def _backfill_v2(db: aiosqlite.Connection) -> None:
    """Fill the columns and seat rows migration 2 added, from what version 1 stored."""
    async with db.execute("SELECT game_id, task_row, config, agents, final_state, metrics FROM games") as cur:
        games = await cur.fetchall()
    for gid, task_row, config, agents, final_state, metrics in games:
        row = _loads(task_row)
        trace = {"config": _loads(config) or {}, "final_state": _loads(final_state), "metrics": _loads(metrics)}
        coord, excess = headline(trace)
        await db.execute("UPDATE games SET cost_mode = ?, coordination = ?, excess_cost = ?, "
                         "source = ? WHERE game_id = ?",
                         (cost_mode_of_row(row), coord, excess, "calbench" if row is not None else "authors", gid))
        rows = _seat_rows(gid, trace, agents or "")
        if rows:
            await db.executemany(_INSERT_SEAT, rows)


BACKFILLS: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {2: _backfill_v2}


async def schema_version(db: aiosqlite.Connection) -> int:
    async with db.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version") as cur:
        return (await cur.fetchone())[0]


async def migrate(db: aiosqlite.Connection, tx: Callable[[], Any], path: str) -> None:
    """Apply the migrations ``db`` lacks, each inside ``tx()`` (the store's write transaction)."""
    await db.execute("CREATE TABLE IF NOT EXISTS schema_version "
                     "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    current = await schema_version(db)
    if current > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer CalBench (schema version {current}; this "
                         f"one knows up to {SCHEMA_VERSION}); upgrade calbench to open it")
    for version, title, statements in MIGRATIONS:
        if version <= current:
            continue
        async with tx():
            # Another process may have migrated while we waited for the write lock.
            if await schema_version(db) >= version:
                continue
            try:
                for stmt in statements:
                    await db.execute(stmt)
                if version in BACKFILLS:
                    await BACKFILLS[version](db)
            except sqlite3.Error as exc:
                raise StoreError(f"{path}: migration {version} ({title}) failed: {exc}") from None
            await db.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                             (version, _now()))


# -- another program's database ---------------------------------------------------------------

def _foreign_tables(path: str) -> list[str] | None:
    """The tables of the SQLite file at ``path`` when it is not a CalBench database, read
    through a read-only connection (nothing is written: no journal mode switched, no table
    made); None when it is ours, new or empty, or not SQLite at all (left to the caller)."""
    from urllib.parse import quote

    try:
        if os.path.getsize(path) == 0:
            return None
    except OSError:
        return None
    uri = "file:" + quote(os.path.abspath(path))
    for opts in ("?mode=ro", "?mode=ro&immutable=1"):  # immutable: a WAL file we may not open shared
        try:
            con = sqlite3.connect(uri + opts, uri=True)
        except sqlite3.Error:
            continue
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            cols = [r[1] for r in con.execute("PRAGMA table_info(schema_version)")]
        except sqlite3.OperationalError:
            continue
        except sqlite3.DatabaseError:
            return None  # not SQLite: Store.open says so in its own words
        finally:
            con.close()
        if not tables or cols == ["version", "applied_at"]:
            return None
        return tables
    return None


def refuse_foreign(path: str) -> None:
    tables = _foreign_tables(path)
    if tables is not None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise StoreError(f"{path} is an SQLite database of another program (tables: {shown}), not a CalBench "
                         "save database; it was left as it was. Give --db a CalBench database or a new file")
