"""Replay folds recorded batches over the initial calendars and catches any tampering (SPEC §12)."""

from __future__ import annotations

import copy
import json

import pytest

from doubles import PlanPersona, ScriptPersona
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand, MeetingCopy, Task, calendar_to_json
from engine.oracle import solve
from engine.trace import TraceError, fold_trace
from engine.seats import Reply


async def play(task, seats=None):
    if seats is None:
        plan = solve(task).assignments
        seats = [PlanPersona(plan) for _ in range(task.num_agents)]
    res = await run_game(task, seats, GameConfig(deterministic=True))
    return res, json.loads(json.dumps(res.trace))


def batches(trace, with_reschedule=False):
    out = [e for e in trace["events"] if e["type"] == "batch_applied"]
    if with_reschedule:
        out = [e for e in out if any(a["type"] == "reschedule" for a in e["data"]["actions"])]
    return out


@pytest.fixture(scope="module")
def task():
    # A seed whose plan needs errands moved out of the way (so reschedules are folded too).
    for seed in range(1, 60):
        t = generate_scenario(seed)
        plan = solve(t).assignments
        if sum(isinstance(t.calendars[a][plan[m.id]], Errand) for m in t.meetings for a in m.participants) >= 2:
            return t
    pytest.fail("no generated scenario needs a reschedule")


async def test_our_game_folds_and_verifies(task):
    res, trace = await play(task)
    fold = fold_trace(trace)
    assert fold.verified, fold.problems
    assert fold.source == "calbench" and fold.problems == []
    assert fold.final_calendars == res.state.calendars
    assert fold.costs == list(res.state.costs)
    assert len(fold.rounds) == len(task.meetings)
    resolutions = [e for e in trace["events"] if e["type"] == "resolution"]
    for r, ev in zip(fold.rounds, resolutions):
        assert r["matches"] is True and r["state_hash"] == ev["data"]["state_hash"]
        assert r["meeting_id"] == ev["data"]["meeting_id"] and r["coordinated"] == ev["data"]["coordinated"]
    assert batches(trace, with_reschedule=True)  # reschedules were folded, not just schedules
    json.dumps(fold.to_json())  # the result is JSON as it is


async def test_calendars_at_each_event(task):
    _, trace = await play(task)
    fold = fold_trace(trace)
    first = batches(trace)[0]["seq"]
    assert fold.calendars_at(first - 1) == task.calendars == fold.initial_calendars
    for ev in batches(trace):
        agent = ev["data"]["agent_id"]
        cals = fold.calendars_at(ev["seq"])
        assert calendar_to_json(cals[agent]) == ev["data"]["calendar_after"]
        part = fold_trace(trace, upto_seq=ev["seq"])  # folding only that far agrees
        assert part.final_calendars == cals and part.verified, part.problems
    for ev in trace["events"]:
        if ev["type"] == "resolution":
            assert [calendar_to_json(c) for c in fold.calendars_at(ev["seq"])] == ev["data"]["calendars"]
    assert fold.calendars_at(10**9) == fold.final_calendars


async def test_a_tampered_destination_is_detected(task):
    _, trace = await play(task)
    ev = batches(trace, with_reschedule=True)[0]
    agent = ev["data"]["agent_id"]
    move = next(a for a in ev["data"]["actions"] if a["type"] == "reschedule")
    # move the errand to a different free slot: the batch is still legal, the outcome is not the record
    cal = fold_trace(trace, upto_seq=ev["seq"] - 1).calendars_at(ev["seq"] - 1)[agent]
    targets = {a.get("slot") for a in ev["data"]["actions"]} | {a.get("to_slot") for a in ev["data"]["actions"]}
    other = next(s for s, it in enumerate(cal) if it is None and s not in targets)
    bad = copy.deepcopy(trace)
    for e in bad["events"]:
        if e["seq"] == ev["seq"]:
            next(a for a in e["data"]["actions"] if a["type"] == "reschedule")["to_slot"] = other
    fold = fold_trace(bad)
    assert not fold.verified
    r = ev["data"]["round"]
    assert any(p.startswith(f"round {r}: calendars after the round differ from the recorded state "
                            f"(agent {agent} slot") for p in fold.problems), fold.problems
    assert fold.rounds[r]["matches"] is False
    assert all(x["matches"] for x in fold.rounds[:r])
    # a destination that is not free breaks the rules outright
    occupied = next(s for s, it in enumerate(cal) if isinstance(it, Errand) and s != move["from_slot"])
    for e in bad["events"]:
        if e["seq"] == ev["seq"]:
            next(a for a in e["data"]["actions"] if a["type"] == "reschedule")["to_slot"] = occupied
    fold = fold_trace(bad)
    assert any("breaks the rules" in p and "Rule 5" in p for p in fold.problems), fold.problems


