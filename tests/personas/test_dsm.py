"""DSM-Welfare / DSM-Private (personas/scripted/dsm.py): offers, scores, decisions,
sub-rounds, displacement, coordination, determinism and mixed tables."""

from __future__ import annotations

import itertools
import json

import pytest
from doubles import ScriptPersona, clear_and_schedule

from engine.actions import Message, Schedule
from engine.game import GameConfig, run_game
from engine.model import Errand, MeetingCopy, Task, calendar_to_json, item_from_json
from engine.seats import Reply
from engine.suite import canonical_task
from personas.scripted.dsm import (
    PRESETS,
    D,
    DSMPersona,
    Plan,
    band_cost,
    offer_utility,
    plan_batch,
    reward,
    satisfaction,
    scoring_cost,
)

F = None
TOP = D - 1


def E(i, c=1, b=False):
    return {"errand_id": i, "cost": c, **({"blocked": True} if b else {})}


def hand_task(calendars, meetings, cost_values=None):
    row = {"task_id": "hand", "seed": 1, "calendars": calendars,
           "meetings": [{"id": i + 1, "participants": p, "cost": 1, "duration": 1} for i, p in enumerate(meetings)]}
    if cost_values:
        row["params"] = {"cost_values": cost_values}
    return Task.from_row(row)


async def play(task, seats):
    return await run_game(task, seats, GameConfig(deterministic=True))


def dsm_table(task, preset="welfare", **kw):
    return [DSMPersona(preset, **kw) for _ in range(task.num_agents)]


def dms(trace, kind=None):
    out = [e["data"] for e in trace["events"] if e["type"] == "dm_sent"]
    if kind is not None:
        out = [d for d in out if (d.get("payload") or {}).get("kind") == kind]
    return out


def resolutions(trace):
    return [e["data"] for e in trace["events"] if e["type"] == "resolution"]


# --------------------------------------------------------------------------------------
# Presets, scores, rewards, offer size
# --------------------------------------------------------------------------------------
def test_presets_follow_table_9():
    w, p = PRESETS["welfare"], PRESETS["private"]
    assert (w.l_min, w.l_max, w.beta, w.theta, w.w_soc, w.cascade_depth, w.displacement_targets, w.exhaustive) == \
        (1, 12, 1.0, 0.0, 1.0, 2, 4, True)
    assert (p.l_min, p.l_max, p.beta, p.theta, p.w_soc, p.cascade_depth, p.displacement_targets, p.exhaustive) == \
        (1, 2, 0.25, 10.0, 0.25, 1, 2, False)
    assert DSMPersona("welfare").model == "dsm-welfare" and DSMPersona("private").model == "dsm-private"
    assert DSMPersona().kind == "scripted"
    assert DSMPersona("private", l_max=3).config.l_max == 3
    with pytest.raises(ValueError):
        DSMPersona("greedy")


def test_satisfaction_mapping_free_infeasible_and_monotone():
    assert satisfaction(None) == 0 and satisfaction(0) == TOP
    assert [satisfaction(c) for c in (1, 2, 3, 4, 10, 100)] == [10, 9, 9, 8, 7, 4]
    prev = TOP
    for c in range(5000):
        s = satisfaction(c)
        assert 1 <= s <= prev
        prev = s
    assert satisfaction(10**6) == 1
    # the initiator reads a score back as the top of its cost band
    assert [band_cost(s) for s in (0, 11, 10, 9, 7, 4)] == [0, 0, 1, 3, 15, 127]
    assert all(band_cost(satisfaction(c)) >= c > band_cost(satisfaction(c) + 1) for c in range(1, 512))
    assert [scoring_cost(s) for s in (0, 1, 10, 11)] == [0, 10, 1, 0]
    # R = (D-1-s*) + max(0, min(A, L) - 1)
    assert reward(10, 12, 12) == 12 and reward(11, 1, 1) == 0 and reward(9, 5, 3) == 4


