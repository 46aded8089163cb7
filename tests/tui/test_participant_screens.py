"""What a first-time participant reads, pinned by Pilot (issue 13): each test drives the real
app by keys, at 160×50 or 80×24, and reads the screen as text."""

from __future__ import annotations

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.settings import Settings

from .helpers import speak_turn, wait_for

WIDE = (160, 50)
SMALL = (80, 24)


def _settings(**kw) -> Settings:
    kw.setdefault("seat", 2)
    kw.setdefault("seed", 7)
    return Settings(deterministic=True, cursor_blink=False, **kw)


def _my_turn(app) -> bool:
    gs = app.game_screen
    return gs is not None and gs.pending is not None and app.screen is gs


async def test_messages_that_arrive_in_a_hidden_thread_wrap_at_the_pane_width():
    """Issue 13.1: open another thread, end the turn, come back: the feed is wrapped at its
    real width, not at 20 columns."""
    app = make_app(settings=_settings())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: _my_turn(app), what="the first turn")
        await pilot.press("r", "right_square_bracket")  # ask costs, then look at the DM0 thread
        assert app.game_screen.chat.active == "dm:0"
        await pilot.press("e")
        await wait_for(pilot, lambda: _my_turn(app) and app.game_screen.reported, what="the answers")
        await pilot.press("left_square_bracket")
        assert app.game_screen.chat.active == "feed"
        await pilot.pause()
        text = screen_text(app)
        # The bots' answers arrived while the feed was hidden: each reads on one wide line.
        assert "Agent 4 → you (DM): Agent 4's costs for meeting M1 — free:" in text, text
        log = app.game_screen.chat.log_for("feed")
        assert max(len(line.text.rstrip()) for line in log.lines) > 60
