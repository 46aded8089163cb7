"""LLM seats a small local model can play (issue 22 items 2, 3, 5, 6, 10, 11, 12; issue 24 item 10).

Everything runs over real HTTP against the loopback mock; its ``sloppy`` policy copies a
small model's habits (``sloppy_mode="runaway"``: strings that never close unless the
schema bounds them; ``"copycat"``: it sends the prompt's example message as written).
"""

from __future__ import annotations

import json
import re
from collections import Counter

import jsonschema
import pytest
from llmkit import decisions_as_named

from engine.actions import MAX_ACTIONS, MAX_MESSAGE_CHARS, EnvelopeError, Message, parse_envelope
from engine.freetext import slot_statements
from engine.game import GameConfig, run_game
from engine.observe import DecisionObservation, SeatBriefing, TurnObservation, meeting_view, seat_view
from engine.taskref import hydrate_labels, resolve_tasks
from engine.usage import failure_counts, token_usage
from personas.llm.client import CallResult
from personas.llm.factory import make_llm_persona
from calbench_devtools.mock_endpoint import MockLLMServer
from personas.llm.prompts import PromptBook
from personas.llm.schema import CONTENT_MAX, THINKING_MAX, drop_keywords, envelope_schema
from personas.registry import make_personas


def canonical(i: int = 0):
    return hydrate_labels(resolve_tasks(f"canonical:{i}")[0])


async def one_llm(task, settings, seat: int = 1, config: GameConfig | None = None):
    seats = list(make_personas("imap", task.num_agents))
    p = make_llm_persona("llm:small", settings)
    seats[seat] = p
    res = await run_game(task, seats, config or GameConfig(deterministic=True))
    decisions_as_named(res.trace)  # issue 31: every DECISION reply got the slot it named, or the rules' words
    return res, p


def events(res, *types):
    return [e for e in res.trace["events"] if e["type"] in types]


def participants(task):
    return {m_round: set(m.participants) for m_round, m in enumerate(task.meetings)}


