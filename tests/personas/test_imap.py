"""IMAP (personas/scripted/imap.py): the exact message exchange, the min-total choice,
2.00 messages per scheduled participant-meeting, failure, mixed tables, determinism."""

from __future__ import annotations

import json

from engine.actions import Message
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand, MeetingCopy, Task
from engine.seats import Reply
from engine.suite import canonical_recipe
from personas.registry import make_personas
from personas.scripted.imap import IMAPPersona

from doubles import E, hand_task, ScriptPersona, clear_and_schedule, round_calendars


def canonical_like(n=12):
    return [generate_scenario(**canonical_recipe(i)) for i in range(n)]


async def play(task, seats):
    return await run_game(task, seats, GameConfig(deterministic=True))


def messages(trace, rnd=None):
    return [e["data"] for e in trace["events"] if e["type"].endswith("_sent")
            and (rnd is None or e["data"]["round"] == rnd)]


def cost(cal, s):
    """Independent insertion cost: 0 free, errand cost if it can move to a free slot, None."""
    it = cal[s]
    if it is None:
        return 0
    if isinstance(it, Errand) and not it.blocked and any(x is None for t, x in enumerate(cal) if t != s):
        return it.cost
    return None


def min_total(cals, participants, num_slots):
    best = None
    for s in range(num_slots):
        cs = [cost(cals[a], s) for a in participants]
        if None in cs:
            continue
        if best is None or sum(cs) < best[0]:
            best = (sum(cs), s)
    return best


# -- the exact exchange ------------------------------------------------------------------
async def test_all_imap_messages_are_exactly_the_protocol():
    for task in canonical_like(6):
        res = await play(task, [IMAPPersona() for _ in range(task.num_agents)])
        cals = round_calendars(task, res.trace)
        for r, m in enumerate(task.meetings):
            init, resp = min(m.participants), sorted(p for p in m.participants if p != min(m.participants))
            msgs = messages(res.trace, r)
            assert len(msgs) == 3 * len(resp)
            assert all(d["channel"] == "dm" and d["payload"]["protocol"] == "imap" for d in msgs)
            assert all(d["payload"]["meeting_id"] == m.id and d["content"] for d in msgs)
            req = [d for d in msgs if d["payload"]["kind"] == "cost_request"]
            costs = [d for d in msgs if d["payload"]["kind"] == "costs"]
            dec = [d for d in msgs if d["payload"]["kind"] == "decision"]
            mine = [s for s in range(task.num_slots) if cost(cals[r][init], s) is not None]
            # cost_request: the initiator's own feasible slots, one DM per responder, at its first turn
            assert [(d["from_agent"], d["to_agent"]) for d in req] == [(init, a) for a in resp]
            assert all(d["payload"]["slots"] == mine for d in req)
            assert len({d["turn"] for d in req}) == 1
            # costs: one per responder, with the independently computed value per requested slot
            assert sorted((d["from_agent"], d["to_agent"]) for d in costs) == [(a, init) for a in resp]
            for d in costs:
                assert d["payload"]["costs"] == {str(s): cost(cals[r][d["from_agent"]], s) for s in mine}
            # decision: the independent min-total insertion (ties -> lowest slot)
            best = min_total(cals[r], m.participants, task.num_slots)
            assert [(d["from_agent"], d["to_agent"], d["payload"]["slot"]) for d in dec] == \
                [(init, a, best[1]) for a in resp]
            assert f"slot {best[1]}" in dec[0]["content"]
            # everyone schedules it, moving the errand there to its lowest free slot
            applied = {e["data"]["agent_id"]: e["data"]["actions"] for e in res.trace["events"]
                       if e["type"] == "batch_applied" and e["data"]["round"] == r}
            assert sorted(applied) == sorted(m.participants)
            for a, acts in applied.items():
                assert acts[-1]["type"] == "schedule" and acts[-1]["slot"] == best[1]
                it = cals[r][a][best[1]]
                if it is None:
                    assert len(acts) == 1
                else:
                    lowest = next(t for t, x in enumerate(cals[r][a]) if x is None)
                    assert acts[0] == {"type": "reschedule", "item_id": it.errand_id, "from_slot": best[1],
                                       "to_slot": lowest, "justification": acts[0]["justification"],
                                       "cost": it.cost}
        assert res.metrics["meetings_scheduled"] == len(task.meetings)


