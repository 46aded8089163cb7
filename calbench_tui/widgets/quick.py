"""Quick actions: English a person can read plus the typed payload the scripted seats understand.

Each builder returns ``engine.actions.Message`` objects for one quick action.  The English
names every slot explicitly (the scripted bots and the free-text estimator both read
"slot N"), and the payload follows the scripted protocols' conventions
(``personas/scripted/protocol.py``: ``{"protocol", "kind", "meeting_id", ...}``) in the
protocol of the recipient: IMAP (``cost_request``, ``costs``, ``decision``), SD-MAP
(``propose``, ``reply`` PENDING/IMPOSSIBLE, ``confirm``), DSM (``proposals``, ``scores``,
``decision``), so a bot answers a human exactly as it answers another bot of its kind.
An action with no sensible typed form in the recipient's protocol is English only (the
bots read English too).  Costs shared by a human are computed from the seat's
own calendar with the same rule the IMAP bots use (:func:`personas.base.insertion_costs`):
0 for a free slot, the errand's shown cost when it can move, "no" otherwise.

Slot mentions in received messages (payloads first, then "slot N" in the text) feed the
calendar's "being talked about" highlight and the batch builder's suggested slot.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from engine.actions import Message

#: Protocols whose typed payloads the quick actions can write (``personas/scripted/*.py``).
TYPED_PROTOCOLS = ("imap", "sdmap", "dsm")


def protocol_of(model: str | None) -> str | None:
    """The scripted protocol a seat's model speaks (``"imap"``, ``"sdmap"``, ``"dsm"``), or None."""
    m = (model or "").lower().replace("scripted:", "")
    if m == "imap":
        return "imap"
    if m in ("sdmap", "sd-map", "sd_map"):
        return "sdmap"
    if m.startswith("dsm"):
        return "dsm"
    return None


def dsm_score(cost: int | None) -> int:
    """A DSM satisfaction level for one of my costs (``personas.scripted.dsm.satisfaction``)."""
    from personas.scripted.dsm import satisfaction

    return satisfaction(cost)


def _slots_words(slots: Sequence[int]) -> str:
    slots = sorted(set(slots))
    if not slots:
        return "no slot"
    if len(slots) == 1:
        return f"slot {slots[0]}"
    if len(slots) > 2 and slots == list(range(slots[0], slots[-1] + 1)):
        return f"slots {slots[0]}-{slots[-1]}"
    return "slots " + ", ".join(map(str, slots[:-1])) + f" and {slots[-1]}"


def _send(channel: str, to: Iterable[int] | None, content: str, payload: dict[str, Any] | None) -> list[Message]:
    if channel == "dm":
        return [Message("dm", content, t, payload) for t in (to or [])]
    return [Message(channel, content, None, payload)]


def _payload(protocol: str | None, kind: str | None, meeting_id: int, **fields: Any) -> dict[str, Any] | None:
    """The typed payload in the scripted protocols' shape (``personas/scripted/protocol.py``):
    ``{"protocol": ..., "kind": ..., "meeting_id": k, ...}``.  None (free text only) when the
    recipients speak no protocol we can type for, or the action has no typed form in theirs;
    the bots then read the English, which names every slot."""
    if protocol not in TYPED_PROTOCOLS or kind is None:
        return None
    return {"protocol": protocol, "kind": kind, "meeting_id": meeting_id, **fields}


def ask_costs(seat: int, meeting_id: int, slots: Sequence[int], *, channel: str, to: Sequence[int],
              protocol: str | None = "imap", initiator: bool = True) -> list[Message]:
    """Ask the others what each slot would cost them: IMAP ``cost_request {slots}``; DSM
    ``proposals {slots}`` (the responders score each slot) when I open the meeting; English
    otherwise (SD-MAP has no cost question)."""
    slots = sorted(set(slots))
    content = f"Agent {seat} asks your costs for meeting M{meeting_id} at {_slots_words(slots)}. What are your costs?"
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
    parts = [f"My costs for meeting M{meeting_id}: free at {_slots_words(free)}" if free
             else f"My costs for meeting M{meeting_id}: no free slot"]
    for value in sorted({c for _, c in items if c}):
        parts.append(f"{_slots_words([s for s, c in items if c == value])} cost {value}")
    bad = [s for s, c in items if c is None]
    if bad:
        parts.append(f"I can't do {_slots_words(bad)}")
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
        content = f"How about {_slots_words(slots)} for meeting M{meeting_id}? Which works for you?"
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