# -- item 2: examples a model can copy must be this game's ----------------------------------
def test_the_system_prompt_has_no_copyable_recipient():
    task = canonical(0)
    view = seat_view(1, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    text = PromptBook(SeatBriefing(view, 15, 3, 5)).system_prompt()
    assert not re.search(r'"to":\s*\d', text)  # only "<agent id>"
    assert not re.search(r'"slot":\s*\d', text) and not re.search(r'"meeting_id":\s*\d', text)


async def test_a_copycat_model_writes_only_to_the_meeting(make_settings):
    """The 135M model DMed Agent 3 in every reply: the example's recipient. The example is
    now the turn's short action (issue 31), which the seat addresses itself, so copying it
    reaches the meeting's participants only."""
    task = canonical(0)
    async with MockLLMServer(policy="sloppy", sloppy_mode="copycat") as mock:
        res, p = await one_llm(task, make_settings(mock, max_calls_per_round=4))
    mine = [e["data"] for e in events(res, "dm_sent") if e["data"]["from_agent"] == 1]
    copied = [s for e in events(res, "turn_end") if e["data"]["agent_id"] == 1
              for s in (e["data"].get("extra") or {}).get("short_actions") or ()]
    assert copied and any(s["expanded"] for s in copied), "the copycat copied the example"
    for d in mine:
        parts = set(task.meetings[d["round"]].participants)
        assert d["to_agent"] in parts and d["to_agent"] != 1, d
    assert not events(res, "parse_error")


# -- item 3: passing, agreeing, knowing when talk is done, a cap on calls ------------------
def test_pass_and_agree_are_short_actions():
    env = parse_envelope('{"thinking": "", "actions": [{"type": "pass"}]}')
    assert env.actions == () and env.agreed == ()
    env = parse_envelope('{"thinking": "ok", "actions": [{"type": "agree", "slot": 7}]}')
    assert env.actions == () and env.agreed == (7,)


async def test_agree_becomes_the_messages_of_the_channel(make_settings):
    task = canonical(0)
    async with MockLLMServer() as mock:
        m0 = task.meetings[0]
        seat = sorted(m0.participants)[1]  # not the opener, whose agree announces the slot (test_llm_talk)
        settings = make_settings(mock)
        p = make_llm_persona("llm:small", settings)
        view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
        await p.register(SeatBriefing(view, 15, 3, 5))
        mock.inject("agree")
        reply = await p.speak(TurnObservation(view, 0, 0, 15, meeting_view(m0, seat, task.labels), True, ()))
    assert reply.error is None
    others = [a for a in m0.participants if a != seat]
    assert [(a.type, a.to) for a in reply.actions] == [("dm", o) for o in others]
    assert all(re.fullmatch(rf"Agreed: Meeting M{m0.id} at slot \d+\.", a.content) for a in reply.actions)


async def test_the_prompt_says_when_talk_is_done(make_settings):
    task = canonical(0)
    async with MockLLMServer() as mock:
        settings = make_settings(mock)
        res = await run_game(task, [make_llm_persona("llm:m", settings) for _ in range(task.num_agents)],
                             GameConfig(deterministic=True))
    lead = task.meetings[0].speaker_order[0]  # it heard every participant agree to its slot
    prompts = [e["data"]["prompt_sent"] or "" for e in events(res, "turn_start")
               if e["data"]["agent_id"] == lead and e["data"]["round"] == 0]
    assert any("so the talk is done" in t for t in prompts)


async def test_a_cap_on_calls_per_round(make_settings):
    """A seat that never stops talking (the parrot) runs every turn of every round; with
    ``max_calls_per_round`` it passes without a request past the cap."""
    task = canonical(0)
    counts = {}
    for cap in (None, 3):
        async with MockLLMServer(policy="sloppy", sloppy_mode="parrot") as mock:
            res, p = await one_llm(task, make_settings(mock, max_calls_per_round=cap))
            talk = Counter(r.phase for r in mock.records if r.seat == 1)
        per_round = Counter(e["data"]["round"] for e in events(res, "turn_end")
                            if e["data"]["agent_id"] == 1 and not (e["data"].get("extra") or {}).get("capped"))
        counts[cap] = (talk["CHEAP_TALK"], per_round, p.counters["capped_turns"])
    uncapped, capped = counts[None], counts[3]
    assert max(capped[1].values()) == 3 and capped[2] > 0
    assert capped[0] < uncapped[0] and max(uncapped[1].values()) > 3
    print(f"\nparrot canonical:0, seat 1: CHEAP_TALK requests {uncapped[0]} uncapped, {capped[0]} with a cap of 3")


async def test_a_small_model_is_capped_by_default(make_settings):
    """Unset, the cap follows the model's window as the endpoint advertises it: a parrot
    behind an 8k window (a small local model) gets 4 CHEAP_TALK calls per round, behind a
    32k window it talks on every turn; ``max_calls_per_round`` set wins either way."""
    task = canonical(0)
    out = {}
    for window, cap in ((8192, None), (32768, None), (8192, 6)):
        async with MockLLMServer(policy="sloppy", sloppy_mode="parrot", context_limit=window,
                                 advertise_context=True) as mock:
            res, p = await one_llm(task, make_settings(mock, max_calls_per_round=cap))
        per_round = Counter(e["data"]["round"] for e in events(res, "turn_end")
                            if e["data"]["agent_id"] == 1 and not (e["data"].get("extra") or {}).get("capped"))
        capped = [e["data"]["extra"]["capped"] for e in events(res, "turn_end")
                  if e["data"]["agent_id"] == 1 and (e["data"].get("extra") or {}).get("capped")]
        out[window, cap] = (max(per_round.values()), set(capped))
    assert out[8192, None] == (4, {4})
    assert out[32768, None][0] > 4 and out[32768, None][1] == set()
    assert out[8192, 6] == (6, {6})


# -- item 5: runaway strings; a cut reply is repaired whole or unreadable -----------------
def test_a_cut_reply_is_never_read_as_one_inner_action():
    cut = ('{"thinking": "long thoughts", "actions": [{"type": "dm", "to": 2, "content": "slot 4?"}, '
           '{"type": "dm", "to": 3, "content": "I could do sl')
    with pytest.raises(EnvelopeError):
        parse_envelope(cut)  # today's reader took the first complete {...}: one DM, the rest dropped
    env = parse_envelope(cut, truncated=True)
    assert env.repaired and env.thinking == "long thoughts"
    assert env.actions == (Message("dm", "slot 4?", 2), Message("dm", "I could do sl", 3))
    with pytest.raises(EnvelopeError):  # cut inside the last action's keys: unreadable, not shortened
        parse_envelope(cut[: cut.rindex('"to"') + 3], truncated=True)
    assert parse_envelope('Here: {"thinking": "a", "actions": []} thanks').actions == ()  # prose still works


def test_every_string_and_list_of_the_schema_is_bounded():
    task = canonical(0)
    m = task.meetings[0]
    seat = m.participants[0]
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values,
                     ("dm", "participant_groupchat"))
    mv = meeting_view(m, seat, task.labels)
    for obs in (TurnObservation(view, 0, 0, 15, mv, True, ()), DecisionObservation(view, 0, mv, ())):
        schema = envelope_schema(obs)
        strings, arrays = [], []

        def walk(n):
            if isinstance(n, dict):
                if n.get("type") == "string" and "enum" not in n:
                    strings.append(n)
                if n.get("type") == "array":
                    arrays.append(n)
                for v in n.values():
                    walk(v)
            elif isinstance(n, list):
                for v in n:
                    walk(v)
        walk(schema)
        assert strings and all("maxLength" in s for s in strings)
        assert arrays and all("maxItems" in a for a in arrays)
        assert schema["properties"]["thinking"]["maxLength"] == THINKING_MAX
    assert CONTENT_MAX <= MAX_MESSAGE_CHARS


