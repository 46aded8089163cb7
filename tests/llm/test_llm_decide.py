"""LLM decisions as the model meant them (issue 31): decide by slot, say what talk produced,
a lost DECISION call keeps the decision retries, calls counted apart.

Whole games run over real HTTP against the loopback mock and the real engine.  The mock's
``literal`` policy always schedules the slot in its own words, alone, even where an errand
of its own sits, and writes what a grammar-constrained model writes (a slot the schema does
not admit becomes the nearest one it does); ``listener`` schedules the slot the DECISION
message says the talk produced.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llmkit import RecordingRounds, decisions_as_named, small_task

from engine.actions import Message, Reschedule, Schedule, parse_envelope
from engine.protocol import fmt_slots
from engine.game import GameConfig, run_game
from engine.model import Errand, MeetingCopy
from engine.observe import DecisionObservation, Delivered, meeting_view, seat_view
from engine.taskref import hydrate_labels, resolve_tasks
from personas.llm.factory import make_llm_persona
from personas.registry import make_personas
from calbench_devtools.mock_endpoint import MockLLMServer

AGENTS_IMAP = "imap"


def canonical(i: int):
    return hydrate_labels(resolve_tasks(f"canonical:{i}")[0])


async def play(server, make_settings, task, llm_seats=(1,), config=None, **kw):
    settings = make_settings(server, **kw)
    seats = list(make_personas(AGENTS_IMAP, task.num_agents))
    for a in llm_seats:
        seats[a] = make_llm_persona("llm:small", settings)
    res = await run_game(task, seats, config or GameConfig(deterministic=True))
    return res, seats


def events(res, *types):
    return [e for e in res.trace["events"] if e["type"] in types]


def errand_in_named_slot(res, row) -> bool:
    """Whether the slot a DECISION reply named held a movable errand on the seat's frozen calendar."""
    start = next(e for e in events(res, "decide_start") if e["data"]["agent_id"] == row["seat"]
                 and e["data"]["round"] == row["round"])
    line = next(x for x in start["data"]["calendar_snapshot_render"].splitlines()
                if x.startswith(f"Slot {row['named']:2d}:") or x.startswith(f"Slot {row['named']}:"))
    return "Errand" in line and "Blocked" not in line


# -- decide by slot: the slot named is the slot scheduled ----------------------------------
@pytest.mark.parametrize("structured, prompt", [("auto", "full"), ("json_object", "full"), ("off", "full"),
                                                ("auto", "compact")])
async def test_a_literal_model_gets_the_slot_it_named(make_settings, structured, prompt):
    """No schema and no profile moves a slot: the slot the model meant is the slot it wrote
    and the slot scheduled — an errand sitting there is moved by the seat — or the rules
    refused it in their words and asked again."""
    async with MockLLMServer(policy="literal") as server:
        moved = 0
        for i in (0, 1, 2):
            res, _ = await play(server, make_settings, canonical(i), structured=structured, prompt=prompt)
            rows = decisions_as_named(res.trace)
            assert rows and all(r["named"] is not None for r in rows)
            for r in rows:
                if r["outcome"] == "accepted" and errand_in_named_slot(res, r):
                    moved += 1
                    assert r["decision"]["seat_moves"] and r["decision"]["seat_moves"][0]["from_slot"] == r["named"]
                elif r["outcome"] == "rejected":
                    assert not errand_in_named_slot(res, r), "a movable errand in the named slot was not moved"
        assert [d["meant"] for d in server.decisions] == [d["wrote"] for d in server.decisions]
        assert moved >= 3  # the games do put meetings on slots that hold the LLM seat's errands


async def test_the_decision_schema_offers_every_slot_and_the_model_writes_the_slot_alone(make_settings):
    async with MockLLMServer(policy="literal") as server:
        res, (p, *_rest) = await play(server, make_settings, canonical(0), llm_seats=(0,))
    for e in events(res, "decide_end"):
        d = e["data"]
        if d["agent_id"] != 0 or d["phase"] != "DECISION":
            continue
        said = parse_envelope(d["text"]).actions
        assert [a.type for a in said] == ["schedule"]  # the reply as written: the slot alone
        assert d["extra"]["decision"]["said"] == [a.to_json() for a in said]
        assert d["extra"]["decision"]["built"] == d["tool_calls"]  # what was built is what was sent
        assert d["extra"]["decision"]["named_slot"] == said[0].slot


