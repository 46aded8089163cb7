"""Every screen a seat sees during a game shows its own private world and nothing of the others'.

For each seat i a whole game is played by keys as seat i; the text of every screen shown
on the way (the game screen at each of its turns and after each round, the batch builder,
the help screen) is searched for another seat's private labels and errands — the things a
leak through the interface would show.  The end screen, where everything is revealed on
purpose once the game is over, is checked to show them (so the search is not blind).
"""

from __future__ import annotations

import re

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from engine.generate import generate_scenario
from engine.model import Errand

from .helpers import play_to_end

ITEM = re.compile(r"(?:Errand|Blocked) #(\d+)")


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
    shown_own = set()
    for text in screens:
        for probe in probes:
            assert probe not in text, f"seat {seat} saw another seat's label {probe!r}:\n{text}"
        ids = {int(x) for x in ITEM.findall(text)}
        assert not ids & other_items, f"seat {seat} saw another seat's errands {ids & other_items}:\n{text}"
        shown_own |= ids & own_items
    assert shown_own, "the seat's own errands were never on screen: the search would be blind"
    assert any(label[:12] in text for label in own_labels for text in screens), "own labels never shown"
    # After the game every calendar is revealed, other seats' included.
    assert any(f"E{e}:" in end_text or f"B{e}:" in end_text for e in other_items)