def test_plan_batch_on_one_calendar():
    cal = (None, Errand(1, 10), Errand(2, 5, True), MeetingCopy(7), Errand(3, 1), None)
    cost = lambda plan, **kw: (plan_batch(cal, plan, 9, host=True, **kw) or (None,))[0]
    assert cost(Plan(0)) == 0 and cost(Plan(1)) == 10 and cost(Plan(4)) == 1
    assert cost(Plan(2)) is None  # blocked errand
    assert cost(Plan(3)) is None  # a prior meeting, no plan to move it
    assert cost(Plan(3, ((7, 3, 5),))) == 1  # move M7 to the free slot 5
    assert cost(Plan(3, ((7, 3, 4),))) == 2  # M7 to slot 4, whose errand goes to a free slot
    assert cost(Plan(3, ((7, 3, 2),))) is None  # cannot land on a blocked errand
    full = (Errand(1, 1), Errand(2, 1), None)
    assert plan_batch(full, Plan(0), 9, host=True)[0] == 1
    assert plan_batch(full[:2] + (MeetingCopy(4),), Plan(0), 9, host=True) is None  # nowhere to put the errand
    # Someone who must move M7 but holds it elsewhere cannot follow the plan.
    assert plan_batch(cal, Plan(0, ((7, 1, 5),)), 9, host=True, must_move=[7]) is None


def test_offer_utility_wide_for_welfare_narrow_for_private():
    cands = [(0.6, 11.0)] * 12
    w, p = PRESETS["welfare"], PRESETS["private"]
    uw = [offer_utility(cands, L, w) for L in range(1, 13)]
    assert all(b >= a for a, b in itertools.pairwise(uw))
    up = [offer_utility(cands, L, p) for L in range(1, 3)]
    assert up[0] > up[1]


async def test_offer_sizes_per_preset():
    # Everyone is free everywhere: the pool is all 16 slots.
    task = hand_task([[F] * 16 for _ in range(3)], [[0, 1, 2]])
    res = await play(task, dsm_table(task, "welfare"))
    props = dms(res.trace, "proposals")
    assert len(props) == 2 and all(d["payload"]["L"] == 12 and len(d["payload"]["slots"]) == 12 for d in props)
    assert props[0]["payload"]["slots"] == list(range(12))  # own order: satisfaction, then slot
    assert props[0]["content"].startswith("Agent 0 asks which of slots 0, 1, 2, 3")
    assert "for meeting M1" in props[0]["content"]
    res = await play(task, dsm_table(task, "private"))
    props = dms(res.trace, "proposals")
    assert props and all(len(d["payload"]["slots"]) <= 2 for d in props)
    # and on real tasks
    for i in (0, 7, 50):
        t = canonical_task(i)
        for preset, cap in (("welfare", 12), ("private", 2)):
            tr = (await play(t, dsm_table(t, preset))).trace
            sizes = [d["payload"]["L"] for d in dms(tr, "proposals")]
            assert sizes and max(sizes) <= cap


async def test_scores_follow_the_responders_calendar():
    cal1 = [F, E(1, 1), E(2, 10), E(3, 100), E(4, 1, True), F, F, F]
    task = hand_task([[F] * 8, cal1, [F] * 8], [[0, 1, 2]], cost_values=[1, 10, 100])
    res = await play(task, dsm_table(task))
    (sc,) = [d for d in dms(res.trace, "scores") if d["from_agent"] == 1]
    assert sc["payload"]["scores"] == {"0": 11, "1": 10, "2": 7, "3": 4, "4": 0, "5": 11, "6": 11, "7": 11}
    assert "slot 4: does not work (score 0)" in sc["content"] and "slot 3: works (score 4)" in sc["content"]
    assert sc["payload"]["scoring_cost"] == sum(scoring_cost(s) for s in sc["payload"]["scores"].values())


# --------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------
def _own_cost(cal, plan: dict):
    """The initiator's displacement cost for a plan, computed from scratch."""
    def usable(s, exclude):
        it = cal[s]
        if it is None:
            return 0
        if isinstance(it, Errand) and not it.blocked and any(cal[f] is None and f not in exclude
                                                             for f in range(len(cal))):
            return it.cost
        return None
    moves = plan["moves"]
    if not moves:
        return usable(plan["slot"], {plan["slot"]})
    if len(moves) != 1:
        return "skip"
    mv = moves[0]
    c = usable(mv["to_slot"], {mv["to_slot"], plan["slot"]})
    return None if c is None else c + 1


