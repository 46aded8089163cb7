"""DECISION by slot: the model names the meeting's slot, the seat builds the batch.

``decision = "slot"`` (the default, :class:`~personas.llm.settings.LLMSettings`): the
DECISION reply names the slot of this round's meeting — any slot: free, holding an item
it may move, or one the rules will refuse — with the moves optional.  The seat completes the batch
with the one builder the scripted seats use (:func:`personas.base.clear_and_schedule`): the
model's own moves first, then a movable errand still sitting in the named slot goes to the
lowest free slot (moving an errand costs its own cost wherever it goes).  What the model
said and what the seat built are both recorded (``Reply.extra["decision"]``, in the
``decide_end`` event).  A request the rules cannot take — a blocked item or a meeting copy
in the slot that the model did not move itself, a move into the named slot, two schedules,
the wrong meeting — is sent **as the model wrote it**: the rules refuse it and the retry
message carries their words.  The named slot is never replaced by another one.

``decision = "batch"``: the model writes its own moves (the schema of
:mod:`personas.llm.schema`, one reschedule then the schedule); nothing is added.

:func:`decision_slot_schema` is the reply's JSON schema for ``slot``: the ``schedule``
comes alone or after one reschedule of a movable item; its ``slot`` may be any slot of the
calendar — a grammar-constrained model that starts with ``schedule`` can name the slot the
talk agreed on when an errand sits there (the old schema offered only free slots there, so
such a model was forced into another slot), and one that names a slot nobody can take (a
blocked errand) is refused by the rules in their words and asked again, not moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from engine.actions import Message, Reschedule, Schedule
from engine.events import MESSAGE_EVENT_TYPES
from engine.model import Errand

from ..base import clear_and_schedule
from ..seat_model import SeatModel, TalkFacts
from .schema import THINKING_MAX, _enum, _kind, _move, _obj, _one_of, _possible_slots, _string

__all__ = ["DECISION_MODES", "DecisionBuild", "build_decision", "decision_slot_schema", "reachable_slots",
           "decision_example_slot", "reach_words", "talk_facts", "talk_lines"]

#: ``LLMSettings.decision``: the model names the slot (the seat moves what must move), or writes the batch.
DECISION_MODES = ("slot", "batch")


@dataclass(frozen=True)
class DecisionBuild:
    """What the model said and what the seat sends the rules.

    ``slot``: the slot the model named (None when its reply has no single schedule of this
    meeting); ``actions``: the batch sent; ``added``: the moves the seat added; ``literal``:
    the batch is the reply as written (nothing to add, or nothing the builder could add —
    then the rules decide, in their own words).
    """

    slot: Any
    actions: tuple
    added: tuple = ()
    literal: bool = True
    said: tuple = field(default=())

    def record(self) -> dict[str, Any]:
        """``extra["decision"]`` of the reply: the mode, the named slot, both batches."""
        return {"mode": "slot", "named_slot": self.slot,
                "said": [a.to_json() for a in self.said], "built": [a.to_json() for a in self.actions],
                "seat_moves": [a.to_json() for a in self.added]}


def build_decision(calendar: Sequence[Any], meeting_id: int, said: Sequence[Any]) -> DecisionBuild:
    """The batch for a DECISION reply that names a slot (see the module docstring)."""
    said = tuple(said)
    schedules = [a for a in said if isinstance(a, Schedule)]
    moves = [a for a in said if isinstance(a, Reschedule)]
    slot = schedules[0].slot if len(schedules) == 1 else None
    if (slot is None or len(moves) + 1 != len(said) or schedules[0].meeting_id != meeting_id
            or not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < len(calendar)):
        return DecisionBuild(slot, said, said=said)
    if any(m.to_slot == slot for m in moves):  # its own move fills the slot it names: the rules say so
        return DecisionBuild(slot, said, said=said)
    cal_item = calendar[slot]
    freed = any(m.from_slot == slot for m in moves)
    if cal_item is None or freed or not isinstance(cal_item, Errand) or cal_item.blocked:
        return DecisionBuild(slot, said, said=said)  # nothing the seat may add: as written
    try:
        built = clear_and_schedule(calendar, meeting_id, slot,
                                   moves=[(m.item_id, m.from_slot, m.to_slot) for m in moves])
    except (TypeError, ValueError):  # a move with a non-integer slot: the rules' words (rule 1)
        built = None
    if built is None:
        return DecisionBuild(slot, said, said=said)
    # the model's own moves keep their words; the seat's move is the one before the schedule
    added = tuple(a for a in built[:-1] if isinstance(a, Reschedule) and a.from_slot == slot)
    actions = tuple(moves) + added + (schedules[0],)
    return DecisionBuild(slot, actions, added=added, literal=False, said=said)


@lru_cache(maxsize=512)
def _slot_schema(meeting_id: int, num_slots: int, calendar: tuple, moves: bool = True) -> dict[str, Any]:
    free, movable, _possible = _possible_slots(calendar, num_slots)

    def sched() -> dict[str, Any]:  # every slot: a slot the rules refuse is refused in their words, never moved
        return _obj(type=_kind("schedule"), meeting_id=_enum([meeting_id]), slot=_enum(range(num_slots)))

    alts = [{"type": "array", "prefixItems": [sched()], "minItems": 1, "maxItems": 1}]
    for slot, item in movable if moves else ():  # optional: the model moves an item itself first
        alts.append({"type": "array", "prefixItems": [_move(slot, item, free), sched()],
                     "minItems": 2, "maxItems": 2})
    return _obj(thinking={**_string(THINKING_MAX), "description": "your private reasoning, brief"},
                actions=_one_of(alts))


def decision_slot_schema(obs, *, moves: bool = True) -> dict[str, Any]:
    """The DECISION envelope schema for ``decision = "slot"``: one ``schedule`` of this
    meeting into any slot, alone or (``moves``) after one reschedule of a movable item.

    ``moves=False`` (a small model, ``LLMPersona.short_thinking``): the ``schedule`` alone.
    SmolLM2-135M, offered the optional move first, wrote "reschedule item 13 from slot 0 to 3"
    and then named slot 13 — its item's number, a blocked errand — in every DECISION of a game
    (12 rejected batches); the seat moves the errand in the named slot anyway."""
    v = obs.view
    return _slot_schema(int(obs.meeting.id), v.num_slots, tuple(v.calendar), moves)


def reachable_slots(calendar: Sequence[Any]) -> tuple[list[int], list[int], list[int]]:
    """``(free, movable, refused)``: the slots the seat can schedule a meeting in by itself —
    free, or holding an errand it may move (not blocked, with a free slot elsewhere), which
    :func:`build_decision` moves — and the others (a blocked errand, a meeting copy: moving
    that breaks its meeting, so the seat never does it for the model)."""
    free = [s for s, it in enumerate(calendar) if it is None]
    movable = [s for s, it in enumerate(calendar)
               if isinstance(it, Errand) and not it.blocked and any(f != s for f in free)]
    refused = [s for s in range(len(calendar)) if s not in free and s not in movable]
    return free, movable, refused


def decision_example_slot(facts: TalkFacts, calendar: Sequence[Any]) -> tuple[int, str] | None:
    """The slot of the DECISION message's example reply and where it comes from: the one slot
    every participant accepted, else the slot the talk settled on (the human's preselection)
    — ``"settled"`` —, else the first slot the talk was last about ("Talked about") —
    ``"talked"`` —, each only when the seat can take it; else None (no example slot)."""
    free, movable, _ = reachable_slots(calendar)
    reach = set(free) | set(movable)
    for slot in ([facts.accepted[0]] if len(facts.accepted) == 1 else []) + [facts.settled]:
        if slot is not None and slot in reach:
            return slot, "settled"
    talked = [s for s in facts.talk if s in reach]
    return (talked[0], "talked") if talked else None


def reach_words(calendar: Sequence[Any]) -> str:
    """The slots the seat can take, in words (the DECISION and retry messages): "Slots you can
    take: 2–4, 7 (free); 0, 5, 6 (your errand there is moved for you). Not slots 1, 13
    (blocked, or holding a meeting)." — facts of the seat's own calendar, which it may still
    ignore (the schema does not narrow the slot to these: docs/llm.md, "Decide by slot")."""
    from engine.protocol import fmt_slots

    free, movable, refused = reachable_slots(calendar)
    parts = []
    if free:
        parts.append(f"{fmt_slots(free)} (free)")
    if movable:
        parts.append(f"{fmt_slots(movable)} (your errand there is moved for you)")
    out = "Slots you can take: " + "; ".join(parts) + "." if parts else "No slot can take it."
    if refused:
        out += f" Not slot{'s' if len(refused) > 1 else ''} {fmt_slots(refused)} (blocked, or holding a meeting)."
    return out


# -- what the talk produced ---------------------------------------------------------------
def talk_facts(obs, own: Sequence[tuple[int, Message]] = ()) -> TalkFacts:
    """What this round's talk produced for the seat of a DecisionObservation: the messages
    it received (``obs.round_messages``) and ``own`` — ``(turn, message)`` it sent this
    round — folded in order by the reader of the human's screens
    (:meth:`personas.seat_model.SeatModel.talk_facts`)."""
    v = obs.view
    m = SeatModel(v.seat, v.channels, v.num_agents)
    m.num_slots = v.num_slots
    m.calendar = list(v.calendar)
    m.meeting_id, m.participants = obs.meeting.id, list(obs.meeting.participants)
    order = {a: i for i, a in enumerate(obs.meeting.speaker_order)}
    evs: list[tuple[int, int, int, dict[str, Any]]] = []
    for i, d in enumerate(obs.round_messages):
        evs.append((d.turn, order.get(d.sender, len(order)), i, {"type": MESSAGE_EVENT_TYPES.get(d.channel, "dm_sent"),
                                                                 **d.to_json()}))
    for i, (turn, msg) in enumerate(own):
        ev = {"type": MESSAGE_EVENT_TYPES.get(msg.type, "dm_sent"), "from_agent": v.seat, "channel": msg.type,
              "meeting_id": obs.meeting.id, "content": msg.content}
        if msg.type == "dm":
            ev["to_agent"] = msg.to
        if msg.payload is not None:
            ev["payload"] = msg.payload
        evs.append((turn, order.get(v.seat, len(order)), len(evs) + i, ev))
    for *_, ev in sorted(evs, key=lambda x: x[:3]):
        m.apply(ev)
    return m.talk_facts()


def _slots(slots: Sequence[int]) -> str:
    """"slot 3", "slots 3, 5 and 9", a long list as ranges ("slots 0–4, 6, 8, 12–15")."""
    from engine.protocol import fmt_slots, slot_words

    return slot_words(list(slots)) if len(slots) <= 4 else "slots " + fmt_slots(slots)


def talk_lines(facts: TalkFacts, seat: int, meeting_id: int, *, limit: int = 8) -> list[str]:
    """The talk facts in words, one line each (the DECISION message's "What the talk produced")."""
    out: list[str] = []
    said = [x for i, x in enumerate(facts.said) if i == 0 or x != facts.said[i - 1]]  # one text to several seats
    for sender, what, slots in said[-limit:]:
        who = "You" if sender == seat else f"Agent {sender}"
        if what == "sent costs":
            continue  # the costs line below says it with the numbers
        out.append(f"{who} {what} {_slots(slots)}.")
    for p, costs in sorted(facts.costs.items()):
        if p == seat:
            continue
        shown = ", ".join(f"{s}: {'impossible' if c is None else c}" for s, c in sorted(costs.items()))
        out.append(f"Agent {p} sent you its costs (slot: cost): {shown}.")
    if facts.cheapest is not None:
        out.append(f"Cheapest slot for everyone by the costs sent: slot {facts.cheapest[1]} "
                   f"(total {facts.cheapest[0]}).")
    if facts.talk:
        out.append("Talked about: " + ", ".join(f"slot {s}" for s in facts.talk) + ".")
    if facts.accepted:
        out.append(f"Every participant accepted: {_slots(facts.accepted)} for Meeting M{meeting_id}.")
    if facts.settled is not None:  # the slot the human's batch builder would preselect
        out.append(f"The slot the talk settled on: slot {facts.settled}.")
    return out