async def test_runaway_strings_close_under_the_schema(make_settings):
    task = canonical(0)
    out = {}
    for structured in ("off", "auto"):
        async with MockLLMServer(policy="sloppy", sloppy_mode="runaway") as mock:
            res, p = await one_llm(task, make_settings(mock, structured=structured, max_tokens=256))
        ends = [e["data"] for e in events(res, "turn_end", "decide_end") if e["data"]["agent_id"] == 1]
        out[structured] = (p.counters["truncated_repaired"], len(events(res, "parse_error")),
                           sum(1 for d in ends if (d.get("extra") or {}).get("finish_reason") == "length"), res)
    repaired, errors, cut, res_off = out["off"]
    assert cut > 0 and repaired + errors == cut  # every cut reply: repaired whole, or unreadable
    notes = [e["data"]["prompt_sent"] for e in events(res_off, "turn_start", "decide_start")
             if e["data"]["agent_id"] == 1 and e["data"]["prompt_sent"]]
    assert any("cut off by max_tokens=256" in t for t in notes)
    assert out["auto"][:3] == (0, 0, 0)  # maxLength: every reply closed
    assert res_off.metrics["meetings_scheduled"] <= out["auto"][3].metrics["meetings_scheduled"]


async def test_the_note_names_the_limit_that_cut_the_reply(make_settings):
    async with MockLLMServer() as mock:
        p = make_llm_persona("llm:small", make_settings(mock, max_tokens=512))
        cut = CallResult(text="{", finish_reason="length", usage={"prompt_tokens": 100, "completion_tokens": 512})
        assert p._cut_by(cut, {}) == "max_tokens=512"
        assert "reply budget of 300 tokens" in p._cut_by(cut, {"reply_tokens": 300})
        p._window = 4096
        full = CallResult(text="{", finish_reason="length", usage={"prompt_tokens": 3900, "completion_tokens": 196})
        assert p._cut_by(full, {}) == "the model's context was full (4096 tokens)"


