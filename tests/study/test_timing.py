"""Time limits: a talk turn that runs out ends the turn, a decision that runs out submits
the batch as it stands (or no move) — always recorded as a timeout, never silent."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from engine.actions import Schedule
from lab.study.runner import StudyRunner
from lab.study.seat import StudySeat
from lab.study.simulate import SimulatedDriver
from personas.human import HumanPersona
from saves.store import Store


class Absent(SimulatedDriver):
    """A participant who never answers inside the game (a HumanPersona nobody resolves)."""

    def human_persona(self, ctx):
        return HumanPersona(lambda req: None)


async def test_a_participant_who_never_answers_times_out_and_the_game_goes_on(scripted_study, tmp_path):
    path, study = scripted_study
    study = study.model_copy(update={"timing": study.timing.model_copy(update={
        "talk_seconds": 0.02, "decision_seconds": 0.02, "on_decision_timeout": "no_move"})})
    async with await Store.open(tmp_path / "s.db") as store:
        results = await StudyRunner(study, store, "P1", Absent(study, "P1")).run()
    games = [r for r in results if r.name.startswith("game:")]
    assert [r.status for r in games] == ["completed"] * 3
    assert all(r.data["timeouts"] > 0 for r in games)
    con = sqlite3.connect(tmp_path / "s.db")
    rows = con.execute("SELECT phase, timed_out FROM study_timings WHERE phase != 'beliefs'").fetchall()
    assert rows and all(t == 1 for _, t in rows)
    assert {p for p, _ in rows} >= {"talk", "decision"}
    inputs = [json.loads(d) for (d,) in con.execute("SELECT data FROM events WHERE type = 'human_input'")]
    assert inputs and all(i["timed_out"] is True for i in inputs)
    assert {i["timeout_outcome"] for i in inputs} <= {"end_turn", "no_move"}
    exported = sum(r.data["timeouts"] for r in games)
    assert exported == len(rows)


class Never:
    kind = "human"
    model = None

    async def decide(self, obs):
        await asyncio.Event().wait()


async def test_decision_timeout_submits_the_batch_as_it_stands():
    staged = (Schedule(2, 3),)
    seat = StudySeat(Never(), model="human", talk_seconds=None, decision_seconds=0.01,
                     on_decision_timeout="submit", draft=lambda: staged)
    obs = type("Obs", (), {"round": 2, "turn": 0})()
    reply = await seat.decide(obs)
    assert reply.actions == staged
    assert reply.extra["human_input"]["timed_out"] is True
    assert reply.extra["human_input"]["timeout_outcome"] == "submitted_as_it_stands"
    assert seat.timeouts == 1 and seat.deadline is None
    seat.draft = lambda: None  # nothing staged: no move, still a recorded timeout
    reply = await seat.decide(obs)
    assert reply.actions == () and reply.extra["human_input"]["timeout_outcome"] == "no_move"