async def test_two_messages_per_scheduled_participant_meeting():
    total_msgs = total_pm = 0
    for task in canonical_like(12):
        res = await play(task, make_personas("imap", task.num_agents))
        m = res.metrics
        assert m["meetings_scheduled"] == len(task.meetings)
        assert m["messages_per_meeting"] == 2.0
        assert m["total_cheap_talk_messages"] == 6 * len(task.meetings)
        total_msgs += m["total_cheap_talk_messages"]
        total_pm += sum(s["meetings_scheduled"] for s in m["per_seat"])
    assert total_msgs / total_pm == 2.0


async def test_authors_tasks_all_scheduled_at_two_messages(authors_tasks_path):
    rows = [json.loads(line) for line in authors_tasks_path.read_text().splitlines() if line.strip()]
    tasks = [Task.from_row(r) for r in rows if r["params"].get("total_agents") == 5
             and r["params"].get("subset_size") == 3]
    assert len(tasks) == 36
    msgs = pm = 0
    for task in tasks:
        res = await play(task, [IMAPPersona() for _ in range(5)])
        assert res.metrics["meetings_scheduled"] == 5
        msgs += res.metrics["total_cheap_talk_messages"]
        pm += sum(s["meetings_scheduled"] for s in res.metrics["per_seat"])
    assert msgs / pm == 2.0


async def test_no_common_slot_sends_fail_and_each_takes_its_cheapest():
    task = hand_task([[None, E(1, 1, True), E(2)], [E(3, 1, True), None, E(4, 1, True)]], [[0, 1]])
    res = await play(task, [IMAPPersona(), IMAPPersona()])
    kinds = [(d["from_agent"], d["payload"]["kind"]) for d in messages(res.trace)]
    assert kinds == [(0, "cost_request"), (1, "costs"), (0, "fail")]
    assert messages(res.trace)[0]["payload"]["slots"] == [0, 2]
    assert messages(res.trace)[1]["payload"]["costs"] == {"0": None, "2": None}
    # Each submits its own cheapest slot: agent 0 slot 0, agent 1 slot 1 -> a ghost, not coordinated.
    assert res.state.calendars[0][0] == MeetingCopy(1) and res.state.calendars[1][1] == MeetingCopy(1)
    assert res.metrics["meetings_scheduled"] == 0


async def test_never_bumps_prior_meetings():
    # Meeting 2 (3 people) could only fit where meeting 1 (2 people) sits: IMAP fails instead.
    B = E(9, 1, True)
    task = hand_task([[None, B, None, B], [None, B, B, None], [None, B, B, B]], [[0, 1], [0, 1, 2]])
    res = await play(task, [IMAPPersona() for _ in range(3)])
    assert res.state.calendars[0][0] == MeetingCopy(1) and res.state.calendars[1][0] == MeetingCopy(1)
    r1 = messages(res.trace, 1)
    assert r1[0]["payload"]["slots"] == [2]  # agent 0's slot 0 holds meeting 1: never offered
    assert r1[-1]["payload"]["kind"] == "fail"
    assert not any(e["type"] == "meeting_broken" for e in res.trace["events"])


# -- mixed tables ------------------------------------------------------------------------
def talker(lines, plan):
    """A free-text seat: ``lines(obs)`` -> [(to, text)] at each turn; schedules ``plan``."""
    def speak(obs):
        return Reply(actions=tuple(Message("dm", text, to) for to, text in lines(obs)))
    return ScriptPersona(speak=[speak] * 50, plan=plan)


def said(obs, needle):
    return any(needle in m.content for m in obs.inbox)


async def test_free_text_responder_steers_the_decision():
    task = hand_task([[None] * 8, [None] * 8, [None] * 8], [[0, 1, 2]])

    def lines(obs):
        return [(0, "I can't do 0-4, how about 7?")] if said(obs, "asks your costs") else []

    res = await play(task, [IMAPPersona(), IMAPPersona(), talker(lines, {1: 7})])
    msgs = messages(res.trace)
    dec = [d for d in msgs if (d.get("payload") or {}).get("kind") == "decision"]
    assert {d["payload"]["slot"] for d in dec} == {7} and len(dec) == 2
    assert res.metrics["meetings_scheduled"] == 1 and res.state.calendars[2][7] == MeetingCopy(1)
    # The IMAP responder answered with costs; the initiator did not chat back to the talker.
    assert [(d["from_agent"], (d.get("payload") or {}).get("kind")) for d in msgs] == [
        (0, "cost_request"), (0, "cost_request"), (1, "costs"), (2, None), (0, "decision"), (0, "decision")]