# -- reading what others said ------------------------------------------------------------------
_SLOT_GROUP = re.compile(r"\bslots?\s+(\d+(?:\s*(?:,|and|or|&|-|–|to)\s*\d+)*)", re.I)
_NUM = re.compile(r"\d+")
_RANGE = re.compile(r"(\d+)\s*(?:-|–|to)\s*(\d+)")


def slots_in_text(text: str, num_slots: int) -> list[int]:
    out: list[int] = []
    for m in _SLOT_GROUP.finditer(text or ""):
        group = m.group(1)
        for a, b in _RANGE.findall(group):
            lo, hi = int(a), int(b)
            if lo <= hi and hi - lo < num_slots:
                out.extend(range(lo, hi + 1))
        for n in _NUM.findall(_RANGE.sub(" ", group)):
            out.append(int(n))
    seen: list[int] = []
    for s in out:
        if 0 <= s < num_slots and s not in seen:
            seen.append(s)
    return seen


def payload_kind(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    k = payload.get("kind") or payload.get("type")
    if k in ("text", "chat", "free_text", "note", "fallback"):
        return None
    return str(k) if k is not None else None


def slots_in_payload(payload: Any, num_slots: int) -> list[int]:
    if not isinstance(payload, dict):
        return []
    out: list[int] = []
    for key in ("slot", "proposed_slot", "confirmed_slot"):
        v = payload.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
    for key in ("slots", "offer", "offers", "proposed_slots"):
        v = payload.get(key)
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, int) and not isinstance(x, bool))
        elif isinstance(v, dict):
            out.extend(int(x) for x in v if str(x).lstrip("-").isdigit())
    for key in ("costs", "scores"):
        v = payload.get(key)
        if isinstance(v, dict):
            out.extend(int(x) for x, c in v.items() if str(x).lstrip("-").isdigit() and c is not None)
        elif isinstance(v, list):
            out.extend(i for i, c in enumerate(v) if c is not None)
    return [s for s in dict.fromkeys(out) if 0 <= s < num_slots]


def costs_in_payload(payload: Any) -> dict[int, int | None] | None:
    """A typed ``costs`` payload (IMAP) as ``{slot: cost or None}``, or a DSM ``scores``
    payload read back as costs (score 0 → None, else the largest cost its band stands for,
    ``personas.scripted.dsm.band_cost``); None for anything else."""
    kind = payload_kind(payload)
    if kind == "scores" and isinstance(payload.get("scores"), dict):
        from personas.scripted.dsm import band_cost

        out_s: dict[int, int | None] = {}
        for k, v in payload["scores"].items():
            try:
                s, v = int(k), int(v)
            except (TypeError, ValueError):
                continue
            out_s[s] = band_cost(v) if v > 0 else None
        return out_s
    if kind != "costs" or not isinstance(payload.get("costs"), dict):
        return None
    out: dict[int, int | None] = {}
    for k, v in payload["costs"].items():
        try:
            s = int(k)
        except (TypeError, ValueError):
            continue
        out[s] = v if isinstance(v, int) and not isinstance(v, bool) else None
    return out


def mentioned_slots(event: dict, num_slots: int) -> list[int]:
    """Slots a (projected) message event talks about: its payload's, else its text's."""
    return slots_in_payload(event.get("payload"), num_slots) or slots_in_text(event.get("content") or "", num_slots)


def is_request_for_costs(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in ("cost_request", "request_costs", "ask_costs", "proposals")
    text = (event.get("content") or "").lower()
    return "cost" in text and ("?" in text or "ask" in text or "what" in text)


def is_proposal(event: dict) -> bool:
    kind = payload_kind(event.get("payload"))
    if kind:
        return kind in ("decision", "propose", "proposal", "proposals", "offer", "confirm", "propose_reschedule")
    text = (event.get("content") or "").lower()
    return any(w in text for w in ("propose", "let's meet", "how about", "meet at", "suggest"))