@pytest.mark.parametrize("i", [0, 3, 11, 20, 33, 44, 45, 48, 56, 65, 78, 89])
async def test_decision_is_the_best_fully_feasible_plan(i):
    task = canonical_task(i)
    res = await play(task, dsm_table(task))
    ev = res.trace["events"]
    cals = [calendar_to_json(c) for c in task.calendars]
    checked = 0
    for r, meeting in enumerate(task.meetings):
        init = min(meeting.participants)
        round_dms = [e["data"] for e in ev if e["type"] == "dm_sent" and e["data"]["round"] == r]
        decisions = [d for d in round_dms if d["payload"]["kind"] == "decision"]
        if decisions:
            props = [d for d in round_dms if d["payload"]["kind"] == "proposals"]
            last_sub = max(d["payload"]["subround"] for d in props)
            offered: dict[str, dict] = {}
            for d in props:
                if d["payload"]["subround"] != last_sub:
                    continue
                pl = d["payload"].get("plans") or {str(s): {"slot": s, "moves": []} for s in d["payload"]["slots"]}
                offered.update(pl)
            cal = [item_from_json(x) for x in cals[init]]
            totals = {}
            for pid, plan in offered.items():
                own = _own_cost(cal, plan)
                if own == "skip":
                    break
                if own is None:
                    continue
                deficits = [TOP - satisfaction(own)]
                ok = True
                for d in round_dms:
                    if d["payload"]["kind"] != "scores" or d["to_agent"] != init:
                        continue
                    p = d["payload"]
                    asked = [x for x in props if x["to_agent"] == d["from_agent"] and x["payload"]["subround"] == last_sub]
                    asked_ids = set(asked[0]["payload"].get("plans") or {str(s): 0 for s in asked[0]["payload"]["slots"]})
                    if pid not in asked_ids:
                        continue
                    s = (p.get("plan_scores") or {}).get(pid, p["scores"].get(str(plan["slot"])) if not plan["moves"] else None)
                    if s is None or s <= 0:
                        ok = False
                        break
                    deficits.append(TOP - s)
                if ok:
                    # least total cost read back from the scores (2**(11-s) - 1 each),
                    # then the smallest worst dissatisfaction, then the lowest slot
                    totals[pid] = (sum(2 ** d - 1 for d in deficits), max(deficits), plan["slot"])
            else:
                chosen = decisions[0]["payload"]["plan"]
                assert chosen in totals, (r, chosen, totals)
                assert totals[chosen] == min(totals.values()), (r, chosen, totals)
                assert all(d["payload"]["slot"] == decisions[0]["payload"]["slot"] for d in decisions)
                checked += 1
        for e in ev:
            if e["type"] == "resolution" and e["data"]["round"] == r:
                cals = e["data"]["calendars"]
    assert checked >= 3


async def test_sub_rounds_when_the_first_offer_fails():
    # Agent 0 is free on 0-11 (its favourites) but the others are blocked there;
    # only 12-15 (errands for agent 0) work for everyone.
    a0 = [F] * 12 + [E(1), E(2), E(3), E(4)]
    other = lambda base: [E(base + s, 1, True) for s in range(12)] + [F] * 4
    task = hand_task([a0, other(10), other(30)], [[0, 1, 2]])
    res = await play(task, dsm_table(task, "welfare"))
    props = dms(res.trace, "proposals")
    subs = sorted({d["payload"]["subround"] for d in props})
    assert subs == [1, 2]
    assert next(d["payload"]["slots"] for d in props if d["payload"]["subround"] == 2) == [12, 13, 14, 15]
    (dec, _) = dms(res.trace, "decision")
    assert dec["payload"]["slot"] == 12
    assert resolutions(res.trace)[0]["coordinated"] is True
    # DSM-Private stops after its first (one-slot) offer, says so, and nobody schedules.
    res = await play(task, dsm_table(task, "private"))
    assert {d["payload"]["subround"] for d in dms(res.trace, "proposals")} == {1}
    fails = dms(res.trace, "fail")
    assert len(fails) == 2 and "will not be scheduled" in fails[0]["content"]
    rs = resolutions(res.trace)[0]
    assert rs["coordinated"] is False and set(rs["per_agent_slot"].values()) == {None}
    assert not [e for e in res.trace["events"] if e["type"] == "batch_applied"]


