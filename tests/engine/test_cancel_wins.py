"""A stopped game stays stopped when a seat's reply lands in the same loop turn as the stop.

With ``seat_timeout`` set the engine bounds each seat call.  On Python 3.11
``asyncio.wait_for`` returns the awaited reply when the reply and the cancel land
together, so the cancelled game played on (the LLM client had the same bug:
tests/llm/test_cancel_wins.py).  The engine's bounded calls must let the cancel win.
"""

from __future__ import annotations

import asyncio

from engine.game import GameConfig, run_game
from engine.seats import PassivePersona, Reply
from engine.suite import canonical_task


async def test_a_stop_that_lands_with_a_seat_reply_stops_the_game():
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    waiting = asyncio.Event()
    calls: list[int] = []

    class Held(PassivePersona):
        async def speak(self, obs):
            calls.append(len(calls))
            if len(calls) == 1:
                waiting.set()
                return await first
            await asyncio.sleep(3600)  # the game would play on from here
            return Reply()

        decide = volunteer = speak

    task = canonical_task(0)
    seats = [Held() for _ in range(task.num_agents)]
    game = asyncio.create_task(run_game(task, seats, GameConfig(deterministic=True, seat_timeout=600)))
    await asyncio.wait_for(waiting.wait(), 60)  # a bound on a broken test, not a speed check
    first.set_result(Reply())
    game.cancel()  # in the same loop turn
    await asyncio.wait([game], timeout=10)
    try:
        assert len(calls) == 1, "the stopped game asked the next seat"
        assert game.cancelled()
    finally:
        game.cancel()


async def test_a_seat_past_its_time_is_recorded_as_a_timeout():
    class Slow(PassivePersona):
        async def speak(self, obs):
            await asyncio.sleep(3600)
            return Reply()

    task = canonical_task(0)
    seats = [Slow()] + [PassivePersona() for _ in range(task.num_agents - 1)]
    res = await run_game(task, seats, GameConfig(deterministic=True, seat_timeout=0.01, max_turns_per_round=1))
    timeouts = [e for e in res.trace["events"] if e["type"] == "seat_timeout"]
    assert timeouts and all(e["data"]["agent_id"] == 0 and e["data"]["error"] == "seat_timeout" for e in timeouts)
