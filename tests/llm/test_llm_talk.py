"""CHEAP_TALK for small models (issue 31): short actions the seat expands, a per-turn example
built from the turn's facts, a worked round, short thinking at 8k or less, and one
condensation of finished rounds per game instead of one prompt-cache cliff per round.

Everything runs over real HTTP against the loopback mock with the real engine and real
IMAP seats.  The mock's ``copycat`` model copies the latest example it was shown, as
SmolLM2-135M did; ``runaway`` fills ``thinking`` up to whatever bound the schema sets.
"""

from __future__ import annotations

import json
import re

from engine.game import GameConfig, run_game
from engine.observe import Delivered, SeatBriefing, TurnObservation, meeting_view, seat_view
from engine.taskref import hydrate_labels, resolve_tasks
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.base import cheapest_common_slot, insertion_costs
from personas.llm.context import message_rounds
from personas.llm.factory import make_llm_persona
from personas.llm.prompts import PromptBook
from personas.llm.schema import THINKING_MAX, THINKING_SHORT
from personas.llm.talk import TalkFacts, expand_short
from personas.registry import make_personas
from llmkit import RecordingRounds

SEAT = 1


def canonical(i: int = 0):
    return hydrate_labels(resolve_tasks(f"canonical:{i}")[0])


async def one_llm(task, settings, seat: int = SEAT):
    seats = list(make_personas("imap", task.num_agents))
    p = make_llm_persona("llm:small", settings)
    seats[seat] = p
    res = await run_game(task, seats, GameConfig(deterministic=True))
    return res, p


def events(res, *types):
    return [e["data"] for e in res.trace["events"] if e["type"] in types]


def example_action(prompt: str) -> dict:
    """The short action of the per-turn example that ends a CHEAP_TALK message."""
    m = re.search(r'for example: (\{"thinking": .*\})$', prompt.rstrip())
    assert m, prompt[-300:]
    actions = json.loads(m.group(1))["actions"]
    assert len(actions) == 1
    return actions[0]


async def copycat_game(make_settings, **kw):
    task = canonical(0)
    async with MockLLMServer(policy="sloppy", sloppy_mode="copycat") as mock:
        res, p = await one_llm(task, make_settings(mock, **kw))
    return task, res, p


# -- short actions ---------------------------------------------------------------------------
async def test_a_short_action_reaches_every_participant_and_is_recorded(make_settings):
    """Meeting M4 (participants 1, 3, 4; speaking order 4, 3, 1) needs its lowest id, the
    LLM seat, to open it: IMAP seats 3 and 4 wait for a cost request.  A model that copies
    the turn's example asks both, proposes the cheapest slot from both answers to both, and
    the meeting is scheduled.  Each short action is recorded with the messages it became,
    and those are exactly the messages the engine delivered."""
    task, res, p = await copycat_game(make_settings)
    r4 = next(r for r, m in enumerate(task.meetings) if m.id == 4)
    others = sorted(set(task.meetings[r4].participants) - {SEAT})
    assert others == [3, 4]
    recorded = [(e["round"], s) for e in events(res, "turn_end") if e["agent_id"] == SEAT
                for s in (e.get("extra") or {}).get("short_actions") or ()]
    kinds = {s["action"]["type"] for _, s in recorded}
    assert {"costs", "ask_costs", "propose", "agree"} <= kinds, kinds

    ask = [s for r, s in recorded if r == r4 and s["action"]["type"] == "ask_costs"]
    assert ask and sorted(m["to"] for m in ask[0]["expanded"]) == others  # every other participant, not one peer
    assert all("asks your costs for meeting M4" in m["content"] for m in ask[0]["expanded"])
    # the IMAP seats answered with typed costs; the proposal is the cheapest slot for all three
    costs = {d["from_agent"]: {int(k): v for k, v in d["payload"]["costs"].items()}
             for d in events(res, "dm_sent") if d["round"] == r4 and d["to_agent"] == SEAT
             and (d.get("payload") or {}).get("kind") == "costs"}
    assert sorted(costs) == others
    prop = [s for r, s in recorded if r == r4 and s["action"]["type"] == "propose"]
    assert prop, "the seat proposed a slot once both had answered"
    slot = prop[0]["action"]["slot"]
    assert sorted(m["to"] for m in prop[0]["expanded"]) == others
    # learned from their typed answers: the proposal carries IMAP's typed decision for each of them
    assert all(m["payload"] == {"protocol": "imap", "kind": "decision", "meeting_id": 4, "slot": slot}
               for m in prop[0]["expanded"])
    assert 4 in (res.trace.get("metrics") or {}).get("scheduled_meeting_ids", [])

    # "costs" answered the IMAP initiator's request: to it alone, typed, the seat's own costs
    answer = [s for _, s in recorded if s["action"]["type"] == "costs" and s["expanded"]]
    assert answer
    for s in answer:
        (m,) = s["expanded"]
        assert m["payload"]["kind"] == "costs" and m["payload"]["protocol"] == "imap"
        assert m["to"] == 0  # the lowest id of M1 and M3 asked

    # what was recorded is what the engine delivered, nothing more
    sent = sorted((d["round"], d["to_agent"], d["content"]) for d in events(res, "dm_sent")
                  if d["from_agent"] == SEAT and d["content"].startswith(("Agent 1 asks", "My costs", "Let's meet")))
    expanded = sorted((r, m["to"], m["content"]) for r, s in recorded if s["action"]["type"] != "agree"
                      for m in s["expanded"])
    assert sent == expanded


