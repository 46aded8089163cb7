"""Helpers shared by the LLM tests (imported by name: tests/llm is on sys.path)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from calbench_devtools.mock_endpoint import MockLLMServer
from engine.generate import generate_scenario

_DOUBLES = Path(__file__).resolve().parents[1] / "engine" / "doubles.py"


def load_doubles():
    """tests/engine/doubles.py (PlanPersona, ScriptPersona), loaded by path."""
    spec = importlib.util.spec_from_file_location("calbench_test_doubles", _DOUBLES)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_task(seed: int = 3, **kw):
    """A small generated task: 4 agents, 8 slots, 3 two-person meetings."""
    args = dict(num_agents=4, num_slots=8, num_meetings=3, participants_per_meeting=2, blocked=1)
    args.update(kw)
    return generate_scenario(seed, **args)


def decisions_as_named(trace) -> list[dict]:
    """Check every DECISION reply of an LLM game (issue 31): the slot the model named is the
    slot scheduled, or the reply was rejected with the rule's words and re-asked.

    The slot the model named is the schedule in its reply as written (``decide_end.text``);
    the batch the game got is ``decide_end.tool_calls``.  A reply whose batch the rules took
    must schedule that slot (``batch_applied`` too, when the round applied it); a rejected
    one is followed by a ``batch_rejected`` and — unless the retries ran out — by a new
    ``decide_start`` of the same seat whose prompt carries the rule's words.  Raises
    AssertionError naming the first reply that breaks this; returns one row per reply
    (seat, round, named, scheduled, outcome) for further checks.
    """
    from engine.actions import EnvelopeError, parse_envelope

    evs = trace["events"]
    rows = []
    for i, e in enumerate(evs):
        d = e.get("data") or {}
        if e["type"] != "decide_end" or d.get("phase") != "DECISION":
            continue
        extra = d.get("extra") or {}
        if not isinstance(extra.get("counters"), dict):
            continue  # not an LLM seat
        seat, rnd = d["agent_id"], d["round"]
        named = None
        if isinstance(d.get("text"), str):
            try:
                said = parse_envelope(d["text"]).actions
            except EnvelopeError:
                said = ()
            slots = [a.slot for a in said if getattr(a, "type", None) == "schedule"]
            named = slots[0] if len(slots) == 1 else None
        sent = [a.get("slot") for a in d.get("tool_calls") or [] if a.get("type") == "schedule"]
        later = [x for x in evs[i + 1:] if (x.get("data") or {}).get("agent_id") == seat
                 and (x.get("data") or {}).get("round") == rnd]
        nxt = next((k for k, x in enumerate(later) if x["type"] == "decide_start"), len(later))
        rejected = next((x for x in later[:nxt] if x["type"] == "batch_rejected"), None)
        row = {"seat": seat, "round": rnd, "named": named, "sent": sent, "status": d.get("status"),
               "decision": extra.get("decision")}
        where = f"seat {seat}, round {rnd}, retry {d.get('retry_count')}: {d.get('text')!r:.300}"
        if d.get("status") == "failed":  # lost to the endpoint: no batch, no rule refused one; asked again
            assert rejected is None, f"a lost DECISION call recorded as a rejected batch ({where})"
            # ...unless it was the last attempt (the decision retries used up: the seat has no batch)
            assert nxt < len(later) or not any(x["type"] == "batch_applied" for x in later), \
                f"a lost DECISION call not asked again ({where})"
            row["outcome"] = "lost"
        elif d.get("status") == "rejected" or rejected is not None:
            assert rejected is not None, f"a rejected reply without batch_rejected ({where})"
            words = rejected["data"]["conflict_description"]
            again = next((x for x in later if x["type"] == "decide_start"), None)
            if again is not None:
                assert words in (again["data"].get("prompt_sent") or ""), \
                    f"re-asked without the rule's words {words!r} ({where})"
            row["outcome"] = "rejected"
            row["words"] = words
        else:
            if named is not None:
                assert sent == [named], f"the model named slot {named} but the batch schedules {sent} ({where})"
                applied = next((x for x in later if x["type"] == "batch_applied"
                                and x["data"].get("phase") == "DECISION"), None)
                if applied is not None:
                    got = [a["slot"] for a in applied["data"]["actions"] if a["type"] == "schedule"]
                    assert got == [named], f"named slot {named}, applied {got} ({where})"
            row["outcome"] = "accepted"
            row["scheduled"] = sent[0] if sent else None
        rows.append(row)
    return rows


class RecordingRounds(MockLLMServer):
    """The mock, also keeping (seat, round, phase, schema) of every chat request it answered."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.schemas: list[tuple[int, int, str, dict]] = []

    def _answer(self, req, th, fault, prompt_chars, reused):
        rf = req.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema")
        h = th.header or {}
        if schema and h:
            self.schemas.append((th.seat, int(h["round"]) - 1, h.get("phase"), schema))  # "Round 1" is round 0
        return super()._answer(req, th, fault, prompt_chars, reused)
