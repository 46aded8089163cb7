"""Seat 2 against LLM seats on the loopback endpoint (real HTTP to MockLLMServer).

The interface must stay live while an LLM seat thinks (keys keep working), show a slow
seat as slow and a failing one as failed, and still reach the end screen.
"""

from __future__ import annotations

import asyncio

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from calbench_tui.widgets import seats as seats_widget
from calbench_tui.widgets.seats import SeatsBar
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.settings import LLMSettings

from .helpers import PATIENCE, play_to_end, wait_for, wait_painted

SIZE = (80, 24)


def hold_replies(server: MockLLMServer) -> asyncio.Event:
    """Every reply of ``server`` waits until the returned event is set (the request stays in flight)."""
    chat, gate = server._chat, asyncio.Event()
    gate.asked = 0

    async def held(req, messages):
        gate.asked += 1
        await gate.wait()
        return await chat(req, messages)

    server._chat = held
    return gate


async def test_seat2_against_llm_seats_on_the_loopback_endpoint(monkeypatch):
    monkeypatch.setattr(seats_widget, "SLOW_AFTER", 0.1)
    async with MockLLMServer(policy="cooperative") as server:
        gate = hold_replies(server)
        llm = LLMSettings(base_url=server.base_url, retries=0, timeout=60)
        app = make_app(settings=Settings(seat=2, seed=7, agents="llm:mock-model", deterministic=True), llm=llm)
        async with app.run_test(size=SIZE) as pilot:
            # Round 1's first speaker is an LLM seat (meeting M1's order starts with agent 4): its
            # request is held at the endpoint, and meanwhile the interface answers keys and shows the seat as slow.
            await wait_painted(pilot, "slow", what="an LLM seat shown slow while its request is held")
            assert gate.asked == 1 and app.game_screen.query_one(SeatsBar).states[4] == "thinking"
            cal = app.game_screen.calendar
            before = cal.cursor
            await pilot.press("down")
            assert cal.cursor == (before + 1) % len(cal.calendar)  # answered while the request is still held
            gate.set()  # the rest of the game at full speed
            await play_to_end(pilot, app, timeout=4 * PATIENCE)
            assert isinstance(app.screen, EndScreen)
            result = app.result
        assert [a["type"] for a in result.trace["config"]["agents"]] == ["llm", "llm", "human", "llm", "llm"]
        assert result.metrics["meetings_scheduled"] >= 1
        seats_asked = {r.seat for r in server.records if getattr(r, "seat", None) is not None}
        assert {0, 1, 3, 4} <= seats_asked


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