async def test_a_tampered_hash_or_schedule_is_detected(task):
    _, trace = await play(task)
    bad = copy.deepcopy(trace)
    res = next(e for e in bad["events"] if e["type"] == "resolution")
    res["data"]["state_hash"] = "0" * 16
    del res["data"]["calendars"]
    fold = fold_trace(bad)
    assert fold.problems == ["round 0: the state hash after the round differs from the recorded one"]
    bad = copy.deepcopy(trace)
    ev = batches(bad)[-1]
    sched = next(a for a in ev["data"]["actions"] if a["type"] == "schedule")
    sched["meeting_id"] += 100
    assert any("Rule 6" in p for p in fold_trace(bad).problems)


async def test_a_truncated_trace_is_detected(task):
    _, trace = await play(task)
    cut = copy.deepcopy(trace)
    second_res = [e["seq"] for e in cut["events"] if e["type"] == "resolution"][1]
    cut["events"] = cut["events"][: second_res + 1]
    fold = fold_trace(cut)
    assert not fold.verified and len(fold.rounds) == 2
    text = " | ".join(fold.problems)
    assert f"ends after 2 of {len(task.meetings)} rounds" in text and "no game_end" in text
    assert "differ from the recorded final state" in text
    # the same events in a trace honestly marked stopped (a quit game) verify
    stopped = dict(cut, stopped=True)
    del stopped["final_state"]
    assert fold_trace(stopped).verified
    # an event missing from the middle is named
    holed = copy.deepcopy(trace)
    del holed["events"][5]
    assert any("event 6 follows event 4" in p for p in fold_trace(holed).problems)


async def test_a_rolled_back_round_applies_nothing():
    row = {"task_id": "t", "seed": 1,
           "calendars": [[None, None, {"errand_id": 1, "cost": 1}], [None, None, None], [None, None, None]],
           "meetings": [{"id": 1, "participants": [0, 1], "cost": 1}, {"id": 2, "participants": [1, 2], "cost": 1}]}
    task = Task.from_row(row)
    plan = {1: 0, 2: 1}
    fail = Reply(actions=())  # no schedule: rejected, every attempt
    seats = [PlanPersona(plan), ScriptPersona(decide=[fail] * 4, plan=plan), PlanPersona(plan)]
    _, trace = await play(task, seats)
    types = [e["type"] for e in trace["events"]]
    assert "batch_rolled_back" in types
    fold = fold_trace(trace)
    assert fold.verified, fold.problems
    assert fold.rounds[0]["coordinated"] is False and fold.rounds[1]["coordinated"] is True
    assert fold.final_calendars[0][0] is None  # agent 0's staged batch was rolled back
    assert fold.final_calendars[1][1] == MeetingCopy(2)


def test_a_trace_without_calendars_cannot_be_folded():
    with pytest.raises(TraceError, match="nothing to fold"):
        fold_trace({"game_id": "x", "events": [{"type": "game_start", "data": {}}]})
    with pytest.raises(TraceError, match="not a trace"):
        fold_trace({"game_id": "x"})


def authors_traces(compat_dir):
    files = sorted(compat_dir.glob("authors_trace_*.json"))
    assert files, "no authors' traces in the compat folder"
    return [json.loads(f.read_text()) for f in files]


def test_the_authors_traces_fold_to_their_final_calendars(compat_dir):
    for trace in authors_traces(compat_dir):
        fold = fold_trace(trace)
        assert fold.source == "authors"
        assert fold.verified, fold.problems
        assert [calendar_to_json(c) for c in fold.final_calendars] == trace["final_state"]["calendars"]
        assert fold.costs == trace["final_state"]["per_agent_cost"]
        outcomes = trace["final_state"]["round_outcomes"]
        assert [r["coordinated"] for r in fold.rounds] == [o["coordinated"] for o in outcomes]
        assert all(r["matches"] for r in fold.rounds)


def test_a_tampered_authors_trace_is_detected(compat_dir):
    trace = authors_traces(compat_dir)[0]
    bad = copy.deepcopy(trace)
    ev = next(e for e in bad["events"] if e["type"] == "batch_applied"
              and any(a["type"] == "reschedule" for a in e["data"]["actions"]))
    move = next(a for a in ev["data"]["actions"] if a["type"] == "reschedule")
    slots = {a.get("slot") for a in ev["data"]["actions"]} | {move["to_slot"], move["from_slot"]}
    render = ev["data"]["calendar_render_after"].splitlines()
    free = [i for i, line in enumerate(render) if line.endswith("[FREE]") and i not in slots]
    move["to_slot"] = free[0]
    fold = fold_trace(bad)
    assert not fold.verified
    assert any("calendar after the batch differs from the recorded one" in p for p in fold.problems)
    assert any("differ from the recorded final state" in p for p in fold.problems)
