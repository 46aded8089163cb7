"""One seat's model: what the human's screens show, folded from what the seat may see.

The game screen and the batch builder render a :class:`SeatModel`; nothing here imports
Textual.  It is fed two things only, the same for a local game and for a seat played
over the wire (``calbench_tui/remote.py`` posts the very same messages):

- the seat's projected engine events (:func:`engine.observe.seat_event` output, plain
  dicts, JSON-safe) through :meth:`SeatModel.apply`;
- the engine's requests to the human seat (``personas.human.HumanRequest``: register,
  speak, volunteer, decide) through :meth:`register`, :meth:`speak` and :meth:`batch`.

From them it keeps the round's meeting, the seat's calendar and penalty (the engine's
figure, from two inputs: the ``penalty`` of each request's view, and in between the
``cost`` of each of the seat's ``batch_applied`` events, which is what the engine added;
nothing is computed here), the latest proposal and cost request made
to the seat, the costs others reported, the slots the talk was about, the seat's queued
messages (the outbox) and every message per thread.  What happened that the person
should be told comes back from :meth:`apply` as :class:`Hint` values; the screen says
them in words.  The quick actions (``personas/quick.py``) are built here from the model's
state plus what the person points at (cursor, marks, the open thread's channel).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from engine import protocol, protocols
from engine.actions import Message, actions_from_json, actions_to_json
from engine.channels import CHANNEL_SHORT
from engine.events import MESSAGE_EVENTS
from engine.model import item_from_json
from engine.phrasebook import Phrasebook, act_of_text
from engine.seats import Reply

from . import quick
from .base import cheapest_common_slot, insertion_costs

__all__ = ["SeatModel", "Hint", "QuickResult", "thread_of", "CHANNEL_THREAD", "stance_of", "TalkFacts",
           "counter_offer"]

#: Thread keys of the groupchats (a DM thread is ``dm:<peer>``; everything else is the feed).
CHANNEL_THREAD = {c: CHANNEL_SHORT[c] for c in ("participant_groupchat", "all_groupchat")}  # engine.channels


def thread_of(event: dict, seat: int) -> str:
    """Which thread a (projected) message event belongs to, for seat ``seat``."""
    ch = event.get("channel")
    if ch == "dm":
        peer = event.get("to_agent") if event.get("from_agent") == seat else event.get("from_agent")
        return f"dm:{peer}"
    return CHANNEL_THREAD.get(ch, "feed")


@dataclass(frozen=True)
class Hint:
    """Something the person should be told after an event; the screen puts it in words.

    ``kind``: ``asks_costs`` (``frm`` asks my costs), ``proposes`` (``frm`` proposes one
    ``slot``), ``cheapest`` (every other participant reported costs: ``slot`` has the least
    ``total``), ``no_common_slot`` (…and no slot works for everyone), ``audience`` (whom
    the feed writes to changed), ``kept`` / ``dropped`` (``count`` queued messages carried
    into a new round / dropped with the last round), ``outside_over`` (a round the seat was not
    in is over: ``count`` items of its own calendar moved in it, at ``total`` cost — all a
    seat outside the meeting may know of it, SPEC §5; never whether the meeting was scheduled).
    """

    kind: str
    frm: int | None = None
    slot: int | None = None
    total: int | None = None
    count: int = 0


#: Stances (:func:`stance_of`) that say which slots a seat can take.
STANCE_TAKES = ("decided", "proposed", "can do", "sent costs")
#: Stances of the typed kinds no protocol declares (an LLM seat's and a person's actions);
#: a protocol's own kinds are read by what its home declares (:func:`_typed_stance`).
_ACTION_STANCE = {"proposal": "proposed", "offer": "proposed", "request_costs": "asked costs for",
                  "ask_costs": "asked costs for", "decline": "cannot do", "reject": "cannot do",
                  "accept": "can do"}


def _typed_stance(payload: Any, kind: str) -> str:
    """A typed message's stance from its declaration (``engine/protocols/``): a cost question
    asks costs; a proposal that also asks (SD-MAP's propose, DSM's proposals) proposes, one that
    does not (a decision, a confirm) decides; a refusal cannot do."""
    rules = protocols.rules(payload.get("protocol") if isinstance(payload, dict) else None, kind)
    if not rules:
        return _ACTION_STANCE.get(kind, "mentioned")
    if any("from_slot" in r.fields for r in rules):
        return "mentioned"  # a move of another (bumped) meeting, not a stance on this one
    audit = {a for r in rules for a in r.audit}
    if any(r.asks_costs for r in rules):
        return "asked costs for"
    if "proposal" in audit:
        return "proposed" if "question" in audit else "decided"
    if "refusal" in audit:
        return "cannot do"
    return "mentioned"


def stance_of(event: dict, num_slots: int) -> tuple[str, list[int]] | None:
    """What one (projected) message says about slots: ``(what, slots)`` — ``decided``,
    ``proposed``, ``can do``, ``cannot do``, ``sent costs`` (slots with a cost), ``asked costs
    for``, ``asked about`` — or None when it names no slot.  Typed payloads by their kind
    (``engine.protocol``), free text by :func:`engine.protocol.read_text`."""
    p = event.get("payload")
    kind = protocol.payload_kind(p)
    if kind:
        costs = protocol.costs_in_payload(p)
        if costs is not None:
            return "sent costs", sorted(s for s, c in costs.items() if c is not None and 0 <= s < num_slots)
        slots = protocol.slots_in_payload(p, num_slots)
        if not slots:
            return None
        return _typed_stance(p, kind), slots
    r = protocol.read_text(event.get("content") or "", num_slots)
    if r.decided is not None:
        return "decided", [r.decided]
    if r.proposed:
        return "proposed", list(dict.fromkeys(r.proposed))
    if r.costs:
        return "sent costs", sorted(s for s in r.costs if s not in r.fails)
    if r.works:
        return "can do", sorted(r.works)
    if r.fails:
        return "cannot do", sorted(r.fails)
    if r.asked:
        return ("asked costs for" if "cost" in (event.get("content") or "").lower() else "asked about"), list(r.asked)
    return None



@dataclass(frozen=True)
class MessageReading:
    """What one message says to the seat it reached (:func:`read_message`)."""

    slots: list[int]  # the slots it names (``engine.protocol.mentioned_slots``)
    asks_costs: bool  # a question for my costs
    proposes: bool  # a proposal of the slots it names
    costs: "dict[int, int | None] | None"  # the costs it reports, if any


def read_message(ev: dict[str, Any], num_slots: int) -> MessageReading:
    """The one reading of a message to a seat, for a person's screen (:class:`SeatModel`) and
    the LLM seat's short talk actions (``personas/llm/talk.py``) alike."""
    slots = protocol.mentioned_slots(ev, num_slots)
    p = ev.get("payload")
    costs = protocol.costs_in_payload(p) if p is not None else quick.read_shared_costs(ev.get("content"), num_slots)
    return MessageReading(slots, protocol.is_request_for_costs(ev), bool(slots) and protocol.is_proposal(ev), costs)


