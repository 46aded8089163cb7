"""What the executor tests share: run ``calbench run --json`` in-process, read a database back."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from calbench_cli.cli import main
from saves.store import Store


def run(capsys, *args) -> dict:
    """``calbench run ARGS --json`` in this process; its JSON document (exit status 0 asserted)."""
    capsys.readouterr()
    rc = main(["run", *args, "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def traces(db: str) -> dict[str, dict]:
    """Every saved game of ``db`` as its trace, by game id."""
    async def go():
        async with await Store.open(db) as store:
            return {g["game_id"]: await store.load_trace(g["game_id"]) for g in await store.list_games()}
    return asyncio.run(go())


def game_rows(db: str) -> list[tuple]:
    """``(game_id, task_id, status)`` of every game of ``db``, by game id."""
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT game_id, task_id, status FROM games ORDER BY game_id").fetchall()
    finally:
        con.close()