async def test_displacement_offer_moves_a_prior_meeting():
    # M1 (agents 0,1) takes slot 0.  M2 (agents 0,2): agent 2 can only use slot 0,
    # so M1 must move to slot 1, the only other slot agents 0 and 1 can use.
    task = hand_task([[F, F, E(1, 1, True), E(2, 1, True)],
                      [F, F, E(3, 1, True), E(4, 1, True)],
                      [F, E(5, 1, True), E(6, 1, True), E(7, 1, True)]],
                     [[0, 1], [0, 2]])
    res = await play(task, dsm_table(task, "welfare"))
    r1 = [d for d in dms(res.trace) if d["round"] == 1]
    to_bumped = [d for d in r1 if d["to_agent"] == 1 and d["payload"]["kind"] == "proposals"]
    assert len(to_bumped) == 1
    plans = to_bumped[0]["payload"]["plans"]
    assert list(plans.values()) == [{"slot": 0, "moves": [{"meeting_id": 1, "from_slot": 0, "to_slot": 1}]}]
    assert "if meeting M1 moves from slot 0 to slot 1" in to_bumped[0]["content"]
    dec = [d for d in r1 if d["payload"]["kind"] == "decision"]
    assert {d["to_agent"] for d in dec} == {1, 2} and all(d["payload"]["slot"] == 0 for d in dec)
    vol = [e for e in res.trace["events"] if e["type"] == "batch_applied" and e["data"]["phase"] == "VOLUNTARY"]
    assert [e["data"]["agent_id"] for e in vol] == [1]
    rs = resolutions(res.trace)
    assert rs[1]["coordinated"] and rs[1]["per_agent_slot"] == {"0": 0, "2": 0}
    assert rs[1]["consistency_violated_meeting_ids"] == []
    cal = res.state.calendars
    assert cal[0][1] == MeetingCopy(1) and cal[1][1] == MeetingCopy(1) and cal[0][0] == MeetingCopy(2)
    assert res.metrics["meetings_scheduled"] == 2
    # Without displacement the second meeting cannot be scheduled.
    res = await play(task, dsm_table(task, "welfare", cascade_depth=0))
    assert [r["coordinated"] for r in resolutions(res.trace)] == [True, False]
    assert res.metrics["meetings_scheduled"] == 1


async def test_budget_bookkeeping():
    task = canonical_task(2)
    seats = dsm_table(task)
    await play(task, seats)
    init_entries = [e for s in seats for e in s.ledger if e["role"] == "initiator"]
    resp_entries = [e for s in seats for e in s.ledger if e["role"] == "responder"]
    assert len(init_entries) == len(task.meetings)
    # What responders paid and received is what initiators received and paid.
    assert sum(e["received"] for e in init_entries) == sum(e["paid"] for e in resp_entries)
    assert sum(e["paid"] for e in init_entries) == sum(e["received"] for e in resp_entries)
    assert sum(s.budget for s in seats) == 100 * len(seats)


# --------------------------------------------------------------------------------------
# Suites, determinism, mixed tables
# --------------------------------------------------------------------------------------
async def test_welfare_coordinates_at_least_95_percent():
    ids = list(range(0, 90, 3))
    coord = total = 0
    for i in ids:
        task = canonical_task(i)
        res = await play(task, dsm_table(task))
        rs = resolutions(res.trace)
        coord += sum(r["coordinated"] for r in rs)
        total += len(rs)
        assert not [e for e in res.trace["events"] if e["type"] in ("parse_error", "meeting_broken")]
    assert coord / total >= 0.95


async def test_welfare_on_the_authors_uniform_tasks(authors_tasks_path):
    rows = [json.loads(line) for line in authors_tasks_path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["params"]["total_agents"] == 5 and r["params"]["subset_size"] == 3]
    assert len(rows) == 36
    coord = total = 0
    for row in rows[::3]:
        task = Task.from_row(row)
        res = await play(task, dsm_table(task))
        rs = resolutions(res.trace)
        coord += sum(r["coordinated"] for r in rs)
        total += len(rs)
    assert coord / total >= 0.95


async def test_same_trace_twice():
    task = canonical_task(52)
    a = await play(task, dsm_table(task))
    b = await play(task, dsm_table(task))
    assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)
    c = await play(task, dsm_table(task, "private"))
    d = await play(task, dsm_table(task, "private"))
    assert json.dumps(c.trace, sort_keys=True) == json.dumps(d.trace, sort_keys=True)


def _dsm_decision(obs):
    for m in obs.round_messages:
        p = m.payload or {}
        if p.get("kind") == "decision":
            return p["slot"]
    return None