def counter_offer(text: str, num_slots: int) -> list[int]:
    """The slots a free-text message offers instead of another, read by the engine's reader
    (:func:`engine.protocol.read_text`) for the LLM seat's per-turn example
    (``personas/llm/talk.py``): "Could we do slot 1, 2 or 3 instead?" (proposed) or "I can't
    do slot 9, but I could do slot 1, 2 or 3." (can do some, cannot do others); [] for
    anything else ("Slot 9 works for me." offers nothing new)."""
    r = protocol.read_text(text or "", num_slots)
    if r.proposed:
        return list(dict.fromkeys(r.proposed))
    if r.works and r.fails:
        return sorted(r.works)
    return []


@dataclass(frozen=True)
class TalkFacts:
    """What a round's talk produced for one seat (:meth:`SeatModel.talk_facts`).

    ``said``: per message about slots, in order, ``(sender, what, slots)`` (:func:`stance_of`);
    ``talk``: the slots the latest message about a few slots named (the human's "Talked
    about"); ``accepted``: the slots every participant's latest stance can take; ``costs``:
    the costs each participant sent this seat; ``cheapest``: ``(total, slot)`` of least
    total once every other participant sent costs; ``settled``: the one slot the talk
    settled on — the slot the human's batch builder preselects (:meth:`SeatModel.agreed_slot`).
    """

    said: list[tuple[int, str, list[int]]]
    talk: list[int]
    accepted: list[int]
    costs: dict[int, dict[int, int | None]]
    cheapest: tuple[int, int] | None = None
    settled: int | None = None  # the slot the human's batch builder preselects (SeatModel.agreed_slot)


