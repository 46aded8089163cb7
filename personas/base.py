"""Small helpers shared by every persona kind (scripted, LLM, human).

Only calendar arithmetic lives here: what it costs a seat to put a meeting in a slot,
and the batch that clears a slot and schedules the meeting.  Everything works on the
seat's own calendar (``SeatView.calendar``), so nothing here can see another seat.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from engine.actions import Reschedule, Schedule
from engine.model import Calendar, Errand, MeetingCopy


def lowest_free(calendar: Calendar, exclude: Iterable[int] = ()) -> int | None:
    """The lowest free slot not in ``exclude`` (None when there is none)."""
    ex = set(exclude)
    for s, it in enumerate(calendar):
        if it is None and s not in ex:
            return s
    return None


def insertion_cost(calendar: Calendar, slot: int, reserved: Iterable[int] = ()) -> int | None:
    """What it costs this seat to hold a meeting at ``slot`` (SPEC §7, IMAP ``costs``).

    0 when the slot is free; the errand's shown cost when a movable errand sits there and
    can move to another free slot (not one of ``reserved``); None otherwise (a blocked
    errand, a meeting copy, or nowhere to put the errand).
    """
    if not 0 <= slot < len(calendar):
        return None
    it = calendar[slot]
    if it is None:
        return 0
    if isinstance(it, Errand) and not it.blocked:
        ex = set(reserved)
        ex.add(slot)
        return it.cost if lowest_free(calendar, ex) is not None else None
    return None


def insertion_costs(calendar: Calendar, reserved: Iterable[int] = ()) -> list[int | None]:
    """``insertion_cost`` for every slot, in one pass (cheap enough for every turn)."""
    ex = set(reserved)
    # an errand's slot is never free itself, so it can move iff some slot is free (and not reserved)
    movable = any(it is None and s not in ex for s, it in enumerate(calendar))
    out: list[int | None] = []
    for it in calendar:
        if it is None:
            out.append(0)
        elif movable and isinstance(it, Errand) and not it.blocked:
            out.append(it.cost)
        else:
            out.append(None)
    return out


def cheapest_common_slot(mine: Mapping[int, int | None], peers: Iterable[int],
                         cost_of: Callable[[int, int], int | None]) -> tuple[int, int] | None:
    """(total cost, slot) of least total over my feasible slots, ties → lowest slot; None when no
    slot is possible for everyone.

    ``mine`` maps a slot to my own cost there (None: impossible for me); ``cost_of(peer, slot)``
    is a peer's cost there (None: impossible for that peer).  The one best-slot rule: the IMAP
    initiator's decision (``personas/scripted/imap.py``) and the human's hint from the costs
    others sent (``personas/seat_model.py``) both call it.
    """
    peers = list(peers)
    best: tuple[int, int] | None = None
    for s in sorted(mine):
        total = mine[s]
        if total is None:
            continue
        for p in peers:
            c = cost_of(p, s)
            if c is None:
                total = None
                break
            total += c
        if total is not None and (best is None or total < best[0]):
            best = (total, s)
    return best


def cheapest_slots(calendar: Calendar, reserved: Iterable[int] = (), exclude: Iterable[int] = (), *,
                   costs: list[int | None] | None = None) -> list[int]:
    """This seat's feasible slots, cheapest first (ties: lowest slot); ``costs``:
    ``insertion_costs(calendar, reserved)`` when the caller has it already."""
    ex = set(exclude) | set(reserved)
    if costs is None:
        costs = insertion_costs(calendar, reserved)
    ok = [(c, s) for s, c in enumerate(costs) if c is not None and s not in ex]
    ok.sort()
    return [s for _, s in ok]


def clear_and_schedule(
    calendar: Calendar,
    meeting_id: int,
    slot: int,
    *,
    reserved: Iterable[int] = (),
    moves: Iterable[tuple[int, int, int]] = (),
) -> list | None:
    """The DECISION batch that puts ``meeting_id`` at ``slot``, or None if it cannot.

    ``moves`` are extra agreed moves ``(item_id, from_slot, to_slot)`` (e.g. a bumped
    meeting copy going to its repair slot) applied in the same batch.  A movable errand at
    ``slot`` goes to the lowest slot that is free after those moves and not ``reserved``.
    """
    cal = list(calendar)
    actions: list = []
    targets: set[int] = set()
    for item_id, frm, to in moves:
        if not (0 <= frm < len(cal) and 0 <= to < len(cal)) or cal[frm] is None:
            return None
        if cal[frm].item_id != item_id or (cal[to] is not None and to != frm) or to in targets:
            return None
        if to != frm:
            actions.append(Reschedule(item_id, frm, to, "agreed move"))
            cal[to], cal[frm] = cal[frm], None
            targets.add(to)
    if not 0 <= slot < len(cal):
        return None
    it = cal[slot]
    if it is not None:
        if not isinstance(it, Errand) or it.blocked:
            return None
        dest = lowest_free(cal, set(reserved) | targets | {slot})
        if dest is None:
            return None
        actions.append(Reschedule(it.errand_id, slot, dest, "make room for the meeting"))
    actions.append(Schedule(meeting_id, slot))
    return actions


def slot_of_meeting(calendar: Calendar, meeting_id: int) -> int | None:
    for s, it in enumerate(calendar):
        if isinstance(it, MeetingCopy) and it.meeting_id == meeting_id:
            return s
    return None
