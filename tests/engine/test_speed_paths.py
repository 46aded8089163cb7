"""The scripted suites' fast paths (issue 33) give what the plain paths give.

* DECISION calls of seats that answer at once (the scripted protocols) are awaited one
  after the other in the game's own task; seats that may wait are still gathered.
* The label bank is shuffled draw for draw as ``random.shuffle`` does.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.labelbank import _fast_shuffle, _shuffle
from engine.taskref import resolve_tasks
from personas.registry import make_personas
from personas.scripted.imap import IMAPPersona


class Watched(IMAPPersona):
    """IMAP, noting the asyncio task each DECISION call runs in."""

    def __init__(self, seen: list) -> None:
        super().__init__()
        self.seen = seen

    async def decide(self, obs):
        self.seen.append(asyncio.current_task())
        return await super().decide(obs)


class Waiting(Watched):
    """A seat that may wait: its DECISION waits until every participant has been asked."""

    answers_at_once = False

    def __init__(self, seen: list, asked: dict) -> None:
        super().__init__(seen)
        self.asked = asked

    async def decide(self, obs):
        ev = self.asked.setdefault(obs.round, (asyncio.Event(), set()))
        ev[1].add(self.seat)
        if len(ev[1]) == len(obs.meeting.participants):
            ev[0].set()
        async with asyncio.timeout(5):
            await ev[0].wait()  # awaited one after the other, the first participant would wait for ever
        return await super().decide(obs)


def _task():
    return resolve_tasks("canonical:0")[0]


async def test_scripted_decisions_run_in_the_games_own_task_with_the_same_trace():
    task = _task()
    seen: list = []
    game_task = asyncio.current_task()
    res = await run_game(task, [Watched(seen) for _ in range(task.num_agents)], GameConfig(deterministic=True),
                         ListSink())
    assert seen and all(t is game_task for t in seen)  # no task per seat and round
    plain = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True))
    strip = lambda tr: [(e["type"], e["data"]) for e in tr["events"]]  # noqa: E731
    assert strip(res.trace) == strip(plain.trace)


async def test_seats_that_may_wait_are_still_asked_together():
    task = _task()
    seen: list = []
    asked: dict = {}
    res = await run_game(task, [Waiting(seen, asked) for _ in range(task.num_agents)],
                         GameConfig(deterministic=True))
    assert seen and all(t is not asyncio.current_task() for t in seen)
    assert res.metrics["meetings_total"] == len(task.meetings)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 64, 255, 256, 1000])
def test_the_bank_shuffle_is_random_shuffle_draw_for_draw(n):
    for seed in (0, 1, 7, 2 ** 40 + 3):
        a, b = list(range(n)), list(range(n))
        ra, rb = random.Random(seed), random.Random(seed)
        ra.shuffle(a)
        _fast_shuffle(rb, b)
        assert a == b
        assert ra.getstate() == rb.getstate()  # the draws after it are the same too
    assert _shuffle is _fast_shuffle  # this Python's shuffle is the one it copies
