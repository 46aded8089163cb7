"""Forward migrations: an old database opens, is upgraded in place and keeps its games."""

from __future__ import annotations

import json
import sqlite3

import pytest

from saves.schema import MIGRATIONS, SCHEMA_VERSION, load_migrations
from saves.store import Store, StoreError

# What a version-1 database looked like (frozen here on purpose: never derived from schema.sql).
V1_SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE games (
    game_id TEXT PRIMARY KEY, task_id TEXT, task_row TEXT, config TEXT NOT NULL DEFAULT '{}',
    agents TEXT NOT NULL DEFAULT '', settings_key TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'stopped', 'failed')),
    started_at TEXT, ended_at TEXT, final_state TEXT, metrics TEXT);
CREATE INDEX games_by_settings ON games (settings_key, status);
CREATE TABLE events (
    game_id TEXT NOT NULL REFERENCES games (game_id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    type TEXT NOT NULL, timestamp TEXT, round INTEGER, agent_id INTEGER, data TEXT NOT NULL,
    PRIMARY KEY (game_id, seq));
INSERT INTO schema_version VALUES (1, '2026-01-01T00:00:00+00:00');
"""

TASK_ROW = {"task_id": "old-task", "seed": 5, "params": {"cost_values": [1, 10, 100]},
            "calendars": [[None, {"errand_id": 1, "cost": 10}], [None, None]],
            "meetings": [{"id": 1, "participants": [0, 1]}]}
METRICS = {"coordination_rate": 1.0, "excess": 0.5, "per_seat": [
    {"agent_id": 0, "meetings_assigned": 1, "meetings_scheduled": 1, "cost": 1, "excess": 1, "signed_excess": 1,
     "fairness": 0.5, "messages_sent": 2, "vps": 0.0},
    {"agent_id": 1, "meetings_assigned": 1, "meetings_scheduled": 1, "cost": 0, "excess": 0, "signed_excess": -1,
     "fairness": 0.5, "messages_sent": 1, "vps": 0.25}]}


def make_v1(path):
    con = sqlite3.connect(path)
    con.executescript(V1_SCHEMA)
    con.execute("INSERT INTO games VALUES (?, ?, ?, ?, ?, ?, 'completed', ?, ?, ?, ?)",
                ("old-game", "old-task", json.dumps(TASK_ROW), json.dumps({"seed": 5}), "imap,dsm-welfare", "key-1",
                 "2026-01-01T00:00:00", "2026-01-01T00:01:00", json.dumps({"calendars": []}), json.dumps(METRICS)))
    con.execute("INSERT INTO games (game_id, task_id, status) VALUES ('half', 'old-task', 'running')")
    con.executemany("INSERT INTO events VALUES ('old-game', ?, ?, 't', 0, NULL, ?)",
                    [(i, "turn_end", json.dumps({"round": 0, "turn": i})) for i in range(3)])
    con.commit()
    con.close()


def columns(con, table):
    return [(r[1], r[2]) for r in con.execute(f"PRAGMA table_info({table})")]


async def test_version_1_database_is_upgraded_and_keeps_its_games(tmp_path):
    path = tmp_path / "old.db"
    make_v1(path)
    async with await Store.open(path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        games = {g["game_id"]: g for g in await store.list_games()}
        old = games["old-game"]
        assert old["source"] == "calbench" and old["cost_mode"] == "varied"
        assert old["coordination"] == 1.0 and old["excess_cost"] == 0.5
        trace = await store.load_trace("old-game")
        assert [e["data"]["turn"] for e in trace["events"]] == [0, 1, 2]
        assert trace["task"] == TASK_ROW and trace["metrics"] == METRICS
        rows = await store.game_results()  # seat rows backfilled from the stored metrics
        assert [(r["agent_id"], r["persona"], r["excess"], r["vps"]) for r in rows] == [
            (0, "imap", 1, 0.0), (1, "dsm-welfare", 0, 0.25)]
        assert await store.completed_task_ids("key-1") == {"old-task"}
        assert await store.running_game_ids() == ["half"]
        # and the upgraded database takes new games
        assert await store.import_trace({"game_id": "new", "events": [], "config": {}}) is True
    con = sqlite3.connect(path)
    assert [r[0] for r in con.execute("SELECT version FROM schema_version ORDER BY version")] == list(
        range(1, SCHEMA_VERSION + 1))
    con.close()


async def test_upgraded_schema_equals_a_fresh_one(tmp_path):
    make_v1(tmp_path / "old.db")
    async with await Store.open(tmp_path / "old.db"):
        pass
    async with await Store.open(tmp_path / "new.db"):
        pass
    old, new = sqlite3.connect(tmp_path / "old.db"), sqlite3.connect(tmp_path / "new.db")
    for table in ("games", "events", "seat_results", "schema_version"):
        assert columns(old, table) == columns(new, table), table
    idx = "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    assert old.execute(idx).fetchall() == new.execute(idx).fetchall()
    old.close()
    new.close()


async def test_a_failed_migration_changes_nothing(tmp_path):
    path = tmp_path / "clash.db"
    make_v1(path)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE seat_results (something_else TEXT)")  # migration 2 will clash with this
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="migration 2"):
        await Store.open(path)
    con = sqlite3.connect(path)
    assert con.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == 1
    assert "source" not in [c for c, _ in columns(con, "games")]  # the ALTERs before the clash were rolled back
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


async def test_a_newer_database_is_refused(tmp_path):
    path = tmp_path / "future.db"
    async with await Store.open(path):
        pass
    con = sqlite3.connect(path)
    con.execute("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer CalBench"):
        await Store.open(path)


def test_migrations_are_numbered_in_order_and_parsed():
    assert [v for v, _, _ in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    assert all(stmts for _, _, stmts in MIGRATIONS)
    steps = load_migrations("-- migration 1: a\nCREATE TABLE a (x); -- ok; really\n"
                            "-- migration 2: b\nCREATE TABLE b (y TEXT DEFAULT ';');\n")
    assert [(v, t, len(s)) for v, t, s in steps] == [(1, "a", 1), (2, "b", 1)]
    with pytest.raises(RuntimeError, match="numbered"):
        load_migrations("-- migration 1: a\nSELECT 1;\n-- migration 3: c\nSELECT 1;\n")


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "shared.db"
    code = ("import asyncio, sys\nfrom saves.store import Store\n"
            "async def main():\n    s = await Store.open(sys.argv[1])\n    print(await s.schema_version())\n"
            "    await s.close()\nasyncio.run(main())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == [str(SCHEMA_VERSION)] * 4
