"""The paper's message audit (§4.3): what the messages a seat sent *do*.

For every message a seat sends (a DM, a participant-groupchat or an all-agent groupchat
message: one each, as in the message counts) the audit decides which of five things it
contains — a message may contain several, or none (a greeting):

``proposal``
    puts a slot forward for the meeting: a typed ``decision``, ``propose``, ``confirm``,
    ``proposals``, ``propose_reschedule``, ``confirm_reschedule``; in free text a proposed or
    decided slot ("how about 9?", "let's go with 7").
``availability``
    says which of its own slots it can or cannot do: a typed ``cost_request`` (the slots the
    initiator can hold), ``costs``, ``reply``, ``reschedule_reply``, ``scores``, ``answer`` (a
    bot's answer to a person: slots that work, do not, or could instead); in free text
    a slot said to work or not ("free at 3", "5 is busy").
``cost``
    gives a cost of one of its slots: a typed ``costs`` with at least one figure, ``scores``
    with at least one score between 1 and 10 (a cost band; 11 is free, 0 impossible); in
    free text a cost named for a slot ("slot 9 costs 10") or a word for a cost or constraint
    of its own (cost, expensive, cheap, penalty, errand, displace, bump, "would move").
``question``
    asks the others for something: a typed ``cost_request``, ``proposals``, ``propose``,
    ``reschedule_request``, ``propose_reschedule``; in free text a question (a question mark
    or an asking phrase).
``refusal``
    declines: a typed ``fail``, ``fail_reschedule``, a ``reply`` / ``reschedule_reply`` of
    IMPOSSIBLE, ``scores`` whose every score is 0, ``costs`` whose every figure is null, an
    ``answer`` that names only slots it cannot do; in
    free text a slot said not to work, or a bare "no".

Typed messages are read from their payload (ours in ``payload``, the authors' JSON in
``content``), with the categories their protocol declares for each kind (``Kind.audit``,
``Kind.audit_rule`` in ``engine/protocols/<name>.py``; the lists above are the built-in
protocols'); everything else — humans, LLMs, the bots' own English lines — through the
shared free-text reader :func:`engine.protocol.read_text`, so both kinds of seat are counted
by the same rules.  Rates (docs/metrics.md, "Message audit"): per seat, the share of its
messages containing each thing (``rate``), and the share of its *talking rounds* (rounds in
which it sent at least one message) in which it did so at least once (``round_rate``).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .events import MESSAGE_EVENTS
from . import protocols
from .protocol import read_text, typed_message

__all__ = ["CATEGORIES", "classify", "seat_audit", "pool_audit"]

CATEGORIES = ("proposal", "availability", "cost", "question", "refusal")



def _typed(proto: str, kind: str, p: dict[str, Any]) -> set[str]:
    """The categories its protocol declares for the kind (``Kind.audit`` and ``audit_rule`` in
    ``engine/protocols/``); a kind its protocol does not declare (a foreign trace) is read
    as any protocol that declares it reads it."""
    out: set[str] = set()
    for rule in protocols.rules(proto, kind):
        out.update(rule.audit)
        if rule.audit_rule is not None:
            out |= rule.audit_rule(p)
    return out


#: Words that mention an own cost or constraint in free text (with or without a figure).
_COST_WORDS = re.compile(r"\b(cost|costs|costly|expensive|cheap|cheaper|penalty|price|errand|errands|displac\w*|"
                         r"bump\w*|would (?:have to )?move)\b", re.IGNORECASE)


def _free(content: str, num_slots: int) -> set[str]:
    r = read_text(content, num_slots)
    out: set[str] = set()
    if r.proposed or r.decided is not None:
        out.add("proposal")
    if r.works or r.fails:
        out.add("availability")
    if r.costs or _COST_WORDS.search(content):
        out.add("cost")
    if r.question:
        out.add("question")
    if r.fails or r.no:
        out.add("refusal")
    return out


def classify(data: dict[str, Any], num_slots: int) -> tuple[set[str], bool]:
    """``(categories, typed)`` of one message event's ``data``."""
    tm = typed_message(data)
    if tm is not None:
        proto, kind, p = tm
        return _typed(proto, kind, p), True
    content = data.get("content")
    return (_free(content, num_slots) if isinstance(content, str) else set()), False


