"""VPS (engine/privacy.py): hand-computed games, groupchats, free text and gossip, the
authors' traces, and our IMAP against the authors' figure on their 36 tasks."""

from __future__ import annotations

import json

import pytest

from engine.actions import Message
from engine.events import ListSink
from engine.game import GameConfig, run_game
from engine.model import Errand, Task, item_from_json
from engine.privacy import belief_updates, privacy_metrics
from engine.render import parse_calendar_render
from engine.seats import Reply
from personas.scripted.imap import IMAPPersona

from doubles import E, hand_task, ScriptPersona


def typed(kind, proto="imap", **fields):
    return {"protocol": proto, "kind": kind, "meeting_id": 1, **fields}


def says(*turns):
    """ScriptPersona speak items: one list of Messages per turn."""
    return [Reply(actions=tuple(t)) for t in turns]


async def play(task, seats, channels=("dm",)):
    res = await run_game(task, seats, GameConfig(deterministic=True, channels=channels), ListSink())
    return res


# Agent 1: slot 0 free, slot 1 blocked, slot 2 a movable errand of cost 9, slot 3 an errand.
TINY = hand_task([[None, None, E(1), None], [None, E(2, 1, True), E(3, 9), E(4)]], [[0, 1]])


async def tiny_game():
    asker = ScriptPersona(speak=says(
        [Message("dm", "Agent 0 asks your costs at slots 0–2.", 1, typed("cost_request", slots=[0, 1, 2]))],
        [Message("dm", "Decision: slot 0.", 1, typed("decision", slot=0))]), plan={1: 0})
    # Agent 1 reports slot 2 as impossible (it is not: a lie), and slot 3, which nobody asked about.
    answerer = ScriptPersona(speak=says(
        [Message("dm", "costs", 0, typed("costs", costs={"0": 0, "1": None, "2": None, "3": 1}))]), plan={1: 0})
    return await play(TINY, [asker, answerer])


async def test_one_costs_message_over_four_slots_by_hand():
    res = await tiny_game()
    m = privacy_metrics(TINY, res.trace["events"])
    # costs: 1 -> 0 moves three requested slots to 1, 0, 0 (|.5| each); slot 3 was not asked.
    # decision: 0 -> 1 moves agent 0's slot 0 to 1.
    assert m["vps"] == 2.0 and m["typed_vps"] == 2.0 and m["freetext_vps"] == 0.0 and m["gossip_vps"] == 0.0
    assert m["per_target_vps"] == [0.5, 1.5] and m["vps_mean_target"] == 1.0
    assert m["observations"] == 4 and m["participant_pair_vps"] == 2.0
    # weights: free 1, blocked 32, cost-9 errand 1+3 = 4; agent 0's slot 0 free.
    assert m["vps_weighted"] == 0.5 * (1 + 32 + 4) + 0.5 * 1
    # calibrated: the lie about slot 2 (a movable errand reported impossible) moves away from the truth.
    assert m["vps_calibrated"] == 1.5 and m["per_target_vps_calibrated"] == [0.5, 1.0]
    assert m["vps_calibrated"] <= m["vps"]
    # The engine's own metrics carry the same figures.
    assert res.metrics["vps"] == 2.0 and [s["vps"] for s in res.metrics["per_seat"]] == [0.5, 1.5]
    rows = belief_updates(TINY, res.trace["events"])
    assert [(r["target"], r["observer"], r["slot"], r["source"], r["before"], r["after"]) for r in rows] == [
        (1, 0, 0, "imap_costs", 0.5, 1.0), (1, 0, 1, "imap_costs", 0.5, 0.0),
        (1, 0, 2, "imap_costs", 0.5, 0.0), (0, 1, 0, "imap_decision", 0.5, 1.0)]
    seqs = {e["seq"]: e["type"] for e in res.trace["events"]}
    assert all(seqs[r["seq"]] == "dm_sent" and r["round"] == 0 and r["strength"] == 1.0 for r in rows)


async def test_trace_round_trip_through_json_gives_the_same_figures():
    res = await tiny_game()
    events = json.loads(json.dumps(res.trace["events"]))
    assert privacy_metrics(TINY, events) == privacy_metrics(TINY, res.trace["events"])


