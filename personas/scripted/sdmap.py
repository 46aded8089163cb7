"""SD-MAP — scheduling-difficulty MAP (paper App. D.2, SPEC §7).  Binary feasibility only.

Meeting negotiation
    The initiator (lowest-id participant) walks its *local calendar order* — slot index
    order, 0 upwards — over the slots it can hold: free, a movable errand with a free slot
    to go to, or a prior meeting it may bump.  For each it sends ``propose {slot}`` to every
    responder; each answers ``reply {slot, status: PENDING | IMPOSSIBLE}`` (the same local
    test).  At its next turn (every responder has had one sweep; a peer that stayed silent
    counts as PENDING) the initiator sends ``confirm {slot}`` when every reply is PENDING,
    else proposes the next slot; when none is left it sends ``fail {}``.  In DECISION every
    participant schedules the confirmed slot.

Bumping (unit difficulty)
    A slot holding a prior meeting ``M_old`` counts as available iff ``M_old`` has strictly
    fewer *other* participants than the incoming meeting (σ = 1 for every agent, so the
    rule compares participant counts).  With the canonical three-participant meetings this
    never triggers.  A bumper moves its copy of ``M_old`` out of the slot in DECISION.

Bump repair (``reschedule_request`` → ``propose_reschedule`` → ``reschedule_reply`` →
``confirm_reschedule`` / ``fail_reschedule``)
    The bumper asks ``M_old``'s initiator (its lowest-id participant) to repair it; that
    initiator proposes repair slots in its local order (a slot free on its calendar, or the
    one its own copy already holds) to the other ``M_old`` participants, who answer PENDING
    when the slot is free for them (or already holds their copy).  Agreed moves are applied
    by the round's participants in their DECISION batch and by everyone else in VOLUNTARY
    (the engine gives a VOLUNTARY phase to non-participants that received a DM).  When no
    slot works, ``fail_reschedule``: every copy stays where it is.

    ``repair="next_round"`` (the default, SPEC §7 / paper D.2): the bump takes effect in
    DECISION (the bumper parks its ``M_old`` copy on its lowest free slot, so ``M_old`` is
    broken at RESOLUTION) and the repair runs in the CHEAP_TALK of a later round — the
    first one in which the bumper (or ``M_old``'s initiator, when it is the bumper) gets a
    turn.  The engine only gives CHEAP_TALK turns to the round's participants and to seats
    that receive a DM, so a bumper that sits in no later meeting cannot start the repair,
    and a bump in the last round is never repaired; ``M_old`` then stays broken.
    ``repair="same_round"`` (what the authors' harness does): the repair starts as soon as
    the new meeting is confirmed, in the same CHEAP_TALK, and the bumper moves its copy
    straight to the agreed repair slot in DECISION; nothing is ever left broken unless the
    repair fails (or the DECISION batch is rolled back after the VOLUNTARY moves).

Payloads (``protocol: "sdmap"``; ``meeting_id`` is the meeting the message is about —
the bumped meeting for the five repair kinds): ``propose {slot}`` · ``reply {slot,
status}`` · ``confirm {slot}`` · ``fail {}`` · ``reschedule_request {from_slot}`` ·
``propose_reschedule {from_slot, to_slot}`` · ``reschedule_reply {from_slot, to_slot,
status}`` · ``confirm_reschedule {from_slot, to_slot}`` · ``fail_reschedule {from_slot}``.

Peers outside the protocol (a person, an LLM): a slot they offer in words gets an ``answer``
(the alternatives: the next slots it can hold in its local order, no costs — binary
feasibility); a person who leads and settles on another slot replaces the PENDING one; a
``propose`` after a ``confirm`` reopens the meeting; an initiator that hears a late "no" to
its confirmed slot walks on.  None of this fires between SD-MAP seats (docs/protocols.md,
"Partners that answer a person").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.actions import Message, Reschedule, Schedule
from engine.model import Errand, MeetingCopy
from engine.observe import DecisionObservation, Delivered, SeatView, TurnObservation, VoluntaryObservation
from engine.protocol import IMPOSSIBLE, PENDING
from engine.seats import Reply

from personas.base import lowest_free, slot_of_meeting

from .protocol import FIDELITIES, ProtocolPersona, Reading, as_int

# PENDING, IMPOSSIBLE: the reply statuses, from engine.protocol
REPAIR_MODES = ("next_round", "same_round")


class SDMAPPersona(ProtocolPersona):
    protocol = "sdmap"

    def __init__(self, repair: str = "next_round", sd_model: dict[int, float] | None = None, *,
                 fidelity: str = "ours") -> None:
        super().__init__()
        if repair not in REPAIR_MODES:
            raise ValueError(f"repair must be one of {', '.join(REPAIR_MODES)}, not {repair!r}")
        if fidelity not in FIDELITIES:
            raise ValueError(f"unknown fidelity {fidelity!r}; choose one of {', '.join(FIDELITIES)}")
        self.repair = repair
        #: "paper": the authors' client when the sweep budget binds (docs/protocols.md, "SD-MAP,
        #: --fidelity paper"): DECISION acts on what was read at turns only; messages left unread
        #: when talk ends are read at this seat's next turn, in a later round.
        self.fidelity = fidelity
        self.unread: list[Delivered] = []  # paper: delivered after my last turn of a round
        self.lingering: dict[int, set[int]] = {}  # paper: meeting -> slots I still hold PENDING for it
        self.sd_model = dict(sd_model or {})  # agent -> difficulty σ (default 1.0)
        self.turn = 0
        self.known: dict[int, tuple[int, ...]] = {}  # meeting id -> participants
        self.bumps: dict[int, dict[str, Any]] = {}  # next_round: old id -> {from, by, requested}
        self.repairs: dict[int, dict[str, Any]] = {}  # I am the bumped meeting's initiator
        self.moves: dict[int, int] = {}  # old id -> agreed repair slot for my copy
        self.max_turns = 0
        self._speaking = False  # inside speak(): a reply I send now reaches the initiator in time

    @property
    def model(self) -> str:
        return self.protocol if self.fidelity == "ours" else f"{self.protocol}@{self.fidelity}"

    @property
    def paper(self) -> bool:
        return self.fidelity == "paper"

    async def register(self, briefing) -> str | None:
        self.unread, self.lingering = [], {}
        return await super().register(briefing)

    # -- difficulty rule --------------------------------------------------------------------
    def difficulty(self, participants) -> float:
        return sum(self.sd_model.get(a, 1.0) for a in participants if a != self.seat)

    def may_bump(self, old_id: int) -> bool:
        parts = self.known.get(old_id)
        if parts is None:
            return False
        return self.difficulty(parts) < self.difficulty(self.meeting.participants)

    # -- per round -----------------------------------------------------------------------------
    def on_round_start(self, view: SeatView) -> None:
        self.known.update(view.prior_meetings)
        self.known[self.meeting.id] = tuple(self.meeting.participants)
        cal = view.calendar
        # Agreed repair moves that are now in place (or impossible) are done.
        for old, to in list(self.moves.items()):
            if slot_of_meeting(cal, old) in (to, None):
                del self.moves[old]
        # A bump whose DECISION batch was rolled back never happened.
        for old, b in list(self.bumps.items()):
            if slot_of_meeting(cal, old) in (b["from"], None):
                del self.bumps[old]
        self.repairs.clear()
        self.rs.extra.update(state="idle", tried=set(), active=None, replies={}, propose_turn=-1,
                             priority=[], pending=None, pending_turn=None, held={})
        self.rs.reserved.update(self.moves.values())

    # -- local availability ----------------------------------------------------------------------
    def meeting_slots(self) -> set[int]:
        st = self.rs.extra
        out = {s for s in (st.get("active"), st.get("pending"), self.rs.agreed) if s is not None}
        return out

    def local_status(self, slot: int) -> str | None:
        """"ok", "bump" (available by bumping a prior meeting) or None (impossible)."""
        cal = self.view.calendar
        rs = self.rs
        if not 0 <= slot < len(cal) or slot in rs.reserved:
            return None
        if self.paper and self._held(slot):
            return None
        it = cal[slot]
        if it is None:
            return "ok"
        spare = lowest_free(cal, rs.reserved | {slot}) is not None
        if isinstance(it, Errand):
            return "ok" if (not it.blocked and spare) else None
        if isinstance(it, MeetingCopy) and spare and self.may_bump(it.meeting_id):
            return "bump"
        return None

    # -- typed messages ---------------------------------------------------------------------------
    def on_typed(self, msg: Delivered, p: dict[str, Any]) -> list[Message]:
        kind = p.get("kind")
        mid = as_int(p.get("meeting_id"))
        st = self.rs.extra
        cur = self.meeting.id
        if mid == cur and (self.seat not in self.meeting.participants or msg.sender not in self.meeting.participants):
            return []  # e.g. an all-agent groupchat read by a non-participant
        if self.paper and mid is not None and mid != cur and kind in ("propose", "confirm", "fail"):
            return self._late(msg, kind, mid, p)
        if kind == "propose" and mid == cur:
            if st["state"] == "confirmed" and self.rs.agreed is not None and not self.is_initiator:
                # a new proposal after a confirm (only a person or an LLM leading does that,
                # after a partner said no): the confirmed slot is off
                self.rs.agreed = None
                st["state"] = "idle"
            slot = as_int(p.get("slot"))
            ok = slot is not None and self.local_status(slot) is not None
            st["pending"] = slot if ok else None
            st["pending_turn"] = self.turn if (ok and self._speaking) else None
            if ok:
                self.rs.told_ok.setdefault(msg.sender, set()).add(slot)  # a yes to it is acknowledged
            if ok and self.paper:
                self.lingering.setdefault(cur, set()).add(slot)
            status = PENDING if ok else IMPOSSIBLE
            text = (f"Slot {slot} works for me for meeting M{cur} (PENDING)." if ok
                    else f"Slot {slot} is impossible for me for meeting M{cur}.")
            return [self.msg(msg.sender, "reply", text, slot=slot, status=status)]
        if kind == "reply" and mid == cur and self.is_initiator:
            slot = as_int(p.get("slot"))
            if slot == st["active"] and msg.sender in self.responders:
                st["replies"][msg.sender] = PENDING if p.get("status", p.get("reply_status")) == PENDING else IMPOSSIBLE
            return []
        if kind == "confirm" and mid == cur and not self.is_initiator:
            slot = as_int(p.get("slot"))
            if slot is not None and 0 <= slot < self.num_slots:
                self.rs.agreed = slot
                self.rs.failed = False
                st["state"] = "confirmed"
                self.lingering.pop(cur, None)
                return self._after_confirm(slot)
            return []
        if kind == "fail" and mid == cur and not self.is_initiator:
            self.lingering.pop(cur, None)
            self.rs.failed = True
            st["state"] = "failed"
            return []
        if mid is None:
            return []
        if kind == "reschedule_request":
            return self._start_repair(mid, as_int(p.get("from_slot")))
        if kind == "propose_reschedule":
            return self._answer_repair(msg.sender, mid, as_int(p.get("from_slot")), as_int(p.get("to_slot")))
        if kind == "reschedule_reply":
            rep = self.repairs.get(mid)
            if rep and rep["state"] == "waiting" and as_int(p.get("to_slot")) == rep["active"] \
                    and msg.sender in rep["expected"]:
                rep["replies"][msg.sender] = PENDING if p.get("status", p.get("reply_status")) == PENDING else IMPOSSIBLE
            return []
        if kind == "confirm_reschedule":
            to = as_int(p.get("to_slot"))
            if to is not None and slot_of_meeting(self.view.calendar, mid) is not None:
                self.moves[mid] = to
                self.rs.reserved.add(to)
            return []
        if kind == "fail_reschedule":
            self._release(mid)
            return []
        return []

    # -- paper fidelity: PENDING slots that outlive a round, messages read late -------------------------
    def _held(self, slot: int) -> bool:
        """Paper: ``slot`` is PENDING for some meeting on my side — a reply or a proposal of mine
        that no ``confirm`` or ``fail`` ever settled, in this round or an earlier one."""
        return any(slot in slots for slots in self.lingering.values())

    def _late(self, msg: Delivered, kind: str, mid: int, p: dict[str, Any]) -> list[Message]:
        """Paper: a message about an earlier round's meeting, read at my first turn after it (it
        reached me after my last turn of that round), handled as the authors' client does: a
        ``propose`` is answered (and a slot I accept stays PENDING for that meeting); a
        ``confirm`` settles that meeting *and* becomes the slot I schedule this round's meeting
        at unless a confirm of this round's meeting replaces it; a ``fail`` settles that meeting."""
        slot = as_int(p.get("slot"))
        if kind == "fail":
            self.lingering.pop(mid, None)
            return []
        if kind == "confirm":
            self.lingering.pop(mid, None)
            if slot is not None and 0 <= slot < self.num_slots:
                self.rs.agreed = slot
            return []
        cal = self.view.calendar
        ok = slot is not None and 0 <= slot < len(cal) and not self._held(slot) and slot not in self.rs.reserved
        if ok:
            it = cal[slot]  # theirs would also bump a meeting with fewer participants: never on their tasks
            ok = it is None or (isinstance(it, Errand) and not it.blocked)
        if ok:
            self.lingering.setdefault(mid, set()).add(slot)
        text = (f"Slot {slot} works for me for meeting M{mid} (PENDING)." if ok
                else f"Slot {slot} is impossible for me for meeting M{mid}.")
        return [self.msg(msg.sender, "reply", text, meeting_id=mid, slot=slot, status=PENDING if ok else IMPOSSIBLE)]

    def _stash_unread(self, round_messages: tuple[Delivered, ...]) -> None:
        """Paper: what reached me after my last turn stays unread until my next turn."""
        rs = self.rs
        self.unread.extend(round_messages[rs.seen:])
        rs.seen = len(round_messages)

    def _paper_batch(self, cal, meeting_id: int, slot: int, moves: list) -> list | None:
        """The authors' batch for ``slot``: a free slot is taken; a movable errand there goes to
        my lowest other free slot; a meeting copy there moves only by an agreed move."""
        it = cal[slot]
        if it is None:
            return [Schedule(meeting_id, slot)]
        if isinstance(it, Errand) and not it.blocked:
            dest = next((s for s in range(len(cal)) if s != slot and cal[s] is None), None)
            if dest is None:
                return None
            return [Reschedule(it.errand_id, slot, dest, f"make room at slot {slot}"), Schedule(meeting_id, slot)]
        if isinstance(it, MeetingCopy):
            move = next(((m, f, t) for m, f, t in moves if f == slot and m == it.meeting_id), None)
            if move is not None and cal[move[2]] is None:
                return [Reschedule(move[0], slot, move[2], "agreed move of a bumped meeting"),
                        Schedule(meeting_id, slot)]
        return None

    def _paper_decide(self, obs: DecisionObservation) -> Reply:
        """Paper, in DECISION: the slot confirmed to me at a turn; with none (or one I cannot
        take) an empty batch, which the engine rejects; retry k then takes the k-th slot, in
        slot order, that is free or holds a movable errand while another slot is free, and that
        I do not hold PENDING for any meeting (never the 0th: theirs counts retries from 1)."""
        cal = obs.view.calendar
        mid = obs.meeting.id
        if obs.attempt == 0:
            slot = self.rs.agreed
            if slot is None:
                return Reply(text=f"No slot was confirmed to me for meeting M{mid}; I abstain.")
            batch = self._paper_batch(cal, mid, slot, self._agreed_moves(cal, exclude_to={slot}))
            if batch is None:
                return Reply(text=f"I cannot take slot {slot} for meeting M{mid}.")
            return Reply(actions=tuple(batch))
        free = [s for s, it in enumerate(cal) if it is None]
        usable = [s for s, it in enumerate(cal) if not self._held(s) and (
            it is None or (isinstance(it, Errand) and not it.blocked and any(f != s for f in free)))]
        if obs.attempt >= len(usable):
            return Reply(text=f"I have no usable slot left for meeting M{mid}.")
        return Reply(actions=tuple(self._paper_batch(cal, mid, usable[obs.attempt], [])))

    def alternatives(self, exclude: set[int]) -> list[int]:
        """Binary feasibility, in my local order (slot index), as I would propose them."""
        out = [s for s in range(self.num_slots) if s not in exclude and self.local_status(s) == "ok"]
        return out[: self.answer_alternatives]

    # -- free text ---------------------------------------------------------------------------------
    def on_text(self, msg: Delivered, reading: Reading) -> list[Message]:
        st = self.rs.extra
        if self.is_initiator and msg.sender in self.responders:
            for s in reading.proposed + reading.mentioned:
                self.rs.peer_slots.append((msg.sender, s, s == reading.decided))
            active = st["active"]
            if st["state"] == "confirmed" and active is not None and (
                    active in reading.fails or (reading.no and not reading.slots)):
                # a partner says no to the confirmed slot after all (a person who missed the turn
                # in which it was proposed): walk on, as for an IMPOSSIBLE reply
                st["state"] = "waiting"
                st["replies"][msg.sender] = IMPOSSIBLE
                st["propose_turn"] = -1
                self.rs.agreed = None
            if st["state"] == "waiting" and active is not None:
                if active in reading.fails or (reading.no and not reading.slots):
                    st["replies"][msg.sender] = IMPOSSIBLE
                elif active in reading.works or reading.yes or reading.decided == active:
                    st["replies"][msg.sender] = PENDING
                elif reading.proposed or reading.works:
                    st["replies"][msg.sender] = IMPOSSIBLE
            for s in reading.proposed + sorted(reading.works):
                if s not in st["tried"] and s not in st["priority"] and s not in reading.fails:
                    st["priority"].append(s)
            if reading.question and not reading.offered:
                return self.answer_text(msg, reading)  # "which slots work for you?": my next proposals answer the rest
            return []
        if not self.is_initiator and msg.sender == min(self.meeting.participants) \
                and (self.rs.agreed is None or self.rs.extra.get("by_words")):
            self._initiator_words(reading)
        return super().on_text(msg, reading)

    def adopt(self, slot: int) -> None:
        super().adopt(slot)
        st = self.rs.extra
        st["state"], st["by_words"] = "confirmed", True
        if st["pending"] != slot:
            st["pending"] = st["pending_turn"] = None

    def _initiator_words(self, reading: Reading) -> None:
        """The initiator answered my PENDING in words, not with a typed ``confirm`` (a human
        or an LLM): "ok" / "yes" / "confirmed" / "slot 7 works" confirms the slot I hold;
        "no" drops it.  A slot it *announces* ("decision: slot 9") is the base's business
        (the latest slot a peer decided comes first in DECISION), so it also undoes a
        confirmation I took from words before."""
        st = self.rs.extra
        pending = st["pending"]
        if reading.decided is not None and reading.decided != pending:
            if st.get("by_words"):
                st["by_words"] = False
                self.rs.agreed = None
            if pending is not None and self.local_status(reading.decided) is not None:
                # the initiator settled on another slot that I can hold: it replaces my pending one
                st["pending"] = st["pending_turn"] = None
            return
        if pending is None:
            return
        if reading.decided == pending or pending in reading.works or (reading.yes and not reading.slots):
            self.rs.agreed = pending
            self.rs.failed = False
            st["state"] = "confirmed"
            st["by_words"] = True
        elif pending in reading.fails or (reading.no and not reading.slots):
            st["pending"] = st["pending_turn"] = None

    def candidates(self, obs: DecisionObservation) -> list[int]:
        """A responder still holding a PENDING slot, with no ``confirm`` and no ``fail``
        although the initiator had a turn after my reply, takes the silence as consent (the
        initiator's own rule for silent responders): the pending slot comes first.  Between
        SD-MAP seats this never happens — an SD-MAP initiator always answers the next turn."""
        out = super().candidates(obs)
        st = self.rs.extra
        pending, turn = st.get("pending"), st.get("pending_turn")
        if (self.rs.agreed is None and not self.rs.failed and not self.is_initiator and pending is not None
                and turn is not None and turn + 1 < self.max_turns and self.local_status(pending) is not None):
            out = [pending] + [s for s in out if s != pending]
        return out

    # -- CHEAP_TALK ----------------------------------------------------------------------------------
    async def speak(self, obs: TurnObservation):
        self.turn = obs.turn
        self.max_turns = obs.max_turns
        self._speaking = True
        try:
            late: list[Message] = []
            if self.unread:  # paper: read first what reached me after my last turn of a past round
                self._enter(obs.round, obs.meeting, obs.view)
                unread, self.unread = self.unread, []
                for msg in unread:
                    late.extend(self._handle(msg))
            reply = await super().speak(obs)
            if late:
                reply = replace(reply, actions=self._fit_channels(late, obs.view.channels) + reply.actions)
            return reply
        finally:
            self._speaking = False

    async def volunteer(self, obs: VoluntaryObservation) -> Reply:
        if not self.paper:
            return await super().volunteer(obs)
        self._enter(obs.round, obs.meeting, obs.view)
        self._stash_unread(obs.round_messages)
        return Reply(actions=tuple(self.on_volunteer(obs)))

    async def decide(self, obs: DecisionObservation) -> Reply:
        if not self.paper:
            return await super().decide(obs)
        self._enter(obs.round, obs.meeting, obs.view)
        self._stash_unread(obs.round_messages)
        return self._paper_decide(obs)

    def on_turn(self, obs: TurnObservation) -> list[Message]:
        out: list[Message] = []
        if self.repair == "next_round":
            out.extend(self._request_repairs())
        st = self.rs.extra
        if obs.is_participant and self.is_initiator:
            if st["state"] == "idle":
                out.extend(self._propose_next())
            elif st["state"] == "waiting" and obs.turn > st["propose_turn"]:
                if self.paper and any(r not in st["replies"] for r in self.responders):
                    pass  # theirs waits for every reply (a reply read late arrives at a later turn)
                elif all(st["replies"].get(r, PENDING) == PENDING for r in self.responders):
                    out.extend(self._confirm())
                else:
                    out.extend(self._propose_next())
        out.extend(self._repair_progress())
        return out

    def _propose_next(self) -> list[Message]:
        st = self.rs.extra
        order = [s for s in st["priority"] if 0 <= s < self.num_slots] + list(range(self.num_slots))
        slot = next((s for s in order if s not in st["tried"] and self.local_status(s)), None)
        mid = self.meeting.id
        if self.paper:  # a new proposal (or the fail) settles my PENDING slots for this meeting
            self.lingering.pop(mid, None)
            if slot is not None:
                self.lingering[mid] = {slot}
        if slot is None:
            st["state"] = "failed"
            st["active"] = None
            self.rs.failed = True
            text = f"No slot worked for meeting M{mid}; the meeting fails this round."
            return [self.msg(to, "fail", text) for to in self.responders]
        st["tried"].add(slot)
        st["active"] = slot
        st["replies"] = {}
        st["propose_turn"] = self.turn
        if not self.responders:
            return self._confirm()
        st["state"] = "waiting"
        text = f"Agent {self.seat} proposes slot {slot} for meeting M{mid} — does it work for you?"
        return [self.msg(to, "propose", text, slot=slot) for to in self.responders]

    def _confirm(self) -> list[Message]:
        st = self.rs.extra
        slot = st["active"]
        st["state"] = "confirmed"
        self.rs.agreed = slot
        self.lingering.pop(self.meeting.id, None)
        text = f"Confirmed: meeting M{self.meeting.id} at slot {slot}."
        out = [self.msg(to, "confirm", text, slot=slot) for to in self.responders]
        return out + self._after_confirm(slot)

    def _after_confirm(self, slot: int) -> list[Message]:
        """A confirmed slot holding a prior meeting on my calendar is a bump."""
        it = self.view.calendar[slot]
        if not isinstance(it, MeetingCopy) or self.repair != "same_round":
            return []
        return self._bump_request(it.meeting_id, slot)

    def _bump_request(self, old: int, from_slot: int, by: int | None = None) -> list[Message]:
        parts = self.known.get(old, ())
        if not parts:
            return []
        i_old = min(parts)
        if i_old == self.seat:
            return self._start_repair(old, from_slot)
        by = self.meeting.id if by is None else by
        text = (f"Meeting M{old} had to leave slot {from_slot} on my calendar for meeting M{by}; "
                f"please find it a new slot.")
        return [self.msg(i_old, "reschedule_request", text, meeting_id=old, from_slot=from_slot)]

    def _request_repairs(self) -> list[Message]:
        out: list[Message] = []
        for old in sorted(self.bumps):
            b = self.bumps[old]
            if not b["requested"]:
                b["requested"] = True
                out.extend(self._bump_request(old, b["from"], b.get("by")))
        return out

    # -- bump repair (I am the bumped meeting's initiator) --------------------------------------------
    def _start_repair(self, old: int, from_slot: int | None) -> list[Message]:
        parts = self.known.get(old)
        if from_slot is None or not parts or min(parts) != self.seat or old in self.repairs:
            return []
        if slot_of_meeting(self.view.calendar, old) is None:
            return []
        self.repairs[old] = {"from": from_slot, "tried": set(), "active": None, "replies": {},
                             "expected": sorted(p for p in parts if p != self.seat), "state": "proposing",
                             "turn": -1}
        return self._repair_propose(old)

    def _repair_candidates(self, rep: dict[str, Any], old: int) -> list[int]:
        cal = self.view.calendar
        mine = slot_of_meeting(cal, old)
        busy = self.meeting_slots() | (self.rs.reserved - {self.moves.get(old)})
        out = []
        for t in range(self.num_slots):
            if t == rep["from"] or t in rep["tried"] or t in busy:
                continue
            if cal[t] is None or (t == mine and mine != rep["from"]):
                out.append(t)
        return out

    def _repair_propose(self, old: int) -> list[Message]:
        rep = self.repairs[old]
        cands = self._repair_candidates(rep, old)
        if not cands:
            rep["state"] = "failed"
            text = f"No new slot found for meeting M{old}; it stays where it is."
            return [self.msg(to, "fail_reschedule", text, meeting_id=old, from_slot=rep["from"]) for to in rep["expected"]]
        t = cands[0]
        rep["tried"].add(t)
        rep["active"] = t
        rep["replies"] = {}
        rep["turn"] = self.turn
        if not rep["expected"]:
            return self._repair_confirm(old)
        rep["state"] = "waiting"
        text = (f"Agent {self.seat} proposes moving meeting M{old} from slot {rep['from']} to slot {t} — "
                f"does slot {t} work for you?")
        return [self.msg(to, "propose_reschedule", text, meeting_id=old, from_slot=rep["from"], to_slot=t)
                for to in rep["expected"]]

    def _repair_confirm(self, old: int) -> list[Message]:
        rep = self.repairs[old]
        rep["state"] = "confirmed"
        t = rep["active"]
        self.moves[old] = t
        self.rs.reserved.add(t)
        text = f"Confirmed: meeting M{old} moves from slot {rep['from']} to slot {t}."
        return [self.msg(to, "confirm_reschedule", text, meeting_id=old, from_slot=rep["from"], to_slot=t)
                for to in rep["expected"]]

    def _repair_progress(self) -> list[Message]:
        out: list[Message] = []
        for old in sorted(self.repairs):
            rep = self.repairs[old]
            if rep["state"] == "waiting" and self.turn > rep["turn"]:
                if all(rep["replies"].get(p, PENDING) == PENDING for p in rep["expected"]):
                    out.extend(self._repair_confirm(old))
                else:
                    out.extend(self._repair_propose(old))
        return out

    def _answer_repair(self, sender: int, old: int, from_slot: int | None, to: int | None) -> list[Message]:
        parts = self.known.get(old)
        if not parts or sender != min(parts) or to is None:
            return []
        cal = self.view.calendar
        mine = slot_of_meeting(cal, old)
        self._release(old)
        ok = (mine is not None and 0 <= to < self.num_slots and to not in self.meeting_slots()
              and to not in self.rs.reserved and (cal[to] is None or to == mine))
        if ok:
            self.rs.reserved.add(to)
            self.rs.extra["held"][old] = to
        text = (f"Moving meeting M{old} to slot {to} works for me (PENDING)." if ok
                else f"Moving meeting M{old} to slot {to} is impossible for me.")
        return [self.msg(sender, "reschedule_reply", text, meeting_id=old, from_slot=from_slot, to_slot=to,
                         status=PENDING if ok else IMPOSSIBLE)]

    def _release(self, old: int) -> None:
        """Free the slot I held for a repair proposal that did not go through."""
        held = self.rs.extra["held"].pop(old, None)
        if held is not None and held not in self.moves.values():
            self.rs.reserved.discard(held)

    # -- VOLUNTARY and DECISION -------------------------------------------------------------------------
    def _agreed_moves(self, cal, exclude_to=()) -> list[tuple[int, int, int]]:
        out = []
        for old in sorted(self.moves):
            to = self.moves[old]
            frm = slot_of_meeting(cal, old)
            if frm is not None and frm != to and to not in exclude_to:
                out.append((old, frm, to))
        return out

    def on_volunteer(self, obs: VoluntaryObservation) -> list:
        cal = obs.view.calendar
        acts = []
        for old, frm, to in self._agreed_moves(cal):
            if cal[to] is None:
                acts.append(Reschedule(old, frm, to, "agreed repair of a bumped meeting"))
        return acts

    def decision_moves(self, obs: DecisionObservation, slot: int) -> list[tuple[int, int, int]]:
        cal = obs.view.calendar
        moves = self._agreed_moves(cal, exclude_to={slot})
        it = cal[slot]
        if isinstance(it, MeetingCopy) and not any(m[1] == slot for m in moves):
            # A bump with no agreed repair slot: park my copy on my lowest free slot.
            dest = lowest_free(cal, self.rs.reserved | {m[2] for m in moves} | {slot})
            if dest is not None:
                moves.append((it.meeting_id, slot, dest))
                if self.repair == "next_round" and self.may_bump(it.meeting_id):
                    self.bumps[it.meeting_id] = {"from": slot, "by": obs.meeting.id, "requested": False}
        return moves
