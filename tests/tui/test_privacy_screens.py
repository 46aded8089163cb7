"""Every screen a seat sees during a game shows its own private world and nothing of the others'.

For each seat i a whole game is played by keys as seat i; the text of every screen shown
on the way (the game screen at each of its turns and after each round, the batch builder,
the help screen) is searched for another seat's private labels and errands, the engine's
render lines of another seat's calendar (``Errand #N (cost=C)``), and cumulative costs
that are not the seat's own — the things a leak through the interface would show.  The
end screen, where everything is revealed on purpose once the game is over, is checked to
show them, and the searches are run on text that does hold them (so they are not blind).
"""

from __future__ import annotations

import re

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from engine.generate import generate_scenario
from engine.model import Errand
from engine.render import render_calendar, render_item

from .helpers import play_to_end

ITEM = re.compile(r"(?:Errand|Blocked) #(\d+)")
#: Where a screen states a running total of costs ("your cost so far 3", "Your total: 3 → 4").
TOTALS = re.compile(r"(?:cost so far|Your total:)\s*(\d+)(?:\s*→\s*(\d+))?")


def _render_lines(task, seat: int) -> set[str]:
    """The engine's render text of every errand that exists only on other seats' calendars."""
    return {render_item(it) for a, cal in enumerate(task.calendars) if a != seat
            for it in cal if isinstance(it, Errand)}


def _running_totals(trace, seat: int) -> set[int]:
    """Every cumulative cost ``seat`` had during the game (0, then after each applied batch)."""
    out, total = {0}, 0
    for e in trace["events"]:
        if e["type"] == "batch_applied" and e["data"].get("agent_id") == seat:
            total += e["data"].get("cost") or 0
            out.add(total)
    return out


def _totals_shown(text: str) -> set[int]:
    return {int(x) for m in TOTALS.finditer(text) for x in m.groups() if x is not None}


def _secrets(task, seat: int):
    mine = {m.id for m in task.meetings if seat in m.participants}
    own_labels = [lab.text for (a, _), lab in task.labels.errands.items() if a == seat]
    own_labels += [lab.text for mid, lab in task.labels.meetings.items() if mid in mine]
    others = [lab.text for (a, _), lab in task.labels.errands.items() if a != seat]
    others += [lab.text for mid, lab in task.labels.meetings.items() if mid not in mine]
    # A label may be cut short on screen: also look for its first 18 characters, unless the
    # seat's own labels start the same way.
    probes = set()
    for text in others:
        probes.add(text)
        head = text[:18]
        if len(text) > 18 and not any(o.startswith(head) for o in own_labels):
            probes.add(head)
    own_items = {it.errand_id for it in task.calendars[seat] if isinstance(it, Errand)}
    other_items = {it.errand_id for a, cal in enumerate(task.calendars) if a != seat
                   for it in cal if isinstance(it, Errand)}
    return probes, own_items, other_items, own_labels


@pytest.mark.parametrize("seat", [0, 1, 2, 3, 4])
async def test_no_screen_shows_another_seats_private_data(seat):
    task = generate_scenario(7, cost_mode="varied")
    probes, own_items, other_items, own_labels = _secrets(task, seat)
    app = make_app(settings=Settings(seat=seat, deterministic=True), task=task)
    screens: list[str] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        screens.append(screen_text(app))
        await pilot.press("escape")
        await play_to_end(pilot, app, log=screens)
        assert isinstance(app.screen, EndScreen)
        end_text = screen_text(app)
        app.end_screen.query_one("#end").scroll_end(animate=False)
        await pilot.pause()
        end_text += screen_text(app)
    assert len(screens) >= 6  # help, turns in several rounds, at least one batch builder
    trace = app.result.trace
    own_totals = _running_totals(trace, seat)
    other_totals = {a: _running_totals(trace, a) for a in range(task.num_agents) if a != seat}
    render_lines = _render_lines(task, seat)
    # The searches are not blind: they find another seat's render lines in the engine's own
    # render of that calendar, and the seat's own running cost on its screens.
    other = next(a for a in range(task.num_agents) if a != seat)
    assert any(line in render_calendar(task.calendars[other]) for line in render_lines)
    shown_totals: set[int] = set()
    shown_own = set()
    for text in screens:
        for probe in probes:
            assert probe not in text, f"seat {seat} saw another seat's label {probe!r}:\n{text}"
        ids = {int(x) for x in ITEM.findall(text)}
        assert not ids & other_items, f"seat {seat} saw another seat's errands {ids & other_items}:\n{text}"
        shown_own |= ids & own_items
        for line in render_lines:
            assert line not in text, f"seat {seat} saw another seat's calendar line {line!r}:\n{text}"
        totals = _totals_shown(text)
        assert totals <= own_totals, (f"seat {seat} saw a running cost {totals - own_totals} that is not its own "
                                      f"(its own: {sorted(own_totals)}; others': {other_totals}):\n{text}")
        shown_totals |= totals
    assert shown_totals, "no running cost was ever on screen: the cost search would be blind"
    # Someone else's running cost differs from all of ours somewhere, so the check can bite.
    assert any(t - own_totals for t in other_totals.values())
    assert shown_own, "the seat's own errands were never on screen: the search would be blind"
    assert any(label[:12] in text for label in own_labels for text in screens), "own labels never shown"
    # After the game every calendar is revealed, other seats' included.
    assert any(f"E{e}:" in end_text or f"B{e}:" in end_text for e in other_items)
    # ... and so are the other seats' costs (the seat table of the end screen).
    assert any(str(max(t)) in end_text for t in other_totals.values() if max(t))
