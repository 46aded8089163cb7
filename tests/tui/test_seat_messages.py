"""Screens post messages up, the app hands the seat model down (issue 23 step 4).

The game screen renders the app's :class:`personas.seat_model.SeatModel`; the saved-games
list asks the app to continue a game with a message (``SavedGamesScreen.Resume``), as the
decision screen (``Answered``), the game screen (``OpenBatch``) and the end screen
(``PlayAgain``) do — those are played through by tests/tui/test_play.py and
test_participant_screens.py.
"""

from __future__ import annotations

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.game import GameScreen
from calbench_tui.screens.setup import SetupScreen
from calbench_tui.settings import Settings
from saves.store import Store

from .helpers import play_to_end, wait_for

SIZE = (100, 30)


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "play.db")
    yield s
    await s.close()


async def test_the_game_screen_renders_the_apps_seat_model(store):
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None
                       and "YOUR TURN" in screen_text(app), what="the first turn, painted")
        gs = app.game_screen
        assert gs.model is app.seat_model
        # the meeting card shows the model's meeting and penalty
        card = " ".join(str(gs.query_one("#meeting").render()).split())
        assert f"M{app.seat_model.meeting_id}" in card
        await pilot.press("ctrl+q")


async def test_c_in_the_saved_games_list_continues_a_stopped_game(store):
    app = make_app(settings=Settings(seat=2, seed=11, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await play_to_end(pilot, app, stop_after_rounds=1)
        await wait_for(pilot, lambda: app.game_screen.pending is not None, what="a turn in round 2")
        game_id = app.game_id
        await pilot.press("ctrl+q")
    assert (await store.load_trace(game_id))["saved"]["status"] == "stopped"
    again = make_app(settings=Settings(seat=None, deterministic=True), store=store)
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, SetupScreen), what="the setup screen")
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: type(again.screen).__name__ == "SavedGamesScreen" and again.screen.loaded,
                       what="the saved games list")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(again.screen, GameScreen) and "Round 2/5" in screen_text(again),
                       what="the resumed game at round 2, painted")
        assert again.game_id == game_id and again.game_screen.model is again.seat_model
        await play_to_end(pilot, again)
    assert (await store.load_trace(game_id))["saved"]["status"] == "completed"
