"""IMAP — Incremental MAP (paper App. D.1, SPEC §7).

Per meeting, the initiator (lowest-id participant), at its first CHEAP_TALK turn, sends
one ``cost_request`` DM to every other participant listing *its own* feasible slots
(free, or holding a movable errand that has a free slot to go to).  Each responder
answers once with ``costs``: for every requested slot 0 if free, the errand's shown cost
if the errand can move to a free slot, ``null`` otherwise.  At its next turn (every
responder has had exactly one sweep to answer) the initiator adds its own cost to the
reported ones, picks the slot of least total (ties → lowest slot) and sends ``decision``
to each responder.  In DECISION every participant schedules that slot, moving the errand
there to its lowest free slot.  IMAP never moves prior meetings.

With IMAP on every seat a meeting of ``p`` participants costs exactly ``3(p−1)`` messages
(request, costs, decision per responder) — 2.00 per scheduled participant-meeting for
three participants.

If no slot is feasible for everyone the initiator sends ``fail``; each participant then
submits its own cheapest slot (DECISION must carry exactly one ``schedule``; the round
then fails as a ghost meeting unless the slots happen to match).

Payloads (``protocol: "imap"``):
``cost_request {slots: [int]}`` · ``costs {costs: {"slot": int | null}}`` (string keys, as
in the authors' traces) · ``decision {slot: int}`` · ``fail {}``.

Free-text peers: the initiator reads their English ("free at 3, 5", "I can't do 7", "slot
9 costs 10"), treats slots they never mentioned as possible but expensive, and re-decides
(at most twice a round) when a peer objects to the decision; a question about its costs gets
its ``costs``, a slot proposed after its decision (or a yes to it) an ``answer``.  A
responder answers a free-text availability question with its ``costs`` vector and adopts a
slot a participant announces in English ("let's meet at 7", "confirmed: 7") when it can hold
it.  A ``decision`` from a peer whose ``cost_request`` it never had (a person's quick key
``p``), or for a slot its costs ruled out, is a proposal: answered with an ``answer`` ("Slot 7
works for me." / "I can't do slot 7, but I could do slot 3, 4 or 9 (slot 9 costs 10 for
me)."), taken only if it can hold it and it comes from the participant who leads; the
initiator decides again for a slot proposed to it that every participant can hold, else
repeats its decision to the proposer (docs/protocols.md, "Partners that answer a person").
"""

from __future__ import annotations

from typing import Any

from engine.actions import Message
from engine.observe import Delivered, SeatView, TurnObservation
from personas.base import cheapest_common_slot

from .protocol import ProtocolPersona, Reading, as_int, fmt_slots

UNKNOWN_COST = 1_000  # a slot a free-text peer never mentioned: possible, but a last resort
MAX_REDECISIONS = 2


