"""The calendar render an LLM seat reads (SPEC §5), and its inverse.

One line per slot, in the authors' format (slot numbers right-aligned, as in their
traces): ``Slot  0: [FREE]``, ``Slot  1: Errand #3 (cost=10)``,
``Slot  2: Blocked Errand #7 (cost=100)``, ``Slot  3: Meeting M2 (cost=1) participants=[0, 2]``;
the seat's own private label follows after `` — `` when the seat may see it.
Other tools parse these lines: keep them stable.
"""

from __future__ import annotations

import re
from typing import Mapping

from .model import Calendar, Errand, Item, Labels, MeetingCopy

LABEL_SEP = " — "


def render_item(item: Item) -> str:
    if item is None:
        return "[FREE]"
    if isinstance(item, MeetingCopy):
        return f"Meeting M{item.meeting_id} (cost={item.cost})"
    return f"{'Blocked ' if item.blocked else ''}Errand #{item.errand_id} (cost={item.cost})"


def render_calendar(
    calendar: Calendar,
    *,
    seat: int | None = None,
    labels: Labels | None = None,
    participants: Mapping[int, tuple[int, ...]] | None = None,
    memo: dict[tuple[int, Item], str] | None = None,
) -> str:
    """Render one seat's calendar.  ``labels`` must already be filtered for ``seat``.

    ``memo``: the lines rendered before for this seat, with these labels and participants
    and a calendar of this length, by (slot, item).  A game renders a seat's calendar again
    after every change, and most of its lines have not changed.
    """
    width = len(str(len(calendar) - 1))
    if memo is None:
        return "\n".join(_line(s, item, width, seat, labels, participants) for s, item in enumerate(calendar))
    lines = []
    for key in enumerate(calendar):
        line = memo.get(key)
        if line is None:
            line = memo[key] = _line(key[0], key[1], width, seat, labels, participants)
        lines.append(line)
    return "\n".join(lines)


def _line(s: int, item: Item, width: int, seat: int | None, labels: Labels | None,
          participants: Mapping[int, tuple[int, ...]] | None) -> str:
    text = render_item(item)
    label = None
    if isinstance(item, MeetingCopy):
        if participants and item.meeting_id in participants:
            text += f" participants={list(participants[item.meeting_id])}"
        if labels is not None:
            label = labels.meetings.get(item.meeting_id)
    elif isinstance(item, Errand) and labels is not None and seat is not None:
        label = labels.errands.get((seat, item.errand_id))
    if label is not None:
        text += LABEL_SEP + label.text
    return f"Slot {s:>{width}}: {text}"


_LINE = re.compile(
    r"Slot\s+(\d+):\s*(?:(\[FREE\])|(Blocked\s+)?Errand\s+#(\d+)\s*\(cost=(\d+)\)|Meeting\s+M(\d+)\s*\(cost=(\d+)\))"
)


def parse_calendar_render(text: str) -> tuple[Item, ...]:
    """Read a render back into items (labels and participants are dropped)."""
    items: dict[int, Item] = {}
    for m in _LINE.finditer(text):
        slot = int(m.group(1))
        if m.group(2):
            items[slot] = None
        elif m.group(4):
            items[slot] = Errand(int(m.group(4)), int(m.group(5)), bool(m.group(3)))
        else:
            items[slot] = MeetingCopy(int(m.group(6)), int(m.group(7)))
    if not items:
        raise ValueError("no 'Slot N: ...' lines in the calendar render")
    n = max(items) + 1
    return tuple(items.get(s) for s in range(n))
