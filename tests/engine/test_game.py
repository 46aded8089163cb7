"""The game loop, phase by phase, with small test personas (tests/engine/doubles.py)."""

from __future__ import annotations

import json

import pytest

from engine.actions import Message, Reschedule, Schedule
from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.model import MeetingCopy, Task
from engine.seats import Reply

from doubles import PlanPersona, ScriptPersona, clear_and_schedule


def row(calendars, meetings, **extra):
    return {"task_id": "t", "seed": 1, "calendars": calendars,
            "meetings": [{"id": i + 1, "participants": p, "speaker_order": list(p), "cost": 1, "duration": 1}
                         for i, p in enumerate(meetings)],
            **extra}


E = lambda i, c=1, b=False: {"errand_id": i, "cost": c, **({"blocked": True} if b else {})}  # noqa: E731

# 4 agents, 5 slots.  Meeting 1: agents 0,1; meeting 2: agents 1,2.
TASK = Task.from_row(row(
    [[None, E(1), None, E(2), None],
     [E(3), None, None, E(4, 10), None],
     [None, E(5), E(6, 1, True), None, None],
     [None, None, None, None, E(7)]],
    [[0, 1], [1, 2]]))


def types(trace):
    return [e["type"] for e in trace["events"]]


async def play(seats, config=None, task=TASK):
    sink = ListSink()
    res = await run_game(task, seats, config or GameConfig(deterministic=True), sink)
    assert sink.events == res.trace["events"]  # the sink saw every event, in order
    return res


async def test_full_game_every_phase_and_metrics():
    plan = {1: 2, 2: 4}
    res = await play([PlanPersona(plan) for _ in range(4)])
    t = types(res.trace)
    assert t[0] == "game_start" and t[-1] == "game_end"
    assert t.count("agent_registered") == 4 and t.count("round_start") == 2 and t.count("resolution") == 2
    assert t.count("batch_applied") == 4
    m = res.metrics
    assert m["meetings_scheduled"] == 2 and m["coordination_rate"] == 1.0
    assert res.state.calendars[0][2] == MeetingCopy(1) and res.state.calendars[1][2] == MeetingCopy(1)
    # every event carries round/turn/phase/agent_id and a strictly increasing seq
    assert [e["seq"] for e in res.trace["events"]] == list(range(len(t)))
    for e in res.trace["events"]:
        assert {"round", "turn", "phase", "agent_id"} <= set(e["data"])
    # quiet-sweep ending: the initiator talks in sweep 0, nobody in sweep 1 -> 2 sweeps per round
    turns = [e["data"]["turn"] for e in res.trace["events"] if e["type"] == "turn_start" and e["data"]["round"] == 0]
    assert turns == [0, 0, 1, 1]


async def test_same_inputs_same_trace_bytes():
    a = await play([PlanPersona({1: 2, 2: 4}) for _ in range(4)])
    b = await play([PlanPersona({1: 2, 2: 4}) for _ in range(4)])
    assert json.dumps(a.trace, sort_keys=False) == json.dumps(b.trace, sort_keys=False)


async def test_message_order_within_a_sweep():
    # Agent 0 speaks first; agent 1 must see 0's turn-0 message at its own turn 0.
    p0 = ScriptPersona(speak=[Reply(actions=(Message("dm", "slot 2?", 1),))], plan={1: 2, 2: 4})
    p1 = ScriptPersona(plan={1: 2, 2: 4})
    await play([p0, p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    first = p1.observations[0]
    assert first.turn == 0 and first.is_round_start and [m.content for m in first.inbox] == ["slot 2?"]


async def test_activation_by_dm_then_voluntary_move():
    # Agent 3 (not in meeting 1) gets a DM, speaks in the same sweep, then may move in VOLUNTARY.
    p0 = ScriptPersona(speak=[Reply(actions=(Message("dm", "could you free slot 4?", 3),))], plan={1: 2, 2: 4})
    p3 = ScriptPersona(speak=[Reply(actions=(Message("dm", "ok", 0),))],
                       volunteer=[Reply(actions=(Reschedule(7, 4, 0, "asked nicely"),))], plan={1: 2, 2: 4})
    res = await play([p0, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4}), p3])
    evs = res.trace["events"]
    r0_turns = [(e["data"]["turn"], e["data"]["agent_id"]) for e in evs if e["type"] == "turn_start" and e["data"]["round"] == 0]
    assert (0, 3) in r0_turns  # queued in the same sweep it was contacted
    assert r0_turns.index((0, 3)) > r0_turns.index((0, 1))
    vol = [e for e in evs if e["type"] == "batch_applied" and e["data"]["phase"] == "VOLUNTARY"]
    assert len(vol) == 1 and vol[0]["data"]["agent_id"] == 3 and vol[0]["data"]["cost"] == 1
    assert res.state.calendars[3][0] is not None and res.state.calendars[3][4] is None
    assert res.metrics["per_seat"][3]["cost"] == 1


