"""SD-MAP (personas/scripted/sdmap.py): slot-by-slot proposals in local order, binary
replies, confirm/fail, scheduling-difficulty bumping and the bump repair episode."""

from __future__ import annotations

import json

import pytest

from engine.actions import Message
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand, MeetingCopy
from engine.seats import Reply
from engine.suite import canonical_recipe
from personas.registry import make_personas
from personas.scripted.sdmap import SDMAPPersona

from doubles import E, hand_task, ScriptPersona, round_calendars


async def play(task, seats):
    return await run_game(task, seats, GameConfig(deterministic=True))


def messages(trace, rnd=None):
    return [e["data"] for e in trace["events"] if e["type"].endswith("_sent")
            and (rnd is None or e["data"]["round"] == rnd)]


def kinds(trace, rnd=None):
    return [(d["from_agent"], d["to_agent"], (d.get("payload") or {}).get("kind")) for d in messages(trace, rnd)]


def feasible(cal, s):
    it = cal[s]
    if it is None:
        return True
    return isinstance(it, Errand) and not it.blocked and any(x is None for t, x in enumerate(cal) if t != s)


CANONICAL = [generate_scenario(**canonical_recipe(i)) for i in range(10)]


async def test_proposals_walk_local_order_until_everyone_is_pending():
    for task in CANONICAL:
        res = await play(task, [SDMAPPersona() for _ in range(5)])
        cals = round_calendars(task, res.trace)
        for r, m in enumerate(task.meetings):
            init = min(m.participants)
            resp = sorted(p for p in m.participants if p != init)
            common = [s for s in range(task.num_slots) if all(feasible(cals[r][a], s) for a in m.participants)]
            mine = [s for s in range(task.num_slots) if feasible(cals[r][init], s)]
            msgs = messages(res.trace, r)
            props = [d["payload"]["slot"] for d in msgs if d["payload"]["kind"] == "propose" and d["to_agent"] == resp[0]]
            replies = [d for d in msgs if d["payload"]["kind"] == "reply"]
            confirms = [d for d in msgs if d["payload"]["kind"] == "confirm"]
            assert all(d["payload"]["protocol"] == "sdmap" and d["channel"] == "dm" for d in msgs)
            if common:
                assert props == [s for s in mine if s <= common[0]]
                assert [(d["to_agent"], d["payload"]["slot"]) for d in confirms] == [(a, common[0]) for a in resp]
                assert len(msgs) == 4 * len(props) + len(resp)
            for d in replies:
                want = "PENDING" if feasible(cals[r][d["from_agent"]], d["payload"]["slot"]) else "IMPOSSIBLE"
                assert d["payload"]["status"] == want and d["to_agent"] == init
            assert not {d["payload"]["kind"] for d in msgs} & {"reschedule_request", "propose_reschedule"}
        assert res.metrics["meetings_scheduled"] == sum(
            1 for r in res.trace["events"] if r["type"] == "resolution" and r["data"]["coordinated"])


async def test_sdmap_is_chattier_than_imap_and_still_coordinates():
    totals = {}
    for spec in ("imap", "sdmap"):
        msgs = sched = 0
        for task in CANONICAL:
            res = await play(task, make_personas(spec, 5))
            msgs += res.metrics["total_cheap_talk_messages"]
            sched += res.metrics["meetings_scheduled"]
        totals[spec] = (msgs, sched)
    assert totals["sdmap"][0] > totals["imap"][0]
    assert totals["sdmap"][1] >= 0.9 * totals["imap"][1]


def test_persona_identity_and_options():
    p = SDMAPPersona()
    assert p.kind == "scripted" and p.model == "sdmap" and p.repair == "next_round"
    with pytest.raises(ValueError):
        SDMAPPersona(repair="whenever")


# -- bumping ------------------------------------------------------------------------------
B = lambda i: E(i, 1, True)  # noqa: E731
# M1 = {1, 2} lands on slot 0.  M2 = {0, 2, 3} can only use slot 0, where agent 2 holds M1:
# M1 has 1 other participant (for agent 2), M2 has 2 -> agent 2 bumps M1.  M1's
# initiator is agent 1, who is not in M2; agent 2 sits in M3 = {0, 2, 3} (slot 5).
BUMP_ROWS = [
    [None, B(1), B(2), B(3), B(4), None],
    [None, B(11), B(12), B(13), None, B(15)],
    [None, B(21), B(22), None, None, None],
    [None, B(31), B(32), B(33), B(34), None],
]
BUMP_MEETINGS = [[1, 2], [0, 2, 3], [0, 2, 3]]


