"""SPEC §5: a seat's observations hold only what it may see.

Property: change everything private about the *other* seats (their calendars, costs,
labels) and seat i's observations stay exactly the same — and so does seat i's projected
event stream (``engine.observe.seat_event``: what the human's screen, and a remote
client, get of the engine's events), byte for byte.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.actions import Message, Schedule
from engine.game import GameConfig, play_game, run_game
from engine.generate import generate_scenario
from engine.model import Errand, Label, Labels, Task
from engine.observe import meeting_view, seat_event, seat_view
from engine.seats import Reply
from personas.registry import make_personas


def scramble_others(task: Task, seat: int, seed: int) -> Task:
    """Same meetings and same seat calendar; every other seat's private world redrawn."""
    rng = random.Random(seed)
    cals = list(task.calendars)
    for a in range(task.num_agents):
        if a == seat:
            continue
        items = [it for it in cals[a]]
        rng.shuffle(items)
        items = [Errand(it.errand_id, rng.choice([1, 10, 100]), rng.random() < 0.3) if isinstance(it, Errand) else it
                 for it in items]
        cals[a] = tuple(items)
    errands = {k: (v if k[0] == seat else Label(f"secret {rng.random()}", "sensitive"))
               for k, v in task.labels.errands.items()}
    meetings = {m: (v if any(seat in mm.participants for mm in task.meetings if mm.id == m)
                    else Label(f"hidden {rng.random()}", "sensitive")) for m, v in task.labels.meetings.items()}
    return dataclasses.replace(task, calendars=tuple(cals), labels=Labels(errands, meetings), cache={})


def strip(obs):
    """An observation as comparable plain data."""
    return repr(obs)


class Recorder:
    kind, model = "test", "recorder"

    def __init__(self):
        self.seen = []

    async def register(self, briefing):
        self.seen.append(strip(briefing))

    async def speak(self, obs):
        self.seen.append(strip(obs))
        return Reply(actions=tuple(Message("dm", "hello", p) for p in obs.meeting.participants if p != obs.view.seat))

    async def volunteer(self, obs):
        self.seen.append(strip(obs))
        return Reply()

    async def decide(self, obs):
        self.seen.append(strip(obs))
        return Reply(actions=(Schedule(obs.meeting.id, 0),))


class Constant:
    """Talks and decides the same whatever its calendar says (so only privacy could differ)."""

    kind, model = "test", "constant"

    async def register(self, briefing):
        return None

    async def speak(self, obs):
        if obs.turn == 0:
            return Reply(actions=(Message("dm", "I propose slot 3", (obs.view.seat + 1) % obs.view.num_agents),))
        return Reply()

    async def volunteer(self, obs):
        return Reply()

    async def decide(self, obs):
        return Reply(actions=())  # always rejected: the outcome never depends on its calendar


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), seat=st.integers(0, 4), other=st.integers(0, 10_000))
def test_observations_do_not_depend_on_other_seats_private_state(seed, seat, other):
    task = generate_scenario(seed, num_agents=5, num_slots=8, num_meetings=3, density=0.5, blocked=1)
    twin = scramble_others(task, seat, other)

    def run(t):
        rec = Recorder()
        seats = [rec if a == seat else Constant() for a in range(5)]
        # the game loop alone: what a seat sees does not depend on scoring
        asyncio.run(play_game(t, seats, GameConfig(max_turns_per_round=3, decision_retries=1, deterministic=True)))
        return rec.seen

    assert run(task) == run(twin)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), seat=st.integers(0, 4))
def test_seat_view_holds_only_own_labels_and_calendar(seed, seat):
    task = generate_scenario(seed, num_agents=5, num_slots=8, num_meetings=3, density=0.5, blocked=1)
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    assert view.calendar == task.calendars[seat]
    assert all(a == seat for a, _ in view.labels.errands)
    mine = {m.id for m in task.meetings if seat in m.participants}
    assert set(view.labels.meetings) <= mine
    text = view.render()
    for (a, _), label in task.labels.errands.items():
        if a != seat:
            assert label.text not in text
    for m in task.meetings:
        mv = meeting_view(m, seat, task.labels)
        assert (mv.label is None) == (seat not in m.participants)


class Chatty:
    """A scripted seat whose public behaviour never depends on its private world, but whose
    private records do: it says the same things and submits the same (refused) batches
    whatever its calendar, yet writes its calendar render — errand costs and labels — into
    its text, thinking and failure details, which the engine records in the trace."""

    kind, model = "scripted", "chatty"

    async def register(self, briefing):
        return None

    async def speak(self, obs):
        secret = obs.view.render()
        if obs.turn == 1:
            return Reply(error="parse_error", error_detail=secret, text=secret)
        msgs = (Message("dm", "I propose slot 3", (obs.view.seat + 1) % obs.view.num_agents),) if obs.turn == 0 else ()
        return Reply(actions=msgs, text=secret, thinking=secret)

    async def volunteer(self, obs):
        return Reply(text=obs.view.render())

    async def decide(self, obs):
        return Reply(actions=(), text=obs.view.render(), thinking=obs.view.render())


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), seat=st.integers(0, 4), other=st.integers(0, 10_000),
       protocol=st.sampled_from(["imap", "sdmap", "dsm-welfare", "dsm-private"]),
       channel=st.sampled_from([("dm",), ("dm", "participant_groupchat", "all_groupchat")]))
def test_projected_event_stream_does_not_depend_on_other_seats_private_state(seed, seat, other, protocol, channel):
    """Seat ``seat`` is a real scripted persona, the others are :class:`Chatty`: the raw
    traces differ (every calendar, render, prompt and metric of the other seats), seat
    ``seat``'s projection of them does not."""
    task = generate_scenario(seed, num_agents=5, num_slots=8, num_meetings=3, density=0.5, blocked=1)
    twin = scramble_others(task, seat, other)

    def run(t):
        seats = [make_personas(protocol, 5)[seat] if a == seat else Chatty() for a in range(5)]
        res = asyncio.run(run_game(t, seats, GameConfig(max_turns_per_round=3, decision_retries=1,
                                                        deterministic=True, channels=channel)))
        events = res.trace["events"]
        projected = [v for v in (seat_event(e, seat) for e in events) if v is not None]
        return json.dumps(events, sort_keys=True), json.dumps(projected, sort_keys=True).encode()

    raw_a, seen_a = run(task)
    raw_b, seen_b = run(twin)
    assert raw_a != raw_b  # the scramble reached the trace, so the gate had something to hide
    assert seen_a == seen_b
    kinds = {e["type"] for e in json.loads(seen_a)}
    assert {"game_start", "round_start", "resolution", "parse_error", "batch_rejected", "game_end"} <= kinds
