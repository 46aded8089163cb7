"""A simulated person: one seat played the way people play it at the terminal.

Used by ``study check --dry-run`` (``simulated_protocol = "person-like"``, lab/study/simulate.py)
and by ``benchmarks/person_partners.py``.  It sees exactly what a person's screen shows — the
seat's projected events (:func:`engine.observe.seat_event`, fed through :attr:`sink`) folded
into the same :class:`personas.seat_model.SeatModel` the game screen renders — and acts
through the same quick actions a person's keys send (``p`` propose, ``a`` accept, ``d``
decline, ``c`` share costs: :meth:`SeatModel.quick`) or through typed words
(:meth:`SeatModel.write`), the way a person at the keyboard does.

The policy, as observed in play-throughs (issue 29):

* **A meeting it leads** (it is the lowest-id participant): at its first turn it proposes a
  slot that is free on its own calendar (``p``; with probability ``typed`` it types the offer
  instead: "How about slot 5?").  When every partner has said the slot works, it confirms
  once (``a``, which confirms its own last proposal; typed words when the slot was offered in
  words).  When
  a partner says no, it proposes again: the slot it can hold that no partner refused, first
  the ones partners said work or offered, then its cheapest, then the lowest.  While an
  answer is outstanding it waits.
* **A meeting it does not lead**: it answers a cost request (``c``), accepts a slot proposed
  to it that it can hold (``a``) and declines one it cannot (``d``).
* **Sometimes it misses a turn** (probability ``miss``, never two in a row, never the turn in
  which it opens a meeting it leads): the turn passes with nothing sent, as when a person
  reads too long.  (A leader silent in the first sweep ends the talk at once — SPEC §4: a
  sweep in which nobody speaks ends CHEAP_TALK — and no partner can tell that a person leads
  until it speaks; that is a hazard of the rules, not of the partners, and the policy leaves
  it out.)
* **DECISION**: the slot the talk settled on (its own last proposal when it leads, else the
  slot it accepted, else what the batch builder preselects), an errand there moved to the
  lowest free slot; on a rejected batch its cheapest slots in turn.

Every choice comes from ``random.Random(f"person-like:{seed}:{seat}")``: the same seed gives
the same game.  :attr:`log` records each proposal (round, turn, slot, recipients, how it was
made) so a benchmark can check who answered.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from engine import protocol
from engine.events import MESSAGE_EVENTS
from engine.observe import seat_event
from engine.seats import Reply

from .base import clear_and_schedule, insertion_costs
from .seat_model import SeatModel

__all__ = ["PersonLikePersona", "PERSON_LIKE", "OFFER_WORDS"]

#: The name of the policy (``simulated_protocol`` in a study file, the persona's model).
PERSON_LIKE = "person-like"

#: Typed offers, as people word them (one is picked per offer, seeded).
OFFER_WORDS = ("How about slot {s}?", "Could we do slot {s}?", "Does slot {s} work for you?",
               "I'm free at slot {s}, does that work?")


@dataclass
class _Request:
    """What :meth:`SeatModel.speak` / :meth:`SeatModel.end_turn` expect of the engine's request."""

    obs: Any
    reply: Reply | None = None

    @property
    def done(self) -> bool:
        return self.reply is not None

    def answer(self, reply: Reply) -> bool:
        self.reply = reply
        return True


@dataclass
class _Talk:
    """What partners said this round about slots: per partner, slots that work / do not."""

    ok: dict[int, set[int]] = field(default_factory=dict)
    no: dict[int, set[int]] = field(default_factory=dict)
    offered: dict[int, list[int]] = field(default_factory=dict)
    proposed: list[int] = field(default_factory=list)  # my proposals, in order
    confirmed: int | None = None  # the slot I confirmed (leader)
    accepted: int | None = None  # the slot I accepted (responder)
    answered: set[tuple[int, tuple[int, ...]]] = field(default_factory=set)  # (from, slots) I answered
    costs_sent: set[int] = field(default_factory=set)  # askers whose cost request I answered


class _Sink:
    """The person's screen: each engine event through the seat's projection into the model."""

    def __init__(self, owner: "PersonLikePersona") -> None:
        self.owner = owner

    async def emit(self, event: dict[str, Any]) -> None:
        self.owner.see(event)


