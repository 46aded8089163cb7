"""The oracle, solved once per task across runs: a small on-disk cache.

A suite plays every task under several protocols, seeds and variants, each run its own
``calbench run``; the oracle of a task (the full optimum and the scheduled-only optima
that metrics need) depends only on the task, so it is solved once and kept in a SQLite
file keyed by the content hash of what the oracle reads, the solver version
(``engine.oracle.ORACLE_VERSION``) and the meeting ids.  A cached answer is the very result the solver gave, so traces are
byte-identical with and without the cache.

Where: ``$CALBENCH_CACHE/oracle.sqlite`` if ``CALBENCH_CACHE`` is set (``off`` turns the
cache off), else the platform's user cache directory (``~/.cache/calbench`` on Linux).
Several processes may share the file (WAL, a busy timeout); a cache that cannot be
opened or written is silently skipped — it only saves time, it never decides a result.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from engine.model import Task

_LOADED = ("oracle_cache", "loaded")  # task.cache key: the oracle keys read from the file
_HASH = ("oracle_cache", "hash")

_conn: sqlite3.Connection | None = None
_conn_pid: int | None = None
_conn_path: str | None = None


def cache_dir() -> Path | None:
    """The folder of the cache file, or None when the cache is off."""
    env = os.environ.get("CALBENCH_CACHE")
    if env is not None:
        if env.strip().lower() in ("", "off", "0", "no", "none"):
            return None
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("calbench", appauthor=False))


#: what :func:`cache_dir` reads (``CALBENCH_CACHE``, else the user's cache folder) as last read
#: -> (the folder, the cache file's path): asked for every game, worked out once
_where: tuple[tuple, Path | None, str | None] | None = None


def _file() -> tuple[Path | None, str | None]:
    global _where
    env = (os.environ.get("CALBENCH_CACHE"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    if _where is None or _where[0] != env:
        folder = cache_dir()
        _where = (env, folder, None if folder is None else str(folder / "oracle.sqlite"))
    return _where[1], _where[2]


def _connection() -> sqlite3.Connection | None:
    """One connection per process (never one inherited through a fork)."""
    global _conn, _conn_pid, _conn_path
    folder, path = _file()
    if folder is None or path is None:
        return None
    if _conn is not None and _conn_pid == os.getpid() and _conn_path == path:
        return _conn
    try:
        folder.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
        con.execute("CREATE TABLE IF NOT EXISTS oracle (task_hash TEXT NOT NULL, version INTEGER NOT NULL, "
                    "meetings TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (task_hash, version, meetings))")
    except (sqlite3.Error, OSError):
        return None
    _conn, _conn_pid, _conn_path = con, os.getpid(), path
    return con


def task_hash(task: Task) -> str:
    """The content hash of what the oracle reads: calendars, meetings, cost values, slots.

    The task id, labels and the row's other fields do not enter, so the same scenario
    under another name (a copy in another suite file) reuses the answer.
    """
    h = task.cache.get(_HASH)
    if h is None:
        content = repr((task.num_slots, task.cost_values, task.calendars, task.meetings))
        h = hashlib.sha256(content.encode()).hexdigest()
        task.cache[_HASH] = h
    return h


def _ids_text(ids: Any) -> str:
    return "full" if ids is None else ",".join(str(i) for i in ids)


def _ids_from_text(text: str) -> tuple[int, ...] | None:
    return None if text == "full" else tuple(int(x) for x in text.split(",") if x)


#: this process's answers, by (cache file, oracle version, task hash): what it read from the
#: file or wrote to it (a suite plays the same task again under another id; answers never change)
_seen: dict[tuple[str | None, int, str], dict[tuple, Any]] = {}


def load(task: Task) -> int:
    """Put every cached oracle result of ``task`` into ``task.cache``; returns how many."""
    from engine.oracle import ORACLE_VERSION, result_from_json

    con = _connection()
    if con is None:
        return 0
    h = task_hash(task)
    memo = (_conn_path, ORACLE_VERSION, h)
    known = _seen.get(memo)
    if known is None:
        try:
            rows = con.execute("SELECT meetings, result FROM oracle WHERE task_hash = ? AND version = ?",
                               (h, ORACLE_VERSION)).fetchall()
        except sqlite3.Error:
            return 0
        known = {("oracle", _ids_from_text(meetings)): result_from_json(orjson.loads(result))
                 for meetings, result in rows}
        if known:
            _seen[memo] = known
    loaded = task.cache.setdefault(_LOADED, set())
    for key, result in known.items():
        task.cache.setdefault(key, result)
        loaded.add(key)
    return len(known)


def save(task: Task) -> int:
    """Write the oracle results ``task.cache`` holds that the file does not; returns how many."""
    from engine.oracle import ORACLE_VERSION, OracleResult, result_to_json

    loaded = task.cache.setdefault(_LOADED, set())
    new = [(k, v) for k, v in list(task.cache.items())
           if isinstance(k, tuple) and len(k) == 2 and k[0] == "oracle" and k not in loaded
           and isinstance(v, OracleResult)]
    if not new:
        return 0
    con = _connection()
    if con is None:
        return 0
    h = task_hash(task)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.executemany("INSERT OR IGNORE INTO oracle (task_hash, version, meetings, result) VALUES (?, ?, ?, ?)",
                        [(h, ORACLE_VERSION, _ids_text(k[1]), orjson.dumps(result_to_json(v)).decode())
                         for k, v in new])
        con.execute("COMMIT")
    except sqlite3.Error:
        if con.in_transaction:
            con.rollback()
        return 0
    loaded.update(k for k, _ in new)
    _seen.setdefault((_conn_path, ORACLE_VERSION, h), {}).update(new)
    return len(new)