async def test_the_full_batch_setting_keeps_the_old_behaviour(make_settings):
    """decision = "batch": the model writes its own moves; the old schema admits only free
    slots for a schedule that comes first, so a grammar-bound model is moved elsewhere."""
    async with MockLLMServer(policy="literal") as server:
        res, seats = await play(server, make_settings, canonical(0), decision="batch")
        forced = [d for d in server.decisions if d["meant"] != d["wrote"]]
    assert forced  # the old behaviour is reachable (issue 31: meant slot 14, wrote slot 4)
    starts = [e["data"]["prompt_sent"] for e in events(res, "decide_start") if e["data"]["agent_id"] == 1]
    assert starts and all("Send any reschedule actions needed to free the slot" in s for s in starts
                          if "was rejected" not in s)
    assert not any("decision" in (e["data"].get("extra") or {}) for e in events(res, "decide_end"))
    assert seats[1].describe()["decision"] == "batch"  # recorded with the seat's settings (config.llm)


def reach_from_render(render: str) -> tuple[list[int], list[int], list[int]]:
    """(free, movable, refused) slots read off a frozen calendar's render, independently of the seat."""
    free, movable, refused = [], [], []
    for line in render.splitlines():
        m = re.match(r"Slot\s+(\d+): (.*)", line)
        if not m:
            continue
        slot, what = int(m.group(1)), m.group(2)
        (free if "[FREE]" in what else movable if what.startswith("Errand") else refused).append(slot)
    return free, movable, refused


async def test_a_small_model_names_the_slot_alone_and_is_told_the_slots_it_can_take(make_settings):
    """Behind an 8k window the DECISION reply is the ``schedule`` alone (SmolLM2-135M, offered
    an optional move first, moved "item 13" and then named slot 13 — a blocked errand — in all
    twelve DECISION replies of a game); its slot may still be any slot (no schema moves it).
    The message lists the slots the seat can take from its frozen calendar and ends with an
    example built from the talk: the slot it settled on.  A rejected batch is asked again with
    the rule's words and the same list.  A 32k window keeps the optional move."""
    task = canonical(0)
    async with RecordingRounds(policy="listener", context_limit=8192, advertise_context=True) as server:
        server.inject("invalid_batch", count=1, seat=1, phase="DECISION")
        res, _ = await play(server, make_settings, task)
    rows = decisions_as_named(res.trace)
    assert [r["outcome"] for r in rows].count("rejected") == 1
    schemas = [sch for seat, r, ph, sch in server.schemas if seat == 1 and ph == "DECISION"]
    assert len(schemas) == len(rows)
    for sch in schemas:
        acts = sch["properties"]["actions"]
        assert "anyOf" not in acts and len(acts["prefixItems"]) == 1 and acts["maxItems"] == 1
        assert acts["prefixItems"][0]["properties"]["slot"]["enum"] == list(range(task.num_slots))
    starts = [e["data"] for e in events(res, "decide_start") if e["data"]["agent_id"] == 1]
    examples = 0
    for d in starts:
        free, movable, refused = reach_from_render(d["calendar_snapshot_render"])
        text = d["prompt_sent"]
        assert f"Slots you can take: {fmt_slots(free)} (free); {fmt_slots(movable)} (your errand there" in text
        assert f"Not slots {fmt_slots(refused)} (blocked" in text
        mid = int(re.search(r"Meeting M(\d+)", text).group(1))
        settled = re.findall(r"- The slot the talk settled on: slot (\d+)\.", text)
        if "was rejected" in text:  # the retry: the rule's words (decisions_as_named) and the same list
            continue
        if settled and int(settled[0]) in free + movable:
            n = int(settled[0])
            examples += 1
            assert (f'To schedule it at slot {n}, the slot the talk settled on, reply: {{"thinking": "", '
                    f'"actions": [{{"type": "schedule", "meeting_id": {mid}, "slot": {n}}}]}}') in text
    assert examples >= 2
    async with RecordingRounds(policy="listener", context_limit=32768, advertise_context=True) as server:
        await play(server, make_settings, task)
    assert all("anyOf" in sch["properties"]["actions"] for seat, r, ph, sch in server.schemas
               if seat == 1 and ph == "DECISION")