async def test_objection_after_the_decision_triggers_a_new_decision():
    task = hand_task([[None] * 8, [None] * 8, [None] * 8], [[0, 1, 2]])

    def lines(obs):
        if said(obs, "asks your costs"):
            return [(0, "I'm free at 2 and 6.")]
        if said(obs, "Decision for meeting M1: slot 2"):
            return [(0, "Sorry, slot 2 doesn't work for me after all. How about 6?")]
        return []

    res = await play(task, [IMAPPersona(), IMAPPersona(), talker(lines, {1: 6})])
    dec = [(d["to_agent"], d["payload"]["slot"]) for d in messages(res.trace)
           if (d.get("payload") or {}).get("kind") == "decision"]
    assert dec == [(1, 2), (2, 2), (1, 6), (2, 6)]
    assert res.metrics["meetings_scheduled"] == 1
    assert res.state.calendars[0][6] == MeetingCopy(1) and res.state.calendars[1][6] == MeetingCopy(1)


async def test_imap_responders_follow_a_free_text_initiator():
    task = hand_task([[None] * 6, [None, None, E(1), None, None, None], [None] * 6], [[0, 1, 2]])

    def lines(obs):
        return [(1, "Hi both, let's meet at slot 2."), (2, "Hi both, let's meet at slot 2.")] if obs.turn == 0 else []

    res = await play(task, [talker(lines, {1: 2}), IMAPPersona(), IMAPPersona()])
    replies = [d for d in messages(res.trace) if d["from_agent"] in (1, 2)]
    assert [(d["from_agent"], d["to_agent"]) for d in replies] == [(1, 0), (2, 0)]
    assert all(d["content"] == "Slot 2 works for me." and d["payload"]["kind"] == "answer"
               and d["payload"]["works"] == [2] for d in replies)
    assert res.metrics["meetings_scheduled"] == 1
    assert res.state.calendars[1][2] == MeetingCopy(1) and res.state.calendars[1][0] == Errand(1, 1)


async def test_responder_says_no_to_a_slot_it_cannot_hold():
    task = hand_task([[None] * 4, [E(1, 1, True), None, None, None]], [[0, 1]])

    def lines(obs):
        return [(1, "How about slot 0?")] if obs.turn == 0 else []

    res = await play(task, [talker(lines, {1: 0}), IMAPPersona()])
    reply, reminder = [d for d in messages(res.trace) if d["from_agent"] == 1]
    assert reply["content"] == "I can't do slot 0, but I could do slot 1, 2 or 3."
    assert reply["payload"]["cannot"] == [0] and reply["payload"]["alternatives"] == [1, 2, 3]
    # the talker (who leads) said nothing more: reminded once of the same slots, nothing new revealed
    assert reminder["content"] == "Could we do slot 1, 2 or 3 instead?" and reminder["turn"] == reply["turn"] + 1
    assert reminder["payload"]["alternatives"] == [1, 2, 3]
    assert res.metrics["meetings_scheduled"] == 0  # the talker insisted on 0; IMAP took its own 1


async def test_mixed_protocol_and_passive_tables_finish_without_errors():
    for spec in ("imap,imap,imap,sdmap,sdmap", "sdmap,imap,dsm-welfare,imap,dsm-private", "imap,passive,imap,imap,imap"):
        for task in canonical_like(4):
            res = await play(task, make_personas(spec, 5))
            ev = res.trace["events"]
            assert ev[-1]["type"] == "game_end"
            assert not [e for e in ev if e["type"] == "parse_error" and e["data"].get("error") == "seat_error"]
            assert res.metrics["total_cheap_talk_messages"] < 40 * len(task.meetings)
            if spec.startswith("imap,imap,imap"):
                assert res.metrics["meetings_scheduled"] >= 1


async def test_deterministic_traces():
    task = canonical_like(1)[0]
    for spec in ("imap", "imap,imap,sdmap,imap,passive"):
        a = await play(task, make_personas(spec, 5))
        b = await play(task, make_personas(spec, 5))
        assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)


def test_persona_identity():
    p = IMAPPersona()
    assert p.kind == "scripted" and p.model == "imap"
    assert clear_and_schedule  # the test double module is importable alongside
