"""Property: whatever valid batches seats commit, folding the trace gives the live state.

Random seats make random (often costly, sometimes uncoordinated) moves; after every round
the folded calendars must equal what the game recorded, and at the end the live state.
"""

from __future__ import annotations

import asyncio
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.actions import Message, Reschedule, Schedule
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.trace import fold_trace
from engine.rules import BatchOutcome, check_batch
from engine.seats import Reply


class RandomSeat:
    kind, model = "test", "random"

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    async def register(self, briefing):
        return None

    async def speak(self, obs):
        if obs.turn == 0 and self.rng.random() < 0.5:
            to = self.rng.randrange(obs.view.num_agents)
            if to != obs.view.seat:
                return Reply(actions=(Message("dm", f"slot {self.rng.randrange(obs.view.num_slots)}?", to),))
        return Reply()

    def _moves(self, cal, k):
        free = [s for s, it in enumerate(cal) if it is None]
        movable = [s for s, it in enumerate(cal) if it is not None and not it.blocked]
        acts = []
        for src in self.rng.sample(movable, min(k, len(movable))):
            if free:
                dst = free.pop(self.rng.randrange(len(free)))
                acts.append(Reschedule(cal[src].item_id, src, dst, "random"))
        return acts

    async def volunteer(self, obs):
        acts = self._moves(obs.view.calendar, self.rng.randrange(2))
        return Reply(actions=tuple(acts))

    async def decide(self, obs):
        cal = obs.view.calendar
        for _ in range(20):
            acts = self._moves(cal, self.rng.randrange(3))
            acts.append(Schedule(obs.meeting.id, self.rng.randrange(len(cal))))
            if isinstance(check_batch(cal, acts, meeting_id=obs.meeting.id, require_schedule=True), BatchOutcome):
                return Reply(actions=tuple(acts))
        return Reply(actions=tuple(acts))


@settings(max_examples=30, deadline=None)
@given(task_seed=st.integers(0, 5000), seat_seed=st.integers(0, 5000))
def test_folding_any_valid_batches_reproduces_the_live_state(task_seed, seat_seed):
    task = generate_scenario(task_seed, num_agents=4, num_slots=8, num_meetings=4, density=0.5, blocked=1,
                             participants_per_meeting=2)
    seats = [RandomSeat(seat_seed * 10 + a) for a in range(4)]
    res = asyncio.run(run_game(task, seats, GameConfig(max_turns_per_round=2, decision_retries=1, deterministic=True)))
    folded = fold_trace(res.trace)
    assert folded.verified, folded.problems
    assert all(r["matches"] for r in folded.rounds)
    assert tuple(tuple(c) for c in folded.final_calendars) == res.state.calendars