# -- the builder ------------------------------------------------------------------------
def test_the_seat_builds_the_batch_as_the_human_builder_does():
    from personas.llm.decide import build_decision

    cal = [Errand(10, 3), None, MeetingCopy(7), Errand(11, 2, blocked=True), None, Errand(12, 5)]
    # the errand in the named slot goes to the lowest free slot; nothing else changes
    b = build_decision(cal, 9, [Schedule(9, 0)])
    assert [a.to_json() for a in b.actions] == [
        {"type": "reschedule", "item_id": 10, "from_slot": 0, "to_slot": 1, "justification": "make room for the meeting"},
        {"type": "schedule", "meeting_id": 9, "slot": 0}]
    assert b.slot == 0 and not b.literal and len(b.added) == 1
    # the model's own move is kept as written; the seat's move avoids its destination
    own = Reschedule(12, 5, 1, "mine")
    b = build_decision(cal, 9, [own, Schedule(9, 0)])
    assert b.actions == (own, Reschedule(10, 0, 4, "make room for the meeting"), Schedule(9, 0))
    # a free slot, or a slot the model cleared itself: as written
    assert build_decision(cal, 9, [Schedule(9, 4)]).actions == (Schedule(9, 4),)
    mv = Reschedule(10, 0, 4, "x")
    assert build_decision(cal, 9, [mv, Schedule(9, 0)]).actions == (mv, Schedule(9, 0))
    # what the seat may not add is sent as written, for the rules to refuse in their words
    for said in ([Schedule(9, 2)],                              # a meeting copy: breaking it is the model's call
                 [Schedule(9, 3)],                              # a blocked errand
                 [Reschedule(10, 0, 4, ""), Schedule(9, 4)],    # its own move fills the slot it names
                 [Schedule(9, 0), Schedule(9, 1)],              # two schedules
                 [Schedule(8, 0)],                              # another meeting
                 [Schedule(9, 99)]):                            # no such slot
        b = build_decision(cal, 9, said)
        assert b.actions == tuple(said) and b.literal and not b.added


_ITEM = st.one_of(st.none(), st.builds(MeetingCopy, st.integers(1, 9)),
                  st.builds(lambda i, c, b: Errand(20 + i, c, blocked=b), st.integers(0, 9), st.integers(1, 5),
                            st.booleans()))


@settings(max_examples=300, deadline=None)
@given(cal=st.lists(_ITEM, min_size=1, max_size=8),
       moves=st.lists(st.tuples(st.integers(20, 29), st.integers(-1, 8), st.integers(-1, 8)), max_size=2),
       slots=st.lists(st.integers(-1, 8), min_size=0, max_size=2), mid=st.sampled_from([9, 8]))
def test_no_decision_reply_is_built_into_another_slot(cal, moves, slots, mid):
    """Whatever the calendar and the reply (issue 31, Done means: "the slot the model named is
    the slot scheduled, or the reply was rejected"): the batch the seat builds keeps every
    action the model wrote, in its order, schedules exactly the slots it named, and adds at
    most one move, of the errand out of the named slot — never another schedule."""
    from personas.llm.decide import build_decision

    said = [Reschedule(i, a, b, "mine") for i, a, b in moves] + [Schedule(mid, s) for s in slots]
    b = build_decision(cal, 9, said)
    kept = [a for a in b.actions if a not in b.added]
    assert kept == said
    assert [a for a in b.actions if isinstance(a, Schedule)] == [a for a in said if isinstance(a, Schedule)]
    assert len(b.added) <= 1 and all(isinstance(a, Reschedule) and len(slots) == 1 and a.from_slot == slots[0]
                                     for a in b.added)


