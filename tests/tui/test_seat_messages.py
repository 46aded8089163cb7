"""Screens post messages up, the app hands the seat model down (issue 23 step 4).

The game screen renders the app's :class:`personas.seat_model.SeatModel`.  The messages
the screens post up — ``DecisionScreen.Answered`` (every game), ``GameScreen.OpenBatch``
(``b``), ``EndScreen.PlayAgain`` (``n``), ``SavedGamesScreen.Resume`` (``c``) — are pressed
through by tests/tui/test_play.py and test_participant_screens.py.
"""

from __future__ import annotations

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.settings import Settings
from saves.store import Store

from .helpers import wait_for

SIZE = (100, 30)


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "play.db")
    yield s
    await s.close()


async def test_the_game_screen_renders_the_apps_seat_model(store):
    """Seat 2 opens M1 (seed 7): it asks for costs; once both answers are folded into the model,
    the screen says the model's cheapest common slot and puts the cursor on it."""
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None
                       and "YOUR TURN" in screen_text(app), what="the first turn, painted")
        gs = app.game_screen
        assert gs.model is app.seat_model and app.seat_model.initiator
        card = " ".join(str(gs.query_one("#meeting").render()).split())
        assert f"M{app.seat_model.meeting_id}" in card
        await pilot.press("r", "e")

        def feed() -> str:
            return " ".join(" ".join(line.text for line in gs.chat.log_for("feed").lines).split())

        await wait_for(pilot, lambda: "Cheapest common slot" in feed(), what="the hint from the costs")
        total, slot = app.seat_model.best_common_slot()
        assert f"slot {slot} (total {total})" in feed() and gs.calendar.cursor == slot
        assert set(app.seat_model.reported) == set(app.seat_model.others_in_meeting())
        await pilot.press("ctrl+q")


def test_the_decision_screens_draft_is_the_valid_batch_on_screen():
    """What a study submits when the decision runs out (StudyApp.draft asks the screen)."""
    import asyncio

    from calbench_tui.screens.decision import DecisionScreen
    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.human import HumanRequest
    from personas.scripted.imap import IMAPPersona

    task = generate_scenario(7)
    got = {}

    class Catch(IMAPPersona):
        async def decide(self, obs):
            got.setdefault("obs", obs)
            return await super().decide(obs)

    seats = [IMAPPersona() for _ in range(task.num_agents)]
    seats[2] = Catch()
    asyncio.run(run_game(task, seats, GameConfig(deterministic=True)))
    obs = got["obs"]
    free = next(s for s, it in enumerate(obs.view.calendar) if it is None)
    placed = DecisionScreen(HumanRequest("decide", obs, 2), suggested=free)
    assert placed.draft() == tuple(placed.plan.actions()) and placed.draft()
    assert DecisionScreen(HumanRequest("decide", obs, 2)).draft() is None  # no slot picked: not a valid batch


async def test_the_decision_cursor_starts_on_the_prefilled_slot_so_enter_keeps_it():
    """By hand: the decision screen pre-filled the slot talk agreed on (slot 10) with the cursor
    on slot 0, so enter ("Meet here", the natural confirm) moved the meeting to slot 0 and the
    agreed meeting failed.  The cursor now starts on the pre-filled slot."""
    from textual.app import App

    from calbench_tui.screens.decision import DecisionScreen
    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.human import HumanRequest
    from personas.scripted.imap import IMAPPersona

    task = generate_scenario(7)
    got = {}

    class Catch(IMAPPersona):
        async def decide(self, obs):
            got.setdefault("obs", obs)
            return await super().decide(obs)

    seats = [IMAPPersona() for _ in range(task.num_agents)]
    seats[2] = Catch()
    await run_game(task, seats, GameConfig(deterministic=True))
    obs = got["obs"]
    free = [s for s, it in enumerate(obs.view.calendar) if it is None and s != 0]
    assert free, "the seat has a free slot other than 0"
    screen = DecisionScreen(HumanRequest("decide", obs, 2), suggested=free[-1])

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async with Host().run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: screen.is_mounted and screen.builder.is_mounted, what="the decision screen")
        assert screen.builder.cursor == free[-1]
        await pilot.press("enter")
        await pilot.pause()
        assert screen.plan.target == free[-1]