async def test_activation_by_all_groupchat_but_not_participant_groupchat():
    cfg = GameConfig(channels=("dm", "participant_groupchat", "all_groupchat"), deterministic=True)
    p0 = ScriptPersona(speak=[Reply(actions=(Message("participant_groupchat", "slot 2 for us?"),))], plan={1: 2, 2: 4})
    res = await play([p0] + [PlanPersona({1: 2, 2: 4}) for _ in range(3)], cfg)
    speakers = {e["data"]["agent_id"] for e in res.trace["events"] if e["type"] == "turn_start" and e["data"]["round"] == 0}
    assert speakers == {0, 1}  # participant groupchat activates nobody
    pg = [e for e in res.trace["events"] if e["type"] == "participant_groupchat_sent"]
    assert pg[0]["data"]["recipients"] == [1]

    p0 = ScriptPersona(speak=[Reply(actions=(Message("all_groupchat", "anyone free at 2?"),))], plan={1: 2, 2: 4})
    res = await play([p0] + [PlanPersona({1: 2, 2: 4}) for _ in range(3)], cfg)
    speakers = {e["data"]["agent_id"] for e in res.trace["events"] if e["type"] == "turn_start" and e["data"]["round"] == 0}
    assert speakers == {0, 1, 2, 3}
    # all-groupchat alone does not open VOLUNTARY (only a DM does)
    assert not [e for e in res.trace["events"] if e["data"]["phase"] == "VOLUNTARY"]


async def test_disabled_channel_is_not_delivered():
    p0 = ScriptPersona(speak=[Reply(actions=(Message("all_groupchat", "hello all"),))], plan={1: 2, 2: 4})
    res = await play([p0] + [PlanPersona({1: 2, 2: 4}) for _ in range(3)])
    assert "all_groupchat_sent" not in types(res.trace)
    err = [e for e in res.trace["events"] if e["type"] == "parse_error"]
    assert err and "not enabled" in err[0]["data"]["detail"]


async def test_turn_budget_and_last_turn_flag():
    chatty = lambda obs: Reply(actions=(Message("dm", f"still talking {obs.turn}", 1 - obs.view.seat),))  # noqa: E731
    p0 = ScriptPersona(speak=[chatty] * 100, plan={1: 2, 2: 4})
    p1 = ScriptPersona(plan={1: 2, 2: 4})
    cfg = GameConfig(max_turns_per_round=3, deterministic=True)
    res = await play([p0, p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})], cfg)
    r0 = [e["data"]["turn"] for e in res.trace["events"] if e["type"] == "turn_start" and e["data"]["round"] == 0 and e["data"]["agent_id"] == 0]
    assert r0 == [0, 1, 2]
    last = [o for o in p1.observations if getattr(o, "phase", "") == "CHEAP_TALK" and o.round == 0]
    assert [o.is_last_turn for o in last] == [False, False, True]