class PersonLikePersona:
    """A seat played like a person (see the module docstring).  Give the engine's events to
    :attr:`sink` (a listener of the game, as the app's screen is)."""

    kind = "scripted"
    model = PERSON_LIKE
    variant = None

    def __init__(self, seat: int, *, seed: int | str = 0, typed: float = 0.3, miss: float = 0.1) -> None:
        self.seat = seat
        self.typed = typed
        self.miss = miss
        self.rng = random.Random(f"person-like:{seed}:{seat}")
        self.seat_model: SeatModel | None = None
        self.sink = _Sink(self)
        self.talk = _Talk()
        self.round = -1
        self._missed = False
        self.log: list[dict[str, Any]] = []

    # -- the screen -----------------------------------------------------------------------
    def see(self, event: dict[str, Any]) -> None:
        view = seat_event(event, self.seat)
        if view is None:
            return
        if view.get("type") == "game_start" and self.seat_model is None:
            chans = str(view.get("communication_protocol") or "dm").split("+")
            self.seat_model = SeatModel(self.seat, chans, view.get("num_agents") or 0)
        if self.seat_model is None:
            return
        self.seat_model.apply(view)
        if view.get("type") == "round_start":
            self.talk = _Talk()
            self.round = view.get("round") or 0
        elif view.get("type") in MESSAGE_EVENTS and view.get("from_agent") != self.seat:
            self._hear(view)

    def _hear(self, ev: dict[str, Any]) -> None:
        """Note what a partner said about slots (typed answer or words)."""
        frm = ev.get("from_agent")
        t = self.talk
        ok, no = t.ok.setdefault(frm, set()), t.no.setdefault(frm, set())
        p = ev.get("payload") if isinstance(ev.get("payload"), dict) else None
        n = self.seat_model.num_slots or 1
        kind = protocol.payload_kind(p)
        if kind == "reply":  # SD-MAP PENDING / IMPOSSIBLE
            s = protocol.as_int(p.get("slot"))
            if s is not None:
                (ok if p.get("status") == protocol.PENDING else no).add(s)
                (no if p.get("status") == protocol.PENDING else ok).discard(s)
            return
        costs = protocol.costs_in_payload(p)  # IMAP costs, DSM scores
        if costs:
            for s, c in costs.items():
                (ok if c is not None else no).add(s)
                (no if c is not None else ok).discard(s)
            return
        r = protocol.read_text(ev.get("content") or "", n)
        for s in r.fails:
            no.add(s)
            ok.discard(s)
        for s in r.works:
            ok.add(s)
            no.discard(s)
        mine = t.proposed[-1] if t.proposed else None
        if mine is not None and not r.slots:
            if r.yes:
                ok.add(mine)
            elif r.no:
                no.add(mine)
        for s in list(r.proposed) + sorted(r.works):
            if s not in t.offered.setdefault(frm, []):
                t.offered[frm].append(s)

    # -- the persona interface --------------------------------------------------------------
    async def register(self, briefing: Any) -> None:
        if self.seat_model is None:  # played without a listener: the briefing is all it knows
            v = briefing.view
            self.seat_model = SeatModel(self.seat, v.channels, v.num_agents)
        self.seat_model.register(briefing)
        return None

    async def speak(self, obs: Any) -> Reply:
        m = self.seat_model
        req = _Request(obs)
        m.speak(req)
        if obs.round != self.round:  # played without a listener: the observation says a round began
            self.talk, self.round = _Talk(), obs.round
        opening = m.initiator and not self.talk.proposed
        missed = obs.is_participant and not opening and not self._missed and self.rng.random() < self.miss
        self._missed = missed  # never two turns in a row: the person looks back at the screen
        if obs.is_participant and not missed:
            if m.initiator:
                self._lead(obs)
            else:
                self._respond(obs)
        m.end_turn()
        return req.reply or Reply()

    async def volunteer(self, obs: Any) -> Reply:
        return Reply()

    async def decide(self, obs: Any) -> Reply:
        cal = obs.view.calendar
        costs = insertion_costs(cal)
        first = None
        t = self.talk
        if self.seat_model.initiator and t.proposed:
            first = t.confirmed if t.confirmed is not None else t.proposed[-1]
        elif t.accepted is not None:
            first = t.accepted
        else:
            first = self.seat_model.agreed_slot()
        order = [first] if first is not None else []
        order += sorted((s for s, c in enumerate(costs) if c is not None), key=lambda s: (costs[s], s))
        tried = 0
        for s in dict.fromkeys(order):
            batch = clear_and_schedule(cal, obs.meeting.id, s)
            if batch is None:
                continue
            if tried == obs.attempt:
                return Reply(actions=tuple(batch))
            tried += 1
        return Reply()

    # -- leading a meeting ---------------------------------------------------------------------
    def _costs(self) -> list[int | None]:
        return insertion_costs(self.seat_model.calendar)

    def _lead(self, obs: Any) -> None:
        m, t = self.seat_model, self.talk
        others = m.others_in_meeting()
        costs = self._costs()
        if not t.proposed:
            free = [s for s, c in enumerate(costs) if c == 0]
            if free:
                slot = self.rng.choice(free)
            else:
                held = [s for s, c in enumerate(costs) if c is not None]
                if not held:
                    return
                slot = min(held, key=lambda s: (costs[s], s))
            self._propose(obs, slot)
            return
        cur = t.proposed[-1]
        said_no = [p for p in others if cur in t.no.get(p, ())]
        if said_no:
            slot = self._next_slot(costs, others)
            if slot is not None:
                self._propose(obs, slot)
            return
        if t.confirmed is None and all(cur in t.ok.get(p, ()) for p in others):
            self._confirm(obs, cur)

    def _next_slot(self, costs: list[int | None], others: list[int]) -> int | None:
        t = self.talk
        refused = set().union(*(t.no.get(p, set()) for p in others)) if others else set()
        cands = [s for s, c in enumerate(costs) if c is not None and s not in refused and s not in t.proposed]
        if not cands:
            cands = [s for s, c in enumerate(costs) if c is not None and s not in refused]
        if not cands:
            return None

        def liked(s: int) -> int:
            return sum(1 for p in others if s in t.ok.get(p, ()) or s in t.offered.get(p, ()))

        return min(cands, key=lambda s: (-liked(s), costs[s], s))

    def _propose(self, obs: Any, slot: int) -> None:
        m = self.seat_model
        how = "typed" if self.rng.random() < self.typed else "p"
        if how == "typed":
            text = self.rng.choice(OFFER_WORDS).format(s=slot)
            out = m.write(text)
        else:
            out = m.quick("propose", cursor=slot, selected=[slot])
        if out.warning:
            return
        self.talk.proposed.append(slot)
        self.talk.confirmed = None
        self.log.append({"action": "propose", "how": how, "round": obs.round, "turn": obs.turn, "slot": slot,
                         "to": sorted({msg.to for msg in out.messages if msg.to is not None})})

    def _confirm(self, obs: Any, slot: int) -> None:
        m = self.seat_model
        prop = m.proposal
        if (m.mine_latest and m.my_proposal == [slot]) or (prop is not None and slot in prop[1]):
            out = m.quick("accept", cursor=slot)  # a: confirms my proposal (or takes the one made to me)
        else:  # the slot came up in words: say so in words
            out = m.write(f"Slot {slot} works for everyone, let's go with slot {slot}.")
        if not out.warning:
            self.talk.confirmed = slot
            self.log.append({"action": "confirm", "round": obs.round, "turn": obs.turn, "slot": slot})

    # -- answering in a meeting led by someone else -----------------------------------------------
    def _respond(self, obs: Any) -> None:
        m, t = self.seat_model, self.talk
        ask = m.cost_request
        if ask is not None and ask[0] not in t.costs_sent:
            out = m.quick("share_costs", cursor=None)
            if not out.warning:
                t.costs_sent.add(ask[0])
                self.log.append({"action": "share_costs", "round": obs.round, "turn": obs.turn})
                return
        prop = m.proposal
        if prop is None:
            return
        frm, slots = prop
        key = (frm, tuple(slots))
        if key in t.answered or not slots:
            return
        t.answered.add(key)
        costs = self._costs()
        can = [s for s in slots if 0 <= s < len(costs) and costs[s] is not None]
        if can:
            slot = min(can, key=lambda s: (costs[s], s))
            out = m.quick("accept", cursor=slot)
            if not out.warning:
                t.accepted = slot
                self.log.append({"action": "accept", "round": obs.round, "turn": obs.turn, "slot": slot})
        else:
            m.quick("decline", cursor=slots[0])
            self.log.append({"action": "decline", "round": obs.round, "turn": obs.turn, "slot": slots[0]})