# -- item 6: DECISION batches a grammar can make valid; rejected batches are failures -----
def test_the_decision_schema_admits_only_well_formed_batches():
    task = canonical(0)
    m = task.meetings[0]
    seat = m.participants[0]
    view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
    schema = envelope_schema(DecisionObservation(view, 0, meeting_view(m, seat, task.labels), ()))
    cal = view.calendar
    free = [s for s, it in enumerate(cal) if it is None]
    movable = [s for s, it in enumerate(cal) if it is not None and not it.blocked]
    blocked = [s for s, it in enumerate(cal) if it is not None and it.blocked]
    sched = lambda s, mid=m.id: {"type": "schedule", "meeting_id": mid, "slot": s}  # noqa: E731

    def ok(actions):
        try:
            jsonschema.validate({"thinking": "t", "actions": actions}, schema)
            return True
        except jsonschema.ValidationError:
            return False

    mv = movable[0]
    move = {"type": "reschedule", "item_id": cal[mv].item_id, "from_slot": mv, "to_slot": free[0],
            "justification": "clear it"}
    assert ok([sched(free[0])]) and ok([move, sched(mv)])
    assert not ok([])  # "Expected exactly 1 schedule action, got 0" can no longer be written
    assert not ok([sched(free[0]), sched(free[-1])]) and not ok([sched(mv), move])
    assert not ok([sched(mv)])  # occupied, and nothing moves it (rule 7)
    assert not ok([move, sched(free[1])])  # the move clears one slot, the meeting goes to another
    assert not ok([dict(move, to_slot=movable[1]), sched(mv)])  # into an occupied slot (rule 5)
    assert not ok([sched(free[0], m.id + 1)])
    assert blocked and not ok([sched(blocked[0])])  # a slot it can never take
    wrong = dict(move, item_id=cal[mv].item_id + 1000)
    assert not ok([wrong, sched(mv)])
    assert not ok([{"type": "dm", "to": 0, "content": "hi"}, sched(free[0])])
    loose = drop_keywords(schema, {"prefixItems"})  # what a server without prefixItems gets
    jsonschema.validate({"thinking": "", "actions": [move, sched(mv)]}, loose)
    assert "prefixItems" not in json.dumps(loose)


async def test_a_rejected_batch_is_an_agent_failure_everywhere(make_settings):
    from calbench_tui.screens.end import failure_line
    from lab.summary import GameSummary

    task = canonical(0)
    async with MockLLMServer() as mock:
        mock.inject("invalid_batch", seat=1, phase="DECISION")
        res, _ = await one_llm(task, make_settings(mock, structured="off"))
    rejected = events(res, "batch_rejected")
    assert [e["data"]["rule"] for e in rejected] == [6]
    f = failure_counts(res.trace["events"])
    assert f["agent"] == 1 and f["kinds"] == {"rejected_batch_rule_6": 1}
    assert GameSummary.from_trace(res.trace, agents="x").agent_failures == 1  # run and report
    assert "rejected_batch_rule_6 1" in failure_line(res.trace)  # the end screen


async def test_auto_drops_a_schema_keyword_the_server_refuses(make_settings):
    task = canonical(0)
    async with MockLLMServer(refuse_keywords=("prefixItems",)) as mock:
        res, p = await one_llm(task, make_settings(mock))
    decides = [e["data"]["extra"] for e in events(res, "decide_end") if e["data"]["agent_id"] == 1]
    assert decides and all(x["structured"] == "json_schema" and x["schema_dropped"] == ["prefixItems"]
                           for x in decides)
    assert p.counters["schema_keywords_dropped"] == 1 and p.counters["format_fallbacks"] == 0
    assert not events(res, "parse_error", "batch_rejected")


# -- issue 24 item 10: reply size, actions per reply, message length -----------------------
@pytest.mark.parametrize("fault, words", [("oversized", "characters long"), ("flood", f"at most {MAX_ACTIONS}"),
                                          ("long_message", f"at most {MAX_MESSAGE_CHARS:,}")])
async def test_replies_past_the_limits_are_agent_failures(make_settings, fault, words):
    task = canonical(0)
    m0 = task.meetings[0]
    seat = m0.speaker_order[0]
    async with MockLLMServer() as mock:
        p = make_llm_persona("llm:small", make_settings(mock, structured="off"))
        view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
        await p.register(SeatBriefing(view, 15, 3, 5))
        mock.inject(fault)
        reply = await p.speak(TurnObservation(view, 0, 0, 15, meeting_view(m0, seat, task.labels), True, ()))
    assert reply.error == "parse_error" and words in reply.error_detail and reply.actions == ()
    assert p.counters["agent_failures"] == 1
    assert max(len(m["content"]) for m in p.messages[1:]) < 12_000  # the thread never re-sends it whole
    if fault == "oversized":
        assert reply.raw is None and len(reply.text) < 2_000


