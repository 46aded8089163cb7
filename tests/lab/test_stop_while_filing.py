"""A stop (ctrl+c) that lands while a game is being filed in the store.

``calbench serve`` starts the game the moment the last seat joins; a ctrl+c in the few
milliseconds the session spends filing it (the lease, the ``games`` row) used to be reported
as "saved as stopped" with nothing saved, and a row whose insert had committed stayed
``running`` for ever.  Now the row, if it made it, is stopped, and the table says whether
the game was saved.
"""

from __future__ import annotations

import asyncio

from engine.game import GameConfig
from engine.taskref import resolve_tasks
from lab.table import Table
from saves.store import Store


class _GatedStore(Store):
    """A real store whose ``create_game`` holds (before or after its insert) until cancelled."""

    insert_first = False
    holding: asyncio.Event

    async def create_game(self, game_id, **kw):
        if self.insert_first:
            await super().create_game(game_id, **kw)
        self.holding.set()
        await asyncio.sleep(3600)


async def _stop_while_filing(tmp_path, *, insert_first: bool):
    store = await Store.open(tmp_path / "t.db")
    store.__class__ = _GatedStore
    store.insert_first = insert_first
    store.holding = asyncio.Event()
    task = resolve_tasks("canonical:3")[0]
    table = Table(task, ["human", "imap", "imap", "imap", "imap"], GameConfig(deterministic=True), game_id="t-1",
                  store=store, lobby_wait=0.0, lobby_fill="imap")
    run = asyncio.create_task(table.run())
    try:
        await asyncio.wait_for(store.holding.wait(), 60)  # a bound on a broken test, not a speed check
        assert table.status == "playing"
        run.cancel()
        await asyncio.wait([run], timeout=60)
        assert run.cancelled()
        return table, await store.game_status("t-1")
    finally:
        run.cancel()
        await store.close()


async def test_a_stop_before_the_game_is_filed_says_nothing_was_saved(tmp_path):
    table, status = await _stop_while_filing(tmp_path, insert_first=False)
    assert status is None
    assert table.status == "cancelled"  # serve: "Stopped before the game started: nothing was ... saved"


async def test_a_stop_after_the_row_is_written_leaves_the_game_stopped_not_running(tmp_path):
    table, status = await _stop_while_filing(tmp_path, insert_first=True)
    assert status == "stopped"
    assert table.status == "stopped"  # serve: "Game ... is saved as stopped."
