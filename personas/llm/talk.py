"""What this round's talk has produced, as one LLM seat saw it, and the short talk moves the
seat expands into messages (issue 31).

A small model writes ``{"type": "costs"}``, ``{"type": "propose", "slot": n}``,
``{"type": "ask_costs"}`` or ``{"type": "agree", "slot": n}`` instead of composing messages;
the seat expands each into the messages a person's quick keys send (``personas/quick.py``:
the same builders, so the same English and the same typed payloads), addressed
deterministically:

* ``costs`` — my cost for every slot of the latest cost request made to me this round, to
  the agent who asked (nothing when nobody asked; the next prompt says so);
* ``propose`` — one slot, to every other participant of the meeting;
* ``ask_costs`` — my possible slots (free, or holding an errand I may move), to every other
  participant of the meeting;
* ``agree`` — "Agreed: Meeting Mk at slot n." to every other participant (issue 22's short
  action; its words are the ones the talk-done detector and the bots read).

Recipients: one participant group chat when that channel is on (a typed payload only when
everyone it reaches speaks one protocol), else one direct message per recipient, else the
all-agent chat.  A recipient's protocol is the one its typed messages to this seat used
(``payload.protocol``); one that never wrote typed gets English only, which every scripted
seat reads.  The seat records each short action and its expansion (``Reply.extra
["short_actions"]``).

:class:`TalkFacts` is the fold of the round's inbox the expansion and the per-turn example
(``PromptBook.next_step``) read: the latest cost request and proposal to the seat, the costs
others reported, and the cheapest slot for everyone once every other participant reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from engine.actions import Message
from engine.observe import Delivered, TurnObservation
from personas import quick
from personas.base import cheapest_common_slot, insertion_costs
from personas.seat_model import counter_offer, read_message

__all__ = ["TalkFacts", "expand_short", "short_record"]


@dataclass
class TalkFacts:
    """One round's talk as the seat saw it (its inbox, folded in order)."""

    round: int
    cost_request: tuple[int, list[int]] | None = None  # (from, slots) the latest ask for my costs
    proposal: tuple[int, list[int]] | None = None  # (from, slots) the latest proposal to me
    reported: dict[int, dict[int, int | None]] = field(default_factory=dict)  # costs others sent me
    answered: set[int] = field(default_factory=set)  # askers I sent my costs to
    asked: bool = False  # I asked the others for costs
    proposed: list[int] = field(default_factory=list)  # slots I proposed
    agreed: int | None = None  # the slot I last agreed to (set by the persona)

    def read(self, msgs: Sequence[Delivered], num_slots: int) -> None:
        """Fold the messages delivered to the seat (the rule ``SeatModel`` uses for a person)."""
        for m in msgs:
            said = read_message(m.to_json(), num_slots)
            if said.asks_costs:
                self.cost_request = (m.sender, said.slots)
                self.answered.discard(m.sender)
            elif said.proposes:
                self.proposal = (m.sender, said.slots)
            elif said.costs is None and said.slots:  # "could we do 1, 2 or 3 instead?", "I can't do 9, but …"
                offer = counter_offer(m.content, num_slots)
                if offer:
                    self.proposal = (m.sender, offer)
            if said.costs is not None:
                self.reported[m.sender] = said.costs

    def open_request(self) -> tuple[int, list[int]] | None:
        """The cost request I have not answered yet, if any."""
        if self.cost_request and self.cost_request[0] not in self.answered:
            return self.cost_request
        return None

    def cheapest(self, calendar, others: Sequence[int]) -> tuple[int, int] | None:
        """(total, slot) of least total once every other participant reported costs, else None."""
        if not others or any(p not in self.reported for p in others):
            return None
        mine = dict(enumerate(insertion_costs(calendar)))
        return cheapest_common_slot(mine, others, lambda p, s: self.reported[p].get(s))


def _others(obs: TurnObservation, seat: int) -> list[int]:
    return [p for p in obs.meeting.participants if p != seat]


def _send(builder, seat: int, obs: TurnObservation, to: list[int], protocols: dict[int, str], *args,
          reply_channel: str | None = None, **kw) -> list[Message]:
    """Messages of one quick builder to ``to``: a participant group chat (typed when every
    recipient speaks one protocol), else a DM each in its own protocol, else the all-agent chat."""
    channels = obs.view.channels
    mid = obs.meeting.id
    if not to:
        return []
    if reply_channel in ("participant_groupchat", "all_groupchat") and "dm" not in channels:
        ch = reply_channel
    elif "participant_groupchat" in channels and obs.is_participant and set(to) <= set(obs.meeting.participants):
        ch = "participant_groupchat"
    elif "dm" in channels:
        return [m for t in to for m in builder(seat, mid, *args, channel="dm", to=[t], protocol=protocols.get(t),
                                               **kw)]
    elif "all_groupchat" in channels:
        ch = "all_groupchat"
    else:
        return []
    protos = {protocols.get(t) for t in to}
    proto = protos.pop() if len(protos) == 1 else None
    return builder(seat, mid, *args, channel=ch, to=to, protocol=proto, **kw)


def expand_short(kind: str, slot: Any, obs: TurnObservation, seat: int, facts: TalkFacts,
                 protocols: dict[int, str]) -> tuple[list[Message], str | None]:
    """The messages one short action stands for, and a note for the next prompt when it
    stands for nothing (why).  Updates ``facts`` (answered, asked, proposed)."""
    m = obs.meeting
    others = _others(obs, seat)
    initiator = bool(m.participants) and seat == min(m.participants)
    costs = insertion_costs(obs.view.calendar)
    if kind == "costs":
        req = facts.open_request() or facts.cost_request
        if req is None:
            return [], 'nobody asked for your costs this round, so {"type": "costs"} sent nothing'
        asker, slots = req
        slots = slots or list(range(len(costs)))
        facts.answered.add(asker)
        msgs = _send(quick.share_costs, seat, obs, [asker], protocols,
                     {s: costs[s] for s in slots if 0 <= s < len(costs)})
        return msgs, None
    if kind == "ask_costs":
        if not obs.is_participant:
            return [], "only a participant of the meeting can ask for costs"
        mine = [s for s, c in enumerate(costs) if c is not None]
        facts.asked = True
        return _send(quick.ask_costs, seat, obs, others, protocols, mine, initiator=initiator), None
    if kind == "propose":
        if not obs.is_participant:
            return [], "only a participant of the meeting can propose a slot"
        if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < len(costs):
            return [], f"a propose action needs a slot from 0 to {len(costs) - 1}, got {slot!r}"
        facts.proposed = [slot]
        return _send(quick.propose, seat, obs, others, protocols, [slot], initiator=initiator), None
    raise ValueError(f"no short action {kind!r}")


def short_record(kind: str, slot: Any, msgs: Sequence[Message], note: str | None = None) -> dict[str, Any]:
    """What the trace keeps of one short action: the action as the model wrote it and the
    messages the seat sent for it."""
    action: dict[str, Any] = {"type": kind}
    if slot is not None or kind in ("propose", "agree"):
        action["slot"] = slot
    out: dict[str, Any] = {"action": action, "expanded": [m.to_json() for m in msgs]}
    if note:
        out["note"] = note
    return out
