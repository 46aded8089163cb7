"""``calbench replay`` mistakes (one line, exit 2) and the saved-games list in the app."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time

import pytest
from textual.app import App

from calbench_tui.app import screen_text
from doubles import one_error_line
from calbench_tui.screens.games import SavedGamesScreen
from calbench_tui.screens.replay import ReplayScreen
from calbench_tui.screens.report import ReportScreen
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas
from saves.store import Store

SIZE = (150, 44)


def run_sync(coro):
    """Run a coroutine to the end on a fresh loop in another thread (safe inside or outside a loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def imap_trace(seed: int) -> dict:
    res = run_sync(run_game(generate_scenario(seed), make_personas("imap", 5), GameConfig(deterministic=True)))
    return json.loads(json.dumps(res.trace))




@pytest.fixture
def db(tmp_path):
    path = tmp_path / "games.db"

    async def fill():
        store = await Store.open(path)
        for seed in (3, 4):
            await store.import_trace(imap_trace(seed))
        await store.close()

    run_sync(fill())
    return path


def test_replay_mistakes_are_one_line_and_exit_2(cli, db, tmp_path):
    rc, _, err = cli("replay", "no-such-game", "--db", str(db))
    assert rc == 2 and "no saved game matches 'no-such-game'" in one_error_line(err)
    rc, _, err = cli("replay", "abc123", "--db", str(tmp_path / "missing.db"))
    assert rc == 2 and "no save database at" in one_error_line(err)
    assert not (tmp_path / "missing.db").exists()  # a replay never creates a database
    rc, _, err = cli("replay", str(tmp_path / "nope.json"))
    assert rc == 2 and "no such file" in one_error_line(err)
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    rc, _, err = cli("replay", str(bad))
    assert rc == 2 and "not a game trace" in one_error_line(err)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"game_id": "x", "events": []}))
    rc, _, err = cli("replay", str(empty))
    assert rc == 2 and "nothing to fold" in one_error_line(err)
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(imap_trace(5)))
    rc, _, err = cli("replay", str(trace), "--seat", "7")
    assert rc == 2 and "--seat 7: this game has seats 0-4" in one_error_line(err)
    rc, _, err = cli("replay", str(tmp_path))
    assert rc == 2 and "is a directory" in one_error_line(err)


class GamesHost(App):
    def __init__(self, store):
        super().__init__()
        self.store = store

    def on_mount(self) -> None:
        self.push_screen(SavedGamesScreen(self.store))


async def wait_until(pilot, pred, timeout=120.0):
    t0 = time.monotonic()  # the timeout bounds a broken test; counting pauses undercounts on a loaded machine
    while not pred():
        await asyncio.sleep(0.02)
        assert time.monotonic() - t0 < timeout, "timed out"


async def test_saved_games_list_opens_replay_and_report(db):
    store = await Store.open(db)
    try:
        games = await store.list_games()
        app = GamesHost(store)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, SavedGamesScreen)
            # wait for what is painted, not for the screen's flags (a loaded machine paints late)
            # the count and the rows, ids whole (tests/tui/test_games_table_layout.py pins the layout)
            await wait_until(pilot, lambda: "2 saved game(s)." in screen_text(app)
                             and all(g["game_id"][:8] in screen_text(app) for g in games))
            await pilot.press("down", "enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen) and "✓ verified" in screen_text(app))
            assert app.screen.model.trace["game_id"] == games[1]["game_id"]
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, SavedGamesScreen))
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen)
                             and "Report over 2 completed game(s), 10 seats" in screen_text(app)
                             and "Table 1" in screen_text(app))
    finally:
        await store.close()


async def test_replay_without_a_game_opens_the_saved_games_list(db):
    from calbench_tui.replay_app import ReplayApp

    app = ReplayApp(store_path=str(db))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, SavedGamesScreen) and app.screen.loaded)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, SavedGamesScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.return_code is not None)
        assert app.return_code == 0
