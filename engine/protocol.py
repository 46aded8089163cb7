"""The message protocol, in one place: typed payloads, their readers, the English of slot
lists, and the free-text reader the scripted seats use (SPEC §7).

Every module that writes or reads a protocol message uses this one: the scripted seats
(``personas/scripted/``), the human's quick actions (``personas/quick.py``), the VPS
estimator (``engine/privacy.py``), the game screen and the loopback mock endpoint
(``calbench_devtools/mock_endpoint.py``).  It imports nothing but the standard library,
``engine.events`` and the protocols' registry ``engine.protocols``, so every layer may use it.

Typed payloads
    A protocol message is a DM (or, with DMs off, a groupchat line) whose ``payload`` is
    ``{"protocol": name, "kind": ..., "meeting_id": k, <fields>}`` in that key order
    (:func:`payload`), with the same meaning in plain English in ``content``.  Each
    protocol declares its kinds and their fields in its own module (``engine/protocols/``,
    docs/architecture.md "How to add a protocol"); :data:`KINDS` is the registry's view of
    every kind and its fields.  ``kind`` in
    :data:`TEXT_KINDS` (``"text"`` …) marks a bot's English-only line: free text, not a
    typed message.  The authors' harness writes the typed form as JSON in ``content``
    (``{"imap": kind}``, ``{"sd": kind}``, ``{"dsm": kind}``); :func:`typed_message`
    reads both.

DSM scores
    A DSM ``scores`` payload carries satisfaction levels ``0..D-1`` (``D = 12``):
    :func:`satisfaction` (cost → level) and :func:`band_cost` (level → the largest cost it
    stands for) are the scale's two directions, declared with DSM
    (``engine/protocols/dsm.py``) and re-exported here.

Slot-list English
    :func:`fmt_slots` (``"0–3, 5, 7–8"``, the bots' lists), :func:`slot_words`
    (``"slots 3, 5 and 9"``), :func:`slot_words_or` (``"slot 3, 5 or 9"``) and
    :func:`slots_phrase` (``"slots 3-5"``, the quick actions').  Every one of them reads
    back through :func:`read_text` and :func:`slots_in_text`.

Free text (:func:`read_text`)
    What a message says about slots, for a bot: slots that work / fail / are proposed /
    decided / asked, costs, a bare yes or no.  Which numbers are slots:

    * a number after *slot/slots*, *at*, *around*, a cue word (*how about 9*, *can't do
      5*, *free: 0, 4*), or continuing such a list or range (``3-5``, ``3, 5 and 7``);
    * **not** a number after *agent, meeting, errand, round, turn, participant, seat, id*
      — nor the rest of a list or range it starts ("Agents 1 and 2", "rounds 1–3",
      "round 2 of 5"); not a number glued to letters (``M5``, ``#7``); not a count
      (a number followed by *agents, slots, meetings, people, rounds, times, %* …, also
      "3 free slots"); not a clock time ("5pm", "5 am", "5:30") — slots are numbered,
      not hours; not a number outside ``0..S-1``.
    * A clause that is only a yes or a no ("No.", "Yes, fine.") answers the question just
      before it: "Slot 5? No." says slot 5 fails, "Slot 5? Yes." that it works.  A yes or
      no in a message with no slot number at all sets ``yes`` / ``no``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from . import lazyre, protocols
from .events import MESSAGE_EVENTS
from .protocols.dsm import D, TOP, band_cost, satisfaction  # the DSM score scale, declared with DSM
from .protocols.sdmap import IMPOSSIBLE, PENDING  # SD-MAP's reply statuses
from .protocols import ANSWER_KIND  # a scripted seat's answer to a peer outside its protocol

__all__ = [
    "MESSAGE_EVENTS", "PROTOCOLS", "TEXT_KINDS", "KINDS", "AUTHOR_KEYS", "D", "TOP", "ANSWER_KIND",
    "payload", "protocol_of", "as_int", "typed_payload", "typed_message", "payload_kind",
    "slots_in_payload", "costs_in_payload", "satisfaction", "band_cost",
    "fmt_slots", "slot_words", "slot_words_or", "slots_phrase", "plain_slots",
    "Reading", "read_text", "slots_in_text", "mentioned_slots", "is_request_for_costs", "is_proposal",
]

# ---------------------------------------------------------------------------------------
# Payload schemas and constructors: each protocol declares its kinds in its own module
# (``engine/protocols/``); the names below follow the registry
# ---------------------------------------------------------------------------------------
#: The registered protocols' names (``engine.protocols``), in list order.
PROTOCOLS = protocols.LiveNames(lambda: [p.name for p in protocols.all_protocols()], "protocols")
#: ``kind`` values that mark an English-only line (free text), whatever the protocol.
TEXT_KINDS = frozenset({"text", "chat", "free_text", "note", "fallback"})
#: The authors' harness: JSON in ``content`` keyed by these names (``Protocol.author_key``).
AUTHOR_KEYS = protocols.LiveNames(protocols.author_keys, "author_keys")

#: protocol -> kind -> its fields besides protocol/kind/meeting_id (optional ones included).
KINDS = protocols.LiveMap(lambda: {p.name: p.kind_fields() for p in protocols.all_protocols()}, "kinds")


def payload(protocol: str, kind: str, meeting_id: int | None, **fields: Any) -> dict[str, Any]:
    """A typed payload, keys in the canonical order (protocol, kind, meeting_id, fields…).

    ``kind`` is a typed kind of ``protocol`` (its declared ``kinds``) or a text kind.
    """
    if kind not in TEXT_KINDS and protocols.kind(protocol, kind) is None:
        raise ValueError(f"{protocol!r} has no message kind {kind!r}")
    out = {"protocol": protocol, "kind": kind, "meeting_id": meeting_id}
    out.update(fields)
    return out


def protocol_of(model: str | None) -> str | None:
    """The scripted protocol a seat's model speaks (its declaration's ``speaks``), or None."""
    return protocols.protocol_of_model(model)


# ---------------------------------------------------------------------------------------
# Reading payloads
# ---------------------------------------------------------------------------------------
as_int = protocols.as_int  # the lenient int reader, with the protocols' other payload readers


def typed_payload(msg: Any, protocol: str | None = None) -> dict[str, Any] | None:
    """The typed payload of a message (a ``Delivered`` or the payload dict itself), of
    ``protocol`` if given; None for free text or a text kind."""
    p = getattr(msg, "payload", msg)
    if not isinstance(p, dict) or protocols.get(p.get("protocol")) is None:
        return None
    kind = p.get("kind")
    if not isinstance(kind, str) or kind in TEXT_KINDS:
        return None
    if protocol is not None and p["protocol"] != protocol:
        return None
    return p


def typed_message(data: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """``(protocol, kind, fields)`` of a message event's typed form — ours in ``payload``,
    the authors' JSON in ``content`` — or None for free text."""
    p = data.get("payload")
    if isinstance(p, dict):
        proto, kind = p.get("protocol"), p.get("kind")
        if protocols.get(proto) is not None and isinstance(kind, str) and kind not in TEXT_KINDS:
            return proto, kind, p
    c = data.get("content")
    if isinstance(c, str) and c[:1] == "{":
        try:
            d = json.loads(c)
        except ValueError:
            return None
        if isinstance(d, dict):
            for key, proto in protocols.author_keys():
                kind = d.get(key)
                if isinstance(kind, str):
                    return proto, kind, d
    return None


