"""Lean traces: leave out of a stored trace what folding the trace rebuilds exactly.

A game's events repeat its calendars many times: every ``turn_start`` and ``decide_start``
carries the seat's calendar render, every ``batch_applied`` the render after the batch,
every ``resolution`` all calendars, every ``agent_registered`` the initial calendar (as
a render and as JSON).  All of them follow from the task row and the structured
``calendar_after`` of each batch: a seat's render depends only on its own calendar and
the task (labels, meeting participants).

:func:`slim_events` folds the events over the task's calendars and drops a field only
when the value it would rebuild is *exactly* the value recorded (compared as JSON bytes);
a field that differs (a render from another version, an edited trace) is kept, and a
kept calendar re-synchronises the fold.  :func:`fatten_events` runs the same fold and
puts every dropped field back at its place in the event's data, so
``fatten_events(slim_events(e)) == e`` key order included — export writes the full shape.

Pure functions; the store (``saves/codec.py``) compresses the result.
"""

from __future__ import annotations

from typing import Any

import orjson

from .events import UNWRITTEN
from .model import Calendar, Task, calendar_to_json, item_from_json
from .observe import seat_view

#: event type -> the fields folding can rebuild (calendars kept as JSON are the fold's input)
DERIVED = {
    "agent_registered": ("calendar_render", "calendar"),
    "turn_start": ("calendar_render",),
    "decide_start": ("calendar_render", "calendar_snapshot_render"),
    "batch_applied": ("calendar_render_after",),
    "resolution": ("calendars",),
}


