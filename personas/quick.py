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

from typing import Any, Iterable, Sequence

from engine.actions import Message
from engine.protocol import PROTOCOLS, payload, protocol_of, satisfaction, slots_phrase

__all__ = ["TYPED_PROTOCOLS", "protocol_of", "dsm_score", "ask_costs", "share_costs", "propose", "accept",
           "decline"]

#: Protocols whose typed payloads the quick actions can write (``personas/scripted/*.py``).
TYPED_PROTOCOLS = PROTOCOLS


def dsm_score(cost: int | None) -> int:
    """A DSM satisfaction level for one of my costs (:func:`engine.protocol.satisfaction`)."""
    return satisfaction(cost)


def _send(channel: str, to: Iterable[int] | None, content: str, payload: dict[str, Any] | None) -> list[Message]:
    if channel == "dm":
        return [Message("dm", content, t, payload) for t in (to or [])]
    return [Message(channel, content, None, payload)]


def _payload(protocol: str | None, kind: str | None, meeting_id: int, **fields: Any) -> dict[str, Any] | None:
    """The typed payload (:func:`engine.protocol.payload`), or None (free text only) when the
    recipients speak no protocol we can type for, or the action has no typed form in theirs;
    the bots then read the English, which names every slot."""
    if protocol not in TYPED_PROTOCOLS or kind is None:
        return None
    return payload(protocol, kind, meeting_id, **fields)


def ask_costs(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
              protocol: str | None = "imap", initiator: bool = True) -> list[Message]:
    """Ask the others what each slot would cost them: IMAP ``cost_request {slots}``; DSM
    ``proposals {slots}`` (the responders score each slot) when I open the meeting; English
    otherwise (SD-MAP has no cost question)."""
    slots = sorted(set(slots))
    content = f"Agent {seat} asks your costs for meeting M{meeting_id} at {slots_phrase(slots)}. What are your costs?"
    if protocol == "imap":
        payload = _payload(protocol, "cost_request", meeting_id, slots=slots)
    elif protocol == "dsm" and initiator and slots:
        payload = _payload(protocol, "proposals", meeting_id, slots=slots, L=len(slots), subround=1)
    else:
        payload = None
    return _send(channel, to, content, payload)


def share_costs(seat: int, meeting_id: int, costs: dict[int, int | None], *, channel: str,
                to: Sequence[int], protocol: str | None = "imap") -> list[Message]:
    """My cost per slot (0 free, the errand's cost, None impossible): IMAP ``costs``; DSM
    ``scores`` (a satisfaction level per slot, 0 impossible … 11 free); English for SD-MAP."""
    items = sorted(costs.items())
    free = [s for s, c in items if c == 0]
    parts = [f"My costs for meeting M{meeting_id}: free at {slots_phrase(free)}" if free
             else f"My costs for meeting M{meeting_id}: no free slot"]
    for value in sorted({c for _, c in items if c}):
        parts.append(f"{slots_phrase([s for s, c in items if c == value])} cost {value}")
    bad = [s for s, c in items if c is None]
    if bad:
        parts.append(f"I can't do {slots_phrase(bad)}")
    content = "; ".join(parts) + "."
    if protocol == "imap":
        payload = _payload(protocol, "costs", meeting_id, costs={str(s): c for s, c in items})
    elif protocol == "dsm":
        payload = _payload(protocol, "scores", meeting_id, scores={str(s): dsm_score(c) for s, c in items})
    else:
        payload = None
    return _send(channel, to, content, payload)


def propose(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
            protocol: str | None = "imap", initiator: bool = True) -> list[Message]:
    """Propose a slot or a few.

    One slot: IMAP ``decision {slot}``; SD-MAP ``propose {slot}`` and DSM ``decision {slot}``
    when I open the meeting (its initiator).  Several slots: DSM ``proposals {slots}`` when I
    open the meeting.  Everything else is English only — a responder's counter-proposal,
    which the bots read from the text.
    """
    slots = sorted(set(slots))
    payload = None
    if len(slots) == 1:
        if protocol == "sdmap" and initiator:
            content = f"Agent {seat} proposes slot {slots[0]} for meeting M{meeting_id} — does it work for you?"
            payload = _payload(protocol, "propose", meeting_id, slot=slots[0])
        else:
            content = f"Let's meet at slot {slots[0]} for meeting M{meeting_id}."
            if protocol == "imap" or (protocol == "dsm" and initiator):
                payload = _payload(protocol, "decision", meeting_id, slot=slots[0])
    else:
        content = f"How about {slots_phrase(slots)} for meeting M{meeting_id}? Which works for you?"
        if protocol == "dsm" and initiator and slots:
            payload = _payload(protocol, "proposals", meeting_id, slots=slots, L=len(slots), subround=1)
    return _send(channel, to, content, payload)


def accept(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
           protocol: str | None = "imap", answering: str | None = None, initiator: bool = False,
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
        if protocol == "sdmap" and answering == "propose":
            payload = _payload(protocol, "reply", meeting_id, slot=slot, status="PENDING")
        elif protocol == "sdmap" and initiator:
            content = f"Confirmed: meeting M{meeting_id} at slot {slot}."
            payload = _payload(protocol, "confirm", meeting_id, slot=slot)
        elif protocol == "dsm" and answering == "proposals":
            payload = _payload(protocol, "scores", meeting_id, scores={str(slot): dsm_score(my_cost)})
        elif protocol == "dsm" and initiator:
            content = f"Decision for meeting M{meeting_id}: slot {slot}. Agreed."
            payload = _payload(protocol, "decision", meeting_id, slot=slot)
    return _send(channel, to, content, payload)


def decline(seat: int, meeting_id: int, slot: int | None, *, channel: str, to: Sequence[int],
            protocol: str | None = "imap", answering: str | None = None, initiator: bool = False) -> list[Message]:
    """Say no to ``slot``: SD-MAP ``propose`` → ``reply {slot, status: IMPOSSIBLE}``; DSM
    ``proposals`` → ``scores {slot: 0}``; English only otherwise."""
    where = f"slot {slot}" if slot is not None else "that"
    content = f"No, I can't do {where} for meeting M{meeting_id}."
    payload = None
    if slot is not None:
        if protocol == "sdmap" and answering == "propose":
            payload = _payload(protocol, "reply", meeting_id, slot=slot, status="IMPOSSIBLE")
        elif protocol == "dsm" and answering == "proposals":
            payload = _payload(protocol, "scores", meeting_id, scores={str(slot): 0})
    return _send(channel, to, content, payload)