async def test_rejection_then_retry_with_exact_conflict():
    p1 = ScriptPersona(decide=[Reply(actions=()),  # no schedule -> rule 6
                               lambda obs: Reply(actions=tuple(clear_and_schedule(obs.view.calendar, obs.meeting.id, 2)))],
                       plan={1: 2, 2: 4})
    res = await play([PlanPersona({1: 2, 2: 4}), p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    rej = [e for e in res.trace["events"] if e["type"] == "batch_rejected"]
    assert len(rej) == 1 and rej[0]["data"]["conflict_description"] == "Expected exactly 1 schedule action, got 0"
    retry_obs = [o for o in p1.observations if getattr(o, "phase", "") == "DECISION" and o.round == 0]
    assert retry_obs[1].rejection == "Expected exactly 1 schedule action, got 0" and retry_obs[1].attempt == 1
    assert res.metrics["meetings_scheduled"] == 2


async def test_rollback_when_one_participant_never_submits_a_valid_batch():
    bad = Reply(actions=(Schedule(1, 99),))
    p1 = ScriptPersona(decide=[bad] * 4, plan={1: 2, 2: 4})
    res = await play([PlanPersona({1: 2, 2: 4}), p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    r0 = [e for e in res.trace["events"] if e["data"]["round"] == 0]
    assert [e["type"] for e in r0].count("batch_rejected") == 4  # 1 try + 3 retries
    rolled = [e for e in r0 if e["type"] == "batch_rolled_back"]
    assert [e["data"]["agent_id"] for e in rolled] == [0]
    assert not [e for e in r0 if e["type"] == "batch_applied"]
    # nothing was applied: agent 0's calendar after round 0 equals its initial calendar
    res0 = [e for e in r0 if e["type"] == "resolution"][0]
    assert res0["data"]["coordinated"] is False
    assert res0["data"]["calendars"][0] == json.loads(json.dumps(TASK.row["calendars"][0]))
    assert res.metrics["meetings_scheduled"] == 1


async def test_ghost_meeting_when_slots_differ():
    p1 = ScriptPersona(decide=[lambda obs: Reply(actions=(Schedule(1, 1),))], plan={1: 2, 2: 4})
    res = await play([PlanPersona({1: 2, 2: 4}), p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    res0 = [e for e in res.trace["events"] if e["type"] == "resolution"][0]["data"]
    assert res0["coordinated"] is False and res0["per_agent_slot"] == {"0": 2, "1": 1}
    assert res0["slot_conflicts"] == {"2": [0], "1": [1]}
    # the copies stay where they were put
    assert res.state.calendars[0][2] == MeetingCopy(1) and res.state.calendars[1][1] == MeetingCopy(1)


async def test_consistency_violation_when_a_prior_meeting_copy_moves():
    # Round 2: agent 1 moves its copy of meeting 1 (slot 2 -> 0 is occupied; use slot 1) alone.
    def move_prior(obs):
        return Reply(actions=(Reschedule(1, 2, 1, "moving"), Schedule(2, 4)))
    p1 = ScriptPersona(decide=[lambda obs: Reply(actions=(Schedule(1, 2),)), move_prior], plan={1: 2, 2: 4})
    res = await play([PlanPersona({1: 2, 2: 4}), p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    evs = res.trace["events"]
    res1 = [e for e in evs if e["type"] == "resolution"][1]["data"]
    assert res1["coordinated"] is True and res1["consistency_violated_meeting_ids"] == [1]
    assert [e["data"]["meeting_id"] for e in evs if e["type"] == "meeting_broken"] == [1]
    assert res.metrics["scheduled_meeting_ids"] == [2]
    assert res.metrics["rounds_coordinated"] == 2
    assert res.metrics["per_seat"][1]["cost"] == 1  # a moved meeting copy costs 1


async def test_persona_crash_and_garbage_never_stop_the_game():
    class Broken(PlanPersona):
        async def speak(self, obs):
            raise RuntimeError("boom")

    p1 = ScriptPersona(decide=[Reply(error="parse_error", error_detail="not JSON", text="blah")], plan={1: 2, 2: 4})
    res = await play([Broken({1: 2, 2: 4}), p1, PlanPersona({1: 2, 2: 4}), PlanPersona({1: 2, 2: 4})])
    t = types(res.trace)
    assert "parse_error" in t and t[-1] == "game_end"
    errs = [e["data"] for e in res.trace["events"] if e["type"] == "parse_error"]
    assert any(e["error"] == "seat_error" and "boom" in e["detail"] for e in errs)


async def test_fold_reproduces_every_round():
    from engine.trace import fold_trace

    res = await play([PlanPersona({1: 2, 2: 4}) for _ in range(4)])
    folded = fold_trace(res.trace)
    assert folded.verified, folded.problems


def test_wrong_number_of_seats_is_a_clear_error():
    import asyncio
    with pytest.raises(ValueError, match="4 seats"):
        asyncio.run(run_game(TASK, [PlanPersona({})]))


async def test_fold_detects_a_tampered_state_hash_alone():
    from engine.trace import fold_trace

    res = await play([PlanPersona({1: 2, 2: 4}) for _ in range(4)])
    trace = json.loads(json.dumps(res.trace))
    res_ev = [e for e in trace["events"] if e["type"] == "resolution"][1]
    res_ev["data"]["state_hash"] = "0" * 16
    folded = fold_trace(trace)
    assert not folded.verified
    assert any("round 1" in p and "hash" in p for p in folded.problems)
