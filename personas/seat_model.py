"""One seat's model: what the human's screens show, folded from what the seat may see.

The game screen and the batch builder render a :class:`SeatModel`; nothing here imports
Textual.  It is fed two things only, the same for a local game and for a seat played
over the wire (``calbench_tui/remote.py`` posts the very same messages):

- the seat's projected engine events (:func:`engine.observe.seat_event` output, plain
  dicts, JSON-safe) through :meth:`SeatModel.apply`;
- the engine's requests to the human seat (``personas.human.HumanRequest``: register,
  speak, volunteer, decide) through :meth:`register`, :meth:`speak` and :meth:`batch`.

From them it keeps the round's meeting, the seat's calendar and penalty (one source:
the engine's own figure, see :meth:`penalty`), the latest proposal and cost request made
to the seat, the costs others reported, the slots the talk was about, the seat's queued
messages (the outbox) and every message per thread.  What happened that the person
should be told comes back from :meth:`apply` as :class:`Hint` values; the screen says
them in words.  The quick actions (``personas/quick.py``) are built here from the model's
state plus what the person points at (cursor, marks, the open thread's channel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from engine import protocol
from engine.actions import Message
from engine.channels import CHANNEL_SHORT
from engine.events import MESSAGE_EVENTS
from engine.model import item_from_json
from engine.seats import Reply

from . import quick
from .base import cheapest_common_slot, insertion_costs

__all__ = ["SeatModel", "Hint", "QuickResult", "thread_of", "CHANNEL_THREAD"]

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
    into a new round / dropped with the last round).
    """

    kind: str
    frm: int | None = None
    slot: int | None = None
    total: int | None = None
    count: int = 0


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
        self.pending = None  # HumanRequest (speak) waiting for "end turn"
        self.batch_request = None  # HumanRequest (decide / volunteer) waiting for the batch builder
        self.outbox: list[Message] = []
        self._handwritten: set[int] = set()  # ids of outbox messages typed by the person
        self.talk: list[int] = []  # the slots the latest message of this round was about
        self.proposal: tuple[int, list[int]] | None = None  # (from, slots) latest proposal to me
        self.proposal_kind: str | None = None  # its typed payload kind (sdmap "propose", dsm "proposals", ...)
        self.cost_request: tuple[int, list[int]] | None = None  # (from, slots) latest ask to me
        self.my_proposal: list[int] = []
        self.mine_latest = False  # my proposal is newer than any proposal made to me this round
        self.reported: dict[int, dict[int, int | None]] = {}  # costs other participants sent me this round
        self.last_writer: int | None = None
        self.protocols: dict[int, str | None] = {}  # seat -> scripted protocol it speaks (from game_start)
        self.messages: dict[str, list[dict[str, Any]]] = {}  # thread key -> message events, in order
        self.game_over = False
        self.timed_out_round: int | None = None  # a study decision that ran out this round

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
                self.calendar = [item_from_json(it) for it in cal]
            self.penalty += ev.get("cost") or 0
        elif t == "resolution":
            cal = ev.get("my_calendar")
            if isinstance(cal, list):
                self.calendar = [item_from_json(it) for it in cal]
            self.batch_request = None
        elif t == "game_end":
            self.game_over = True
        return []

    def _new_round(self, ev: dict[str, Any]) -> list[Hint]:
        m = ev.get("meeting") or {}
        self.round = ev.get("round") or 0
        self.meeting = m
        self.meeting_id, self.participants = m.get("id"), list(m.get("participants") or [])
        self.talk, self.proposal, self.cost_request, self.my_proposal = [], None, None, []
        self.mine_latest = False
        self.proposal_kind = None
        self.reported = {}
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
        slots = protocol.mentioned_slots(ev, self.num_slots or 10**6)
        frm = ev.get("from_agent")
        hints: list[Hint] = []
        if frm != self.seat:
            if self.last_writer != frm:
                self.last_writer = frm
                hints.append(Hint("audience", frm=frm))
            kind = protocol.payload_kind(ev.get("payload"))
            if protocol.is_request_for_costs(ev):
                self.cost_request = (frm, slots)
                hints.append(Hint("asks_costs", frm=frm))
                if kind == "proposals" and slots:  # a DSM offer: c scores them all, a / d answer one
                    self.proposal, self.proposal_kind = (frm, slots), kind
            elif slots and protocol.is_proposal(ev):
                self.proposal, self.proposal_kind = (frm, slots), kind
                self.mine_latest = False
                if len(slots) == 1:
                    hints.append(Hint("proposes", frm=frm, slot=slots[0]))
            elif slots and not self.proposal and len(slots) <= 3:
                self.proposal, self.proposal_kind = (frm, slots), kind
            costs = protocol.costs_in_payload(ev.get("payload"))
            if costs is not None:
                self.reported[frm] = costs
                hints.extend(self._suggest_from_costs())
        if slots and len(slots) <= 4:  # a proposal or an answer about a few slots, not a cost list
            self.talk = slots
        return hints

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

    def route(self, default_to: list[int], open_channel: str | None = None) -> tuple[str, list[int]]:
        """Channel and recipients for a message: the open groupchat thread if one is open; else
        DMs to ``default_to``; else the first groupchat the game enables."""
        if open_channel in ("participant_groupchat", "all_groupchat"):
            return open_channel, []
        if "dm" in self.channels:
            return "dm", default_to
        ch = "participant_groupchat" if "participant_groupchat" in self.channels else self.channels[0]
        return ch, []

    def agreed_slot(self) -> int | None:
        """The slot the batch builder preselects: the one slot the talk settled on, else my one
        proposed slot, else the one slot proposed to me."""
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
        the feed (``channel`` None) to the meeting's audience."""
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
        return QuickResult(msgs)

    # -- quick actions --------------------------------------------------------------------
    def quick(self, kind: str, *, cursor: int | None, selected: Sequence[int] = (), marks: Iterable[int] = (),
              open_channel: str | None = None, confirmed: bool = False) -> QuickResult:
        """The messages a quick action makes (``personas/quick.py``), queued; or why not.

        ``kind``: ``ask_costs``, ``share_costs``, ``propose``, ``accept`` or ``decline``.
        ``cursor`` is the calendar slot under the cursor, ``selected`` the slots a proposal is
        about (the marked slots, else the cursor's), ``marks`` the marked slots,
        ``open_channel`` the channel of the thread on screen, ``confirmed`` a second press of a
        key that asked for one.
        """
        if self.meeting_id is None:
            return QuickResult(warning="No meeting is being negotiated right now.")
        costs = insertion_costs(self.calendar) if self.calendar else []
        if kind == "ask_costs":
            ch, to = self.route(self._others_or_all(), open_channel)
            out = QuickResult(self._typed(quick.ask_costs, ch, to, [s for s, c in enumerate(costs) if c is not None],
                                          initiator=self.initiator))
        elif kind == "share_costs":
            out = self._share_costs(costs, sorted(marks), open_channel, confirmed)
        elif kind == "propose":
            out = self._propose(costs, list(selected), open_channel)
        elif kind in ("accept", "decline"):
            out = self._answer(kind, costs, cursor, open_channel)
        else:
            raise ValueError(f"no quick action {kind!r}")
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
            return [m for t in to for m in builder(self.seat, mid, *args, channel=ch, to=[t],
                                                   protocol=self.protocols.get(t), **kw)]
        protos = {self.protocols.get(p) for p in self._others_or_all()}
        proto = protos.pop() if len(protos) == 1 else None
        return builder(self.seat, mid, *args, channel=ch, to=to, protocol=proto, **kw)

    def _share_costs(self, costs: list[int | None], marks: list[int], open_channel: str | None,
                     confirmed: bool) -> QuickResult:
        n = len(self.calendar)
        if marks:
            slots = marks
        elif self.cost_request:
            slots = self.cost_request[1] or list(range(n))
        else:
            slots = list(range(n))
        asker = [self.cost_request[0]] if self.cost_request else self._others_or_all()
        ch, to = self.route(asker, open_channel)
        if not marks and not self.cost_request and not confirmed:
            whom = "everyone in the chat" if ch != "dm" else ("Agent " if len(to) == 1 else "Agents ") + \
                ", ".join(map(str, to))
            return QuickResult(warning=f"Nobody asked: this would send your cost for all {len(slots)} slots to "
                                       f"{whom}. Press c again to send it, or mark slots with space first.",
                               confirm=True)
        return QuickResult(self._typed(quick.share_costs, ch, to, {s: costs[s] for s in slots if 0 <= s < len(costs)}))

    def _propose(self, costs: list[int | None], slots: list[int], open_channel: str | None) -> QuickResult:
        blocked = [s for s in slots if 0 <= s < len(costs) and costs[s] is None]
        if blocked:
            return QuickResult(warning=f"You can't hold {protocol.slots_phrase(blocked)}: it is taken on your "
                                       "calendar by something that cannot move. Pick a free slot or an errand "
                                       "you can move.")
        ch, to = self.route(self._others_or_all(), open_channel)
        msgs = self._typed(quick.propose, ch, to, slots, initiator=self.initiator)
        self.my_proposal = slots
        self.mine_latest = True
        self.talk = slots
        return QuickResult(msgs)

    def _answer(self, kind: str, costs: list[int | None], cursor: int | None,
                open_channel: str | None) -> QuickResult:
        """Accept or decline the slot proposed to me (or the cursor's slot when none was).  A
        leader who proposed one slot and has had no proposal since confirms that slot (the
        answers to it — "slot 3 is impossible", "slot 4 works" — are not proposals)."""
        if kind == "accept" and self.initiator and self.mine_latest and len(self.my_proposal) == 1:
            slot = self.my_proposal[0]
            ch, to = self.route(self._others_or_all(), open_channel)
            msgs = self._typed(quick.accept, ch, to, slot, answering=None, initiator=True,
                               my_cost=costs[slot] if 0 <= slot < len(costs) else None)
            self.talk = [slot]
            return QuickResult(msgs)
        if self.proposal:
            frm, slots = self.proposal
            slot = slots[0] if len(slots) == 1 else (cursor if cursor in slots else slots[0])
            to_default = [frm]
        else:
            slot = cursor
            to_default = self._others_or_all()
        answering = self.proposal_kind if self.proposal else None
        initiator = self.initiator
        if initiator and kind == "accept":
            to_default = self._others_or_all()  # my confirm / decision goes to every participant
        ch, to = self.route(to_default, open_channel)
        if kind == "decline":
            return QuickResult(self._typed(quick.decline, ch, to, slot, answering=answering, initiator=initiator))
        msgs = self._typed(quick.accept, ch, to, slot, answering=answering, initiator=initiator,
                           my_cost=costs[slot] if slot is not None and 0 <= slot < len(costs) else None)
        self.talk = [slot]
        return QuickResult(msgs)