class IMAPPersona(ProtocolPersona):
    protocol = "imap"
    answer_costs = True  # an answer to a person names what each alternative costs, as costs do

    # -- per round --------------------------------------------------------------------
    def on_round_start(self, view: SeatView) -> None:
        self.rs.extra.update(
            requested=False,
            request_turn=-1,
            my={},  # my own insertion costs at request time
            typed={},  # responder -> {slot: cost | None}
            said_ok={},  # responder -> {slot: cost} from free text (0 when no cost given)
            said_no={},  # responder -> set of slots from free text
            heard=set(),  # responders that said anything at all
            decided=None,
            objection=False,
            redecisions=0,
            answered=set(),  # peers whose cost_request I answered
            asked_by=set(),  # peers that sent me a typed cost_request
        )

    # -- typed messages ------------------------------------------------------------------
    def on_typed(self, msg: Delivered, p: dict[str, Any]) -> list[Message]:
        st = self.rs.extra
        kind = p.get("kind")
        mid = as_int(p.get("meeting_id"))
        if (mid is not None and mid != self.meeting.id) or self.seat not in self.meeting.participants \
                or msg.sender not in self.meeting.participants:
            return []  # e.g. an all-agent groupchat read by a non-participant
        if kind == "cost_request":
            st["asked_by"].add(msg.sender)
            return self._answer_request(msg.sender, p.get("slots"))
        if kind == "costs":
            raw = p.get("costs")
            if isinstance(raw, dict):
                costs: dict[int, int | None] = {}
                for k, v in raw.items():
                    s = as_int(k)
                    if s is not None:
                        costs[s] = as_int(v) if v is not None else None
                st["typed"][msg.sender] = costs
                st["heard"].add(msg.sender)
            return []
        if kind == "decision":
            s = as_int(p.get("slot"))
            if s is None or not 0 <= s < self.num_slots:
                return []
            if self.is_initiator:
                # never an IMAP responder's: a person's proposal (quick key p) or an LLM's
                self.outsiders.add(msg.sender)
                return self._proposed_to_me(msg.sender, s)
            if msg.sender not in st["asked_by"] or msg.sender in self.outsiders or self.cost(s) is None:
                # No cost_request came first, or a slot my costs ruled out: never an IMAP
                # initiator's, but a person's proposal (quick key p) or an LLM's.  Answer it;
                # take it only if I can hold it and it comes from the one who leads the meeting
                # (a participant who does not lead proposes to the initiator, whose decision
                # stands until it decides again: two slots taken at once make a ghost meeting).
                self.outsiders.add(msg.sender)
                if self.cost(s) is not None and msg.sender == min(self.meeting.participants):
                    self.rs.agreed, self.rs.failed = s, False
                return self.answer_offer(msg.sender, [s])
            self.rs.agreed = s
            self.rs.failed = False
            return []
        if kind == "fail" and not self.is_initiator:
            self.rs.failed = True
            self.rs.agreed = None
        return []

    def _proposed_to_me(self, sender: int, slot: int) -> list[Message]:
        """The initiator hears a participant outside the protocol propose ``slot`` (a person's
        quick key p).  Before my decision, it is what that peer can do (the decision answers
        it).  After it: the decided slot is acknowledged; another slot that every participant
        can hold, as far as I know their costs, becomes my new decision, sent to every
        responder (at most :data:`MAX_REDECISIONS` a round); else my decision is sent to that
        peer again, so nobody is left holding a slot the others do not (a ghost meeting)."""
        st = self.rs.extra
        if sender in self.responders:
            st["said_ok"].setdefault(sender, {}).setdefault(slot, 0)  # it can do the slot it proposes
            st["said_no"].setdefault(sender, set()).discard(slot)
            st["heard"].add(sender)
        decided = st["decided"]
        if decided is None or self.rs.failed:
            return []
        if slot == decided:
            return self.answer_offer(sender, [slot])
        everyone = slot in st["my"] and self.cost(slot) is not None and all(
            r == sender or self._responder_cost(r, slot) not in (None, UNKNOWN_COST) for r in self.responders)
        if everyone and st["redecisions"] < MAX_REDECISIONS:
            st["redecisions"] += 1
            st["objection"] = False
            st["decided"] = slot
            self.rs.agreed, self.rs.failed = slot, False
            text = f"Decision for meeting M{self.meeting.id}: slot {slot}. Please schedule it there."
            return [self.msg(to, "decision", text, slot=slot) for to in self.responders]
        text = f"Decision for meeting M{self.meeting.id}: slot {decided}. Please schedule it there."
        return [self.msg(sender, "decision", text, slot=decided)]

    def _answer_request(self, sender: int, slots: Any) -> list[Message]:
        st = self.rs.extra
        if sender in st["answered"]:
            return []
        st["answered"].add(sender)
        if isinstance(slots, list):
            req = sorted({s for s in (as_int(x) for x in slots) if s is not None and 0 <= s < self.num_slots})
        else:
            req = list(range(self.num_slots))
        now = self.costs_now()
        costs = {s: now[s] for s in req}
        return [self.msg(sender, "costs", self._costs_text(costs), costs={str(s): c for s, c in costs.items()})]

    def _costs_text(self, costs: dict[int, int | None]) -> str:
        free = [s for s, c in costs.items() if c == 0]
        parts = [f"Agent {self.seat}'s costs for meeting M{self.meeting.id} — free: {fmt_slots(free)}"]
        for value in sorted({c for c in costs.values() if c}):
            parts.append(f"movable at cost {value}: {fmt_slots(s for s, c in costs.items() if c == value)}")
        bad = [s for s, c in costs.items() if c is None]
        if bad:
            parts.append(f"impossible: {fmt_slots(bad)}")
        return "; ".join(parts) + "."

    # -- free text -------------------------------------------------------------------------
    def on_text(self, msg: Delivered, reading: Reading) -> list[Message]:
        rs = self.rs
        for s in reading.proposed + reading.mentioned:
            rs.peer_slots.append((msg.sender, s, s == reading.decided))
        if self.seat not in self.meeting.participants or msg.sender not in self.meeting.participants:
            return []
        if self.is_initiator:
            self._learn(msg.sender, reading)
            # a question about my slots gets my costs ("what are your costs?"); my decision (or
            # re-decision) answers what a peer says before it; a slot proposed after it, or a yes
            # to it, is answered in words
            if reading.question and not reading.offered and (not reading.asked or len(reading.asked) > 3):
                return self._answer_request(msg.sender, reading.asked or None)
            if self.rs.extra["decided"] is None and not self.rs.failed:
                return []
            if reading.proposed or reading.decided is not None or reading.works or reading.yes or reading.question:
                return self.answer_text(msg, reading)
            return []
        # Responder: a broad availability question gets my cost vector.
        if reading.question and not reading.offered and (not reading.asked or len(reading.asked) > 3):
            return self._answer_request(msg.sender, reading.asked or None)
        return self.answer_text(msg, reading)

    def _learn(self, sender: int, reading: Reading) -> None:
        st = self.rs.extra
        if sender not in self.responders:
            return
        ok = st["said_ok"].setdefault(sender, {})
        no = st["said_no"].setdefault(sender, set())
        if reading.informative:
            st["heard"].add(sender)
        decided = st["decided"]
        for s in reading.fails:
            no.add(s)
            ok.pop(s, None)
        for s in list(reading.works) + reading.proposed:
            if s not in reading.fails:
                ok[s] = reading.costs.get(s, 0)
                no.discard(s)
        if decided is not None and reading.no and not reading.slots:
            no.add(decided)
        if decided is not None and decided in no:
            st["objection"] = True

    # -- CHEAP_TALK turns ------------------------------------------------------------------
    def on_turn(self, obs: TurnObservation) -> list[Message]:
        if not obs.is_participant or not self.is_initiator:
            return []
        st = self.rs.extra
        if not st["requested"]:
            st["requested"] = True
            st["request_turn"] = obs.turn
            my = {s: c for s, c in enumerate(self.costs_now()) if c is not None}
            st["my"] = my
            if not self.responders:
                return self._announce()
            if not my:
                return self._announce()  # nothing is feasible for me: fail
            slots = sorted(my)
            text = f"Agent {self.seat} asks your costs for meeting M{self.meeting.id} at slots {fmt_slots(slots)}."
            return [self.msg(to, "cost_request", text, slots=slots) for to in self.responders]
        if st["decided"] is None and not self.rs.failed:
            if obs.turn > st["request_turn"] or obs.is_last_turn:
                return self._announce()
            return []
        if st["objection"] and st["redecisions"] < MAX_REDECISIONS:
            st["objection"] = False
            st["redecisions"] += 1
            return self._announce()
        return []

    def _responder_cost(self, r: int, s: int) -> int | None:
        st = self.rs.extra
        if s in st["said_no"].get(r, ()):
            return None
        typed = st["typed"].get(r)
        if typed is not None:
            return typed.get(s)
        ok = st["said_ok"].get(r)
        if ok and s in ok:
            return ok[s]
        return UNKNOWN_COST

    def best_slot(self) -> tuple[int, int] | None:
        """(total cost, slot) of least total over my feasible slots, ties → lowest slot."""
        return cheapest_common_slot(self.rs.extra["my"], self.responders, self._responder_cost)

    def _announce(self) -> list[Message]:
        st, rs = self.rs.extra, self.rs
        best = self.best_slot()
        mid = self.meeting.id
        if best is None:
            st["decided"] = None
            rs.agreed = None
            rs.failed = True
            text = f"No common slot found for meeting M{mid}; I cannot schedule it."
            return [self.msg(to, "fail", text) for to in self.responders]
        slot = best[1]
        st["decided"] = slot
        rs.agreed = slot
        rs.failed = False
        text = f"Decision for meeting M{mid}: slot {slot}. Please schedule it there."
        return [self.msg(to, "decision", text, slot=slot) for to in self.responders]