def payload_kind(p: Any) -> str | None:
    """A payload's kind (``kind``, else ``type``), None for no payload or a text kind."""
    if not isinstance(p, dict):
        return None
    k = p.get("kind") or p.get("type")
    if k in TEXT_KINDS:
        return None
    return str(k) if k is not None else None


def slots_in_payload(p: Any, num_slots: int) -> list[int]:
    """Every slot a payload names (its slot fields, slot lists, cost and score keys)."""
    if not isinstance(p, dict):
        return []
    out: list[int] = []
    for key in ("slot", "proposed_slot", "confirmed_slot"):
        v = p.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
    for key in ("slots", "offer", "offers", "proposed_slots"):
        v = p.get(key)
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, int) and not isinstance(x, bool))
        elif isinstance(v, dict):
            out.extend(int(x) for x in v if str(x).lstrip("-").isdigit())
    for key in ("costs", "scores"):
        v = p.get(key)
        if isinstance(v, dict):
            out.extend(int(x) for x, c in v.items() if str(x).lstrip("-").isdigit() and c is not None)
        elif isinstance(v, list):
            out.extend(i for i, c in enumerate(v) if c is not None)
    return [s for s in dict.fromkeys(out) if 0 <= s < num_slots]


def costs_in_payload(p: Any) -> dict[int, int | None] | None:
    """The costs a typed payload reports as ``{slot: cost or None}`` (an IMAP ``costs``; a DSM
    ``scores`` read back through its scale), by its kind's declared reader; None otherwise."""
    read = protocols.cost_reader(payload_kind(p))
    return read(p) if read is not None else None