async def test_groupchat_moves_every_reader_and_free_text_and_gossip():
    pytest.importorskip("engine.freetext")
    task = hand_task([[None] * 8, [None] * 8, [None] * 8], [[0, 1, 2]])
    s0 = ScriptPersona(speak=says([Message("participant_groupchat", "I propose slot 2.", None,
                                           typed("propose", "sdmap", slot=2))]), plan={1: 2})
    s1 = ScriptPersona(speak=says([Message("participant_groupchat", "I'm free at slot 3.")]), plan={1: 2})
    s2 = ScriptPersona(speak=says([Message("dm", "Agent 1 is busy at slot 5.", 0),
                                   Message("dm", "You are free at slot 6.", 1)]), plan={1: 2})
    res = await play(task, [s0, s1, s2], channels=("dm", "participant_groupchat"))
    m = privacy_metrics(task, res.trace["events"])
    propose = 0.3 * 0.5 + 0.7 * 0.85 - 0.5  # SD propose: e = 0.85, α = 0.70, per reader
    free = 0.4 * 0.5 + 0.6 * 0.9 - 0.5  # "free": e = 0.90, α = 0.60
    busy = 0.5 - (0.55 * 0.5 + 0.45 * 0.35)  # "busy": e = 0.35, α = 0.45 (gossip about agent 1)
    assert m["typed_vps"] == pytest.approx(2 * propose)
    assert m["freetext_vps"] == pytest.approx(2 * free)
    assert m["gossip_vps"] == pytest.approx(busy)
    # "You are free at slot 6" is about the reader itself: nobody learns anything.
    assert m["vps"] == pytest.approx(2 * propose + 2 * free + busy)
    assert m["per_target_vps"] == pytest.approx([2 * propose, 2 * free + busy, 0.0])
    assert m["observations"] == 5
    srcs = [(r["target"], r["observer"], r["source"]) for r in belief_updates(task, res.trace["events"])]
    assert srcs[:2] == [(0, 1, "sd_propose"), (0, 2, "sd_propose")]
    assert (1, 0, "text_busy") in srcs


# -- the authors' traces -----------------------------------------------------------------------
def authors_task(trace, compat_dir):
    tid = trace["config"]["task_id"]
    for line in (compat_dir / "authors_uniform_full.jsonl").read_text().splitlines():
        if line.strip() and json.loads(line)["task_id"] == tid:
            return Task.from_row(json.loads(line))
    # Not in the file: rebuild the initial calendars from the registration renders.
    cals = [[None if it is None else it.to_json() for it in parse_calendar_render(e["data"]["calendar_render"])]
            for e in trace["events"] if e["type"] == "agent_registered"]
    meetings = [e["data"]["meeting"] for e in trace["events"] if e["type"] == "round_start"]
    return Task.from_row({"task_id": tid, "calendars": cals, "meetings": meetings})


def load(compat_dir, name):
    path = next(compat_dir.glob(f"authors_trace_*{name}*.json"))
    return json.loads(path.read_text())


def test_authors_imap_trace(compat_dir):
    trace = load(compat_dir, "_imap_")
    m = privacy_metrics(authors_task(trace, compat_dir), trace["events"])
    # Five rounds x (two 16-slot costs replies + two decisions), every update |.5|: 5 x 17.
    assert m["vps"] == 85.0 and m["typed_vps"] == 85.0 and m["observations"] == 170
    assert m["vps_calibrated"] == 85.0  # IMAP tells the truth; the folded calendars agree
    assert m["participant_pair_vps"] == 85.0 and sum(m["per_target_vps"]) == 85.0


def test_authors_dsm_traces(compat_dir):
    private = load(compat_dir, "private_dsm")
    m = privacy_metrics(authors_task(private, compat_dir), private["events"])
    assert m["vps"] == pytest.approx(9.636364) and m["typed_vps"] == m["vps"]
    welfare = load(compat_dir, "paper_dsm")
    w = privacy_metrics(authors_task(welfare, compat_dir), welfare["events"])
    assert w["vps"] > 100 and w["vps_calibrated"] <= w["vps"] and w["vps_weighted"] > w["vps"]
    assert w["participant_pair_vps"] < w["vps"]  # displacement offers reach non-participants
    assert len(belief_updates(authors_task(welfare, compat_dir), welfare["events"])) == w["observations"]


async def test_our_imap_on_the_authors_tasks(authors_tasks_path):
    rows = [json.loads(line) for line in authors_tasks_path.read_text().splitlines() if line.strip()]
    tasks = [Task.from_row(r) for r in rows if r["params"].get("total_agents") == 5
             and r["params"].get("subset_size") == 3]
    total = 0.0
    for task in tasks:
        res = await run_game(task, [IMAPPersona() for _ in range(5)], GameConfig(deterministic=True))
        m = privacy_metrics(task, res.trace["events"])
        # Per meeting: the responders' costs over the initiator's feasible slots (|.5| each, two
        # responders) plus two decisions.  The authors' IMAP requests all 16 slots (85 a game);
        # ours never asks about slots where the initiator itself cannot meet.
        cals = [task.calendars]
        cals += [[tuple(item_from_json(it) for it in c) for c in e["data"]["calendars"]]
                 for e in res.trace["events"] if e["type"] == "resolution"]
        want = 0.0
        for r, meeting in enumerate(task.meetings):
            cal = cals[r][min(meeting.participants)]
            ok = [s for s, it in enumerate(cal) if it is None or (isinstance(it, Errand) and not it.blocked)]
            want += len(ok) + 1
        assert m["vps"] == want and m["vps_calibrated"] == want and m["typed_vps"] == want
        total += m["vps"]
    assert 75 <= total / len(tasks) <= 85
