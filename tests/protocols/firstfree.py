"""A protocol that exists only in the tests: "first free slot".

It shows what adding a protocol takes — this one module and nothing else.  It declares its
messages (with their VPS evidence, audit categories and what they say in a person's words), its seat and the typed form of a
person's quick actions, and registers itself when it is imported; the engine plays it, the
lab files its games, the VPS estimator and the message audit read its messages, a person's
quick keys speak it, and no file of the product names it.

The rules: the meeting's initiator (its lowest-id participant) offers its first free slot
(``offer {slot}``) to every other participant; each answers ``answer {slot, ok}`` — ok when
it can hold the slot.  At its next turn the initiator keeps the slot when nobody said no
(silence is consent), else offers its next free slot, at most ``MAX_OFFERS`` times.  In
DECISION everyone schedules the agreed slot (the base class's fallback otherwise).
"""

from __future__ import annotations

from typing import Any

from engine.actions import Message
from engine.observe import Delivered, SeatView, TurnObservation
from engine.protocol import as_int
from engine.protocols import Kind, Protocol, Seat, Typed, int_of, register, slot_of
from personas.scripted.protocol import ProtocolPersona

NAME = "firstfree"
SEAT = "first-free"
MAX_OFFERS = 3


class FirstFreePersona(ProtocolPersona):
    protocol = NAME

    def on_round_start(self, view: SeatView) -> None:
        self.rs.extra.update(offered=None, answers={}, tried=[])

    def _next_slot(self) -> int | None:
        costs = self.costs_now()
        tried = self.rs.extra["tried"]
        for want_free in (True, False):
            for s, c in enumerate(costs):
                if s not in tried and c is not None and (c == 0 or not want_free):
                    return s
        return None

    def on_turn(self, obs: TurnObservation) -> list[Message]:
        st, rs = self.rs.extra, self.rs
        if not self.is_initiator or self.seat not in self.meeting.participants:
            return []
        if st["offered"] is not None:
            if all(st["answers"].values()):  # nobody said no (silence is consent)
                rs.agreed = st["offered"]
                return []
            if len(st["tried"]) >= MAX_OFFERS:
                rs.agreed = None
                return []
        slot = self._next_slot()
        if slot is None:
            return []
        st.update(offered=slot, answers={})
        st["tried"].append(slot)
        rs.agreed = slot
        return [self.msg(p, "offer", f"How about slot {slot} for meeting M{self.meeting.id}? It is my first free one.",
                         slot=slot) for p in self.responders]

    def on_typed(self, msg: Delivered, p: dict[str, Any]) -> list[Message]:
        mid = as_int(p.get("meeting_id"))
        slot = as_int(p.get("slot"))
        if mid != self.meeting.id or slot is None or msg.sender not in self.meeting.participants:
            return []
        if p.get("kind") == "offer" and not self.is_initiator:
            ok = self.cost(slot) is not None
            self.rs.agreed = slot if ok else None
            words = (f"Slot {slot} works for me for meeting M{mid}." if ok
                     else f"I can't do slot {slot} for meeting M{mid}.")
            return [self.msg(msg.sender, "answer", words, slot=slot, ok=ok)]
        if p.get("kind") == "answer" and self.is_initiator and slot == self.rs.extra["offered"]:
            self.rs.extra["answers"][msg.sender] = bool(p.get("ok"))
        return []


# -- the declaration ------------------------------------------------------------------------
def _offer_evidence(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """An offered slot is free for its sender."""
    s = int_of(d.get("slot"))
    if s is not None:
        for j in readers:
            est.update(r, sender, j, s, 1.0, 1.0, "typed", f"{NAME}_offer", seq)


def _answer_evidence(est: Any, r: int, sender: int, readers: list[int], d: dict[str, Any], seq: Any) -> None:
    """ok: the slot is feasible for the sender; not ok: it is not."""
    s = int_of(d.get("slot"))
    if s is not None and isinstance(d.get("ok"), bool):
        for j in readers:
            est.update(r, sender, j, s, 1.0 if d["ok"] else 0.0, 1.0, "typed", f"{NAME}_answer", seq)


def _quick(action: str, *, slots: list[int] = (), slot: int | None = None, initiator: bool = False,
           answering: str | None = None, **_: Any) -> Typed | None:
    if action == "propose" and initiator and len(slots) == 1:
        return Typed("offer", {"slot": slots[0]})
    if action in ("accept", "decline") and answering == "offer":
        return Typed("answer", {"slot": slot, "ok": action == "accept"})
    return None


PROTOCOL = register(Protocol(
    name=NAME,
    order=90,
    kinds={
        "offer": Kind(("slot",), audit=("proposal", "question"), evidence=_offer_evidence, offers=True,
                      says=lambda p: (("propose", slot_of(p)),)),
        "answer": Kind(("slot", "ok"), audit=("availability",), evidence=_answer_evidence,
                       audit_rule=lambda p: set() if p.get("ok") else {"refusal"},
                       says=lambda p: (("works" if p.get("ok") else "fails", slot_of(p)),)),
    },
    seats=(Seat(SEAT, FirstFreePersona, aliases=(NAME, "ff"), short="ff",
                words="offers its first free slot; the others say yes or no"),),
    quick=_quick,
))