# -- what talk produced -------------------------------------------------------------------
async def test_the_decision_prompt_names_what_talk_produced(make_settings):
    """The DECISION message says who decided which slot and which slot the talk was about;
    a model that reads it (listener) schedules the slot the talk decided."""
    async with MockLLMServer(policy="listener") as server:
        res, _ = await play(server, make_settings, canonical(0))
    decided = {}
    for e in events(res, "dm_sent"):
        p = e["data"].get("payload") or {}
        if p.get("kind") == "decision" and e["data"]["to_agent"] == 1:
            decided[e["data"]["round"]] = (e["data"]["from_agent"], p["slot"])
    assert decided
    for e in events(res, "decide_start"):
        d = e["data"]
        if d["agent_id"] != 1 or d["round"] not in decided or "was rejected" in d["prompt_sent"]:
            continue
        frm, slot = decided[d["round"]]
        assert "What the talk produced for Meeting M" in d["prompt_sent"]
        assert f"- Agent {frm} decided slot {slot}." in d["prompt_sent"]
        assert f"- Talked about: slot {slot}." in d["prompt_sent"]
        assert d["prompt_sent"].count("- The slot the talk settled on: slot") == 1
        assert f"- The slot the talk settled on: slot {slot}.\n" in d["prompt_sent"]
    rows = decisions_as_named(res.trace)
    assert {r["round"]: r["named"] for r in rows if r["round"] in decided} == {r: s for r, (_f, s) in decided.items()}
    assert all(r["outcome"] == "accepted" for r in rows)


