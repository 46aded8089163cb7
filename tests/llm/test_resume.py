"""Resuming a stopped game with LLM seats: each seat's thread is rebuilt from the trace.

An uninterrupted game is played against the loopback mock (real HTTP), its trace is cut
inside round 1 (index 1), and fresh personas on a fresh mock continue it with
``run_game(resume_events=...)``.  Every request a seat sends after the resume must be the
request the uninterrupted game sent at the same point: same history, same new message.
"""

from __future__ import annotations

import re

import pytest

from engine.game import GameConfig, resume_point, run_game
from engine.observe import SeatBriefing, seat_view
from personas.llm.factory import make_llm_persona
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.prompts import fragment

MODEL = "llm:mock-model"
AGENT_RE = re.compile(r"You are Agent (\d+)")


class RecordingMock(MockLLMServer):
    """The loopback mock, also keeping the messages of every chat request it answers."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.bodies: list[list[dict]] = []

    async def _chat(self, req, messages):
        self.bodies.append([dict(m) for m in messages])
        return await super()._chat(req, messages)

    def by_seat(self) -> dict[int, list[list[dict]]]:
        out: dict[int, list[list[dict]]] = {}
        for msgs in self.bodies:
            seat = int(AGENT_RE.search(msgs[0]["content"]).group(1))
            out.setdefault(seat, []).append(msgs)
        return out


async def play(task, make_settings, *, resume_events=None, faults=(), **settings_kw):
    async with RecordingMock() as server:
        for kind, kw in faults:
            server.inject(kind, **kw)
        settings = make_settings(server, reflection=True, **settings_kw)
        seats = [make_llm_persona(MODEL, settings) for _ in range(task.num_agents)]
        res = await run_game(task, seats, GameConfig(deterministic=True), game_id="resume-test",
                             resume_events=resume_events)
        assert server.pending_faults == 0
    return res, seats, server.by_seat()


def calls_in(events, seat):
    """How many requests a seat sent in these events (no faults: one per call / reflection)."""
    return sum(1 for e in events if e["data"].get("agent_id") == seat
               and e["type"] in ("turn_end", "decide_end", "reflection"))


FAULTS = {
    "clean": [],
    # every DECISION attempt of one round-0 participant is unreadable / lost to the endpoint,
    # so its next call (in round 1, after the cut) carries a note about the failure
    "parse_failure": [("prose", {"count": 4, "phase": "DECISION"})],
    # (3 calls lost to the endpoint use no decision retry, then the 4 attempts: 7 calls, 2 requests each)
    "infra_failure": [("500", {"count": 14, "phase": "DECISION"})],
}


@pytest.mark.parametrize("case", list(FAULTS))
async def test_resumed_llm_seats_send_what_the_uninterrupted_game_sent(make_settings, task, case):
    failing = task.meetings[0].participants[-1]
    faults = [(k, dict(kw, seat=failing)) for k, kw in FAULTS[case]]
    full, full_seats, full_reqs = await play(task, make_settings, faults=faults, retries=1)
    events = full.trace["events"]
    if case != "clean":  # the fault really hit the last round-0 call of that seat
        ends = [e["data"] for e in events if e["type"] == "decide_end" and e["data"]["agent_id"] == failing
                and e["data"]["round"] == 0]
        want = "parse_error" if case == "parse_failure" else "server_error"
        assert len(ends) == (4 if case == "parse_failure" else 7) and all(d["extra"]["failure"] == want
                                                                          for d in ends)

    cut = next(e["seq"] for e in events if e["type"] == "turn_end" and e["data"]["round"] == 1)
    keep = resume_point([e for e in events if e["seq"] <= cut])
    prefix = [e for e in events if e["seq"] <= keep]
    assert prefix[-1]["type"] == "reflection" and prefix[-1]["data"]["round"] == 0  # round 0's tail is kept

    again, seats, reqs = await play(task, make_settings, resume_events=prefix, retries=1)

    # The game completes, as the uninterrupted one did.
    ev2 = again.trace["events"]
    assert ev2[-1]["type"] == "game_end" and ev2[: len(prefix)] == prefix
    assert [e["seq"] for e in ev2] == list(range(len(ev2)))
    assert ([e["data"]["state_hash"] for e in ev2 if e["type"] == "resolution"]
            == [e["data"]["state_hash"] for e in events if e["type"] == "resolution"])
    assert again.metrics["meetings_scheduled"] == full.metrics["meetings_scheduled"]

    assert set(reqs) == set(range(task.num_agents))  # every seat spoke (or reflected) again
    for seat, sent in reqs.items():
        before = full_reqs[seat]
        done = calls_in(prefix, seat)  # requests this seat sent up to the resume point
        if case == "infra_failure" and seat == failing:
            done += 7  # each of its 7 failed DECISION calls (3 lost, 4 attempts) was retried once
        assert len(before) == done + len(sent)
        first = sent[0]
        assert first[:-1] == before[done][:-1], f"seat {seat}: the history differs"
        assert first == before[done], f"seat {seat}: the new message differs"
        assert sent == before[done:]  # and so does everything after
    # The rebuilt threads end where the uninterrupted ones ended, counters included.
    for a, b in zip(full_seats, seats):
        assert a.messages == b.messages
        assert a.counters == b.counters

    if case != "clean":  # the note about the failed call reached the seat's next game prompt
        if case == "parse_failure":
            detail = [e["data"]["detail"] for e in events if e["type"] == "parse_error"
                      and e["data"]["agent_id"] == failing][-1]
            note = fragment("parse_notice", detail=detail)
        else:
            note = fragment("infra_notice")
        game_calls = [m for m in reqs[failing] if "Reflection after Round" not in m[-1]["content"]]
        if game_calls:
            assert note in game_calls[0][-1]["content"]
            assert not any(note in m[-1]["content"] for m in game_calls[1:])


async def test_resume_without_an_agent_registered_event_regenerates_the_system_prompt(make_settings, task):
    async with MockLLMServer() as server:
        settings = make_settings(server)
        seats = [make_llm_persona(MODEL, settings) for _ in range(task.num_agents)]
        res = await run_game(task, seats, GameConfig(deterministic=True))
        seat = task.meetings[0].participants[0]
        own = [e for e in res.trace["events"] if e["data"].get("agent_id") == seat
               and e["type"] != "agent_registered" and e["data"]["round"] == 0]
        fresh = make_llm_persona(MODEL, settings)
        view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
        system = await fresh.register(SeatBriefing(view, 15, 3, len(task.meetings)))
        await fresh.resume(own)
    assert fresh.messages[0] == {"role": "system", "content": system}
    calls = [e["data"] for e in own if e["type"] in ("turn_end", "decide_end")]
    assert len(fresh.messages) == 1 + 2 * len(calls)
    assert fresh.messages[1:] == seats[seat].messages[1: 1 + 2 * len(calls)]
    assert fresh.counters == calls[-1]["extra"]["counters"]