class _Recorded:
    """Every seat's calendar as the events *recorded* it (JSON, and its bytes).

    Not the game's fold (``engine.fold.Fold``, which re-validates each batch with the
    rules): a stored blob leaves out renders and calendar copies that these recorded
    values rebuild exactly, so restoring them must follow the recorded ``calendar_after``
    and ``resolution.calendars`` value for value, even in a trace whose record and rules
    disagree (an imported, unverified one).  Blobs already written depend on it.
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.cals: list[list] = [calendar_to_json(c) for c in task.calendars]
        self.keys: list[bytes] = [orjson.dumps(c) for c in self.cals]
        self._renders: dict[tuple[int, bytes], str] = {}

    def render(self, seat: int, cal: list, key: bytes) -> str:
        hit = self._renders.get((seat, key))
        if hit is None:
            t = self.task
            items = _calendar(cal)
            cals = tuple(t.calendars[:seat]) + (items,) + tuple(t.calendars[seat + 1:])
            hit = seat_view(seat, cals, t.labels, t.meetings, 0, t.cost_values, ()).render()
            self._renders[(seat, key)] = hit
        return hit

    def derive(self, typ: str, key: str, data: dict[str, Any]) -> Any:
        """The value folding gives for ``data[key]`` (before this event updates the fold)."""
        a = data.get("agent_id")
        if typ == "resolution":
            return list(self.cals)
        if not isinstance(a, int) or not 0 <= a < len(self.cals):
            return _MISSING
        if key == "calendar":
            return self.cals[a]
        if key == "calendar_render_after":
            after = data.get("calendar_after")
            if not isinstance(after, list):
                return _MISSING
            return self.render(a, after, orjson.dumps(after))
        return self.render(a, self.cals[a], self.keys[a])

    def update(self, typ: str, data: dict[str, Any]) -> None:
        """Move the fold past an event (its full data)."""
        if typ == "batch_applied":
            a, after = data.get("agent_id"), data.get("calendar_after")
            if isinstance(a, int) and 0 <= a < len(self.cals) and isinstance(after, list):
                self.cals[a], self.keys[a] = after, orjson.dumps(after)
        elif typ == "resolution" and isinstance(data.get("calendars"), list):
            cals = data["calendars"]
            if len(cals) == len(self.cals) and all(isinstance(c, list) for c in cals):
                self.cals = list(cals)
                self.keys = [orjson.dumps(c) for c in cals]


_MISSING = object()


def _calendar(raw: list) -> Calendar:
    return tuple(item_from_json(it) for it in raw)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, str) or isinstance(b, str):
        return a == b and type(a) is type(b)
    try:
        return a == b and orjson.dumps(a) == orjson.dumps(b)
    except TypeError:
        return False


def slim_events(task: Task, events: list[dict[str, Any]], *,
                trusted: bool = False) -> list[tuple[dict[str, Any], list | None]]:
    """``[(data_without_derivable_fields, [[key, position], ...] or None), ...]`` per event.

    ``events`` are ``{"type", "data", ...}`` dicts; only ``data`` is slimmed.

    ``trusted``: the events were just made by this engine (``engine.game``), whose renders
    and calendar copies are by construction what the fold rebuilds (every calendar change
    is a ``batch_applied`` with its ``calendar_after`` or a ``resolution`` with all
    calendars; a render depends only on the seat, its calendar and the task).  Then every
    derivable field is dropped without rebuilding it to compare, which is most of the cost.
    ``tests/engine/test_lean.py`` holds trusted slimming to the compared result over games
    of every protocol, channel set and seat kind.  Anything read from outside (an imported
    or an older trace) is compared, never trusted.
    """
    fold = None if trusted else _Recorded(task)
    seats = len(task.calendars)
    out: list[tuple[dict[str, Any], list | None]] = []
    append = out.append
    for ev in events:
        typ, data = ev.get("type"), ev.get("data")
        keys = DERIVED.get(typ) if isinstance(data, dict) else None
        if not keys:
            append((data, None))
            continue
        if fold is not None:
            dropped = _compared(fold, typ, keys, data)
        else:  # trusted: every field the fold has what it needs to rebuild (not whether it would match)
            dropped = [key for key in keys if key in data]
            if dropped and typ != "resolution":  # a seat's render or calendar: a seat to render it for
                a = data.get("agent_id")
                if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < seats:
                    dropped = []
                elif "calendar_render_after" in dropped and not isinstance(data.get("calendar_after"), list):
                    dropped.remove("calendar_render_after")
        if dropped:
            slim = dict(data)  # a copy less the dropped keys: the rest keep their order
            for k in dropped:
                del slim[k]
            order = list(data)
            append((slim, [[k, order.index(k)] for k in dropped]))
        else:
            append((data, None))
    return out


def _compared(fold: _Recorded, typ: str, keys: tuple[str, ...], data: dict[str, Any]) -> list[str]:
    """The fields of ``data`` whose recorded value is exactly what ``fold`` rebuilds; moves the fold past the event."""
    dropped = []
    for key in keys:
        if key not in data:
            continue
        if data[key] is UNWRITTEN:  # left for this fold to write (play_game(renders=False))
            dropped.append(key)
            continue
        try:
            derived = fold.derive(typ, key, data)
        except Exception:  # an odd calendar: keep the field
            derived = _MISSING
        if derived is not _MISSING and _same(derived, data[key]):
            dropped.append(key)
    try:
        fold.update(typ, data)
    except Exception:
        pass
    return dropped


def fill_unwritten(task: Task, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with every :data:`engine.events.UNWRITTEN` render written: the value the
    fold rebuilds, as :func:`fatten_events` writes it (the events themselves are not changed;
    an event with nothing unwritten is returned as it is)."""
    fold = _Recorded(task)
    out: list[dict[str, Any]] = []
    for ev in events:
        typ, data = ev.get("type"), ev.get("data")
        keys = DERIVED.get(typ) if isinstance(data, dict) else None
        if keys:
            gaps = [k for k in keys if data.get(k) is UNWRITTEN]
            if gaps:
                data = dict(data)
                for k in gaps:
                    data[k] = fold.derive(typ, k, data)
                ev = dict(ev, data=data)
            try:
                fold.update(typ, data)
            except Exception:
                pass
        out.append(ev)
    return out


def fatten_events(task: Task, slimmed: list[tuple[str, dict[str, Any], list | None]]) -> list[dict[str, Any]]:
    """The full data of every event from ``[(type, slim_data, dropped), ...]`` (inverse of slimming)."""
    fold = _Recorded(task)
    out: list[dict[str, Any]] = []
    for typ, data, dropped in slimmed:
        if dropped:
            values = {k: fold.derive(typ, k, data) for k, _ in dropped}
            items = list(data.items())
            for k, pos in sorted(dropped, key=lambda kp: kp[1]):
                items.insert(pos, (k, values[k]))
            data = dict(items)
        if typ in DERIVED and isinstance(data, dict):
            try:
                fold.update(typ, data)
            except Exception:
                pass
        out.append(data)
    return out