def test_talk_facts_count_the_seats_own_messages():
    """Every participant accepted slot 5: one proposed it, one sent costs, this seat agreed."""
    from personas.llm.decide import talk_facts, talk_lines
    from personas.llm.prompts import PromptBook
    from engine.observe import SeatBriefing

    task = small_task(3, num_agents=4, num_slots=8, participants_per_meeting=3)
    m = task.meetings[0]
    me, a, b = m.participants[0], m.participants[1], m.participants[2]
    view = seat_view(me, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    got = (Delivered(a, "dm", m.id, "How about slot 5 for the meeting?", 0, 0, None, me),
           Delivered(b, "dm", m.id, "costs", 0, 1, {"protocol": "imap", "kind": "costs", "meeting_id": m.id,
                                                    "costs": {"5": 2, "6": None}}, me))
    obs = DecisionObservation(view, 0, meeting_view(m, me, task.labels), got, 0, 3, None)
    mine = [(1, Message("dm", f"Agreed: Meeting M{m.id} at slot 5.", a))]
    facts = talk_facts(obs, mine)
    assert facts.accepted == [5] and facts.talk == [5] and facts.costs == {b: {5: 2, 6: None}}
    lines = talk_lines(facts, me, m.id)
    assert f"Agent {a} proposed slot 5." in lines and "You can do slot 5." in lines
    assert f"Every participant accepted: slot 5 for Meeting M{m.id}." in lines
    assert f"Agent {b} sent you its costs (slot: cost): 5: 2, 6: impossible." in lines
    assert lines[-1] == "The slot the talk settled on: slot 5."
    assert talk_facts(obs).accepted == []  # without this seat's own word, not everyone accepted
    book = PromptBook(SeatBriefing(view, 15, 3, len(task.meetings)))
    text = book.decision_message(obs, own=mine)
    assert "What the talk produced" in text and "Every participant accepted: slot 5" in text


# -- a lost DECISION call keeps the retries meant for rejected batches ----------------------
async def test_a_decision_timeout_leaves_the_rejection_retries(make_settings):
    task = small_task(3)
    seat = task.meetings[0].participants[0]
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("hang", seat=seat, phase="DECISION", seconds=3)  # the first DECISION call times out
        server.inject("invalid_batch", count=3, seat=seat, phase="DECISION")  # then three rejected batches
        settings = make_settings(server, timeout=0.5, retries=0)
        seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
        res = await run_game(task, seats, GameConfig(deterministic=True))
    mine = [e["data"] for e in events(res, "decide_end") if e["data"]["agent_id"] == seat
            and e["data"]["round"] == 0]
    assert [d["status"] for d in mine] == ["failed", "rejected", "rejected", "rejected", "pending"]
    assert [d["retry_count"] for d in mine] == [0, 0, 1, 2, 3]
    assert mine[0]["extra"]["failure"] == "timeout"
    assert [e["data"]["attempt"] for e in events(res, "batch_rejected") if e["data"]["agent_id"] == seat] == [0, 1, 2]
    assert any(e["data"]["agent_id"] == seat for e in events(res, "batch_applied") if e["data"]["round"] == 0)
    assert events(res, "resolution")[0]["data"]["coordinated"]
    from engine.usage import call_counts

    assert call_counts(res.trace["events"])["per_seat"][str(seat)]["lost_decisions"] == 1
    decisions_as_named(res.trace)


async def test_decision_calls_lost_past_the_re_asks_are_failed_calls_never_rejected_batches(make_settings):
    """An endpoint that keeps failing in DECISION: after the re-asks that spare the decision
    retries, each further loss uses a retry but is a failed call — no ``batch_rejected`` "rule
    0" (counted as a rejected batch and told to the model as "Your batch was rejected"; found
    by hand: 12 rejected batches and rejected:0 12 for a seat whose endpoint was down)."""
    task = small_task(3)
    seat = task.meetings[0].participants[0]
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("500", count=50, seat=seat, phase="DECISION")  # every DECISION call of the seat fails
        settings = make_settings(server, retries=0)
        seats = [make_llm_persona("llm:mock", settings) for _ in range(task.num_agents)]
        res = await run_game(task, seats, GameConfig(deterministic=True, decision_retries=2))
    mine = [e["data"] for e in events(res, "decide_end") if e["data"]["agent_id"] == seat
            and e["data"]["round"] == 0]
    assert [d["status"] for d in mine] == ["failed"] * 5  # 2 re-asks, then the 3 attempts
    assert not [e for e in events(res, "batch_rejected") if e["data"]["agent_id"] == seat]
    from engine.usage import call_counts

    row = call_counts(res.trace["events"])["per_seat"][str(seat)]
    lost = [e for e in events(res, "decide_end") if e["data"]["agent_id"] == seat and e["data"]["status"] == "failed"]
    assert row["rejected_batches"] == 0 and row["lost_decisions"] == len(lost) >= 5
    starts = [e["data"]["prompt_sent"] for e in events(res, "decide_start") if e["data"]["agent_id"] == seat
              and e["data"]["round"] == 0]
    assert len(starts) == 5 and not [p for p in starts if "Your batch was rejected" in str(p)]


# -- counting: requests, retries, capped turns, rejected batches -----------------------------
async def test_calls_capped_turns_and_retries_are_named_apart(make_settings, tmp_path):
    import importlib.util
    from pathlib import Path

    from calbench_tui.screens.end import failure_line
    from engine.usage import call_counts
    from lab.llm_calls import llm_call_rows

    spec = importlib.util.spec_from_file_location(
        "real_model", Path(__file__).resolve().parents[2] / "benchmarks" / "real_model.py")
    real_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real_model)

    task = canonical(0)
    async with MockLLMServer(policy="cooperative") as server:
        server.inject("500", seat=1, phase="CHEAP_TALK")  # one request sent again
        server.inject("invalid_batch", seat=1, phase="DECISION")  # one rejected batch, asked again
        res, (_a, p, *_r) = await play(server, make_settings, task, max_calls_per_round=1)
        http = server.stats()["per_seat"][1]
    from personas.llm.restore import seats_llm_config

    res.trace["config"].update(seats_llm_config([_a, p, *_r]))  # as calbench run records the seats' settings
    counted = call_counts(res.trace["events"])["per_seat"]["1"]
    capped = sum(1 for e in events(res, "turn_end") if e["data"]["agent_id"] == 1
                 and e["data"]["extra"].get("capped") is not None)
    assert capped > 0
    assert counted == {"requests": http, "retries": 1, "capped_turns": capped, "rejected_batches": 1,
                       "lost_decisions": 0}
    assert counted["requests"] == p.counters["requests"]
    g = real_model.analyse_trace(res.trace)
    assert (g["requests"], g["retries"], g["capped_turns"], g["rejected_batches"]) == (http, 1, capped, 1)
    assert g["calls"] == http - 1  # calls to the model: each sent one request, one of them twice; no capped turn
    (row,) = llm_call_rows([res.trace])
    assert (row["requests"], row["retries"], row["capped_turns"], row["calls"]) == (http, 1, capped, http - 1)
    line = failure_line(res.trace)
    assert f"LLM requests: {http} (of which 1 retries after a failure); {capped} capped turns" in line