def _free_text_responder(works, fails):
    def speak(obs):
        props = [m for m in obs.inbox if (m.payload or {}).get("kind") == "proposals"]
        if not props:
            return Reply()
        return Reply(actions=(Message("dm", f"Slot {works} works for me. I can't do slot {fails}.",
                                       props[0].sender),))
    return speak


def _follow_decision(obs):
    slot = _dsm_decision(obs)
    if slot is None:
        return Reply()
    return Reply(actions=tuple(clear_and_schedule(obs.view.calendar, obs.meeting.id, slot)))


async def test_mixed_table_free_text_responder():
    task = hand_task([[F] * 8 for _ in range(3)], [[0, 1, 2]])
    human = ScriptPersona(speak=[_free_text_responder(5, 0)] * 15, decide=[_follow_decision] * 4)
    seats = [DSMPersona(), DSMPersona(), human]
    res = await play(task, seats)
    (dec,) = [d for d in dms(res.trace, "decision") if d["to_agent"] == 2]
    assert dec["payload"]["slot"] == 5  # 0 was refused; 5 is the only slot the text accepted
    assert resolutions(res.trace)[0]["coordinated"]
    assert not [e for e in res.trace["events"] if e["type"] == "parse_error"]


async def test_mixed_table_free_text_initiator():
    # The free-text seat is the initiator (lowest id) and proposes slot 5 in English.
    task = hand_task([[F] * 8 for _ in range(3)], [[0, 1, 2]])

    def propose(obs):
        if obs.turn == 0:
            return Reply(actions=(Message("dm", "Hi! How about slot 5 for our meeting?", 1),
                                  Message("dm", "Hi! How about slot 5 for our meeting?", 2)))
        return Reply()

    human = ScriptPersona(speak=[propose] * 15, decide=[lambda o: Reply(actions=tuple(
        clear_and_schedule(o.view.calendar, o.meeting.id, 5)))] * 4)
    res = await play(task, [human, DSMPersona(), DSMPersona()])
    answers = [d for d in dms(res.trace) if d["to_agent"] == 0]
    assert len(answers) == 2 and all("5" in d["content"] for d in answers)
    rs = resolutions(res.trace)[0]
    assert rs["coordinated"] and rs["per_agent_slot"] == {"0": 5, "1": 5, "2": 5}


async def test_mixed_table_silent_responder_and_canonical_table():
    # A responder that never answers: the initiator decides with what it has.
    task = hand_task([[F] * 8 for _ in range(3)], [[0, 1, 2]])
    silent = ScriptPersona(decide=[_follow_decision] * 4)
    res = await play(task, [DSMPersona("private"), DSMPersona("private"), silent])
    decs = dms(res.trace, "decision")
    assert {d["to_agent"] for d in decs} == {1, 2}
    assert resolutions(res.trace)[0]["coordinated"]
    # A canonical game with one free-text seat among DSM bots finishes cleanly.
    task = canonical_task(4)
    human = ScriptPersona(speak=[_free_text_responder(3, 9)] * 80, decide=[_follow_decision] * 40)
    seats = [DSMPersona() for _ in range(5)]
    seats[3] = human
    res = await play(task, seats)
    t = [e["type"] for e in res.trace["events"]]
    assert t[-1] == "game_end" and t.count("resolution") == len(task.meetings)
    assert not [e for e in res.trace["events"] if e["type"] == "parse_error" and e["data"]["agent_id"] != 3]


async def test_one_sweep_budget_falls_back_to_own_best_slot():
    task = hand_task([[E(1), F, F, F], [F] * 4, [F] * 4], [[0, 1, 2]])
    res = await run_game(task, dsm_table(task), GameConfig(deterministic=True, max_turns_per_round=1))
    d1, _d2 = dms(res.trace, "decision")
    assert d1["payload"]["slot"] == 1 and "own best slot" in d1["content"]  # its first free slot
    assert resolutions(res.trace)[0]["coordinated"]


def test_schedule_helper_sanity():
    # The doubles' helper and ours agree on a simple clear-and-schedule.
    cal = (Errand(1, 1), None, None)
    assert clear_and_schedule(cal, 4, 0)[-1] == Schedule(4, 0)
    assert plan_batch(cal, Plan(0), 4, host=True)[1][-1] == Schedule(4, 0)
