"""Seat 2 against LLM seats on the loopback endpoint (real HTTP to MockLLMServer).

The interface must stay live while an LLM seat thinks (keys keep working), show a slow
seat as slow and a failing one as failed, and still reach the end screen.
"""

from __future__ import annotations

import time

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from calbench_tui.widgets import seats as seats_widget
from calbench_tui.widgets.seats import SeatsBar
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.settings import LLMSettings

from .helpers import play_to_end, wait_for

SIZE = (80, 24)


async def test_seat2_against_llm_seats_on_the_loopback_endpoint(monkeypatch):
    monkeypatch.setattr(seats_widget, "SLOW_AFTER", 0.1)
    async with MockLLMServer(policy="cooperative", latency=0.6) as server:
        llm = LLMSettings(base_url=server.base_url, retries=0, timeout=10)
        app = make_app(settings=Settings(seat=2, seed=7, agents="llm:mock-model", deterministic=True), llm=llm)
        async with app.run_test(size=SIZE) as pilot:
            # Round 1's first speaker is an LLM seat (meeting M1's order starts with agent 4):
            # while it thinks, the interface answers keys at once and shows the seat as slow.
            await wait_for(pilot, lambda: app.game_screen is not None
                           and "thinking" in app.game_screen.query_one(SeatsBar).states,
                           what="an LLM seat thinking")
            cal = app.game_screen.calendar
            before = cal.cursor
            t0 = time.perf_counter()
            await pilot.press("down")
            assert cal.cursor == (before + 1) % len(cal.calendar)
            assert time.perf_counter() - t0 < 0.25  # answered while the seat's request was in flight
            await wait_for(pilot, lambda: "slow" in screen_text(app), what="the slow mark")
            server.latency = 0.0  # the rest of the game at full speed
            await play_to_end(pilot, app, timeout=90)
            assert isinstance(app.screen, EndScreen)
            result = app.result
        assert [a["type"] for a in result.trace["config"]["agents"]] == ["llm", "llm", "human", "llm", "llm"]
        assert result.metrics["meetings_scheduled"] >= 1
        seats_asked = {r.seat for r in server.records if getattr(r, "seat", None) is not None}
        assert {0, 1, 3, 4} <= seats_asked


@pytest.mark.skip(reason="quitting while a failing LLM seat's game plays on hangs the Pilot after other "
                         "app tests (passes alone); open in issue 23's 'tests that hold on a loaded machine'")
async def test_a_failing_llm_seat_is_shown_as_failed():
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("500", count=50, seat=4)  # agent 4 speaks first in round 1 and keeps failing
        llm = LLMSettings(base_url=server.base_url, retries=0, timeout=10)
        app = make_app(settings=Settings(seat=2, seed=7, agents="llm:mock-model", deterministic=True,
                                         max_turns_per_round=2), llm=llm)
        async with app.run_test(size=SIZE) as pilot:
            def agent_4_shown_failed() -> bool:  # the seat bar may not be composed yet: wait for it
                bars = app.game_screen.query(SeatsBar) if app.game_screen is not None else []
                return bool(bars) and bars.first().failed[4] is not None and "failed" in screen_text(app)

            await wait_for(pilot, agent_4_shown_failed, what="agent 4 shown failed")
            text = screen_text(app)
            assert "4:" in text and "failed" in text
            # ctrl+q's action, run directly: pilot.press would also wait for every pending message of
            # the screen to be handled, and the game keeps sending them while it plays on
            await app.run_action("quit_game")
            await wait_for(pilot, lambda: app.status == "stopped", what="the game stopped")
        assert app.status == "stopped"