def batches(trace, phase=None):
    return [(e["data"]["round"], e["data"]["phase"], e["data"]["agent_id"], e["data"]["actions"])
            for e in trace["events"] if e["type"] == "batch_applied" and (phase is None or e["data"]["phase"] == phase)]


def strip(acts):
    return [(a["type"], a.get("item_id", a.get("meeting_id")), a.get("from_slot"), a.get("to_slot", a.get("slot")))
            for a in acts]


async def test_bump_and_repair_in_the_next_round():
    task = hand_task(BUMP_ROWS, BUMP_MEETINGS)
    res = await play(task, [SDMAPPersona() for _ in range(4)])
    # Round 1: agent 2 answers PENDING by bumping M1, parks it on its lowest free slot (3).
    assert (2, 0, "reply") in kinds(res.trace, 1)
    r1 = [b for b in batches(res.trace) if b[0] == 1 and b[2] == 2]
    assert strip(r1[0][3]) == [("reschedule", 1, 0, 3), ("schedule", 2, None, 0)]
    broken = [e["data"] for e in res.trace["events"] if e["type"] == "meeting_broken"]
    assert [(d["round"], d["meeting_id"]) for d in broken] == [(1, 1)]
    # Round 2: the repair episode, started by the bumper at its first turn.
    repair = [k for k in kinds(res.trace, 2) if k[2] and "reschedule" in k[2]]
    assert repair == [(2, 1, "reschedule_request"), (1, 2, "propose_reschedule"),
                      (2, 1, "reschedule_reply"), (1, 2, "confirm_reschedule")]
    prop = next(d for d in messages(res.trace, 2) if d["payload"]["kind"] == "propose_reschedule")
    assert prop["payload"] == {"protocol": "sdmap", "kind": "propose_reschedule", "meeting_id": 1,
                               "from_slot": 0, "to_slot": 4}
    # The non-participant moves in VOLUNTARY, the participant in its DECISION batch.
    assert [(b[2], strip(b[3])) for b in batches(res.trace, "VOLUNTARY")] == [(1, [("reschedule", 1, 0, 4)])]
    r2 = [b for b in batches(res.trace, "DECISION") if b[0] == 2 and b[2] == 2]
    assert strip(r2[0][3]) == [("reschedule", 1, 3, 4), ("schedule", 3, None, 5)]
    cals = res.state.calendars
    assert cals[1][4] == MeetingCopy(1) and cals[2][4] == MeetingCopy(1)
    assert res.metrics["meetings_scheduled"] == 3


async def test_bump_and_repair_in_the_same_round():
    task = hand_task(BUMP_ROWS, BUMP_MEETINGS)
    res = await play(task, [SDMAPPersona(repair="same_round") for _ in range(4)])
    repair = [k for k in kinds(res.trace, 1) if k[2] and "reschedule" in k[2]]
    assert repair == [(2, 1, "reschedule_request"), (1, 2, "propose_reschedule"),
                      (2, 1, "reschedule_reply"), (1, 2, "confirm_reschedule")]
    assert [(b[0], b[2], strip(b[3])) for b in batches(res.trace, "VOLUNTARY")] == [(1, 1, [("reschedule", 1, 0, 4)])]
    r1 = [b for b in batches(res.trace, "DECISION") if b[0] == 1 and b[2] == 2]
    assert strip(r1[0][3]) == [("reschedule", 1, 0, 4), ("schedule", 2, None, 0)]
    assert not any(e["type"] == "meeting_broken" for e in res.trace["events"])
    assert res.metrics["meetings_scheduled"] == 3


async def test_failed_repair_leaves_the_bumped_meeting_where_it_is():
    rows = [list(r) for r in BUMP_ROWS]
    rows[1] = [None, B(11), B(12), B(13), B(14), B(15)]  # agent 1 has no other free slot
    res = await play(hand_task(rows, BUMP_MEETINGS), [SDMAPPersona() for _ in range(4)])
    repair = [k for k in kinds(res.trace, 2) if k[2] and "reschedule" in k[2]]
    assert repair == [(2, 1, "reschedule_request"), (1, 2, "fail_reschedule")]
    assert not batches(res.trace, "VOLUNTARY")
    assert res.state.calendars[1][0] == MeetingCopy(1) and res.state.calendars[2][3] == MeetingCopy(1)
    assert res.metrics["meetings_scheduled"] == 2


async def test_no_bump_between_meetings_of_equal_size():
    rows = [list(r) for r in BUMP_ROWS]
    task = hand_task(rows, [[0, 2, 3], [1, 2, 3]])  # both three-participant: nothing to bump
    res = await play(task, [SDMAPPersona() for _ in range(4)])
    assert not any((d.get("payload") or {}).get("kind", "").endswith("reschedule") for d in messages(res.trace))
    assert all(not any(a["type"] == "reschedule" and a["item_id"] == 1 for a in b[3]) for b in batches(res.trace))


