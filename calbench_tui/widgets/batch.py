"""The batch builder (DECISION and VOLUNTARY): pick the slot, move what must move, check, submit.

:class:`BatchPlan` is the model: a frozen snapshot of the seat's own calendar, the slot
chosen for the meeting (DECISION) and a set of moves ``from_slot -> to_slot``.  Every edit
is checked at once with the engine's own validator (:func:`engine.rules.check_batch`),
so the person reads exactly the plain-word message the engine would give.  Destinations
are suggested cheapest first: a free slot costs only the moved item's own cost (moving
into an occupied slot would force a second move), nearest slots first.

:class:`BatchBuilder` is the widget: one line per slot, ``now`` → ``after``.
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from engine.actions import Reschedule, Schedule
from engine.model import Errand, MeetingCopy
from engine.rules import BatchOutcome, Rejection, check_batch

from .calendar import item_words, movable


class BatchPlan:
    def __init__(self, calendar: Iterable, *, meeting_id: int | None, meeting_cost: int = 1,
                 require_schedule: bool = True) -> None:
        self.calendar = tuple(calendar)
        self.meeting_id = meeting_id
        self.meeting_cost = meeting_cost
        self.require_schedule = require_schedule
        self.target: int | None = None
        self.moves: dict[int, int] = {}  # from_slot -> to_slot, in the order they were added
        self._auto: int | None = None  # the move added for the target, undone when the target changes

    # -- queries ------------------------------------------------------------------------
    @property
    def num_slots(self) -> int:
        return len(self.calendar)

    def actions(self) -> list:
        acts: list = [Reschedule(self.calendar[f].item_id, f, t, "make room" if f == self.target else "")
                      for f, t in self.moves.items() if self.calendar[f] is not None]
        if self.target is not None and self.require_schedule:
            acts.append(Schedule(self.meeting_id, self.target))
        return acts

    def check(self) -> BatchOutcome | Rejection:
        return check_batch(self.calendar, self.actions(), meeting_id=self.meeting_id,
                           require_schedule=self.require_schedule, meeting_cost=self.meeting_cost)

    def cost(self) -> int:
        """What the batch would cost, in shown units (the items' own costs)."""
        out = self.check()
        if isinstance(out, BatchOutcome):
            return out.cost
        return sum(self.calendar[f].cost for f in self.moves if self.calendar[f] is not None)

    def after(self) -> list:
        """The calendar as it would be (best effort, also for an invalid plan)."""
        out = self.check()
        if isinstance(out, BatchOutcome):
            return list(out.calendar)
        cal = list(self.calendar)
        for f in self.moves:
            cal[f] = None
        for f, t in self.moves.items():
            cal[t] = self.calendar[f]
        if self.target is not None and self.require_schedule:
            cal[self.target] = MeetingCopy(self.meeting_id or 0, self.meeting_cost)
        return cal

    def occupied_after(self, ignore_from: int | None = None) -> set[int]:
        """Slots that hold something after the plan (ignoring one move, to re-place it)."""
        occ = {s for s, it in enumerate(self.calendar) if it is not None}
        for f, t in self.moves.items():
            if f == ignore_from:
                continue
            occ.discard(f)
        for f, t in self.moves.items():
            if f == ignore_from:
                continue
            occ.add(t)
        if self.target is not None and self.require_schedule:
            occ.add(self.target)
        return occ

    def suggestions(self, from_slot: int) -> list[int]:
        """Cheapest destinations for the item at ``from_slot``: free slots after the plan, nearest first."""
        occ = self.occupied_after(ignore_from=from_slot)
        free = [s for s in range(self.num_slots) if s not in occ and s != from_slot]
        return sorted(free, key=lambda s: (abs(s - from_slot), s))

    def must_move(self) -> list[int]:
        """Slots whose item has to leave for the meeting to fit (today: the chosen slot's item)."""
        if self.target is None or not self.require_schedule:
            return []
        return [self.target] if self.calendar[self.target] is not None else []

    # -- edits --------------------------------------------------------------------------
    def set_target(self, slot: int | None) -> None:
        if self._auto is not None and self._auto != slot:
            self.moves.pop(self._auto, None)
        self._auto = None
        self.target = slot
        if slot is None or not self.require_schedule:
            return
        item = self.calendar[slot]
        # Whatever sits at the new target must not be a destination of another move.
        for f, t in list(self.moves.items()):
            if t == slot:
                self.moves.pop(f)
        if item is not None and movable(item) and slot not in self.moves:
            dest = self.suggestions(slot)
            if dest:
                self.moves[slot] = dest[0]
                self._auto = slot

    def add_move(self, from_slot: int) -> bool:
        item = self.calendar[from_slot]
        if item is None or not movable(item):
            return False
        if from_slot in self.moves:
            return True
        dest = self.suggestions(from_slot)
        if not dest:
            return False
        self.moves[from_slot] = dest[0]
        return True

    def remove_move(self, from_slot: int) -> bool:
        if self._auto == from_slot:
            self._auto = None
        return self.moves.pop(from_slot, None) is not None

    def cycle_destination(self, from_slot: int, delta: int) -> int | None:
        """Move the item at ``from_slot`` to the next (or previous) possible destination."""
        if from_slot not in self.moves:
            return None
        cur = self.moves[from_slot]
        options = sorted(set(self.suggestions(from_slot)) | {cur})
        i = options.index(cur)
        self.moves[from_slot] = options[(i + delta) % len(options)]
        return self.moves[from_slot]

    def describe(self) -> list[str]:
        """The plan in plain words, one line per step."""
        lines = []
        if self.require_schedule:
            if self.target is None:
                lines.append("Pick the slot for the meeting (enter on a slot).")
            else:
                lines.append(f"Meet at slot {self.target}.")
                item = self.calendar[self.target]
                if item is not None and not movable(item):
                    lines.append(f"{item_words(item)} at slot {self.target} is blocked: it cannot move. "
                                 "Pick another slot.")
                elif item is not None and self.target not in self.moves:
                    lines.append(f"{item_words(item)} at slot {self.target} must move first (m).")
        for f, t in self.moves.items():
            it = self.calendar[f]
            line = f"Move {item_words(it)} from slot {f} to slot {t} (cost {it.cost})."
            others = [s for s in self.suggestions(f) if s != t][:4]
            if others:
                line += f" Also free: {', '.join(map(str, others))} (←/→)."
            lines.append(line)
        if not self.require_schedule and not self.moves:
            lines.append("No moves: submitting does nothing (that is fine).")
        return lines


class BatchBuilder(Widget, can_focus=True):
    """One line per slot of the frozen snapshot: now → after, with the cursor."""

    DEFAULT_CSS = """
    BatchBuilder { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    BatchBuilder:focus { background: $boost; }
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="batch.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="batch.down"),
    ]

    cursor: reactive[int] = reactive(0)

    class Changed(Message):
        pass


    def __init__(self, plan: BatchPlan, *, seat: int, labels=None, participants=None,
                 highlight: Iterable[int] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.plan = plan
        self.seat = seat
        self.labels = labels
        self.participants = dict(participants or {})
        self.highlight = set(highlight)
        if plan.target is not None:  # start on the slot already chosen: enter ("meet here") keeps it
            self.set_reactive(BatchBuilder.cursor, plan.target)

    def action_cursor(self, delta: int) -> None:
        self.cursor = (self.cursor + delta) % self.plan.num_slots

    detail = None  # a Static the screen hands over: the slot under the cursor, whole

    def watch_cursor(self) -> None:
        self.refresh()
        if self.detail is not None:  # updated in the same refresh (no message round trip)
            self.detail.update(self.slot_words(), layout=False)

    def slot_words(self) -> Text:
        """The slot under the cursor, whole (its label is cut in the list at 80 columns)."""
        s = self.cursor
        item = self.plan.calendar[s] if 0 <= s < self.plan.num_slots else None
        t = Text()
        t.append(f"▸ slot {s}: ", style="bold")
        t.append(item_words(item, self.participants))
        if item is not None:
            t.append(f", cost {item.cost}" + ("" if movable(item) else ", cannot move"))
        label = self._label(item)
        if label:
            t.append(" — " + label, style="italic")
        return t

    def changed(self) -> None:
        self.refresh(layout=True)
        self.post_message(self.Changed())

    def on_click(self, event: Click) -> None:
        row = event.y - 1
        if 0 <= row < self.plan.num_slots:
            self.cursor = row

    def get_content_height(self, container, viewport, width: int) -> int:
        return self.plan.num_slots + 1

    def _label(self, item) -> str:
        if self.labels is None or item is None:
            return ""
        if isinstance(item, MeetingCopy):
            lab = self.labels.meetings.get(item.meeting_id)
        else:
            lab = self.labels.errands.get((self.seat, item.errand_id))
        return lab.text if lab else ""

    def render(self) -> Text:
        plan = self.plan
        after = plan.after()
        w = max(2, len(str(plan.num_slots - 1)))
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"  {'#':>{w}} {'now':<12}{'cost':>4}  {'after':<14} label\n", style="bold")
        incoming_from = {t: f for f, t in plan.moves.items()}
        for s, item in enumerate(plan.calendar):
            line = Text(no_wrap=True)
            line.append("▸" if s == self.cursor else " ")
            line.append("»" if s in self.highlight else " ", style="bold yellow")
            line.append(f"{s:>{w}} ")
            style = "dim" if item is None else ("red" if isinstance(item, Errand) and item.blocked else "")
            line.append(f"{item_words(item, self.participants):<12}"[:12], style=style)
            line.append(f"{'' if item is None else item.cost:>4}  ")
            a = after[s]
            if s == plan.target and plan.require_schedule:
                cell, st = f"★ M{plan.meeting_id} here", "bold cyan"
            elif s in plan.moves:
                cell, st = f"→ slot {plan.moves[s]}", "yellow"
            elif s in incoming_from:
                cell, st = f"← from {incoming_from[s]}", "yellow"
            elif a == item:
                cell, st = "·", "dim"
            else:
                cell, st = item_words(a), ""
            line.append(f"{cell:<14}"[:14], style=st)
            line.append(" " + self._label(item), style="italic dim")
            if s == self.cursor and self.has_focus:
                line.stylize("reverse")
            out.append_text(line)
            if s < plan.num_slots - 1:
                out.append("\n")
        return out
