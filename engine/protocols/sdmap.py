"""SD-MAP, declared (paper App. D.2, SPEC §7): its messages, their evidence and audit, its seat.

The bot is ``personas/scripted/sdmap.py`` (``SDMAPPersona``); docs/protocols.md says how it
plays.  Payloads (``protocol: "sdmap"``; ``meeting_id`` is the meeting the message is about —
the bumped meeting for the five repair kinds): ``propose {slot}`` · ``reply {slot, status}``
· ``confirm {slot}`` · ``fail {}`` · ``reschedule_request {from_slot}`` ·
``propose_reschedule {from_slot, to_slot}`` · ``reschedule_reply {from_slot, to_slot,
status}`` · ``confirm_reschedule {from_slot, to_slot}`` · ``fail_reschedule {from_slot}``.
"""

from __future__ import annotations

from typing import Any

from engine.protocols import ANSWER_KIND, Kind, Protocol, Seat, Typed, int_of, meeting_of, answer_kind, register, slot_of

NAME = "sdmap"
#: a ``reply`` / ``reschedule_reply`` status
PENDING, IMPOSSIBLE = "PENDING", "IMPOSSIBLE"
SD_PROPOSE = (0.85, 0.70)  # evidence, strength for SD propose / propose_reschedule (paper Table 10)


# -- VPS evidence (paper Table 10) --------------------------------------------------------
def _proposed(slot_key: str, source: str):
    def evidence(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
        """A proposed slot is probably feasible for its sender (e = 0.85, α = 0.70)."""
        s = int_of(d.get(slot_key))
        if s is not None:
            for j in readers:
                est.update(r, sender, j, s, SD_PROPOSE[0], SD_PROPOSE[1], "typed", source, seq)
    return evidence


def _status_evidence(d: dict[str, Any]) -> float | None:
    st = d.get("status", d.get("reply_status"))
    if st == PENDING:
        return 1.0
    if st == IMPOSSIBLE:
        return 0.0
    return None


def _replied(slot_key: str, source: str):
    def evidence(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
        """PENDING: the slot is feasible for the sender; IMPOSSIBLE: it is not (α = 1)."""
        s = int_of(d.get(slot_key))
        e = _status_evidence(d)
        if s is not None and e is not None:
            for j in readers:
                est.update(r, sender, j, s, e, 1.0, "typed", source, seq)
    return evidence


def _refused(p: dict[str, Any]) -> set[str]:
    return {"refusal"} if str(p.get("status", "")).upper() == IMPOSSIBLE else set()


# -- what it says in a person's terms (engine/phrasebook.py's clauses) ----------------------
def _pending(p: dict[str, Any]) -> bool:
    return p.get("status", p.get("reply_status")) == PENDING


def _says(verb: str, key: str = "slot"):
    return lambda p: ((verb, slot_of(p, key)),)


def _move(p: dict[str, Any], *keys: str) -> tuple[int, ...]:
    """``(meeting, slot, ...)``: the bumped meeting and the slots of ``keys`` it names."""
    out: tuple[int, ...] = (meeting_of(p),)
    for k in keys:
        out += slot_of(p, k)
    return out


def _confirm_move(p: dict[str, Any]) -> tuple:
    return (("move_confirm", tuple(mv for mv in [_move(p, "from_slot", "to_slot")] if len(mv) == 3)),)


def _give_up(p: dict[str, Any]) -> tuple:
    return (("give_up", True),)


# -- a person's quick actions to an SD-MAP seat -------------------------------------------
def _quick(action: str, *, slots: list[int] = (), slot: int | None = None, initiator: bool = False,
           answering: str | None = None, **_: Any) -> Typed | None:
    if action == "propose" and len(slots) == 1 and initiator:
        return Typed("propose", {"slot": slots[0]}, "ask_one")
    if action == "accept" and answering == "propose":
        return Typed("reply", {"slot": slot, "status": PENDING})
    if action == "accept" and initiator:
        return Typed("confirm", {"slot": slot}, "confirm")
    if action == "decline" and answering == "propose":
        return Typed("reply", {"slot": slot, "status": IMPOSSIBLE})
    return None  # SD-MAP has no cost question: English only


PROTOCOL = register(Protocol(
    name=NAME,
    order=20,
    author_key="sd",
    kinds={
        "propose": Kind(("slot",), audit=("proposal", "question"), evidence=_proposed("slot", "sd_propose"),
                        offers=True, says=_says("propose")),
        "reply": Kind(("slot", "status"), audit=("availability",), audit_rule=_refused,
                      evidence=_replied("slot", "sd_reply"),
                      says=lambda p: (("works" if _pending(p) else "fails", slot_of(p)),)),
        "confirm": Kind(("slot",), audit=("proposal",), offers=True, says=_says("confirm")),
        "fail": Kind((), audit=("refusal",), says=_give_up),
        "reschedule_request": Kind(("from_slot",), audit=("question",),
                                   says=lambda p: (("move_ask", _move(p, "from_slot")),)),
        "propose_reschedule": Kind(("from_slot", "to_slot"), audit=("proposal", "question"),
                                   evidence=_proposed("to_slot", "sd_propose_reschedule"), offers=True,
                                   says=lambda p: (("move_propose", _move(p, "from_slot", "to_slot")),)),
        "reschedule_reply": Kind(("from_slot", "to_slot", "status"), audit=("availability",), audit_rule=_refused,
                                 evidence=_replied("to_slot", "sd_reschedule_reply"),
                                 says=lambda p: (("move_ok" if _pending(p) else "move_no", _move(p, "to_slot")),)),
        "confirm_reschedule": Kind(("from_slot", "to_slot"), audit=("proposal",), says=_confirm_move),
        "fail_reschedule": Kind(("from_slot",), audit=("refusal",),
                                says=lambda p: (("move_fail", (meeting_of(p),)),)),
        ANSWER_KIND: answer_kind(),  # to a peer outside the protocol (docs/protocols.md)
    },
    seats=(Seat(NAME, "personas.scripted.sdmap:SDMAPPersona", aliases=("sd-map", "sd_map", "sd"), short="sd",
                fidelity=True,
                words="proposes one slot at a time; the others answer \"works\" or \"impossible\"; it confirms"),),
    quick=_quick,
    speaks=lambda m: m.split("@", 1)[0] in (NAME, "sd-map", "sd_map"),  # "sdmap@paper": --fidelity paper
    doc="docs/protocols.md",
))
