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
from engine.protocol import (ANSWER_KIND, PROTOCOLS, TEXT_KINDS, Reading, as_int, fmt_slots, payload, payload_kind,
                             read_text, slot_words, slot_words_or, typed_payload)
from engine.seats import Reply

from personas.base import cheapest_slots, clear_and_schedule, insertion_cost, insertion_costs

__all__ = ["PROTOCOLS", "TEXT_KINDS", "MAX_TEXT_REPLIES", "MAX_ANSWERS", "Reading", "read_text", "fmt_slots",
           "typed_payload", "as_int", "RoundState", "ProtocolPersona"]

MAX_TEXT_REPLIES = 2  # per peer per round: fallback answers never loop between bots
#: Answers to one peer's proposals per round.  An answer proposes nothing and asks nothing, so
#: two bots never answer each other in a loop; a person who proposes again and again is
#: answered each time, up to this many times a round (more than a round's turns leave room for).
MAX_ANSWERS = 8
#: How a scripted seat plays: ``ours`` (the default) or ``paper`` — the authors' public client
#: where it differs from ours (DSM: docs/protocols-dsm.md; SD-MAP: docs/protocols.md).
FIDELITIES = ("ours", "paper")


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
    answers: dict[int, int] = field(default_factory=dict)  # answers to proposals sent per peer
    told_ok: dict[int, set[int]] = field(default_factory=dict)  # slots I told a peer work for me
    acked: set[tuple[int, int]] = field(default_factory=set)  # (peer, slot) agreements acknowledged
    refused: dict[int, tuple[int, list[int], list[int]]] = field(default_factory=dict)  # leader -> (turn, no, alts)
    nudged: set[int] = field(default_factory=set)  # leaders reminded of my alternatives this round
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
    #: How many other slots an answer that cannot take a peer's slot names (docs/protocols.md).
    answer_alternatives = 3
    #: Whether that answer also names what each alternative costs (IMAP: costs are its currency).
    answer_costs = False

    def __init__(self) -> None:
        self.seat = -1
        self.num_agents = 0
        self.num_slots = 0
        self.view: SeatView | None = None
        self.rs: RoundState | None = None
        self.outsiders: set[int] = set()  # peers that spoke outside my protocol this game
        self._turn = -1  # the CHEAP_TALK turn being played (-1 outside one)
        self._costs_memo: tuple | None = None  # (calendar, reserved, its insertion costs)

    #: Its seat calls never wait on anything (pure computation): the engine may await the
    #: participants' DECISION calls one after the other instead of gathering them as tasks
    #: (the same result: each seat's events are buffered; a subclass that does wait is
    #: still correct, only not concurrent).
    answers_at_once = True

    @property
    def model(self) -> str:
        return self.protocol

    # -- persona interface -------------------------------------------------------------
    async def register(self, briefing: SeatBriefing) -> str | None:
        self.seat = briefing.view.seat
        self.num_agents = briefing.view.num_agents
        self.num_slots = briefing.view.num_slots
        self.view = briefing.view
        self.outsiders = set()
        return None

    async def speak(self, obs: TurnObservation) -> Reply:
        self._enter(obs.round, obs.meeting, obs.view)
        self._turn = obs.turn
        rs = self.rs
        out: list[Message] = []
        for msg in obs.inbox:
            rs.refused.pop(msg.sender, None)  # the leader I said no to spoke again
            out.extend(self._handle(msg))
        rs.seen += len(obs.inbox)
        out.extend(self._remind(obs.turn))
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
        if msg.sender != self.seat and 0 <= msg.sender < self.num_agents:
            self.outsiders.add(msg.sender)
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

    def _insertion_costs(self) -> list[int | None]:
        """``insertion_costs`` of my calendar with this round's reserved slots, worked out
        again only when either has changed (a round asks for them many times).  Read only."""
        cal, res = self.view.calendar, self.rs.reserved
        memo = self._costs_memo
        if memo is not None and memo[0] is cal and memo[1] == res:
            return memo[2]
        out = insertion_costs(cal, res)
        self._costs_memo = (cal, set(res), out)
        return out

    def costs_now(self) -> list[int | None]:
        """``cost`` for every slot, in one pass."""
        res = self.rs.reserved
        out = self._insertion_costs()
        return [None if s in res else c for s, c in enumerate(out)] if res else list(out)

    def my_cheapest(self, limit: int | None = None) -> list[int]:
        out = cheapest_slots(self.view.calendar, self.rs.reserved, costs=self._insertion_costs())
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
        """A short, polite English answer: to a slot proposed or announced (:meth:`answer_slots`),
        to a yes to the slot on the table (:meth:`acknowledge`), or to a question about slots
        (the slots I could do; at most twice a round per peer)."""
        rs = self.rs
        offer = reading.offered
        if offer and len(offer) <= 3:
            self._follow(msg.sender, offer)
            return self.answer_offer(msg.sender, offer)
        if not reading.question and not reading.asked:
            if payload_kind(getattr(msg, "payload", None)) == ANSWER_KIND:
                return []  # another bot's answer needs none
            return self.acknowledge(msg.sender, reading)
        if rs.text_replies.get(msg.sender, 0) >= MAX_TEXT_REPLIES:
            return []
        asked = list(dict.fromkeys(offer + reading.asked))
        mid = self.meeting.id
        if asked and len(asked) <= 3:
            return self.answer_slots(msg.sender, asked)
        pool = set(asked) if asked else None
        mine = [s for s in self.my_cheapest() if pool is None or s in pool][: self.answer_alternatives + 1]
        content = (f"For meeting M{mid} I could do slots {fmt_slots(mine)}." if mine
                   else f"Sorry, I have no slot free for meeting M{mid}.")
        rs.text_replies[msg.sender] = rs.text_replies.get(msg.sender, 0) + 1
        return [self.text(msg.sender, content)]

    # -- answers to peers outside the protocol ---------------------------------------------------
    def _follow(self, sender: int, offer: list[int]) -> None:
        """A person (or an LLM) leading the meeting offers slots in words: the first of its latest
        offer that I can hold is the slot I schedule, as a protocol initiator's decision would be."""
        if sender not in self.outsiders or sender != min(self.meeting.participants) or sender == self.seat:
            return
        slot = next((s for s in offer if self.cost(s) is not None), None)
        if slot is not None:
            self.adopt(slot)

    def adopt(self, slot: int) -> None:
        """Take ``slot`` as the agreed slot of this round (subclasses keep their own state too)."""
        self.rs.agreed, self.rs.failed = slot, False

    def alternatives(self, exclude: set[int]) -> list[int]:
        """Slots I could hold instead of ``exclude``, best first: my cheapest (SD-MAP: slot order)."""
        return [s for s in self.my_cheapest() if s not in exclude][: self.answer_alternatives]

    def answer_offer(self, to: int, offer: list[int]) -> list[Message]:
        """A peer's offer: acknowledged when I already told it every slot works ("let's go with
        5" after my yes to 5, or the person's confirmation), else answered (:meth:`answer_slots`)."""
        if all(s in self.rs.told_ok.get(to, ()) for s in offer):
            return self.acknowledge(to, Reading(), offer)
        return self.answer_slots(to, offer)

    def answer_slots(self, to: int, slots: list[int]) -> list[Message]:
        """"Slot 5 works for me." / "I can't do slot 5, but I could do slot 3, 7 or 11." — an
        ``answer`` DM whose payload says exactly what the words say (at most
        :data:`MAX_ANSWERS` a round per peer)."""
        rs = self.rs
        if rs.answers.get(to, 0) >= MAX_ANSWERS:
            return []
        rs.answers[to] = rs.answers.get(to, 0) + 1
        ok = [s for s in slots if self.cost(s) is not None]
        bad = [s for s in slots if s not in ok]
        rs.told_ok.setdefault(to, set()).update(ok)
        alts = [] if ok else self.alternatives(set(bad))
        if not ok and alts and to == min(self.meeting.participants):
            rs.refused[to] = (self._turn, bad, alts)
        fields: dict[str, Any] = {"works": ok, "cannot": bad, "alternatives": alts}
        parts = []
        if ok:
            parts.append(f"{_cap(slot_words(ok))} {'works' if len(ok) == 1 else 'work'} for me")
        if bad:
            parts.append(f"I can't do {slot_words(bad)}")
        content = "; ".join(parts)
        if alts:
            content += f", but I could do {slot_words_or(alts)}"
            if self.answer_costs:
                costs = {s: self.cost(s) for s in alts}
                fields["costs"] = {str(s): c for s, c in costs.items()}
                dear = [f"slot {s} costs {c} for me" for s, c in costs.items() if c]
                if dear:
                    content += f" ({', '.join(dear)})"
        elif bad and not ok:
            content += ", and I have no other slot free"
        return [self.msg(to, ANSWER_KIND, content + ".", **fields)]

    def _remind(self, turn: int) -> list[Message]:
        """A leader outside my protocol whose slot I could not take, and who has said nothing
        since a whole sweep later (a person who missed a turn), is offered my alternatives once
        more — the same slots, so nothing new is revealed — and the talk does not end on a
        sweep in which nobody spoke: "Could we do slot 3, 7 or 11 instead?"."""
        rs = self.rs
        out = []
        for to, (when, bad, alts) in sorted(rs.refused.items()):
            if when < turn and to not in rs.nudged:
                rs.nudged.add(to)
                out.append(self.msg(to, ANSWER_KIND, f"Could we do {slot_words_or(alts)} instead?", works=[],
                                    cannot=bad, alternatives=alts))
        for to in rs.nudged:
            rs.refused.pop(to, None)
        return out

    def acknowledge(self, to: int, reading: Reading, said: list[int] | None = None) -> list[Message]:
        """A peer's yes to the slot on the table — the slot agreed, or one I told that peer works
        for me — is acknowledged once: "Agreed, slot 5 it is."."""
        rs = self.rs
        table = set(rs.told_ok.get(to, ()))
        if rs.agreed is not None and not rs.failed:
            table.add(rs.agreed)
        said = [s for s in (said or sorted(reading.works)) if s in table]
        if not said and reading.yes and not reading.slots and len(table) == 1:
            said = sorted(table)
        said = [s for s in said if (to, s) not in rs.acked and self.cost(s) is not None]
        if not said:
            return []
        slot = said[0]
        rs.acked.add((to, slot))
        return [self.msg(to, ANSWER_KIND, f"Agreed, slot {slot} it is.", works=[slot], cannot=[], alternatives=[])]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
