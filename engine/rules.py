"""Batch validation: the seven rules of SPEC §4, transactional.

``check_batch`` is pure: it takes one calendar and a list of calendar actions and returns
either the calendar after the batch (with its cost) or a :class:`Rejection` naming the
rule and the offending action in plain words.  Nothing is applied unless every rule
passes.  The same function backs the game loop, the terminal batch builder's live
checks and the property tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from .actions import Action, Message, Reschedule, Schedule
from .model import Calendar, Errand, Item, MeetingCopy
from .quickinit import quick_init


@quick_init
@dataclass(frozen=True, slots=True)
class Rejection:
    rule: int
    message: str

    def __str__(self) -> str:  # what a seat reads in its retry prompt
        return self.message


@quick_init
@dataclass(frozen=True, slots=True)
class Move:
    """One applied move: what moved, from where to where, and what it cost."""

    item: Item
    from_slot: int
    to_slot: int
    cost: int


@quick_init
@dataclass(frozen=True, slots=True)
class BatchOutcome:
    calendar: Calendar
    moves: tuple[Move, ...]
    scheduled_slot: int | None
    cost: int  # shown units: moved errands' values + 1 per moved meeting copy


def _is_slot(v, num_slots: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < num_slots


def _describe(a: Action) -> str:
    if isinstance(a, Schedule):
        return f"schedule meeting {a.meeting_id} at slot {a.slot}"
    if isinstance(a, Reschedule):
        return f"reschedule item {a.item_id} from slot {a.from_slot} to slot {a.to_slot}"
    return f"{a.type} message"


def check_batch(
    calendar: Calendar,
    actions: list[Action] | tuple[Action, ...],
    *,
    meeting_id: int | None,
    require_schedule: bool,
    meeting_cost: int = 1,
) -> BatchOutcome | Rejection:
    """Validate and (purely) apply a batch to one calendar.

    ``require_schedule`` is True in DECISION (exactly one ``schedule`` for ``meeting_id``)
    and False in VOLUNTARY (no ``schedule`` allowed).
    """
    num_slots = len(calendar)
    msgs = [a for a in actions if isinstance(a, Message)]
    if msgs:
        return Rejection(6, f"Messages cannot be sent in this phase ({_describe(msgs[0])}); "
                            "only schedule and reschedule actions are valid")
    moves = [a for a in actions if isinstance(a, Reschedule)]
    schedules = [a for a in actions if isinstance(a, Schedule)]

    # Rule 1: slot bounds.
    for a in moves:
        for name in ("from_slot", "to_slot"):
            v = getattr(a, name)
            if not _is_slot(v, num_slots):
                return Rejection(1, f"Rule 1 (slot bounds): {name} {v!r} in '{_describe(a)}' "
                                    f"is not an integer slot in 0..{num_slots - 1}")
    for a in schedules:
        if not _is_slot(a.slot, num_slots):
            return Rejection(1, f"Rule 1 (slot bounds): slot {a.slot!r} in '{_describe(a)}' "
                                f"is not an integer slot in 0..{num_slots - 1}")

    # Rule 2: item identity (and each slot moved at most once).
    seen_from: set[int] = set()
    for a in moves:
        item = calendar[a.from_slot]
        if item is None:
            return Rejection(2, f"Rule 2 (item identity): slot {a.from_slot} is free, so there is no "
                                f"item {a.item_id} to move ('{_describe(a)}')")
        if item.item_id != a.item_id:
            return Rejection(2, f"Rule 2 (item identity): slot {a.from_slot} holds "
                                f"{_item_name(item)}, not item {a.item_id} ('{_describe(a)}')")
        if a.from_slot in seen_from:
            return Rejection(2, f"Rule 2 (item identity): slot {a.from_slot} is moved twice in one batch")
        seen_from.add(a.from_slot)

    # Rule 3: blocked items never move.
    for a in moves:
        item = calendar[a.from_slot]
        if isinstance(item, Errand) and item.blocked:
            return Rejection(3, f"Rule 3 (blocked): {_item_name(item)} at slot {a.from_slot} is blocked "
                                f"and cannot be moved ('{_describe(a)}')")

    # Rule 4: no two actions target the same destination.
    targets: dict[int, Action] = {}
    for a in moves:
        if a.to_slot in targets:
            return Rejection(4, f"Rule 4 (destination conflict): two actions target slot {a.to_slot} "
                                f"('{_describe(targets[a.to_slot])}' and '{_describe(a)}')")
        targets[a.to_slot] = a

    # Rule 5: each destination is free, or freed by another reschedule in the batch.
    for a in moves:
        if calendar[a.to_slot] is not None and a.to_slot not in seen_from:
            return Rejection(5, f"Rule 5 (destination not free): slot {a.to_slot} holds "
                                f"{_item_name(calendar[a.to_slot])} and is not freed by this batch "
                                f"('{_describe(a)}')")

    # Rule 6: exactly one schedule, for the incoming meeting (VOLUNTARY: none).
    if require_schedule:
        if len(schedules) != 1:
            return Rejection(6, f"Expected exactly 1 schedule action, got {len(schedules)}")
        if schedules[0].meeting_id != meeting_id:
            return Rejection(6, f"Rule 6 (schedule): the schedule action must be for meeting {meeting_id}, "
                                f"got meeting {schedules[0].meeting_id!r}")
    elif schedules:
        return Rejection(6, f"Expected 0 schedule actions in this phase, got {len(schedules)}")

    # Apply the reschedules simultaneously.
    cal = list(calendar)
    applied: list[Move] = []
    cost = 0
    for a in moves:
        cal[a.from_slot] = None
    for a in moves:
        item = calendar[a.from_slot]
        cal[a.to_slot] = item
        c = item.cost if item is not None else 0
        cost += c
        applied.append(Move(item, a.from_slot, a.to_slot, c))

    # Rule 7: the schedule slot is free after all reschedules.
    slot = None
    if schedules:
        slot = schedules[0].slot
        if cal[slot] is not None:
            return Rejection(7, f"Rule 7 (schedule slot not free): slot {slot} still holds "
                                f"{_item_name(cal[slot])} after the reschedules in this batch")
        if slot in targets:
            return Rejection(4, f"Rule 4 (destination conflict): slot {slot} is both a reschedule "
                                f"destination and the schedule slot")
        cal[slot] = MeetingCopy(int(meeting_id), meeting_cost)
    return BatchOutcome(tuple(cal), tuple(applied), slot, cost)


def _item_name(item: Item) -> str:
    if item is None:
        return "nothing"
    if isinstance(item, MeetingCopy):
        return f"Meeting M{item.meeting_id}"
    return f"{'Blocked ' if item.blocked else ''}Errand #{item.errand_id}"