@dataclass
class QuickResult:
    """What a quick action makes: the messages to queue, or a warning (and nothing queued)."""

    messages: list[Message] = field(default_factory=list)
    warning: str | None = None
    confirm: bool = False  # the warning asks for a second press of the same key


class SeatModel:
    """The human seat's state, folded from its projected events and the engine's requests."""

    def __init__(self, seat: int, channels: Sequence[str], num_agents: int, num_rounds: int = 0) -> None:
        self.seat = seat
        self.channels = tuple(channels)
        self.num_agents = num_agents
        self.num_rounds = num_rounds  # known up front (a resumed game replays rounds before registering)
        self.num_slots = 0
        self.max_turns = 0
        self.round = -1
        self.meeting_id: int | None = None
        self.participants: list[int] = []
        self.meeting: Any = None  # the round's meeting: the round_start dict, then the observation's MeetingView
        self.calendar: list[Any] = []
        self.penalty = 0
        self.round_cost = 0  # what my own batches cost this round
        self.apart: set[int] = set()  # my meetings that ended apart (not coordinated): nothing to break
        self._changed: set[int] = set()  # slots where an item of my calendar landed this round
        self.pending = None  # HumanRequest (speak) waiting for "end turn"
        self.batch_request = None  # HumanRequest (decide / volunteer) waiting for the batch builder
        self.outbox: list[Message] = []
        self._handwritten: set[int] = set()  # ids of outbox messages typed by the person
        self.talk: list[int] = []  # the slots the latest message of this round was about
        self.proposal: tuple[int, list[int]] | None = None  # (from, slots) latest proposal to me
        self.proposal_kind: str | None = None  # its typed payload kind (sdmap "propose", dsm "proposals", ...)
        self.cost_request: tuple[int, list[int]] | None = None  # (from, slots) latest ask to me
        self.my_proposal: list[int] = []
        self.last_proposal: list[int] = []  # the slots of this round's latest proposal, mine or to me
        self.proposed: list[int] = []  # every slot proposed this round, by anyone, in order
        self.mine_latest = False  # my proposal is newer than any proposal made to me this round
        self.reported: dict[int, dict[int, int | None]] = {}  # costs other participants sent me this round
        self.said: list[tuple[int, str, list[int]]] = []  # this round: (sender, what, slots) per message about slots
        self.stances: dict[int, list[int]] = {}  # this round: the slots each seat's latest stance can take
        self.last_writer: int | None = None
        self.protocols: dict[int, str | None] = {}  # seat -> scripted protocol it speaks (from game_start)
        self.messages: dict[str, list[dict[str, Any]]] = {}  # thread key -> message events, in order
        self.game_over = False
        self.timed_out_round: int | None = None  # a study decision that ran out this round
        #: A blinded study game's phrasebook (``engine.phrasebook``): the quick actions' words
        #: come from it, the same whoever the recipients are; None: ``personas/quick.py``'s words.
        self.voice: Phrasebook | None = None

    # -- requests -------------------------------------------------------------------------
    def _view(self, view: Any) -> None:
        self.num_slots = view.num_slots
        self.calendar = list(view.calendar)
        self.penalty = view.penalty

    def register(self, briefing: Any) -> None:
        self.num_rounds = briefing.num_rounds
        self.max_turns = briefing.max_turns_per_round
        self._view(briefing.view)

    def speak(self, request: Any) -> None:
        self.pending = request
        self._view(request.obs.view)
        self.meeting = request.obs.meeting
        self.meeting_id, self.participants = request.obs.meeting.id, list(request.obs.meeting.participants)

    def batch(self, request: Any) -> None:
        self.batch_request = request

    @property
    def batch_open(self) -> bool:
        """A DECISION / VOLUNTARY batch is waiting for the person."""
        return self.batch_request is not None and not self.batch_request.done

    @property
    def talk_left(self) -> bool:
        """Whether a message queued now can still be sent: False once the last round's talk
        is over (its batch is asked for) or the game is over."""
        if self.game_over:
            return False
        last = self.num_rounds > 0 and self.round >= self.num_rounds - 1
        return not (last and self.batch_request is not None)

    def decision_timed_out(self) -> None:
        self.timed_out_round = self.round

    # -- events ---------------------------------------------------------------------------
    def apply(self, ev: dict[str, Any]) -> list[Hint]:
        """Fold one projected event; returns what the person should be told."""
        t = ev.get("type")
        agent = ev.get("agent_id")
        if t == "game_start":
            self.protocols = {a: protocol.protocol_of(m) for a, m in enumerate(ev.get("agent_models") or [])}
            self.num_slots = ev.get("num_slots") or self.num_slots
        elif t == "round_start":
            return self._new_round(ev)
        elif t in MESSAGE_EVENTS:
            return self._message(ev)
        elif t == "batch_applied" and agent == self.seat:
            cal = ev.get("calendar_after")
            if isinstance(cal, list):
                self._changed |= self._differs(cal)
                self.calendar = [item_from_json(it) for it in cal]
            self.penalty += ev.get("cost") or 0
            self.round_cost += ev.get("cost") or 0
        elif t == "resolution":
            if ev.get("participant") and isinstance(ev.get("meeting_id"), int):
                (self.apart.discard if ev.get("coordinated") else self.apart.add)(ev["meeting_id"])
            cal = ev.get("my_calendar")
            if isinstance(cal, list):
                self._changed |= self._differs(cal)
                self.calendar = [item_from_json(it) for it in cal]
            self.batch_request = None
            if ev.get("participant") is False and self.round >= 0 and ev.get("round") == self.round:
                return [Hint("outside_over", count=len(self._changed), total=self.round_cost)]
        elif t == "game_end":
            self.game_over = True
        return []

    def _differs(self, calendar: list[Any]) -> set[int]:
        """The slots where ``calendar`` (JSON items) holds an item the calendar I hold does not have
        there: one slot per item moved or placed."""
        new = [item_from_json(it) for it in calendar]
        if len(new) != len(self.calendar):
            return set()
        return {s for s, (a, b) in enumerate(zip(self.calendar, new)) if b is not None and a != b}

    def _new_round(self, ev: dict[str, Any]) -> list[Hint]:
        m = ev.get("meeting") or {}
        self.round = ev.get("round") or 0
        self.round_cost = 0
        self._changed = set()
        self.meeting = m
        self.meeting_id, self.participants = m.get("id"), list(m.get("participants") or [])
        self.talk, self.proposal, self.cost_request, self.my_proposal = [], None, None, []
        self.last_proposal, self.proposed = [], []
        self.mine_latest = False
        self.proposal_kind = None
        self.reported = {}
        self.said, self.stances = [], {}
        self.last_writer = None
        hints: list[Hint] = []
        if self.outbox:
            # what the person wrote stays queued for their next turn; a quick action about the
            # last meeting (a typed proposal, costs) would mislead the bots and is dropped
            kept = [msg for msg in self.outbox if id(msg) in self._handwritten]
            dropped = len(self.outbox) - len(kept)
            self.outbox[:] = kept
            if kept:
                hints.append(Hint("kept", count=len(kept)))
            if dropped:
                hints.append(Hint("dropped", count=dropped))
        return hints

    def _message(self, ev: dict[str, Any]) -> list[Hint]:
        self.messages.setdefault(thread_of(ev, self.seat), []).append(ev)
        said = read_message(ev, self.num_slots or 10**6)
        slots = said.slots
        frm = ev.get("from_agent")
        hints: list[Hint] = []
        if frm != self.seat:
            if self.last_writer != frm:
                self.last_writer = frm
                hints.append(Hint("audience", frm=frm))
            kind = protocol.payload_kind(ev.get("payload"))
            if said.asks_costs:
                self.cost_request = (frm, slots)
                hints.append(Hint("asks_costs", frm=frm))
                if kind and said.proposes:  # an offer too (DSM's): c scores all, a / d one
                    self.proposal, self.proposal_kind = (frm, slots), kind
            elif said.proposes:
                self.proposal, self.proposal_kind = (frm, slots), kind
                self._proposed(slots)
                self.mine_latest = False
                if len(slots) == 1:
                    hints.append(Hint("proposes", frm=frm, slot=slots[0]))
            elif slots and not self.proposal and len(slots) <= 3:
                self.proposal, self.proposal_kind = (frm, slots), kind
                self._proposed(slots, weak=True)  # a few slots mentioned, not a typed proposal
            if said.costs is not None:
                self.reported[frm] = said.costs
                hints.extend(self._suggest_from_costs())
        if slots and len(slots) <= 4:  # a proposal or an answer about a few slots, not a cost list
            self.talk = slots
        self._stance(frm, ev)
        return hints

    def _stance(self, frm: Any, ev: dict[str, Any]) -> None:
        st = stance_of(ev, self.num_slots or 10**6)
        if st is None or not isinstance(frm, int):
            return
        what, slots = st
        self.said.append((frm, what, slots))
        if what in STANCE_TAKES:
            self.stances[frm] = list(slots)
        elif what == "cannot do" and frm in self.stances:
            self.stances[frm] = [s for s in self.stances[frm] if s not in slots]

    def accepted_by_all(self) -> list[int]:
        """The slots every participant's latest stance this round can take (proposed, decided,
        accepted, said to work, or reported with a cost); [] while one has taken none."""
        common: set[int] | None = None
        for p in self.participants:
            if p not in self.stances:
                return []
            common = set(self.stances[p]) if common is None else common & set(self.stances[p])
        return sorted(common or ())

    def talk_facts(self) -> "TalkFacts":
        """What the talk of this round produced, as the decision screens show it (the human's
        "Talked about: slot 7"; the LLM seat's DECISION message)."""
        best = None
        others = self.others_in_meeting()
        if others and all(p in self.reported for p in others) and self.calendar:
            best = self.best_common_slot()
        return TalkFacts(said=list(self.said), talk=list(self.talk), accepted=self.accepted_by_all(),
                         costs={p: dict(c) for p, c in self.reported.items()}, cheapest=best,
                         settled=self.agreed_slot())

    def best_common_slot(self) -> tuple[int, int] | None:
        """(total, slot) of least total from my costs and the costs the others reported."""
        return cheapest_common_slot(dict(enumerate(insertion_costs(self.calendar))), self.others_in_meeting(),
                                    lambda p, s: self.reported[p].get(s))

    def _suggest_from_costs(self) -> list[Hint]:
        """Once every other participant sent costs: the cheapest common slot (or that none works)."""
        others = self.others_in_meeting()
        if not others or any(p not in self.reported for p in others) or not self.calendar:
            return []
        best = self.best_common_slot()
        if best is None:
            return [Hint("no_common_slot")]
        return [Hint("cheapest", slot=best[1], total=best[0])]

    # -- who and what ---------------------------------------------------------------------
    def others_in_meeting(self) -> list[int]:
        return [p for p in self.participants if p != self.seat]

    def thread_fits(self, key: str) -> bool:
        """Whether a conversation thread is still one to write in for this round's meeting: a DM
        thread only with one of its participants (a new round resets any other to the feed)."""
        if key.startswith("dm:"):
            try:
                peer = int(key[3:])
            except ValueError:
                return False
            return peer != self.seat and peer in self.participants
        return True

    @property
    def initiator(self) -> bool:
        return bool(self.participants) and self.seat == min(self.participants)

    def audience(self) -> list[int]:
        """Whom a message from the feed goes to: the meeting's other participants, or — for a
        seat outside the meeting — the last one who wrote to it this round."""
        if self.seat in self.participants:
            return self.others_in_meeting()
        if self.last_writer is not None:
            return [self.last_writer]
        return self.others_in_meeting()

    def route(self, default_to: list[int], open_channel: str | None = None,
              open_to: int | None = None) -> tuple[str, list[int]]:
        """Channel and recipients for a message — typed or made by a quick action, the one rule:
        the thread on screen decides (a groupchat thread: that chat; a DM thread: its peer
        ``open_to``, the one the composer's line names); from the feed, DMs to ``default_to``;
        without DMs, the first groupchat the game enables."""
        if open_channel in ("participant_groupchat", "all_groupchat"):
            return open_channel, []
        if open_channel == "dm" and open_to is not None and "dm" in self.channels:
            return "dm", [open_to]
        if "dm" in self.channels:
            return "dm", default_to
        ch = "participant_groupchat" if "participant_groupchat" in self.channels else self.channels[0]
        return ch, []

    def _proposed(self, slots: Sequence[int], *, weak: bool = False) -> None:
        """Slots proposed this round; ``weak``: only mentioned in free text, which does not
        replace a proposal already made (the one the builder preselects)."""
        if not (weak and self.last_proposal):
            self.last_proposal = list(slots)
        self.proposed += [s for s in slots if s not in self.proposed]

    def talked_slots(self) -> list[int]:
        """The slots the round's talk was about, for the batch builder's warning: the latest
        message's, then every slot proposed this round (mine included)."""
        return list(self.talk) + [s for s in self.proposed if s not in self.talk]

    def agreed_slot(self) -> int | None:
        """The slot the batch builder preselects: the round's latest proposal when it names one
        slot (mine or to me: a later message merely mentioning another slot does not replace
        it), else the one slot the talk settled on, else my one proposed slot, else the one
        slot proposed to me."""
        if len(self.last_proposal) == 1:
            return self.last_proposal[0]
        if self.talk and len(self.talk) == 1:
            return self.talk[0]
        if self.my_proposal and len(self.my_proposal) == 1:
            return self.my_proposal[0]
        if self.proposal and len(self.proposal[1]) == 1:
            return self.proposal[1][0]
        return None

    # -- the outbox -----------------------------------------------------------------------
    def queue(self, msgs: Iterable[Message], *, handwritten: bool = False) -> None:
        msgs = list(msgs)
        if handwritten:
            self._handwritten.update(id(m) for m in msgs)
        self.outbox.extend(msgs)

    def unqueue(self) -> Message | None:
        return self.outbox.pop() if self.outbox else None

    def outbox_json(self) -> list[dict[str, Any]]:
        """The queued messages as JSON (``{"message": action, "handwritten": bool}`` each), to
        keep them over a stop; :meth:`requeue` puts them back."""
        return [{"message": actions_to_json([m])[0], "handwritten": id(m) in self._handwritten} for m in self.outbox]

    def requeue(self, kept: Any) -> int:
        """Queue again what :meth:`outbox_json` kept (anything that does not read is left out);
        returns how many messages are queued again."""
        n = 0
        for item in kept if isinstance(kept, list) else ():
            try:
                msgs = actions_from_json([item["message"]])
            except Exception:
                continue
            if msgs and all(isinstance(m, Message) for m in msgs):
                self.queue(msgs, handwritten=bool(item.get("handwritten")))
                n += len(msgs)
        return n

    def outbox_groups(self) -> list[tuple[str, list[int | None], str]]:
        """(channel, recipients, words) per queued text; the same words by DM to several seats
        are one group."""
        groups: dict[tuple[str, str], list[int | None]] = {}
        for m in self.outbox:
            groups.setdefault((m.type, m.content), []).append(m.to)
        return [(kind, tos, content) for (kind, content), tos in groups.items()]

    def end_turn(self) -> tuple[Message, ...] | None:
        """Send what is queued and end the CHEAP_TALK turn (nothing queued: a pass).  Returns the
        messages sent, or None when it is not the seat's turn."""
        req = self.pending
        if req is None:
            return None
        msgs = tuple(self.outbox)
        self.outbox.clear()
        self.pending = None
        req.answer(Reply(actions=msgs, text="\n".join(m.content for m in msgs) or None))
        return msgs

    def write(self, text: str, *, channel: str | None = None, to: int | None = None,
              open_channel: str | None = None) -> QuickResult:
        """A message the person typed: on the thread's ``channel`` (and ``to`` for a DM), or from
        the feed (``channel`` None) to :meth:`audience` (what the composer's line names)."""
        if channel is None:
            ch, tos = self.route(self.audience(), open_channel)
            if ch == "dm" and not tos:
                return QuickResult(warning="Nobody to write to yet: pick a thread with [ or ].")
            msgs = [Message("dm", text, t) for t in tos] if ch == "dm" else [Message(ch, text)]
        else:
            msgs = [Message(channel, text, to if channel == "dm" else None)]
        self.queue(msgs, handwritten=True)
        offer = protocol.read_text(text, self.num_slots or 10**6).offered
        if len(offer) == 1 and self.participants:  # "how about slot 5?": my proposal, as p makes it
            self.my_proposal, self.mine_latest, self.talk = offer, True, offer
            self._proposed(offer)
        return QuickResult(msgs)

    # -- quick actions --------------------------------------------------------------------
    def quick(self, kind: str, *, cursor: int | None, selected: Sequence[int] = (), marks: Iterable[int] = (),
              open_channel: str | None = None, open_to: int | None = None,
              confirmed: bool = False) -> QuickResult:
        """The messages a quick action makes (``personas/quick.py``), queued; or why not.

        ``kind``: ``ask_costs``, ``share_costs``, ``propose``, ``accept`` or ``decline``.
        ``cursor`` is the calendar slot under the cursor, ``selected`` the slots a proposal is
        about (the marked slots, else the cursor's), ``marks`` the marked slots,
        ``open_channel`` the channel of the thread on screen and ``open_to`` its DM peer (the
        thread decides whom it goes to, :meth:`route`; from the feed a reply goes to whoever
        proposed or asked, anything else to :meth:`audience`, the composer's line), ``confirmed``
        a second press of a key that asked for one.
        """
        if self.meeting_id is None:
            return QuickResult(warning="No meeting is being negotiated right now.")
        costs = insertion_costs(self.calendar) if self.calendar else []
        thread = (open_channel, open_to)
        if kind == "ask_costs":
            ch, to = self.route(self.audience(), *thread)
            out = QuickResult(self._typed(quick.ask_costs, ch, to, [s for s, c in enumerate(costs) if c is not None],
                                          initiator=self.initiator))
        elif kind == "share_costs":
            out = self._share_costs(costs, sorted(marks), thread, confirmed)
        elif kind == "propose":
            out = self._propose(costs, list(selected), thread)
        elif kind in ("accept", "decline"):
            out = self._answer(kind, costs, cursor, thread)
        else:
            raise ValueError(f"no quick action {kind!r}")
        if not out.messages and out.warning is None:
            out = QuickResult(warning="Nobody to send it to: pick a thread with [ or ].")
        self.queue(out.messages)
        return out

    def _others_or_all(self) -> list[int]:
        """The meeting's other participants, or (no participants known) every other seat."""
        return self.others_in_meeting() or [a for a in range(self.num_agents) if a != self.seat]

    def _typed(self, builder, ch: str, to: list[int], *args, **kw) -> list[Message]:
        """One message per DM recipient in its own protocol; a groupchat line typed only when
        everyone it is meant for speaks the same protocol."""
        mid = self.meeting_id
        if ch == "dm":
            out = [m for t in to for m in builder(self.seat, mid, *args, channel=ch, to=[t],
                                                  protocol=self.protocols.get(t), **kw)]
        else:
            protos = {self.protocols.get(p) for p in self._others_or_all()}
            proto = protos.pop() if len(protos) == 1 else None
            out = builder(self.seat, mid, *args, channel=ch, to=to, protocol=proto, **kw)
        if self.voice is None or not out:
            return out
        # One text for every recipient: the act of the English a recipient with no protocol
        # gets (an LLM's), in the phrasebook's words; each payload stays its recipient's.
        plain = builder(self.seat, mid, *args, channel="participant_groupchat", to=None, protocol=None, **kw)
        act = act_of_text(plain[0].content, self.num_slots or 1000) if plain else None
        turn = self.pending.obs.turn if self.pending is not None else 0
        text = self.voice.say(act, round=self.round, turn=turn, sender=self.seat) if act else None
        return [replace(m, content=text) for m in out] if text else out

    def _share_costs(self, costs: list[int | None], marks: list[int], thread: tuple[str | None, int | None],
                     confirmed: bool) -> QuickResult:
        n = len(self.calendar)
        if marks:
            slots = marks
        elif self.cost_request:
            slots = self.cost_request[1] or list(range(n))
        else:
            slots = list(range(n))
        asker = [self.cost_request[0]] if self.cost_request else self.audience()
        ch, to = self.route(asker, *thread)
        if not marks and not self.cost_request and not confirmed:
            whom = "everyone in the chat" if ch != "dm" else ("Agent " if len(to) == 1 else "Agents ") + \
                ", ".join(map(str, to))
            return QuickResult(warning=f"Nobody asked: this would send your cost for all {len(slots)} slots to "
                                       f"{whom}. Press c again to send it, or mark slots with space first.",
                               confirm=True)
        return QuickResult(self._typed(quick.share_costs, ch, to, {s: costs[s] for s in slots if 0 <= s < len(costs)}))

    @staticmethod
    def _cannot_hold(costs: list[int | None], slots: Iterable[int], then: str) -> QuickResult | None:
        """The one rule for offering or agreeing to a slot: refused when my calendar holds
        something there that cannot move (its insertion cost is None) — ``p`` and ``a`` alike."""
        blocked = [s for s in slots if s is not None and 0 <= s < len(costs) and costs[s] is None]
        if not blocked:
            return None
        return QuickResult(warning=f"You can't hold {protocol.slots_phrase(blocked)}: it is taken on your "
                                   f"calendar by something that cannot move. {then}")

    def _propose(self, costs: list[int | None], slots: list[int],
                 thread: tuple[str | None, int | None]) -> QuickResult:
        refused = self._cannot_hold(costs, slots, "Pick a free slot or an errand you can move.")
        if refused:
            return refused
        ch, to = self.route(self.audience(), *thread)
        msgs = self._typed(quick.propose, ch, to, slots, initiator=self.initiator)
        self.my_proposal = slots
        self.mine_latest = True
        self.talk = slots
        self._proposed(slots)
        return QuickResult(msgs)

    def _answer(self, kind: str, costs: list[int | None], cursor: int | None,
                thread: tuple[str | None, int | None]) -> QuickResult:
        """Accept or decline the slot proposed to me (or the cursor's slot when none was).  Of
        several slots proposed: the cursor's, else (accepting) the first I can hold.  A leader
        who proposed one slot and has had no proposal since confirms that slot (the answers to
        it — "slot 3 is impossible", "slot 4 works" — are not proposals)."""
        if kind == "accept" and self.initiator and self.mine_latest and len(self.my_proposal) == 1:
            slot = self.my_proposal[0]
            ch, to = self.route(self.audience(), *thread)
            msgs = self._typed(quick.accept, ch, to, slot, answering=None, initiator=True,
                               my_cost=costs[slot] if 0 <= slot < len(costs) else None)
            self.talk = [slot]
            return QuickResult(msgs)
        if self.proposal:
            frm, slots = self.proposal
            if len(slots) == 1 or cursor in slots:
                slot = slots[0] if len(slots) == 1 else cursor
            else:
                holdable = [s for s in slots if kind == "accept" and 0 <= s < len(costs) and costs[s] is not None]
                slot = holdable[0] if holdable else slots[0]
            to_default = [frm]
        else:
            slot = cursor
            to_default = self.audience()
        if kind == "accept":
            refused = self._cannot_hold(costs, [slot], "d declines it; p proposes a slot you can hold.")
            if refused:
                return refused
        answering = self.proposal_kind if self.proposal else None
        initiator = self.initiator
        if initiator and kind == "accept":
            to_default = self.audience()  # my confirm / decision goes to every participant
        ch, to = self.route(to_default, *thread)
        if kind == "decline":
            return QuickResult(self._typed(quick.decline, ch, to, slot, answering=answering, initiator=initiator))
        msgs = self._typed(quick.accept, ch, to, slot, answering=answering, initiator=initiator,
                           my_cost=costs[slot] if slot is not None and 0 <= slot < len(costs) else None)
        self.talk = [slot]
        return QuickResult(msgs)
