"""The seat's own calendar: one line per slot, a cursor, marks, and the slots under discussion.

Only the human's own :class:`engine.observe.SeatView` (or its own calendar after a batch)
ever reaches this widget.  Each line shows the slot, its item (free, an errand, a blocked
errand, a meeting and its participants), the cost in shown units and the seat's private
label.  ``↑``/``↓`` move the cursor, ``space`` marks slots for the quick actions, and the
slots being talked about this round are highlighted (with a ``»`` so the cue survives
``NO_COLOR``).

At 80 columns the label column holds a dozen characters, so the slot under the cursor is
also described in full, wrapped, by :meth:`CalendarView.slot_words` (the game screen shows
it under the calendar): kind, cost, whether it can move, and the whole label.
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from engine.model import Errand, MeetingCopy


def item_words(item, participants: dict[int, tuple[int, ...]] | None = None) -> str:
    """A short name for a calendar item, as the calendar shows it."""
    if item is None:
        return "free"
    if isinstance(item, MeetingCopy):
        who = (participants or {}).get(item.meeting_id)
        return f"M{item.meeting_id}" + (f" w/{','.join(map(str, who))}" if who else "")
    if isinstance(item, Errand):
        return f"{'Blocked' if item.blocked else 'Errand'} #{item.errand_id}"
    return str(item)


def movable(item) -> bool:
    return item is not None and not (isinstance(item, Errand) and item.blocked)


class CalendarView(Widget, can_focus=True):
    """A seat's calendar with a slot cursor."""

    DEFAULT_CSS = """
    CalendarView { height: auto; min-height: 3; padding: 0 0; text-wrap: nowrap; text-overflow: ellipsis; }
    CalendarView:focus { background: $boost; }
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="calendar.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="calendar.down"),
        Binding("space", "toggle_mark", "Mark slot", show=False, id="calendar.mark"),
    ]

    cursor: reactive[int] = reactive(0)

    class SlotChosen(Message):
        def __init__(self, slot: int) -> None:
            super().__init__()
            self.slot = slot

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.seat: int | None = None
        self.calendar: tuple = ()
        self.labels = None
        self.participants: dict[int, tuple[int, ...]] = {}
        self.apart: set[int] = set()  # my meetings that ended apart (the game screen sets it at resolution)
        self.marks: set[int] = set()
        self.highlight: set[int] = set()
        self.moved: set[int] = set()  # slots changed this game (own batches)
        self.incoming: int | None = None  # the incoming meeting's id, once placed
        self.detail = None  # a Static that describes the slot under the cursor (see _update_detail)
        self._detail_plain: str | None = None

    # -- data ---------------------------------------------------------------------------
    def set_view(self, view) -> None:
        """Show a :class:`engine.observe.SeatView` (the seat's whole private world)."""
        self.seat = view.seat
        self.calendar = tuple(view.calendar)
        self.labels = view.labels
        self.participants = dict(view.prior_meetings)
        self.cursor = min(self.cursor, max(0, len(self.calendar) - 1))
        self.refresh(layout=True)
        self._update_detail()

    def set_calendar(self, calendar: Iterable, participants: dict[int, tuple[int, ...]] | None = None) -> None:
        new = tuple(calendar)
        if self.calendar and len(new) == len(self.calendar):
            self.moved |= {s for s, (a, b) in enumerate(zip(self.calendar, new)) if a != b}
        self.calendar = new
        if participants:
            self.participants.update(participants)
        self.refresh(layout=True)
        self._update_detail()

    def set_highlight(self, slots: Iterable[int]) -> None:
        self.highlight = {s for s in slots if 0 <= s < len(self.calendar)}
        self.refresh()

    def selected_slots(self) -> list[int]:
        """Marked slots, or the cursor's slot when nothing is marked."""
        return sorted(self.marks) if self.marks else ([self.cursor] if self.calendar else [])

    def label_for(self, slot: int) -> str | None:
        item = self.calendar[slot]
        if self.labels is None or item is None:
            return None
        if isinstance(item, MeetingCopy):
            lab = self.labels.meetings.get(item.meeting_id)
        else:
            lab = self.labels.errands.get((self.seat, item.errand_id))
        return lab.text if lab else None

    # -- actions ------------------------------------------------------------------------
    def action_cursor(self, delta: int) -> None:
        if self.calendar:
            self.cursor = (self.cursor + delta) % len(self.calendar)

    def action_toggle_mark(self) -> None:
        if not self.calendar:
            return
        self.marks ^= {self.cursor}
        self.refresh()

    def watch_cursor(self) -> None:
        self.refresh()
        self._update_detail()
        self.call_after_refresh(self._keep_cursor_visible)

    def _keep_cursor_visible(self) -> None:
        """In a short terminal the pane scrolls: keep the cursor's line (and its neighbours) in view."""
        parent = self.parent
        if parent is None or not self.is_attached or not hasattr(parent, "scroll_to_region"):
            return
        from textual.geometry import Region

        y = self.virtual_region.y + 1 + self.cursor  # (the header line)
        parent.scroll_to_region(Region(0, max(0, y - 1), 1, 3), animate=False, immediate=True)

    def _update_detail(self) -> None:
        """Describe the slot under the cursor in ``detail`` (a fixed-height Static the screen
        hands over): updated here, in the same refresh as the cursor — a message round trip
        would cost every cursor key a second frame."""
        detail = self.detail
        if detail is None:
            return
        words = self.slot_words()
        if words.plain != self._detail_plain:
            self._detail_plain = words.plain
            detail.update(words, layout=False)

    def slot_words(self, slot: int | None = None) -> Text:
        """The slot under the cursor in full: ``▸ slot 5: errand, cost 1, can move — its label``."""
        s = self.cursor if slot is None else slot
        if not self.calendar or not 0 <= s < len(self.calendar):
            return Text("")
        item = self.calendar[s]
        t = Text()
        t.append(f"▸ slot {s}: ", style="bold")
        if item is None:
            t.append("free", style="dim")
        elif isinstance(item, MeetingCopy):
            who = self.participants.get(item.meeting_id)
            t.append(f"meeting M{item.meeting_id}" + (f" with {', '.join(map(str, who))}" if who else ""),
                     style="bold cyan")
            if item.meeting_id in self.apart:
                t.append(" · not coordinated: its copies are apart")
            else:
                t.append(f" · moving it costs {item.cost} and breaks it unless the others move too")
        elif isinstance(item, Errand):
            t.append("blocked errand (cannot move)" if item.blocked else f"errand, cost {item.cost} to move",
                     style="red" if item.blocked else "")
        label = self.label_for(s)
        if label:
            t.append(" — " + label, style="italic")
        return t

    def on_click(self, event: Click) -> None:
        row = event.y - 1  # the header line
        if 0 <= row < len(self.calendar):
            self.cursor = row
            self.post_message(self.SlotChosen(row))

    # -- rendering ----------------------------------------------------------------------
    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.calendar) + 1 if self.calendar else 1

    def render(self) -> Text:
        if not self.calendar:
            return Text("(your calendar appears when the game starts)", style="dim")
        w = max(2, len(str(len(self.calendar) - 1)))
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"  {'#':>{w}} {'item':<12}{'cost':>4}  label\n", style="bold")
        for s, item in enumerate(self.calendar):
            cur = s == self.cursor and self.has_focus
            line = Text(no_wrap=True)
            line.append("▸" if s == self.cursor else " ", style="bold" if cur else "")
            talk = s in self.highlight
            line.append("*" if s in self.marks else ("»" if talk else " "), style="bold yellow")
            line.append(f"{s:>{w}} ")
            words = item_words(item, self.participants)
            style = ""
            if item is None:
                style = "dim"
            elif isinstance(item, MeetingCopy):
                style = "bold cyan"
            elif item.blocked:
                style = "red"
            line.append(f"{words:<12}"[:12], style=style)
            line.append(f"{'' if item is None else item.cost:>4}")
            label = self.label_for(s)
            if label:
                line.append("  " + label, style="italic")
            if talk:
                line.stylize("on #3a3a00" if not cur else "reverse")
            elif cur:
                line.stylize("reverse")
            out.append_text(line)
            if s < len(self.calendar) - 1:
                out.append("\n")
        return out