async def test_the_llm_and_the_human_screen_read_the_same_talk(make_settings):
    """One reader: the human's seat model, fed the LLM seat's own projected events as the game
    screen is, shows at each DECISION the slots the LLM's DECISION message names."""
    from engine.observe import seat_event
    from personas.seat_model import SeatModel

    async with MockLLMServer(policy="cooperative") as server:
        for i in (0, 1):
            task = canonical(i)
            res, _ = await play(server, make_settings, task)
            model = SeatModel(1, ("dm",), task.num_agents)
            model.num_slots = task.num_slots
            checked = 0
            for e in res.trace["events"]:
                if e["type"] == "decide_start" and e["data"]["agent_id"] == 1 and e["data"]["phase"] == "DECISION" \
                        and "was rejected" not in e["data"]["prompt_sent"]:
                    prompt = e["data"]["prompt_sent"]
                    if model.talk:
                        assert "- Talked about: " + ", ".join(f"slot {s}" for s in model.talk) + "." in prompt
                        checked += 1
                    else:
                        assert "Talked about" not in prompt
                    if model.accepted_by_all():
                        assert "Every participant accepted" in prompt
                    if model.agreed_slot() is not None:  # what the human's batch builder preselects
                        assert f"- The slot the talk settled on: slot {model.agreed_slot()}." in prompt
                ev = seat_event(e, 1)
                if ev is not None:
                    model.apply(ev)
            assert checked >= 2


def test_with_no_settled_slot_the_example_is_a_talked_about_slot_the_seat_can_take():
    """SmolLM2-135M, after "I can't do slot 9, but I could do slot 1, 2 or 3." in talk, named
    slot 1 — a blocked errand of its own, the first slot of "Talked about" — in its DECISION
    and on all three retries.  With no settled slot the example names the first talked-about
    slot the seat can take; the retry, after the rule's words, lists the slots it can take and
    carries the same example (one sentence, no doubled full stop)."""
    from engine.observe import SeatBriefing
    from personas.llm.prompts import PromptBook

    task = canonical(0)
    seat = 1
    r = next(i for i, m in enumerate(task.meetings) if min(m.participants) == seat)
    m = task.meetings[r]
    view = seat_view(seat, task.calendars, task.labels, task.meetings, r, task.cost_values, ("dm",))
    assert view.calendar[1] is not None and view.calendar[1].blocked  # slot 1 is blocked for this seat
    got = (Delivered(4, "dm", m.id, "I can't do slot 9, but I could do slot 1, 2 or 3.", r, 1, None, seat),
           Delivered(4, "dm", m.id, "Could we do slot 1, 2 or 3 instead?", r, 2, None, seat))
    mine: list = []
    obs = DecisionObservation(view, r, meeting_view(m, seat, task.labels), got, 0, 3, None)
    book = PromptBook(SeatBriefing(view, 15, len(task.meetings), len(task.meetings)), short_thinking=True)
    text = book.decision_message(obs, own=mine)
    assert "- Talked about: slot 1, slot 2, slot 3." in text and "settled on: slot" not in text
    first = next(s for s in (1, 2, 3) if view.calendar[s] is None or not view.calendar[s].blocked)
    assert first != 1
    example = (f'To schedule it at slot {first}, the first slot the talk was last about that you can take, '
               f'reply: {{"thinking": "", "actions": [{{"type": "schedule", "meeting_id": {m.id}, "slot": {first}}}]}}')
    assert example in text
    retry = DecisionObservation(view, r, meeting_view(m, seat, task.labels), got, 1, 3,
                                "Rule 7 (schedule slot not free): slot 1 still holds Blocked Errand #14")
    again = book.decision_message(retry, own=mine)
    assert "Rule 7 (schedule slot not free): slot 1 still holds Blocked Errand #14" in again
    assert "Not slots 1, 13 (blocked" in again and example in again and ").." not in again