# -- item 10: the context estimate decides only beyond its own error ------------------------
async def test_a_request_within_the_estimates_margin_is_sent(make_settings):
    """Our estimate (characters/3.5) counts ~14 % more than the mock's (characters/4): a
    request the estimate says is a little too big is sent, and the server accepts it."""
    from calbench_devtools.mock_endpoint import estimate_tokens

    task = canonical(0)
    m0 = task.meetings[0]
    seat = m0.speaker_order[0]
    async with MockLLMServer() as probe:
        p = make_llm_persona("llm:small", make_settings(probe))
        view = seat_view(seat, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm",))
        await p.register(SeatBriefing(view, 15, 3, 5))
        obs = TurnObservation(view, 0, 0, 15, meeting_view(m0, seat, task.labels), True, ())
        msgs = p.messages + [{"role": "user", "content": p.prompt(obs)}]
        server_count, ours = estimate_tokens(msgs), p._est.tokens(msgs)
    assert ours > server_count
    window = server_count + 300 + 10
    results = {}
    for w in (window, server_count // 2):
        async with MockLLMServer(context_limit=w) as mock:
            p = make_llm_persona("llm:small", make_settings(mock, context_window=max(256, w), max_tokens=300,
                                                             history="full"))
            await p.register(SeatBriefing(view, 15, 3, 5))
            reply = await p.speak(obs)
            results[w] = (reply.error, len(mock.records))
    assert results[window] == (None, 1)  # today: context_overflow without a request
    assert results[server_count // 2] == ("context_overflow", 0)  # far beyond the margin: no request


async def test_one_estimate_per_model_calibrated_by_every_seat(make_settings):
    task = canonical(0)
    async with MockLLMServer() as mock:
        settings = make_settings(mock)
        seats = [make_llm_persona("llm:small", settings) for _ in range(task.num_agents)]
        await run_game(task, seats, GameConfig(deterministic=True))
    assert len({id(s._est) for s in seats}) == 1
    est = seats[0]._est
    assert len(est.seen) > 10 and est.ratio < 1.0  # the mock counts fewer tokens than characters/3.5
    assert est.margin < 0.2


# -- item 11: modal forms in the free-text estimator ---------------------------------------
SMALL_MODEL_SENTENCES = [
    ("For Meeting M2 I could do slot 6 or 11. Does either suit you?", {6: "free", 11: "free"}),
    ("I could do slot 6 or 11.", {6: "free", 11: "free"}),
    ("I would be able to do slot 2.", {2: "free"}),
    ("I might be able to do slot 3 if needed", {3: "free"}),
    ("I can manage slot 7.", {7: "free"}),
    ("I'd do slot 5.", {5: "free"}),
    ("I'm able to do slots 1 and 2.", {1: "free", 2: "free"}),
    ("Slot 10 is possible for me.", {10: "free"}),
    ("Slot 4 suits me.", {4: "free"}),
    ("I could also make slot 9.", {9: "free"}),
    ("I couldn't do slot 8.", {8: "cant"}),
    ("I could not make slot 8.", {8: "cant"}),
    ("I won't be able to do slot 9.", {9: "cant"}),
    ("I'm not able to do slot 7.", {7: "cant"}),
    ("Slot 12 wouldn't work for me.", {12: "cant"}),
    ("I can't do slot 3 but I could do slot 5.", {3: "cant", 5: "free"}),
    ("Could you do slot 5?", {}),
]


@pytest.mark.parametrize("text, want", SMALL_MODEL_SENTENCES)
def test_modal_availability_sentences(text, want):
    got = {s.slot: s.category for s in slot_statements(text, sender=1, recipients=(2,), num_agents=5, num_slots=16)
           if s.target == 1}
    assert got == want


# -- item 12: the compact profile --------------------------------------------------------
async def test_compact_prompts_cost_at_most_half_of_full_history(make_settings):
    task = canonical(0)
    tokens = {}
    for name, kw in (("full", {"prompt": "full", "history": "full"}), ("compact", {"prompt": "compact"})):
        async with MockLLMServer() as mock:
            res, p = await one_llm(task, make_settings(mock, **kw))
        tokens[name] = token_usage(res.trace["events"])["game"]["prompt_tokens"]
        assert p.prompt_profile == name and res.metrics["meetings_scheduled"] >= 1
    assert tokens["compact"] <= tokens["full"] / 2, tokens
    print(f"\ncanonical:0, one LLM seat: prompt tokens full {tokens['full']:,}, compact {tokens['compact']:,}")


async def test_auto_picks_compact_under_4k(make_settings):
    task = canonical(0)
    async with MockLLMServer(context_limit=3072, advertise_context=True) as mock:
        res, p = await one_llm(task, make_settings(mock))
    assert p.prompt_profile == "compact" and p.history == "digest"
    assert not failure_counts(res.trace["events"])["configuration"]
    async with MockLLMServer(context_limit=8192, advertise_context=True) as mock:
        _, p8 = await one_llm(task, make_settings(mock))
    assert p8.prompt_profile == "full"


def test_the_compact_system_prompt_keeps_the_rules():
    task = canonical(0)
    view = seat_view(2, task.calendars, task.labels, task.meetings, 0, task.cost_values, ("dm", "all_groupchat"))
    full = PromptBook(SeatBriefing(view, 15, 3, 5)).system_prompt()
    compact = PromptBook(SeatBriefing(view, 15, 3, 5), profile="compact").system_prompt()
    assert len(compact) < 0.5 * len(full)
    for fact in ("You are Agent 2", "16 slots per calendar", "up to 15 turns", "3 retries", '"type": "dm"',
                 '"type": "all_groupchat"', '"type": "schedule"', '"type": "reschedule"', '"type": "agree"',
                 '"type": "pass"', "Blocked Errand", "private description", "exactly one schedule"):
        assert fact in compact, fact


async def test_the_thread_keeps_a_cut_reply_closed_and_resume_rebuilds_it(make_settings, task):
    """A repaired reply enters the thread as the closed envelope (a small model imitates its
    own history), and ``--resume`` rebuilds exactly that thread."""
    from engine.game import resume_point
    from test_resume import calls_in, play

    lead = task.meetings[0].speaker_order[0]
    full, full_seats, full_reqs = await play(task, make_settings, retries=1,
                                             faults=[("truncated", {"count": 1, "seat": lead, "phase": "CHEAP_TALK"})])
    events = full.trace["events"]
    repaired = [e["data"] for e in events if e["type"] == "turn_end" and e["data"]["agent_id"] == lead
                and (e["data"].get("extra") or {}).get("truncated_repaired")]
    assert len(repaired) == 1 and repaired[0]["round"] == 0 and repaired[0]["tool_calls"]
    kept = [m["content"] for m in full_seats[lead].messages if m["role"] == "assistant"]
    assert repaired[0]["text"] not in kept  # the raw cut text is in the trace, not in the thread
    assert all(parse_envelope(k) is not None for k in kept if k.startswith('{"thinking"'))
    cut = next(e["seq"] for e in events if e["type"] == "turn_end" and e["data"]["round"] == 1)
    prefix = [e for e in events if e["seq"] <= resume_point([e for e in events if e["seq"] <= cut])]
    again, seats, reqs = await play(task, make_settings, resume_events=prefix, retries=1)
    done = calls_in(prefix, lead)
    assert reqs[lead][0] == full_reqs[lead][done]  # the same history after the resume
    assert full_seats[lead].messages == seats[lead].messages


def test_the_reader_is_lenient_but_bounded():
    # a stray brace in prose before the envelope still finds the envelope
    assert parse_envelope('Sure { here: {"thinking": "x", "actions": [{"type": "pass"}]} bye').thinking == "x"
    for text in ("[" * 30_000, '{"actions": ' + "[" * 5_000):  # nesting past the decoder's depth: unreadable
        for truncated in (False, True):
            with pytest.raises(EnvelopeError):
                parse_envelope(text, truncated=truncated)
