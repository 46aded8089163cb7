"""SVG snapshots of the setup, game, batch builder and end screens at 80×24.

Deterministic: a fixed seed, the logical clock, TEXTUAL_ANIMATIONS=none (tests/conftest.py)
and no cursor blink.  Update after an intended change with
``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the report.
"""

from __future__ import annotations

from calbench_tui.app import make_app
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.settings import Settings

from .helpers import play_to_end, speak_turn, wait_for, wait_painted

SIZE = (80, 24)


def _settings(**kw) -> Settings:
    return Settings(seat=2, seed=7, deterministic=True, cursor_blink=False, **kw)


def test_setup_screen(snap_compare):
    app = make_app(settings=_settings(setup=True))
    assert snap_compare(app, terminal_size=SIZE)


def test_game_screen_after_the_first_answers(snap_compare):
    """Seat 2 opens meeting M1 with a cost request; the bots' costs are in, the cheapest slot is marked."""
    app = make_app(settings=_settings())

    async def run_before(pilot):
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None)
        await speak_turn(pilot, app)  # r, e
        await wait_for(pilot, lambda: app.game_screen.pending is not None and app.game_screen.model.reported)
        await pilot.press("p")
        # the queued proposal painted, and the messages pane scrolled down to its last line (at 10
        # frames a second the scroll can land a frame after the proposal)
        await wait_painted(pilot, "Let's meet at slot 11", "cursor is on it).")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_decision_screen(snap_compare):
    app = make_app(settings=_settings())

    async def run_before(pilot):
        while not isinstance(app.screen, DecisionScreen):
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           or (app.game_screen is not None and app.game_screen.pending is not None))
            if not isinstance(app.screen, DecisionScreen):
                await speak_turn(pilot, app)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_end_screen(snap_compare):
    app = make_app(settings=_settings())

    async def run_before(pilot):
        await play_to_end(pilot, app)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
