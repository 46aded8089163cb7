"""The base of every scripted reference protocol (SPEC §7): typed messages, a free-text
reader, polite fallbacks.

Typed messages
    Every message a protocol bot sends is a DM whose ``payload`` is
    ``{"protocol": "imap" | "sdmap" | "dsm", "kind": "...", "meeting_id": k, ...}`` and
    whose ``content`` says the same thing in plain English ("Agent 0 asks your costs for
    meeting M2 at slots 0–15."), so a human or an LLM at the table can follow.  Bots read
    the payload of their own protocol.  The VPS estimator (``engine.privacy``) scores the
    payload with the paper's Table 10 rules.  A bot's English-only lines (answers to free
    text) carry ``kind: "text"``, which ``engine.privacy`` treats as free text.

Free text
    Everything else a bot receives — a human's or an LLM's English, or the payload of a
    *different* protocol — is read from ``content`` by :func:`read_text`, a small
    deterministic reader of slot statements ("can't do 5, how about 7?", "free at 3–5",
    "slot 9 costs 10", "yes").  Bots answer questions about slots sensibly and never wait
    for an answer that may not come: every peer gets one sweep to reply, then the bot goes
    on with what it knows ("silence is consent" for proposals).  So mixed tables (IMAP with
    LLMs, humans, other protocols) always finish.

DECISION fallback
    With an agreed slot, a bot schedules it (moving the errand there to its lowest free
    slot).  Without one, it takes the latest slot a peer decided or proposed that it can
    hold, else its own cheapest slot.  A rejected batch is retried with the next candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from engine.actions import Message
from engine.observe import (
    DecisionObservation,
    Delivered,
    MeetingView,
    SeatBriefing,
    SeatView,
    TurnObservation,
    VoluntaryObservation,
)
from engine.seats import Reply

from personas.base import cheapest_slots, clear_and_schedule, insertion_cost, insertion_costs

PROTOCOLS = ("imap", "sdmap", "dsm")
TEXT_KINDS = frozenset({"text", "chat", "free_text", "note", "fallback"})
MAX_TEXT_REPLIES = 2  # per peer per round: fallback answers never loop between bots


# ---------------------------------------------------------------------------------------
# English rendering of slot lists
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
_YES = re.compile(r"\b(yes|yep|yup|yeah|sure|ok|okay|agreed|agree|sounds good|works for me|fine|deal|confirmed|perfect|great)\b")
_NO = re.compile(r"\b(no|nope|can't|cannot|doesn't work|does not work|not possible|impossible|unfortunately|fails|failed)\b")
_NOT_SLOT_BEFORE = re.compile(
    r"(?:\bagents?|\bmeetings?|\berrands?|\brounds?|\bturns?|\bparticipants?|\bids?|\blevels?|\bscores?"
    r"|\bseats?|\battempts?|\bx|#|\$)\s*$"
)
_COST_BEFORE = re.compile(r"(?:\bcosts?|\bcost\s+of|\bprice|\bpenalty)\s*(?:=|:|\bis\b|\bof\b)?\s*$")

_cue_alts = []
for _cat, _words in _CUES:
    for _w in _words:
        _cue_alts.append((len(_w), _cat, _w))
# Longest phrases first, so "not free" wins over "free" and "doesn't work" over "work".
_cue_alts.sort(key=lambda t: -t[0])
_CUE_CAT = {w: c for _, c, w in _cue_alts}
_TOKEN = re.compile(
    r"(?P<range>(?<![\w#.])(\d{1,3})\s*(?:-|–|—|\bto\b|\bthrough\b|\bthru\b|\buntil\b)\s*(\d{1,3})(?![\w.]))"
    r"|(?P<num>(?<![\w#.])\d{1,3}(?![\w.]|\.\d))"
    r"|(?P<cue>\b(?:" + "|".join(re.escape(w) for _, _, w in _cue_alts) + r")\b)"
)
_CLAUSE = re.compile(r"[.!?;\n]+(?=\s|$)|[;\n]|\bbut\b|\bhowever\b|\balthough\b|\bthough\b|\bwhereas\b|\botherwise\b")
_NUMS_ONLY = re.compile(r"^\s*(?:(?:and|or|&|slots?|,)\s*)*[\d\s,–—\-]*(?:and|or|to|through)?[\d\s,–—\-]*$")


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


def read_text(text: str, num_slots: int) -> Reading:
    """Read slot statements from free text (deterministic; slot numbers in ``[0, num_slots)``).

    Each number takes the cue (can't / free / how about / confirmed / are you free …) that
    precedes it in its comma segment, else the first cue after it; segments inherit the
    previous segment's cue when they have none.  Numbers after ``agent``/``meeting``/``#`` or
    glued to letters (``M2``) are not slots; a number right after ``cost`` is a cost value.
    """
    r = Reading()
    if not text:
        return r
    low = text.replace("’", "'").replace("‘", "'").lower()
    r.question = "?" in low
    any_num = False
    for clause in _CLAUSE.split(low):
        if not clause or not clause.strip():
            continue
        prev_cat: str | None = None
        pending_cost: int | None = None
        for seg in _segments(clause):
            items: list[tuple[str, Any]] = []  # ("cue", cat) | ("slots", [..]) | ("cost", v)
            for m in _TOKEN.finditer(seg):
                before = seg[: m.start()]
                if m.group("cue"):
                    items.append(("cue", _CUE_CAT[m.group("cue")]))
                    continue
                if _NOT_SLOT_BEFORE.search(before):
                    continue
                if _COST_BEFORE.search(before):
                    v = int(m.group(3) if m.group("range") else m.group("num"))
                    items.append(("cost", v))
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
            cues = [v for k, v in items if k == "cue"]
            if cues:
                prev_cat = cues[-1]
    if not any_num:
        if _NO.search(low):
            r.no = True
        elif _YES.search(low):
            r.yes = True
    for s in r.costs:
        if s not in r.fails:
            r.works.add(s)
    return r


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


# ---------------------------------------------------------------------------------------
# Typed payload helpers
# ---------------------------------------------------------------------------------------
def typed_payload(msg: Delivered, protocol: str | None = None) -> dict[str, Any] | None:
    """The message's typed payload (of ``protocol`` if given), or None for free text."""
    p = msg.payload
    if not isinstance(p, dict) or p.get("protocol") not in PROTOCOLS:
        return None
    kind = p.get("kind")
    if not isinstance(kind, str) or kind in TEXT_KINDS:
        return None
    if protocol is not None and p["protocol"] != protocol:
        return None
    return p


def as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


# ---------------------------------------------------------------------------------------
# Per-round state and the base persona
# ---------------------------------------------------------------------------------------
@dataclass
class RoundState:
    round: int
    meeting: MeetingView
    seen: int = 0  # messages of this round already processed (a prefix of round_messages)
    agreed: int | None = None  # slot agreed for the incoming meeting
    failed: bool = False  # the protocol gave up on this meeting
    peer_slots: list[tuple[int, int, bool]] = field(default_factory=list)  # (sender, slot, decided) from free text
    text_replies: dict[int, int] = field(default_factory=dict)  # fallback answers sent per peer
    reserved: set[int] = field(default_factory=set)  # slots promised to something else this round
    extra: dict[str, Any] = field(default_factory=dict)


class ProtocolPersona:
    """Base class: a deterministic scripted seat (``kind="scripted"``, ``model=protocol``).

    Subclasses implement ``on_typed`` (their own payloads), ``on_turn`` (what to say at a
    CHEAP_TALK turn), and may extend ``on_text``, ``on_volunteer``, ``decision_moves`` and
    ``candidates``.  The base does the bookkeeping: it feeds each delivered message exactly
    once (from the turn inboxes, then whatever is left in ``round_messages`` at VOLUNTARY or
    DECISION), answers free text, and builds the DECISION batch with retries.
    """

    kind = "scripted"
    protocol = "base"
    variant: str | None = None

    def __init__(self) -> None:
        self.seat = -1
        self.num_agents = 0
        self.num_slots = 0
        self.view: SeatView | None = None
        self.rs: RoundState | None = None

    @property
    def model(self) -> str:
        return self.protocol

    # -- persona interface -------------------------------------------------------------
    async def register(self, briefing: SeatBriefing) -> str | None:
        self.seat = briefing.view.seat
        self.num_agents = briefing.view.num_agents
        self.num_slots = briefing.view.num_slots
        self.view = briefing.view
        return None

    async def speak(self, obs: TurnObservation) -> Reply:
        self._enter(obs.round, obs.meeting, obs.view)
        rs = self.rs
        out: list[Message] = []
        for msg in obs.inbox:
            out.extend(self._handle(msg))
        rs.seen += len(obs.inbox)
        out.extend(self.on_turn(obs))
        return Reply(actions=self._fit_channels(out, obs.view.channels))

    @staticmethod
    def _fit_channels(out: list[Message], channels: tuple[str, ...]) -> tuple[Message, ...]:
        """With DMs disabled, send each distinct message once on the narrowest groupchat."""
        if "dm" in channels or not out:
            return tuple(out)
        chan = "participant_groupchat" if "participant_groupchat" in channels else "all_groupchat"
        seen: set[str] = set()
        fitted = []
        for m in out:
            key = m.content + repr(sorted((m.payload or {}).items()))
            if key not in seen:
                seen.add(key)
                fitted.append(Message(chan, m.content, None, m.payload))
        return tuple(fitted)

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        self._enter(obs.round, obs.meeting, obs.view)
        self._catch_up(obs.round_messages)
        return Reply(actions=tuple(self.on_volunteer(obs)))

    async def decide(self, obs: DecisionObservation) -> Reply:
        self._enter(obs.round, obs.meeting, obs.view)
        self._catch_up(obs.round_messages)
        cands = self.candidates(obs)
        tried = 0
        for slot in cands:
            reserved = self.rs.reserved - {slot}
            moves = self.decision_moves(obs, slot)
            batch = clear_and_schedule(obs.view.calendar, obs.meeting.id, slot, reserved=reserved, moves=moves)
            if batch is None and moves:
                batch = clear_and_schedule(obs.view.calendar, obs.meeting.id, slot, reserved=reserved)
            if batch is None:
                continue
            if tried == obs.attempt:
                return Reply(actions=tuple(batch))
            tried += 1
        return Reply()  # nothing feasible: an empty batch (rejected; the round fails)

    # -- bookkeeping ---------------------------------------------------------------------
    def _enter(self, rnd: int, meeting: MeetingView, view: SeatView) -> None:
        self.view = view
        if self.rs is None or self.rs.round != rnd:
            self.rs = RoundState(rnd, meeting)
            self.on_round_start(view)

    def _catch_up(self, round_messages: tuple[Delivered, ...]) -> None:
        rs = self.rs
        for msg in round_messages[rs.seen:]:
            self._handle(msg)  # too late to answer: replies are dropped
        rs.seen = len(round_messages)

    def _handle(self, msg: Delivered) -> list[Message]:
        p = typed_payload(msg, self.protocol)
        if p is not None:
            return self.on_typed(msg, p)
        return self.on_text(msg, read_text(msg.content, self.num_slots))

    # -- helpers for subclasses ------------------------------------------------------------
    @property
    def meeting(self) -> MeetingView:
        return self.rs.meeting

    @property
    def is_initiator(self) -> bool:
        return self.seat == min(self.rs.meeting.participants)

    @property
    def responders(self) -> list[int]:
        return sorted(p for p in self.rs.meeting.participants if p != self.seat)

    def msg(self, to: int, kind: str, content: str, **fields: Any) -> Message:
        payload = {"protocol": self.protocol, "kind": kind, "meeting_id": fields.pop("meeting_id", self.meeting.id)}
        payload.update(fields)
        return Message("dm", content, to, payload)

    def text(self, to: int, content: str) -> Message:
        return Message("dm", content, to, {"protocol": self.protocol, "kind": "text", "meeting_id": self.meeting.id})

    def cost(self, slot: int) -> int | None:
        """My insertion cost at ``slot`` now, respecting this round's reserved slots."""
        if slot in self.rs.reserved:
            return None
        return insertion_cost(self.view.calendar, slot, self.rs.reserved)

    def costs_now(self) -> list[int | None]:
        """``cost`` for every slot, in one pass."""
        res = self.rs.reserved
        out = insertion_costs(self.view.calendar, res)
        if res:
            out = [None if s in res else c for s, c in enumerate(out)]
        return out

    def my_cheapest(self, limit: int | None = None) -> list[int]:
        out = cheapest_slots(self.view.calendar, self.rs.reserved)
        return out if limit is None else out[:limit]

    # -- default behaviour (override in subclasses) ------------------------------------------
    def on_round_start(self, view: SeatView) -> None:
        pass

    def on_typed(self, msg: Delivered, payload: dict[str, Any]) -> list[Message]:
        return []

    def on_turn(self, obs: TurnObservation) -> list[Message]:
        return []

    def on_volunteer(self, obs: VoluntaryObservation) -> list:
        return []

    def decision_moves(self, obs: DecisionObservation, slot: int) -> list[tuple[int, int, int]]:
        """Agreed moves ``(item_id, from_slot, to_slot)`` to add to a DECISION batch for ``slot``."""
        return []

    def candidates(self, obs: DecisionObservation) -> list[int]:
        """Slots to try in DECISION, best first: agreed, then peers' picks, then my cheapest."""
        rs = self.rs
        out: list[int] = []
        if rs.agreed is not None and not rs.failed:
            out.append(rs.agreed)
        for decided in (True, False):
            for _sender, slot, dec in reversed(rs.peer_slots):
                if dec == decided and slot not in out and self.cost(slot) is not None:
                    out.append(slot)
        for s in self.my_cheapest():
            if s not in out:
                out.append(s)
        return out

    def on_text(self, msg: Delivered, reading: Reading) -> list[Message]:
        """Remember what a free-text peer proposed and answer it politely (at most twice a round)."""
        rs = self.rs
        for s in reading.proposed + reading.mentioned:
            rs.peer_slots.append((msg.sender, s, s == reading.decided))
        if msg.sender == self.seat or msg.sender not in range(self.num_agents):
            return []
        if self.seat not in self.meeting.participants:
            return []
        return self.answer_text(msg, reading)

    def answer_text(self, msg: Delivered, reading: Reading) -> list[Message]:
        """A short, polite English answer about the slots a peer asked about or proposed."""
        rs = self.rs
        if rs.text_replies.get(msg.sender, 0) >= MAX_TEXT_REPLIES:
            return []
        props = [s for s in reading.proposed if s != reading.decided]
        if reading.decided is not None and self.cost(reading.decided) is None:
            props.insert(0, reading.decided)  # an announced slot I cannot hold: say so
        asked = list(dict.fromkeys(props + reading.asked))
        if not asked and not reading.question:
            return []
        mid = self.meeting.id
        if asked and len(asked) <= 3:
            ok = [s for s in asked if self.cost(s) is not None]
            bad = [s for s in asked if s not in ok]
            parts = []
            if ok:
                parts.append(f"Slot {fmt_slots(ok)} works for me for meeting M{mid}.")
            if bad:
                alts = [s for s in self.my_cheapest(3) if s not in bad]
                parts.append(f"I can't do slot {fmt_slots(bad)}." + (f" How about slot {alts[0]}?" if alts and not ok else ""))
            content = " ".join(parts)
        else:
            pool = set(asked) if asked else None
            mine = [s for s in self.my_cheapest() if pool is None or s in pool][:4]
            content = (f"For meeting M{mid} I could do slots {fmt_slots(mine)}." if mine
                       else f"Sorry, I have no slot free for meeting M{mid}.")
        rs.text_replies[msg.sender] = rs.text_replies.get(msg.sender, 0) + 1
        return [self.text(msg.sender, content)]
