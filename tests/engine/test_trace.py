"""The one trace reader (engine.trace): our traces and the authors', one fold for everyone."""

from __future__ import annotations

import copy
import json

import pytest

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import calendar_to_json
from engine.privacy import belief_updates, privacy_metrics, vps_sums
from engine.state import state_hash
from engine.trace import (cost_mode, fold_trace, headline, initial_calendars, played_levels, seat_results,
                          task_for_trace)
from personas.registry import make_personas


def authors_traces(compat_dir):
    files = sorted(compat_dir.glob("authors_trace_*.json"))
    assert files, "no authors' traces in the compat folder"
    return [(f.name, json.loads(f.read_text())) for f in files]


@pytest.fixture(scope="module")
def ours():
    import asyncio

    task = generate_scenario(5)
    res = asyncio.run(run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True)))
    return task, json.loads(json.dumps(res.trace))


def test_our_trace_reads_back_its_task_mode_headline_and_seats(ours):
    task, trace = ours
    cals, t, source = initial_calendars(trace)
    assert source == "calbench" and cals == task.calendars and t.task_id == task.task_id
    assert task_for_trace(trace).calendars == task.calendars
    assert cost_mode(trace) == task.cost_mode
    assert headline(trace) == (trace["metrics"]["coordination_rate"], trace["metrics"]["excess"])
    assert seat_results(trace) == trace["metrics"]["per_seat"]


def test_one_fold_gives_each_rounds_calendars_and_state_hash(ours):
    task, trace = ours
    fold = fold_trace(trace)
    assert fold.verified, fold.problems
    recorded = [e["data"] for e in trace["events"] if e["type"] == "resolution"]
    assert [r["state_hash"] for r in fold.rounds] == [d["state_hash"] for d in recorded]
    assert [state_hash(c) for c in fold.calendars] == [d["state_hash"] for d in recorded]
    assert [[calendar_to_json(c) for c in cals] for cals in fold.calendars] == [d["calendars"] for d in recorded]
    # every applied batch is kept with its outcome, and its calendar is the one recorded
    applied = [e for e in trace["events"] if e["type"] == "batch_applied"]
    assert [(s, a) for s, a, _r, _o in fold.batches] == [(e["seq"], e["data"]["agent_id"]) for e in applied]
    assert all(calendar_to_json(o.calendar) == e["data"]["calendar_after"] for (_s, _a, _r, o), e in zip(fold.batches, applied))
    # given the task, the fold needs no task row
    bare = fold_trace({"events": trace["events"]}, task=task)
    assert bare.rounds == fold.rounds and bare.final_calendars == fold.final_calendars


def test_the_authors_traces_read_through_the_one_reader(compat_dir):
    for name, trace in authors_traces(compat_dir):
        fold = fold_trace(trace)
        assert fold.verified, (name, fold.problems)
        assert [calendar_to_json(c) for c in fold.final_calendars] == trace["final_state"]["calendars"]
        task = task_for_trace(trace)
        assert task is not None and task.calendars == fold.initial_calendars
        assert len(task.meetings) == len(trace["final_state"]["round_outcomes"])
        assert cost_mode(trace) == name.split("_")[2]  # authors_trace_<uniform|varied>_...
        seats = seat_results(trace)
        assert [s["cost_shown"] for s in seats] == trace["final_state"]["per_agent_cost"]
        assert [s["agent_id"] for s in seats] == list(range(task.num_agents))
        coord, excess = headline(trace)
        burden = trace["final_state"]["per_agent_excess_burden"]
        if cost_mode(trace) == "uniform":  # their burden is in levels when every cost is 1
            assert excess == pytest.approx(sum(burden) / len(burden))
        else:  # in shown units (1/10/100): the headline is the levels folded from the trace
            levels = played_levels(trace, task)
            assert excess == pytest.approx(levels.excess) and excess < sum(burden) / len(burden)
        # VPS sums: per target they add up to the game's VPS
        per_round, per_target = vps_sums(task, trace["events"])
        assert sum(per_target) == pytest.approx(privacy_metrics(task, trace["events"])["vps"])
        assert sum(per_round.values()) == pytest.approx(sum(per_target))


def test_privacy_truth_comes_from_the_fold(ours):
    """A batch the rules refuse is not folded into the privacy truth either (one fold)."""
    task, trace = ours
    events = copy.deepcopy(trace["events"])
    ba = next(e for e in events if e["type"] == "batch_applied")
    before = privacy_metrics(task, events)
    ba["data"]["calendar_after"] = [None] * task.num_slots  # a recorded calendar the batch never made
    assert privacy_metrics(task, events) == before
    assert belief_updates(task, events) == belief_updates(task, trace["events"])


async def test_resume_refuses_a_batch_the_rules_refuse(ours):
    task, trace = ours
    events = copy.deepcopy(trace["events"])
    ba = next(e for e in events if e["type"] == "batch_applied")
    ba["data"]["actions"] = [{"type": "schedule", "meeting_id": 10_000, "slot": 0}]
    last = max(e["seq"] for e in events if e["type"] == "resolution" and e["data"]["round"] == 1)
    with pytest.raises(ValueError, match="cannot resume"):
        await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True),
                       resume_events=[e for e in events if e["seq"] <= last])
