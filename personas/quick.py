"""Quick actions: what a human's quick keys send — English a person can read plus the typed
payload each scripted seat understands.

Each builder returns ``engine.actions.Message`` objects for one quick action.  The English
names every slot explicitly (the scripted bots and the free-text estimator both read
"slot N"), and the payload is built by the protocol's owner (``engine/protocol.py``:
``{"protocol", "kind", "meeting_id", ...}``) in the protocol of the recipient: IMAP
(``cost_request``, ``costs``, ``decision``), SD-MAP (``propose``, ``reply``
PENDING/IMPOSSIBLE, ``confirm``), DSM (``proposals``, ``scores``, ``decision``), so a bot
answers a human exactly as it answers another bot of its kind.  An action with no sensible
typed form in the recipient's protocol is English only (the bots read English too).  Costs
shared by a human are computed from the seat's own calendar with the same rule the IMAP
bots use (:func:`personas.base.insertion_costs`): 0 for a free slot, the errand's shown
cost when it can move, "no" otherwise; DSM scores use the protocol's scale
(:func:`engine.protocol.satisfaction`).

This module sits beside the human persona, below the interface: the game screen maps keys
to these builders and shows the result; reading what others said (slots mentioned, cost
requests, proposals) is ``engine.protocol``'s.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from engine import protocols
from engine.actions import Message
from engine.protocol import PROTOCOLS, payload, protocol_of, satisfaction, slots_in_text, slots_phrase

__all__ = ["TYPED_PROTOCOLS", "protocol_of", "dsm_score", "ask_costs", "share_costs", "propose", "accept",
           "decline"]

#: Protocols whose typed payloads the quick actions can write (each declares its ``quick``).
TYPED_PROTOCOLS = PROTOCOLS

#: The English a protocol's typed form may ask for instead of the action's usual sentence
#: (``Typed.wording``): a question with the proposal, a confirmation, a decision.
WORDING = {
    "ask_one": "Agent {seat} proposes slot {slot} for meeting M{meeting_id} — does it work for you?",
    "confirm": "Confirmed: meeting M{meeting_id} at slot {slot}.",
    "decide": "Decision for meeting M{meeting_id}: slot {slot}. Agreed.",
}


#: ``protocol=`` left out: the protocol of the default partner (``engine.protocols.default_seat``).
DEFAULT = "default"


def dsm_score(cost: int | None) -> int:
    """A DSM satisfaction level for one of my costs (:func:`engine.protocol.satisfaction`)."""
    return satisfaction(cost)


def _send(channel: str, to: Iterable[int] | None, content: str, payload: dict[str, Any] | None) -> list[Message]:
    if channel == "dm":
        return [Message("dm", content, t, payload) for t in (to or [])]
    return [Message(channel, content, None, payload)]


def _typed(protocol: str | None, action: str, seat: int, meeting_id: int, content: str,
           **context: Any) -> tuple[str, dict[str, Any] | None]:
    """``(content, payload)``: the typed form the recipients' protocol declares for the action
    (its ``quick``; :func:`engine.protocol.payload`), or None (free text only) when they speak
    no protocol we can type for or the action has no typed form in theirs — the bots then
    read the English, which names every slot."""
    if protocol == DEFAULT:
        protocol = protocols.seat(protocols.default_seat())[1].name
    proto = protocols.get(protocol)
    form = proto.quick(action, **context) if proto is not None and proto.quick is not None else None
    if form is None:
        return content, None
    if form.wording is not None:
        slot = context.get("slot")
        if slot is None and context.get("slots"):
            slot = context["slots"][0]
        content = WORDING[form.wording].format(seat=seat, meeting_id=meeting_id, slot=slot)
    return content, payload(protocol, form.kind, meeting_id, **form.fields)


def ask_costs(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
              protocol: str | None = DEFAULT, initiator: bool = True) -> list[Message]:
    """Ask the others what each slot would cost them: IMAP ``cost_request {slots}``; DSM
    ``proposals {slots}`` (the responders score each slot) when I open the meeting; English
    otherwise (SD-MAP has no cost question)."""
    slots = sorted(set(slots))
    content = f"Agent {seat} asks your costs for meeting M{meeting_id} at {slots_phrase(slots)}. What are your costs?"
    content, payload = _typed(protocol, "ask_costs", seat, meeting_id, content, slots=slots, initiator=initiator)
    return _send(channel, to, content, payload)


def share_costs(seat: int, meeting_id: int, costs: dict[int, int | None], *, channel: str,
                to: Sequence[int], protocol: str | None = DEFAULT) -> list[Message]:
    """My cost per slot (0 free, the errand's cost, None impossible): IMAP ``costs``; DSM
    ``scores`` (a satisfaction level per slot, 0 impossible … 11 free); English for SD-MAP."""
    items = sorted(costs.items())
    free = [s for s, c in items if c == 0]
    parts = [f"My costs for meeting M{meeting_id}: free at {slots_phrase(free)}" if free
             else f"My costs for meeting M{meeting_id}: none of these slots is free"]
    for value in sorted({c for _, c in items if c}):
        parts.append(f"{slots_phrase([s for s, c in items if c == value])} cost {value}")
    bad = [s for s, c in items if c is None]
    if bad:
        parts.append(f"I can't do {slots_phrase(bad)}")
    content = "; ".join(parts) + "."
    content, payload = _typed(protocol, "share_costs", seat, meeting_id, content, costs=items)
    return _send(channel, to, content, payload)


_SHARED_COSTS = re.compile(r"^My costs for meeting M-?\d+: (?:free at (?P<free>[^;]+)|none of these slots is free"
                           r"|no free slot)"  # (the words before 0.3: they read as the whole calendar)
                           r"(?P<rest>(?:; [^;]+)*)\.$")
_COST_PART = re.compile(r"^(?P<slots>slots? [^;]+) cost (?P<cost>\d+)$")


def read_shared_costs(text: str, num_slots: int) -> dict[int, int | None] | None:
    """The costs in :func:`share_costs`'s own sentence when it went as English only (to a seat
    that speaks no protocol we type for: a person, an LLM), ``{slot: cost or None}``; None for
    any other text.  The engine's free-text reader takes "slots 4, 9, 12 and 13 cost 1" as a
    cost for 13 alone, and "free at slot 10 …; I can't do …" as an offer of slots."""
    m = _SHARED_COSTS.match((text or "").strip())
    if m is None:
        return None
    out: dict[int, int | None] = dict.fromkeys(slots_in_text(m["free"] or "", num_slots), 0)
    for part in filter(None, (m["rest"] or "").split("; ")):
        if part.startswith("I can't do "):
            out.update(dict.fromkeys(slots_in_text(part, num_slots)))
            continue
        c = _COST_PART.match(part)
        if c is None:
            return None
        out.update(dict.fromkeys(slots_in_text(c["slots"], num_slots), int(c["cost"])))
    return out


def propose(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
            protocol: str | None = DEFAULT, initiator: bool = True) -> list[Message]:
    """Propose a slot or a few.

    One slot: IMAP ``decision {slot}``; SD-MAP ``propose {slot}`` and DSM ``decision {slot}``
    when I open the meeting (its initiator).  Several slots: DSM ``proposals {slots}`` when I
    open the meeting.  Everything else is English only — a responder's counter-proposal,
    which the bots read from the text.
    """
    slots = sorted(set(slots))
    if len(slots) == 1:
        content = f"Let's meet at slot {slots[0]} for meeting M{meeting_id}."
    else:
        content = f"How about {slots_phrase(slots)} for meeting M{meeting_id}? Which works for you?"
    content, payload = _typed(protocol, "propose", seat, meeting_id, content, slots=slots, initiator=initiator)
    return _send(channel, to, content, payload)


def accept(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
           protocol: str | None = DEFAULT, answering: str | None = None, initiator: bool = False,
           my_cost: int | None = 0) -> list[Message]:
    """Say yes to ``slot``.  Typed when the message being answered has a typed answer:
    SD-MAP ``propose`` → ``reply {slot, status: PENDING}``; SD-MAP ``reply`` to my proposal
    (I open the meeting) → ``confirm {slot}``; DSM ``proposals`` → ``scores {slot: level}``
    (my satisfaction there); DSM ``scores`` to my offer → ``decision {slot}``.  IMAP has no
    typed yes (its decision is final), so that and everything else is English only."""
    where = f"slot {slot}" if slot is not None else "that"
    content = f"Yes, {where} works for me for meeting M{meeting_id}. Agreed."
    payload = None
    if slot is not None:
        content, payload = _typed(protocol, "accept", seat, meeting_id, content, slot=slot, answering=answering,
                                  initiator=initiator, my_cost=my_cost)
    return _send(channel, to, content, payload)


def decline(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
            protocol: str | None = DEFAULT, answering: str | None = None, initiator: bool = False) -> list[Message]:
    """Say no to ``slot``: SD-MAP ``propose`` → ``reply {slot, status: IMPOSSIBLE}``; DSM
    ``proposals`` → ``scores {slot: 0}``; English only otherwise."""
    where = f"slot {slot}" if slot is not None else "that"
    content = f"No, I can't do {where} for meeting M{meeting_id}."
    payload = None
    if slot is not None:
        content, payload = _typed(protocol, "decline", seat, meeting_id, content, slot=slot, answering=answering,
                                  initiator=initiator)
    return _send(channel, to, content, payload)
