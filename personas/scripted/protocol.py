"""The base of every scripted reference protocol (SPEC §7): typed messages, a free-text
reader, polite fallbacks.

Typed messages
    Every message a protocol bot sends is a DM whose ``payload`` is
    ``{"protocol": "imap" | "sdmap" | "dsm", "kind": "...", "meeting_id": k, ...}`` (built
    and read by ``engine/protocol.py``, the one owner of the message protocol) and
    whose ``content`` says the same thing in plain English ("Agent 0 asks your costs for
    meeting M2 at slots 0–15."), so a human or an LLM at the table can follow.  Bots read
    the payload of their own protocol.  The VPS estimator (``engine.privacy``) scores the
    payload with the paper's Table 10 rules.  A bot's English-only lines (answers to free
    text) carry ``kind: "text"``, which ``engine.privacy`` treats as free text.

Free text
    Everything else a bot receives — a human's or an LLM's English, or the payload of a
    *different* protocol — is read from ``content`` by :func:`engine.protocol.read_text`,
    a small deterministic reader of slot statements ("can't do 5, how about 7?", "free at 3–5",
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

from dataclasses import dataclass, field
from typing import Any

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
from engine.protocol import PROTOCOLS, TEXT_KINDS, Reading, as_int, fmt_slots, payload, read_text, typed_payload
from engine.seats import Reply

from personas.base import cheapest_slots, clear_and_schedule, insertion_cost, insertion_costs

__all__ = ["PROTOCOLS", "TEXT_KINDS", "MAX_TEXT_REPLIES", "Reading", "read_text", "fmt_slots", "typed_payload",
           "as_int", "RoundState", "ProtocolPersona"]

MAX_TEXT_REPLIES = 2  # per peer per round: fallback answers never loop between bots


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
        mid = fields.pop("meeting_id", self.meeting.id)
        return Message("dm", content, to, payload(self.protocol, kind, mid, **fields))

    def text(self, to: int, content: str) -> Message:
        return Message("dm", content, to, payload(self.protocol, "text", self.meeting.id))

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
