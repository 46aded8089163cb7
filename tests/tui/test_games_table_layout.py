"""The saved-games table is laid out the same whatever the timing of its paint (issue 23, step 6).

Textual's DataTable sized auto-width columns in its idle handler and cached the lines it
rendered under a counter that this sizing does not bump: a frame painted between the rows
being added and the table's idle pass cut every column to its label ("game" → a 4-character
id, "status" → "stoppe") until a key moved the cursor.  On a loaded machine that frame came
often enough for a test waiting for the 8-character id to wait out its patience.  Here the
timing is not left to chance: the store's answer is held back until the empty table is painted,
and a frame is painted on purpose just before the table's idle pass.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from textual.app import App
from textual.widgets import DataTable

from calbench_tui.app import screen_text
from calbench_tui.screens.games import SavedGamesScreen
COLUMNS = ("game", "status", "coord.", "excess", "task", "agents", "started", "costs", "source")
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas
from saves.store import Store

from .helpers import wait_painted

SIZE = (150, 24)


@pytest.fixture
async def store(tmp_path):
    store = await Store.open(tmp_path / "games.db")
    for seed in (3, 4):
        res = await run_game(generate_scenario(seed), make_personas("imap", 5), GameConfig(deterministic=True))
        await store.import_trace(json.loads(json.dumps(res.trace)))
    try:
        yield store
    finally:
        await store.close()


class Host(App):
    def __init__(self, store) -> None:
        super().__init__()
        self.store = store

    def on_mount(self) -> None:
        self.push_screen(SavedGamesScreen(self.store))


class HeldBackStore:
    """The real store, whose list of games is held back until the test lets it go."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.go = asyncio.Event()

    async def list_games(self, **kw):
        await self.go.wait()
        return await self.store.list_games(**kw)

    def __getattr__(self, name):
        return getattr(self.store, name)


def paint_before_the_tables_idle_pass(monkeypatch) -> list[str]:
    """From now on, a frame is painted (``screen_text``) just before a DataTable runs its idle
    pass over newly added rows — the frame a loaded machine painted by chance."""
    frames: list[str] = []
    original = DataTable._on_idle

    async def _on_idle(self, event):
        if self._new_rows:
            frames.append(screen_text(self.app))
        await original(self, event)

    monkeypatch.setattr(DataTable, "_on_idle", _on_idle)
    return frames


def table_lines(text: str) -> list[str]:
    """The painted table: its header line and the rows under it (up to the note)."""
    lines = [line.rstrip() for line in text.splitlines()]
    top = next(i for i, line in enumerate(lines) if line.split()[:len(COLUMNS)] == list(COLUMNS))
    end = next(i for i, line in enumerate(lines) if "saved game(s)." in line)
    return [line for line in lines[top:end] if line.strip()]


async def painted_table(store) -> list[str]:
    app = Host(store)
    async with app.run_test(size=SIZE) as pilot:
        if isinstance(store, HeldBackStore):
            await wait_painted(pilot, *COLUMNS, what="the empty table")  # its first paint, no rows yet
            store.go.set()
        return table_lines(await wait_painted(pilot, "2 saved game(s).", what="the count under the rows"))


async def test_the_saved_games_table_is_laid_out_the_same_whatever_the_timing(store, monkeypatch):
    ids = [g["game_id"][:8] for g in await store.list_games()]
    soon = await painted_table(store)  # the rows as soon as the store answers
    late = await painted_table(HeldBackStore(store))  # the rows after the empty table was painted
    frames = paint_before_the_tables_idle_pass(monkeypatch)
    raced = await painted_table(HeldBackStore(store))  # ... and a frame painted before the table's idle pass
    assert frames, "no frame was painted between the rows and the table's idle pass"
    assert table_lines(frames[0]) == raced  # the frame painted early is the settled layout
    assert soon == late == raced, "\n".join(["soon:", *soon, "late:", *late, "raced:", *raced])
    header, *rows = raced
    assert len(rows) == 2 and all(any(row.split()[:2] == [i, "completed"] for row in rows) for i in ids)
    # every column as wide as its widest cell: the header words are spaced by the row's cells
    assert header.index("status") == rows[0].index("completed") == 1 + 8 + 2


async def test_a_reload_lays_the_table_out_for_its_new_rows(store, monkeypatch):
    """f5 after a game with a wider agents label was saved: its row is painted whole, in the
    frame painted before the table's idle pass too."""
    frames = paint_before_the_tables_idle_pass(monkeypatch)
    app = Host(store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_painted(pilot, "2 saved game(s).")
        res = await run_game(generate_scenario(5), make_personas("imap,dsm-private-requeue,imap,sdmap,imap", 5),
                             GameConfig(deterministic=True))
        await store.import_trace(json.loads(json.dumps(res.trace)))
        await pilot.press("f5")
        text = await wait_painted(pilot, "3 saved game(s).")
    row = next(line for line in table_lines(text) if line.split()[0] == res.trace["game_id"][:8])
    assert "imap,dsm-private-requeue,imap,sdmap,imap" in row
    assert table_lines(frames[-1]) == table_lines(text)