# -- mixed tables and determinism -------------------------------------------------------------
async def test_free_text_counter_proposal_is_tried_next():
    task = hand_task([[None] * 6, [None] * 6], [[0, 1]])

    def speak(obs):
        text = " ".join(m.content for m in obs.inbox)
        if "proposes slot 0" in text:
            return Reply(actions=(Message("dm", "I can't do 0, how about 3?", 0),))
        if "proposes slot 3" in text:
            return Reply(actions=(Message("dm", "Yes, 3 works.", 0),))
        return Reply()

    res = await play(task, [SDMAPPersona(), ScriptPersona(speak=[speak] * 30, plan={1: 3})])
    props = [d["payload"]["slot"] for d in messages(res.trace) if (d.get("payload") or {}).get("kind") == "propose"]
    assert props == [0, 3]
    assert [d["payload"]["slot"] for d in messages(res.trace) if (d.get("payload") or {}).get("kind") == "confirm"] == [3]
    assert res.metrics["meetings_scheduled"] == 1


async def test_sdmap_answers_other_protocols_in_english():
    task = hand_task([[None] * 6, [E(1, 1, True)] + [None] * 5, [None] * 6], [[0, 1, 2]])
    res = await play(task, make_personas("imap,sdmap,sdmap", 3))
    # IMAP's cost_request reaches the SD-MAP seats as English; they answer with slots they can do,
    # and IMAP's decision (a slot announced outside their protocol) with whether it works for them.
    ans = [d for d in messages(res.trace) if d["from_agent"] in (1, 2)]
    asked = [d for d in ans if d["payload"]["kind"] == "text"]
    assert len(asked) == 2 and all("I could do slots" in d["content"] for d in asked)
    told = [d for d in ans if d["payload"]["kind"] == "answer"]
    assert len(told) == 2 and all(d["content"] == "Slot 1 works for me." for d in told)
    assert res.metrics["meetings_scheduled"] == 1


async def test_deterministic_traces():
    for task, seats in ((hand_task(BUMP_ROWS, BUMP_MEETINGS), lambda: [SDMAPPersona() for _ in range(4)]),
                        (CANONICAL[0], lambda: make_personas("sdmap", 5))):
        a = await play(task, seats())
        b = await play(task, seats())
        assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)


GARBAGE = [
    {"protocol": "sdmap", "kind": "propose", "meeting_id": 1, "slot": "abc"},
    {"protocol": "sdmap", "kind": "propose", "meeting_id": 1, "slot": 99},
    {"protocol": "sdmap", "kind": "reply", "meeting_id": 1, "slot": None, "status": 7},
    {"protocol": "sdmap", "kind": "confirm", "meeting_id": 1, "slot": -4},
    {"protocol": "sdmap", "kind": "reschedule_request", "meeting_id": "x", "from_slot": [1]},
    {"protocol": "sdmap", "kind": "propose_reschedule", "meeting_id": 1, "from_slot": 0, "to_slot": 400},
    {"protocol": "sdmap", "kind": "confirm_reschedule", "meeting_id": 2, "to_slot": "3"},
    {"protocol": "imap", "kind": "cost_request", "meeting_id": 1, "slots": "all"},
    {"protocol": "imap", "kind": "costs", "meeting_id": 1, "costs": [1, 2, None]},
    {"protocol": "imap", "kind": "costs", "meeting_id": 1, "costs": {"x": 1, "3": "cheap", "-1": 0}},
    {"protocol": "imap", "kind": "decision", "meeting_id": True, "slot": 2.5},
    {"protocol": "dsm", "kind": "proposals", "slots": {"a": 1}},
    {"protocol": "nope", "kind": 3},
]


async def test_forged_or_malformed_payloads_never_crash_a_bot():
    task = hand_task([[None] * 6, [None, E(1)] + [None] * 4, [None] * 6], [[0, 1, 2], [0, 1, 2]])
    for spec in ("sdmap", "imap"):
        for first in (True, False):
            noise = [Reply(actions=tuple(Message("dm", "x", to, p) for to in (0, 1, 2) if to != (0 if first else 1)))
                     for p in GARBAGE]
            seats = make_personas(spec, 3)
            seats[0 if first else 1] = ScriptPersona(speak=noise, plan={1: 3, 2: 4})
            res = await play(task, seats)
            assert res.trace["events"][-1]["type"] == "game_end"
            assert not [e for e in res.trace["events"] if e["type"] == "parse_error"
                        and e["data"].get("error") == "seat_error"]
