"""A stopped study game stays stopped when the participant's answer lands with the stop.

A study seat bounds each talk turn and decision by the design's seconds.  With
``asyncio.wait_for`` on Python 3.11, an answer and a cancel landing in the same loop turn
made the seat return the answer (and record its timing) as if nothing had happened.
"""

from __future__ import annotations

import asyncio

from engine.seats import Reply
from lab.study.seat import StudySeat


async def test_a_stop_that_lands_with_the_answer_is_not_lost():
    loop = asyncio.get_running_loop()
    answer = loop.create_future()
    timings: list[str] = []

    class Person:
        async def speak(self, obs):
            return await answer

    async def on_timing(*, phase, round_, turn, seconds, timed_out):
        timings.append(phase)

    seat = StudySeat(Person(), model="human", talk_seconds=600, decision_seconds=600, on_timing=on_timing)
    task = asyncio.create_task(seat.speak(object()))
    for _ in range(5):
        await asyncio.sleep(0)  # the seat now waits for the answer
    answer.set_result(Reply())
    task.cancel()  # in the same loop turn
    await asyncio.wait([task], timeout=10)
    assert task.cancelled(), "the stopped seat handed its answer on"
    assert timings == []


async def test_an_answer_past_the_limit_is_the_timeout_reply():
    class Silent:
        async def speak(self, obs):
            await asyncio.sleep(3600)

    seen: list[tuple[str, object]] = []
    seat = StudySeat(Silent(), model="human", talk_seconds=0.01, decision_seconds=None,
                     on_timeout=lambda phase, outcome: seen.append((phase, outcome)))
    reply = await seat.speak(object())
    assert seen == [("talk", "end_turn")] and seat.timeouts == 1
    assert reply.extra["human_input"]["timed_out"] is True