def test_a_short_action_with_nothing_to_answer_sends_nothing_and_says_why():
    """``costs`` with no cost request this round stands for nothing: nothing is sent, and the
    note for the next prompt says why (never a guessed recipient)."""
    task = canonical(0)
    m0 = task.meetings[0]
    view = seat_view(SEAT, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    obs = TurnObservation(view, 0, 0, 15, meeting_view(m0, SEAT, task.labels), True, ())
    msgs, note = expand_short("costs", None, obs, SEAT, TalkFacts(0), {})
    assert msgs == [] and "nobody asked" in note
    msgs, note = expand_short("propose", 99, obs, SEAT, TalkFacts(0), {})
    assert msgs == [] and "slot from 0 to 15" in note
    msgs, note = expand_short("propose", 7, obs, SEAT, TalkFacts(0), {0: "imap"})
    assert [(m.to, (m.payload or {}).get("kind")) for m in msgs] == [(0, "decision"), (2, None)]


# -- the per-turn example -----------------------------------------------------------------
async def test_the_turn_example_is_built_from_the_turns_facts(make_settings):
    """Every CHEAP_TALK message ends with the short action that fits that turn: answer the
    cost request in the inbox, agree to the slot the initiator decided, ask for costs when the
    seat opens the meeting, propose the cheapest slot once everyone answered, pass when
    nothing needs an answer — never the old fixed "I could do slot A or slot B" to one peer."""
    task, res, p = await copycat_game(make_settings)
    starts = [e for e in events(res, "turn_start") if e["agent_id"] == SEAT and e.get("prompt_sent")]
    seen = {}
    calendars = {}
    for e in starts:
        prompt = e["prompt_sent"]
        calendars.setdefault(e["round"], p_calendar(e))  # the round's first message shows the calendar
        # the old fixed example ("For Meeting Mk I could do slot A or slot B. Does that suit
        # you?") is gone; partners' answers in the inbox may still say "I could do slots 5–8."
        assert "Does that suit you?" not in prompt
        if "so the talk is done" in prompt:
            continue
        act = example_action(prompt)
        inbox = e.get("inbox_drained") or []
        kinds = [(d.get("payload") or {}).get("kind") for d in inbox]
        if "cost_request" in kinds:
            assert act == {"type": "costs"}, (kinds, act)
        elif "decision" in kinds:
            slot = next(d["payload"]["slot"] for d in inbox if (d.get("payload") or {}).get("kind") == "decision")
            assert act == {"type": "agree", "slot": slot}
        elif kinds.count("costs") == 2:  # both participants of M4 answered the seat's request
            mine = dict(enumerate(insertion_costs(calendars[e["round"]])))
            reported = {d["from_agent"]: {int(k): v for k, v in d["payload"]["costs"].items()} for d in inbox}
            best = cheapest_common_slot(mine, sorted(reported), lambda a, s: reported[a].get(s))
            assert act == {"type": "propose", "slot": best[1]}
        seen.setdefault(act["type"], set()).add(json.dumps(act))
    assert {"costs", "agree", "ask_costs", "propose", "pass"} <= set(seen), seen
    assert len({a for v in seen.values() for a in v}) >= 5  # the example changes with the facts


def p_calendar(turn_start: dict):
    """The seat's calendar at a turn, rebuilt from the prompt's calendar render."""
    from engine.model import Errand

    cal = []
    for line in turn_start["prompt_sent"].splitlines():
        m = re.match(r"^Slot +(\d+): (.*)$", line)
        if not m:
            continue
        what = m.group(2)
        if what.startswith("[FREE]"):
            cal.append(None)
        else:
            e = re.match(r"^(Blocked )?Errand #(\d+) \(cost=(\d+)\)", what)
            if e:
                cal.append(Errand(int(e.group(2)), int(e.group(3)), blocked=bool(e.group(1))))
            else:  # a meeting: never moved by IMAP's insertion costs
                cal.append(Errand(-1, 0, blocked=True))
    return cal


def test_the_system_prompt_has_a_worked_round_without_copyable_ids():
    task = canonical(0)
    view = seat_view(1, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    text = PromptBook(SeatBriefing(view, 15, 3, 5)).system_prompt()
    assert "## Worked round" in text
    for kind in ("ask_costs", "costs", "propose", "agree", "pass"):
        assert f'{{"type": "{kind}"' in text
    assert not re.search(r'"(?:to|slot|meeting_id)":\s*\d', text)


# -- short thinking at 8k or less ------------------------------------------------------------
class Recording(MockLLMServer):
    """The mock, also keeping the JSON schema of every chat request it answered."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.schemas: list[tuple[str, dict]] = []

    def _answer(self, req, th, fault, prompt_chars, reused):
        rf = req.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
        if schema:
            self.schemas.append(((th.header or {}).get("phase"), schema))
        return super()._answer(req, th, fault, prompt_chars, reused)


async def test_thinking_is_short_and_optional_in_a_small_window(make_settings):
    """A model that never stops thinking (``runaway``) writes as much as the schema lets it:
    behind an 8k window that is a few words and the prompt calls thinking optional; behind a
    32k window the usual two sentences.  A small model's talk reply holds one action (each
    short action reaches every participant it should by itself)."""
    task = canonical(0)
    out = {}
    for window in (8192, 32768):
        async with Recording(policy="sloppy", sloppy_mode="runaway", context_limit=window,
                             advertise_context=True) as mock:
            res, p = await one_llm(task, make_settings(mock))
            talk = {s["properties"]["actions"]["maxItems"] for ph, s in mock.schemas if ph == "CHEAP_TALK"}
            assert talk == ({1} if window == 8192 else {3}), talk
        ends = [e for e in events(res, "turn_end", "decide_end") if e["agent_id"] == SEAT and e.get("text")]
        lengths = [len(json.loads(e["text"])["thinking"]) for e in ends]
        system = next(e["system_prompt"] for e in events(res, "agent_registered") if e["agent_id"] == SEAT)
        out[window] = (max(lengths), "optional" in system.split("## 7.")[1].split("\n")[2])
        assert not events(res, "parse_error")
    assert out[8192] == (THINKING_SHORT, True)
    assert out[32768] == (THINKING_MAX, False)


# -- one condensation per game ---------------------------------------------------------------
async def test_finished_rounds_are_condensed_at_once_not_one_cliff_per_round(make_settings):
    """Five LLM seats behind a 4,096-token window: the talk of finished rounds no longer fits,
    so it is condensed.  A prompt-cache cliff is a request that sends again, after the point
    where it stops repeating the seat's previous request, messages that request already held
    (the mock's ``resent_chars``).  Condensing every finished round at once, at a round's first
    call, then each finished round as the next begins, leaves the cached prefix (system prompt
    and digest) to grow only at its end: at most one cliff per seat and game (one round at a
    time, as before: two for most seats)."""
    task = canonical(0)
    async with MockLLMServer(context_limit=4096, advertise_context=True) as mock:
        settings = make_settings(mock, prompt="full", max_tokens=512)
        seats = [make_llm_persona("llm:m", settings) for _ in range(task.num_agents)]
        res = await run_game(task, seats, GameConfig(deterministic=True))
        recs = list(mock.records)
    assert len((res.trace.get("metrics") or {}).get("scheduled_meeting_ids", [])) == 5
    for seat, p in enumerate(seats):
        mine = [r for r in recs if r.seat == seat]
        assert p.counters["context_trims"] >= 1, "the window forced condensation"
        cliffs = [r for r in mine if r.resent_chars]
        assert len(cliffs) <= 1, (seat, [(r.index, r.resent_chars) for r in cliffs])
        # after the first condensation nothing already sent is sent again
        first = next(i for i, e in enumerate(e for e in events(res, "turn_end", "decide_end")
                                             if e["agent_id"] == seat and (e.get("extra") or {}).get("context", {})
                                             .get("digested_upto")))
        assert all(r.resent_chars == 0 for r in mine[first + 1:]), seat


async def test_the_openers_agree_is_imaps_decision_for_an_imap_seat(make_settings):
    """The meeting's lowest id is the one IMAP seats wait for: its ``agree`` announces the
    slot (the quick ``propose`` builder) — to a seat that has written typed IMAP to it as
    IMAP's ``decision``, to a seat that never did in English the bots adopt."""
    from engine.observe import Delivered

    task = canonical(0)
    r4 = next(r for r, m in enumerate(task.meetings) if m.id == 4)
    m4 = task.meetings[r4]
    view = seat_view(SEAT, task.calendars, task.labels, task.meetings, r4, task.cost_values, ("dm",))
    costs = Delivered(3, "dm", 4, "Agent 3's costs for meeting M4 — free: 3.", r4, 0,
                      {"protocol": "imap", "kind": "costs", "meeting_id": 4, "costs": {"3": 0}}, SEAT)
    async with MockLLMServer() as mock:
        p = make_llm_persona("llm:small", make_settings(mock))
        await p.register(SeatBriefing(view, 15, 3, 5))
        mock.inject("agree")
        reply = await p.speak(TurnObservation(view, r4, 1, 15, meeting_view(m4, SEAT, task.labels), True, (costs,)))
    assert reply.error is None
    by_to = {a.to: a for a in reply.actions}
    assert sorted(by_to) == [3, 4]
    slot = by_to[4].payload is None and int(re.search(r"slot (\d+)", by_to[4].content).group(1))
    assert by_to[4].content == by_to[3].content == f"Let's meet at slot {slot} for meeting M4."
    assert by_to[3].payload == {"protocol": "imap", "kind": "decision", "meeting_id": 4, "slot": slot}
    (rec,) = reply.extra["short_actions"]
    assert rec["action"] == {"type": "agree", "slot": slot} and len(rec["expanded"]) == 2


# -- a small model is not offered a short action that would only repeat itself ----------------
def offered(schema: dict) -> set[str]:
    items = schema["properties"]["actions"]["items"]
    return {alt["properties"]["type"]["enum"][0] for alt in items.get("anyOf", [items])}


async def test_a_small_model_is_not_offered_a_short_action_that_repeats_itself(make_settings):
    """SmolLM2-135M, opening Meeting M4 of canonical:0, wrote ``ask_costs`` on all four of its
    turns although both partners had answered and its prompt said "propose slot 3", so the
    IMAP seats waiting for the opener's decision never got one.  The mock's ``echo`` model
    repeats its own latest short action while the schema admits it: behind an 8k window the
    schema offers ``ask_costs`` only until the seat asked, and ``costs`` only while a cost
    request to it is unanswered, so the opener asks once, then copies the example and proposes
    the cheapest slot — and M4 is scheduled.  A 32k window keeps every action."""
    task = canonical(0)
    m4 = next(r for r, m in enumerate(task.meetings) if min(m.participants) == SEAT)
    async with RecordingRounds(policy="sloppy", sloppy_mode="echo", context_limit=8192,
                               advertise_context=True) as mock:
        res, p = await one_llm(task, make_settings(mock))
    shorts = [(e["round"], s["action"]) for e in events(res, "turn_end") if e["agent_id"] == SEAT
              for s in (e.get("extra") or {}).get("short_actions") or []]
    assert [a["type"] for r, a in shorts if r == m4 and a["type"] == "ask_costs"] == ["ask_costs"]
    proposed = [a["slot"] for r, a in shorts if r == m4 and a["type"] == "propose"]
    assert proposed, shorts
    assert task.meetings[m4].id in res.metrics["scheduled_meeting_ids"]
    # the schemas: ask_costs gone from the seat's talk once it asked; costs only with a request
    talk = [(r, s) for seat, r, ph, s in mock.schemas if seat == SEAT and ph == "CHEAP_TALK"]
    first_m4 = [s for r, s in talk if r == m4]
    assert "ask_costs" in offered(first_m4[0]) and all("ask_costs" not in offered(s) for s in first_m4[1:])
    assert "costs" not in offered(first_m4[0])  # nobody had asked the opener for costs
    asked_me = [r for r, s in talk if "costs" in offered(s)]
    assert asked_me and all(r != m4 for r in asked_me)  # offered only in rounds where an IMAP seat asked
    async with RecordingRounds(policy="sloppy", sloppy_mode="echo", context_limit=32768,
                               advertise_context=True) as mock:
        await one_llm(task, make_settings(mock))
    assert all({"ask_costs", "costs"} <= offered(s) for seat, r, ph, s in mock.schemas
               if seat == SEAT and ph == "CHEAP_TALK" and SEAT in task.meetings[r].participants)


def test_an_opener_whose_slot_a_partner_cannot_take_asks_costs_then_proposes_the_cheapest():
    """SmolLM2-135M opened Meeting M4 of canonical:0 by agreeing to slot 9 ("Let's meet at slot
    9"); Agent 4 wrote back in words it could not do 9 but could do 1, 2 or 3, and the
    per-turn example said "pass" until talk ended — M4 was lost.  A counter-offer in free text
    is read as a proposal (``counter_offer``, the engine's reader), and the opener's example
    becomes: ask everyone's costs, then propose the slot of least total, then no second slot."""
    task = canonical(0)
    r = next(i for i, m in enumerate(task.meetings) if min(m.participants) == SEAT)
    m = task.meetings[r]
    others = [p for p in m.participants if p != SEAT]
    view = seat_view(SEAT, task.calendars, task.labels, task.meetings, r, task.cost_values, ("dm",))
    book = PromptBook(SeatBriefing(view, 15, len(task.meetings), len(task.meetings)), short_thinking=True)
    said = (Delivered(others[1], "dm", m.id, "I can't do slot 9, but I could do slot 1, 2 or 3.", r, 1, None, SEAT),
            Delivered(others[0], "dm", m.id, "Slot 9 works for me.", r, 1, None, SEAT))
    obs = TurnObservation(view, r, 1, 15, meeting_view(m, SEAT, task.labels), True, said)
    facts = TalkFacts(r, agreed=9)
    facts.read(said, view.num_slots)
    assert facts.proposal == (others[1], [1, 2, 3])
    assert example_action(book.next_step(obs, facts)) == {"type": "ask_costs"}
    facts.asked = True
    costs = {others[0]: {s: (0 if s in (3, 8) else 1) for s in range(16)},
             others[1]: {s: (0 if s in (2, 3) else None) for s in range(16)}}
    facts.reported = costs
    mine = dict(enumerate(insertion_costs(list(view.calendar))))
    best = cheapest_common_slot(mine, others, lambda a, s: costs[a].get(s))[1]
    assert example_action(book.next_step(obs, facts)) == {"type": "propose", "slot": best}
    facts.proposed = [best]
    assert example_action(book.next_step(obs, facts)) == {"type": "pass"}


def test_a_persons_costs_in_words_are_costs_not_an_offer_and_a_typed_refusal_reopens():
    """Found by a person playing beside SmolLM2-135M (study run, the LLM opening Meeting M5): the
    person answered the model's cost request with the quick key ``c``, which goes as English
    only to a seat that speaks no typed protocol ("My costs for meeting M5: free at slot 10;
    slots 4, 9, 12 and 13 cost 1; I can't do …").  The reader took it for an offer of slot 13
    and no costs, so the model's example said "Agent 2 proposed slot 13 … agree to it" instead
    of proposing the cheapest slot for all; the IMAP partner, for whom 13 was impossible,
    answered in a typed ``answer`` ("I can't do slot 13, but I could do slot 12, 14 or 2"),
    which the reader skipped, and every later example said "pass": the meeting was lost.
    Now the sentence is read as the costs it states (``quick.read_shared_costs``, the inverse
    of ``quick.share_costs``), a typed refusal with alternatives counts as a counter-offer,
    and the opener's example proposes the cheapest slot for everyone."""
    from personas import quick

    task = canonical(0)
    r = next(i for i, m in enumerate(task.meetings) if min(m.participants) == SEAT)
    m = task.meetings[r]
    person, bot = [p for p in m.participants if p != SEAT]
    view = seat_view(SEAT, task.calendars, task.labels, task.meetings, r, task.cost_values, ("dm",))
    book = PromptBook(SeatBriefing(view, 15, len(task.meetings), len(task.meetings)), short_thinking=True)
    mine = dict(enumerate(insertion_costs(list(view.calendar))))
    can = [s for s, c in mine.items() if c is not None]
    person_costs = {s: (0 if i % 3 == 0 else 1 if i % 3 == 1 else None) for i, s in enumerate(can)}
    words = quick.share_costs(person, m.id, person_costs, channel="dm", to=[SEAT], protocol=None)[0]
    assert words.payload is None and quick.read_shared_costs(words.content, view.num_slots) == person_costs
    bot_costs = {s: (None if s == can[1] else 0) for s in can}
    typed = quick.share_costs(bot, m.id, bot_costs, channel="dm", to=[SEAT], protocol="imap")[0]
    said = (Delivered(person, "dm", m.id, words.content, r, 0, None, SEAT),
            Delivered(bot, "dm", m.id, typed.content, r, 0, typed.payload, SEAT))
    facts = TalkFacts(r, asked=True)
    facts.read(said, view.num_slots)
    assert facts.proposal is None and facts.reported == {person: person_costs, bot: bot_costs}
    best = cheapest_common_slot(mine, [person, bot], lambda a, s: facts.reported[a].get(s))[1]
    obs = TurnObservation(view, r, 1, 15, meeting_view(m, SEAT, task.labels), True, said)
    assert example_action(book.next_step(obs, facts)) == {"type": "propose", "slot": best}
    # the model announced another slot; the IMAP partner refuses it in a typed answer
    wrong = can[1]
    facts.agreed = wrong
    answer = {"protocol": "imap", "kind": "answer", "meeting_id": m.id, "works": [], "cannot": [wrong],
              "alternatives": [best]}
    refusal = (Delivered(bot, "dm", m.id, f"I can't do slot {wrong}, but I could do slot {best}.", r, 2, answer,
                         SEAT),)
    facts.read(refusal, view.num_slots)
    assert facts.proposal == (bot, [best])
    obs = TurnObservation(view, r, 2, 15, meeting_view(m, SEAT, task.labels), True, refusal)
    assert example_action(book.next_step(obs, facts)) == {"type": "propose", "slot": best}


# -- an idle pass leaves a small model's thread --------------------------------------------
async def _repeat_game(make_settings, task, idle_passes: str, window: int = 8192):
    """``task`` with LLM seats 1 and 3 (the mock's ``repeat`` model, which copies its own
    previous reply of the round) among IMAP seats; returns the result and the two personas."""
    async with MockLLMServer(policy="sloppy", sloppy_mode="repeat", context_limit=window,
                             advertise_context=True) as mock:
        seats = list(make_personas("imap", task.num_agents))
        llm = {s: make_llm_persona("llm:small", make_settings(mock, idle_passes=idle_passes)) for s in (1, 3)}
        seats[1], seats[3] = llm[1], llm[3]
        res = await run_game(task, seats, GameConfig(deterministic=True))
        for seat, p in llm.items():  # --resume rebuilds exactly this thread from the seat's own events
            again = make_llm_persona("llm:small", p.settings)
            await again.register(p.book.briefing)
            await again.resume([e for e in res.trace["events"] if (e.get("data") or {}).get("agent_id") == seat])
            assert again.messages == p.messages
    return res, llm


def _unanswered_cost_requests(res) -> list[tuple[int, int]]:
    """(round, seat) of each IMAP cost request to an LLM seat that it never answered with costs."""
    asked = {(d["round"], d["to_agent"], d["from_agent"]) for d in events(res, "dm_sent")
             if (d.get("payload") or {}).get("kind") == "cost_request" and d["to_agent"] in (1, 3)}
    answered = {(d["round"], d["from_agent"], d["to_agent"]) for d in events(res, "dm_sent")
                if (d.get("payload") or {}).get("kind") == "costs" and d["from_agent"] in (1, 3)}
    return sorted((r, s) for r, s, frm in asked - answered)


async def test_an_idle_pass_leaves_a_small_models_thread(make_settings):
    """A model that copies its own last reply (SmolLM2-135M) passed at a turn that brought
    nothing, then passed again with IMAP's cost request in front of it: IMAP decided without
    its costs, on a slot blocked for it.  Behind an 8k window (``idle_passes`` auto) such a pass
    leaves the thread, so the next message of the round opens it with the calendar and the
    request, and the seat answers; kept (``idle_passes = "keep"``, or a large window), the
    copied pass leaves requests unanswered.  The trace keeps every call, and ``--resume``
    rebuilds the same threads."""
    task = canonical(2)
    res, llm = await _repeat_game(make_settings, task, "auto")
    kept, _ = await _repeat_game(make_settings, task, "keep")
    large, _ = await _repeat_game(make_settings, task, "auto", window=32768)
    assert _unanswered_cost_requests(res) == []
    assert _unanswered_cost_requests(kept) and _unanswered_cost_requests(kept) == _unanswered_cost_requests(large)
    assert res.metrics["meetings_scheduled"] > kept.metrics["meetings_scheduled"]

    idle = [d for d in events(res, "turn_end") if (d.get("extra") or {}).get("idle_pass")]
    assert idle and all(not d["tool_calls"] for d in idle)  # recorded calls, each a pass
    assert not any((d.get("extra") or {}).get("idle_pass") for d in events(kept, "turn_end"))
    for seat, p in llm.items():
        rounds = message_rounds(p.messages)
        firsts = {}
        for m, r in zip(p.messages, rounds):
            if m["role"] == "user" and r >= 0:
                firsts.setdefault(r, m["content"])
        for r, text in firsts.items():  # each round opens with its meeting and the seat's calendar
            assert "Slot  0:" in text or "Meeting M" in text.split("\n")[0], (seat, r, text[:200])
        assert all("Slot  0:" in firsts[d["round"]] for d in idle if d["agent_id"] == seat and d["round"] in firsts)