# -- sampling: a small model talks and decides greedily ----------------------------------
async def test_a_small_models_talk_and_decision_are_sampled_at_temperature_zero_unless_the_user_set_one(
        make_settings):
    """Behind an 8k window a DECISION request and every talk request carry ``temperature: 0``
    when the settings name no temperature (SmolLM2-135M at the server's default temperature
    wrote another slot than the one the talk settled on and the message's example named, and
    as the opener of a meeting passed or announced a slot nobody had offered where its example
    said ``ask_costs``); the retry after a rejected batch (greedy, the model wrote the refused
    reply again every time) carries the settings' sampling only (none: the endpoint's
    default).  A temperature the user set is sent unchanged in every request, and a larger
    window keeps the endpoint's default.  Checked on the requests the mock received over HTTP."""
    task = canonical(0)

    def sampled(server, phase):
        return [dict(r.sampling or {}) for r in server.records if r.seat == 1 and r.phase == phase]

    async with MockLLMServer(policy="listener", context_limit=8192, advertise_context=True) as server:
        server.inject("invalid_batch", count=1, seat=1, phase="DECISION")
        res, _ = await play(server, make_settings, task, seed=5)
    mine = [r for r in server.records if r.seat == 1 and r.phase == "DECISION"]
    bad = next(i for i, r in enumerate(mine) if r.fault == "invalid_batch")
    retry = mine.pop(bad + 1)  # the request after the rejected batch
    assert retry.sampling == {"seed": 5}
    decisions, talk = [dict(r.sampling or {}) for r in mine], sampled(server, "CHEAP_TALK")
    assert len(decisions) >= 3 and talk
    assert all(s.get("temperature") == 0 and s.get("seed") == 5 for s in decisions), decisions
    assert all(s.get("temperature") == 0 and s.get("seed") == 5 for s in talk), talk
    ends = [e["data"] for e in events(res, "decide_end") if e["data"]["agent_id"] == 1]
    assert [d["extra"].get("sampling") for d in ends].count(None) == 1
    assert all(d["extra"]["sampling"] == {"temperature": 0.0, "seed": 5} for d in ends if d["retry_count"] == 0)
    assert all(e["data"]["extra"]["sampling"] == {"temperature": 0.0, "seed": 5} for e in events(res, "turn_end")
               if e["data"].get("agent_id") == 1 and "capped" not in e["data"]["extra"])
    decisions_as_named(res.trace)

    async with MockLLMServer(policy="listener", context_limit=8192, advertise_context=True) as server:
        res, _ = await play(server, make_settings, task, temperature=0.7)
    decisions, talk = sampled(server, "DECISION"), sampled(server, "CHEAP_TALK")
    assert decisions and talk
    assert all(s.get("temperature") == 0.7 for s in decisions + talk), decisions + talk

    async with MockLLMServer(policy="listener", context_limit=32768, advertise_context=True) as server:
        await play(server, make_settings, task)
    decisions, talk = sampled(server, "DECISION"), sampled(server, "CHEAP_TALK")
    assert decisions and talk and all("temperature" not in s for s in decisions + talk), decisions + talk