# ---------------------------------------------------------------------------------------
# English for slot lists
# ---------------------------------------------------------------------------------------
def fmt_slots(slots: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8]`` → ``"0–3, 5, 7–8"`` (en dash ranges; the reader parses them)."""
    xs = sorted(set(slots))
    if not xs:
        return "none"
    parts: list[str] = []
    start = prev = xs[0]
    for x in xs[1:] + [None]:  # type: ignore[list-item]
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else (f"{start}, {prev}" if prev == start + 1 else f"{start}–{prev}"))
        if x is not None:
            start = prev = x
    return ", ".join(parts)


def slot_words(slots: Sequence[int]) -> str:
    """``[3]`` → "slot 3"; ``[3, 5, 9]`` → "slots 3, 5 and 9" (in the order given)."""
    xs = [str(s) for s in slots]
    if len(xs) == 1:
        return f"slot {xs[0]}"
    return f"slots {', '.join(xs[:-1])} and {xs[-1]}"


def slot_words_or(slots: Sequence[int]) -> str:
    """``[3]`` → "slot 3"; ``[3, 5, 9]`` → "slot 3, 5 or 9" (in the order given)."""
    xs = [str(s) for s in slots]
    return f"slot {xs[0]}" if len(xs) == 1 else f"slot {', '.join(xs[:-1])} or {xs[-1]}"


def slots_phrase(slots: Iterable[int]) -> str:
    """Sorted, with a hyphen range for a run of three or more: "no slot", "slot 4",
    "slots 3-5", "slots 3, 5 and 9"."""
    xs = sorted(set(slots))
    if not xs:
        return "no slot"
    if len(xs) == 1:
        return f"slot {xs[0]}"
    if len(xs) > 2 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"slots {xs[0]}-{xs[-1]}"
    return "slots " + ", ".join(map(str, xs[:-1])) + f" and {xs[-1]}"


def plain_slots(slots: Iterable[int]) -> str:
    """``[0, 1, 5]`` → "0, 1, 5" in the order given; "none" when empty."""
    xs = list(slots)
    return ", ".join(str(x) for x in xs) if xs else "none"


_LIST_RE = lazyre.compile(
    r"\bslots?\s+((?:\d{1,3}(?!\d)(?:\s*(?:[-–—]|\bto\b|\bthrough\b|\bthru\b)\s*\d{1,3}(?!\d))?"
    r"(?:\s*(?:,|\band\b|\bor\b|&)\s*)?)+)", re.I)
_ITEM_RE = lazyre.compile(r"(\d{1,3})(?:\s*(?:[-–—]|\bto\b|\bthrough\b|\bthru\b)\s*(\d{1,3}))?", re.I)


def slots_in_text(text: str, num_slots: int) -> list[int]:
    """Slots named after *slot/slots* in ``text``, in order, once each: "slot 9",
    "slots 3-5 or 9", "slots 0–3, 7"."""
    out: list[int] = []
    for m in _LIST_RE.finditer(text or ""):
        for a, b in _ITEM_RE.findall(m.group(1)):
            lo, hi = int(a), int(b) if b else int(a)
            out.extend(range(lo, min(hi, num_slots - 1) + 1))
    return [s for s in dict.fromkeys(out) if 0 <= s < num_slots]


def mentioned_slots(event: dict, num_slots: int) -> list[int]:
    """Slots a (projected) message event talks about: its payload's, else its text's."""
    return slots_in_payload(event.get("payload"), num_slots) or slots_in_text(event.get("content") or "", num_slots)


#: Kinds no protocol declares that still ask for costs / make an offer (others' words for them).
_ASKS_COSTS = frozenset({"request_costs", "ask_costs"})
_OFFERS = frozenset({"proposal", "offer"})


def is_request_for_costs(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in _ASKS_COSTS or kind in protocols.kinds_with("asks_costs")
    text = (event.get("content") or "").lower()
    return "cost" in text and ("?" in text or "ask" in text or "what" in text)


def is_proposal(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in _OFFERS or kind in protocols.kinds_with("offers")
    text = (event.get("content") or "").lower()
    return any(w in text for w in ("propose", "let's meet", "how about", "meet at", "suggest"))


# ---------------------------------------------------------------------------------------
# The free-text reader
# ---------------------------------------------------------------------------------------
@dataclass
class Reading:
    """What a message says about slots, as far as a simple deterministic reader can tell."""

    works: set[int] = field(default_factory=set)  # "free at 7", "7 works", "I can do 3-5"
    fails: set[int] = field(default_factory=set)  # "can't do 5", "5 is busy"
    proposed: list[int] = field(default_factory=list)  # "how about 9?", "let's meet at 9" (in order)
    decided: int | None = None  # "confirmed: slot 7", "decision: 7" (the last one)
    asked: list[int] = field(default_factory=list)  # "are you free at 3?", "asks your costs at 0-15"
    mentioned: list[int] = field(default_factory=list)  # numbers with no cue at all ("Slot 9.")
    costs: dict[int, int] = field(default_factory=dict)  # "slot 3 costs 10"
    yes: bool = False  # agreement words with no slot number ("ok", "sounds good")
    no: bool = False  # refusal words with no slot number ("no", "that doesn't work")
    question: bool = False  # the message asks something

    @property
    def slots(self) -> set[int]:
        return self.works | self.fails | set(self.proposed) | set(self.asked) | set(self.mentioned) | set(self.costs)

    @property
    def informative(self) -> bool:
        return bool(self.slots) or self.yes or self.no

    @property
    def offered(self) -> list[int]:
        """The slots the message puts forward, once each: the one decided, the ones proposed, or
        — in a question that asks about no slot — the ones the sender says work ("I'm free at
        slot 3, does that work?")."""
        out = ([self.decided] if self.decided is not None else []) + self.proposed
        if not out and self.question and not self.asked:
            out = sorted(self.works)
        return list(dict.fromkeys(out))


_CUES: list[tuple[str, list[str]]] = [
    # Order matters: longer / negated phrases first ("not free" before "free").
    ("neg", ["can't", "cant", "cannot", "can not", "couldn't", "could not", "won't work", "will not work",
             "doesn't work", "doesnt work", "does not work", "don't work", "do not work", "not work",
             "no good", "not good", "not ok", "not okay", "not free", "not open", "not available",
             "unavailable", "not possible", "impossible", "not feasible", "infeasible", "isn't possible",
             "is not possible", "busy", "booked", "occupied", "blocked", "taken", "conflicts", "conflict",
             "clash", "unable", "no way", "bumped", "fails", "failed", "doesn't", "doesnt", "does not",
             "won't", "isn't", "not for me", "not"]),
    ("decide", ["decision", "decided", "confirmed", "confirm", "let's go with", "lets go with", "go with",
                "final", "settled", "lock in", "locked", "we meet at", "meeting is at", "book it",
                "scheduled at", "schedule it at", "schedule at", "agreed slot"]),
    ("ask", ["are you free", "are you available", "is your", "do you have", "what about your", "which slots",
             "what slots", "when are you", "your availability", "your costs", "your cost", "asks", "ask",
             "can you do", "could you do", "does it work", "would it work", "would that work", "works for you",
             "work for you", "not sure"]),
    ("prop", ["how about", "what about", "proposes", "propose", "proposal", "suggests", "suggest",
              "let's", "lets", "let us", "shall we", "could we", "can we", "should we", "meet at", "try",
              "prefer", "instead", "alternatively", "maybe", "option", "moving"]),
    ("pos", ["free", "open", "available", "works", "work for me", "workable", "can do", "could do", "can make",
             "fine", "ok", "okay", "good for me", "sounds good", "good for", "suits", "possible", "feasible", "pending", "movable",
             "accept", "accepted", "agree", "agreed", "yes", "yep", "yeah", "yup", "sure", "perfect"]),
]
_YES = lazyre.compile(r"\b(yes|yep|yup|yeah|sure|ok|okay|agreed|agree|sounds good|works for me|fine|deal|confirmed"
                  r"|confirm|perfect|great)\b")
_NO = lazyre.compile(r"\b(no|nope|can't|cannot|doesn't work|does not work|not possible|impossible|unfortunately|fails|failed)\b")
_NOT_SLOT_BEFORE = lazyre.compile(
    r"(?:\bagents?|\bmeetings?|\berrands?|\brounds?|\bturns?|\bparticipants?|\bids?|\blevels?|\bscores?"
    r"|\bseats?|\battempts?|\bx|#|\$)\s*$"
)
# A number that is an id or a round and the rest of the list or range it starts:
# "agents 1 and 2", "meetings 3, 4", "rounds 1-3", "round 2 of 5".
# The plural continues through any list or range ("agents 1, 2", "rounds 1-3"); the
# singular only through and / or / of ("agent 1 and 2", "round 2 of 5"), so "Agent 1, 5
# works for me" still offers slot 5.
_ID_NOUNS = r"agent|meeting|errand|round|turn|participant|seat|id"
_NOT_SLOT_RUN = lazyre.compile(
    r"\b(?:" + _ID_NOUNS + r")s\s*#?\s*\d{1,3}(?!\d)"
    r"(?:\s*(?:,|\band\b|\bor\b|&|[-–—/]|\bto\b|\bof\b)\s*#?m?\d{1,3}(?!\d))*"
    r"|\b(?:" + _ID_NOUNS + r")\s*#?\s*\d{1,3}(?!\d)"
    r"(?:\s*(?:\band\b|\bor\b|&|/|\bof\b)\s*#?m?\d{1,3}(?!\d))*")
# A count or a clock time, not a slot: "3 agents", "3 free slots", "5pm", "5:30".
_NOT_SLOT_AFTER = lazyre.compile(
    r"\s*(?:(?:free|open|more|other|possible|available|different)\s+)?"
    r"(?:agents?|slots|meetings?|errands?|turns?|rounds?|times|people|others|participants|seats|hours?|minutes?)\b"
    r"|\s*(?:%|[ap]\.?m\b|o'clock\b|:\d)")
_COST_BEFORE = lazyre.compile(r"(?:\bcosts?|\bcost\s+of|\bprice|\bpenalty)\s*(?:=|:|\bis\b|\bof\b)?\s*$")
# A clause that only answers yes or no ("No.", "Yes, that works.", "nope").
_ANSWER_ONLY = lazyre.compile(
    r"^\s*(?:(?P<no>no|nope|nah|sorry)|(?P<yes>yes|yep|yup|yeah|sure|ok|okay|fine|agreed|confirmed|perfect))\b"
    r"[\s,!]*(?:(?:that|it|this|one)\s+)?(?:(?:works|work|does|doesn't|doesnt|won't|will|is|isn't|can|can't|fine"
    r"|good|ok|okay|for|me|not|sorry|thanks|thank|you)\b[\s,!]*)*$")

_cue_alts = []
for _cat, _words in _CUES:
    for _w in _words:
        _cue_alts.append((len(_w), _cat, _w))
# Longest phrases first, so "not free" wins over "free" and "doesn't work" over "work".
_cue_alts.sort(key=lambda t: -t[0])
_CUE_CAT = {w: c for _, c, w in _cue_alts}
_TOKEN = lazyre.compile(
    r"(?P<range>(?<![\w#.])(\d{1,3})\s*(?:-|–|—|\bto\b|\bthrough\b|\bthru\b|\buntil\b)\s*(\d{1,3})(?![\w.]))"
    r"|(?P<num>(?<![\w#.])\d{1,3}(?![\w.]|\.\d))"
    r"|(?P<cue>\b(?:" + "|".join(re.escape(w) for _, _, w in _cue_alts) + r")\b)"
)
_CLAUSE = lazyre.compile(r"[.!?;\n]+(?=\s|$)|[;\n]|\bbut\b|\bhowever\b|\balthough\b|\bthough\b|\bwhereas\b|\botherwise\b")
_NUMS_ONLY = lazyre.compile(r"^\s*(?:(?:and|or|&|slots?|,)\s*)*[\d\s,–—\-]*(?:and|or|to|through)?[\d\s,–—\-]*$")


def _segments(clause: str) -> list[str]:
    """Split a clause at commas, except when what follows is just more numbers ("0, 2, 5")."""
    parts = clause.split(",")
    out: list[str] = []
    for p in parts:
        if out and _NUMS_ONLY.match(p) and re.search(r"\d", p):
            out[-1] += "," + p
        else:
            out.append(p)
    return out


def _clauses(low: str) -> list[tuple[str, str]]:
    """``(clause, delimiter after it)``, the clauses of ``_CLAUSE.split``."""
    out = []
    pos = 0
    for m in _CLAUSE.finditer(low):
        out.append((low[pos:m.start()], m.group(0)))
        pos = m.end()
    out.append((low[pos:], ""))
    return out


def read_text(text: str, num_slots: int) -> Reading:
    """Read slot statements from free text (deterministic; slot numbers in ``[0, num_slots)``).

    Each number takes the cue (can't / free / how about / confirmed / are you free …) that
    precedes it in its comma segment, else the first cue after it; segments inherit the
    previous segment's cue when they have none.  Which numbers are slots at all: see the
    module docstring.  A number right after ``cost`` is a cost value.
    """
    r = Reading()
    if not text:
        return r
    low = text.replace("’", "'").replace("‘", "'").lower()
    r.question = "?" in low
    any_num = False
    prev_q: list[int] | None = None  # slots of the clause just before, when it was a question
    for clause, delim in _clauses(low):
        if not clause or not clause.strip():
            continue
        skip = [(m.start(), m.end()) for m in _NOT_SLOT_RUN.finditer(clause)]
        prev_cat: str | None = None
        pending_cost: int | None = None
        clause_slots: list[int] = []
        for seg_start, seg in _offsets(_segments(clause)):
            items: list[tuple[str, Any]] = []  # ("cue", cat) | ("slots", [..]) | ("cost", v)
            for m in _TOKEN.finditer(seg):
                before = seg[: m.start()]
                if m.group("cue"):
                    items.append(("cue", _CUE_CAT[m.group("cue")]))
                    continue
                if _NOT_SLOT_BEFORE.search(before):
                    continue
                at = seg_start + m.start()
                if any(a <= at < b for a, b in skip):
                    continue
                if _COST_BEFORE.search(before):
                    v = int(m.group(3) if m.group("range") else m.group("num"))
                    items.append(("cost", v))
                    continue
                if _NOT_SLOT_AFTER.match(seg, m.end()):
                    continue
                if m.group("range"):
                    a, b = int(m.group(2)), int(m.group(3))
                    if a > b or b - a > 64:
                        continue
                    ss = [s for s in range(a, b + 1) if 0 <= s < num_slots]
                else:
                    v = int(m.group("num"))
                    ss = [v] if 0 <= v < num_slots else []
                if ss:
                    items.append(("slots", ss))
            cur = None
            for i, (k, v) in enumerate(items):
                if k == "cue":
                    cur = v
                    continue
                if k == "cost":
                    # "slot 3 costs 10": attach to the last slot in this segment, else to what follows.
                    last = next((items[j][1] for j in range(i - 1, -1, -1) if items[j][0] == "slots"), None)
                    if last is not None:
                        for s in last:
                            r.costs.setdefault(s, v)
                    else:
                        pending_cost = v
                    continue
                cat = cur
                if cat is None:
                    cat = next((items[j][1] for j in range(i + 1, len(items)) if items[j][0] == "cue"), None)
                if cat is None:
                    cat = prev_cat
                any_num = True
                for s in v:
                    if pending_cost is not None:
                        r.costs.setdefault(s, pending_cost)
                    _file(r, cat, s)
                clause_slots.extend(v)
            cues = [v for k, v in items if k == "cue"]
            if cues:
                prev_cat = cues[-1]
        if not clause_slots and prev_q:
            ans = _ANSWER_ONLY.match(clause)
            if ans:  # "Slot 5? No." — the answer to the question just before
                for s in prev_q:
                    _answer(r, s, yes=ans.group("yes") is not None)
        prev_q = clause_slots if (clause_slots and "?" in delim) else None
    if not any_num:
        if _NO.search(low):
            r.no = True
        elif _YES.search(low):
            r.yes = True
    for s in r.costs:
        if s not in r.fails:
            r.works.add(s)
    return r


def _offsets(segments: list[str]) -> list[tuple[int, str]]:
    out, pos = [], 0
    for seg in segments:
        out.append((pos, seg))
        pos += len(seg) + 1  # the comma between segments
    return out


def _answer(r: Reading, s: int, *, yes: bool) -> None:
    if s in r.asked:
        r.asked.remove(s)
    if s in r.mentioned:
        r.mentioned.remove(s)
    if yes:
        r.fails.discard(s)
        r.works.add(s)
    else:
        r.works.discard(s)
        r.fails.add(s)


def _file(r: Reading, cat: str | None, s: int) -> None:
    if cat == "neg":
        r.fails.add(s)
        r.works.discard(s)
    elif cat == "pos":
        if s not in r.fails:
            r.works.add(s)
    elif cat == "decide":
        r.decided = s
        r.proposed.append(s)
    elif cat == "prop":
        r.proposed.append(s)
    elif cat == "ask":
        r.asked.append(s)
    else:
        r.mentioned.append(s)