def _num_slots(trace: dict[str, Any]) -> int:
    cfg = trace.get("config") if isinstance(trace.get("config"), dict) else {}
    task = trace.get("task") if isinstance(trace.get("task"), dict) else {}
    for v in (cfg.get("num_slots"), (task.get("params") or {}).get("num_slots") if isinstance(task.get("params"), dict)
              else None):
        if isinstance(v, int) and v > 0:
            return v
    cals = task.get("calendars")
    if isinstance(cals, list) and cals and isinstance(cals[0], list):
        return len(cals[0])
    for e in trace.get("events") or []:
        if isinstance(e, dict) and e.get("type") == "game_start":
            v = (e.get("data") or {}).get("num_slots")
            if isinstance(v, int) and v > 0:
                return v
    return 16


def seat_audit(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per seat that sent anything: ``agent_id``, ``messages``, ``typed``,
    ``free_text``, ``talk_rounds``, and per category ``n`` (messages containing it),
    ``rounds`` (talking rounds with at least one), and the same split by typed / free text."""
    S = _num_slots(trace)
    seats: dict[int, dict[str, Any]] = {}
    rounds: dict[int, dict[Any, set[str]]] = {}
    for e in trace.get("events") or []:
        if not isinstance(e, dict) or e.get("type") not in MESSAGE_EVENTS:
            continue
        d = e.get("data") if isinstance(e.get("data"), dict) else {}
        a = d.get("from_agent", d.get("agent_id"))
        if not isinstance(a, int) or isinstance(a, bool):
            continue
        cats, typed = classify(d, S)
        rec = seats.setdefault(a, {"agent_id": a, "messages": 0, "typed": 0, "free_text": 0,
                                   **{c: 0 for c in CATEGORIES},
                                   **{f"{c}_typed": 0 for c in CATEGORIES},
                                   **{f"{c}_free_text": 0 for c in CATEGORIES}})
        rec["messages"] += 1
        rec["typed" if typed else "free_text"] += 1
        for c in cats:
            rec[c] += 1
            rec[f"{c}_{'typed' if typed else 'free_text'}"] += 1
        rounds.setdefault(a, {}).setdefault(d.get("round"), set()).update(cats)
    out = []
    for a in sorted(seats):
        rec = seats[a]
        by_round = rounds.get(a, {})
        rec["talk_rounds"] = len(by_round)
        for c in CATEGORIES:
            rec[f"{c}_rounds"] = sum(1 for cats in by_round.values() if c in cats)
        out.append(rec)
    return out


def pool_audit(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Pooled rates over seat records of :func:`seat_audit`: per category the share of all
    messages (``rate``), of talking rounds (``round_rate``), and the message share among
    typed and among free-text messages."""
    recs = list(records)
    msgs = sum(r["messages"] for r in recs)
    typed = sum(r["typed"] for r in recs)
    free = sum(r["free_text"] for r in recs)
    talk = sum(r["talk_rounds"] for r in recs)
    out: dict[str, Any] = {"seats": len(recs), "messages": msgs, "typed": typed, "free_text": free,
                           "talk_rounds": talk}
    for c in CATEGORIES:
        out[c] = {
            "rate": sum(r[c] for r in recs) / msgs if msgs else None,
            "round_rate": sum(r[f"{c}_rounds"] for r in recs) / talk if talk else None,
            "typed_rate": sum(r[f"{c}_typed"] for r in recs) / typed if typed else None,
            "free_text_rate": sum(r[f"{c}_free_text"] for r in recs) / free if free else None,
        }
    return out
