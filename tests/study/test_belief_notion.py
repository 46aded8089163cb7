"""Issue 20, item 3: the belief grid asks the notion its truth is scored with — could the
seat have taken the meeting in the slot as the round started (free, or a movable errand)?
The participant's own row shows their own calendar by the same notion at the same moment,
and that row equals the truth the export would give for their own seat."""

from __future__ import annotations

import asyncio

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Errand, MeetingCopy
from engine.privacy import feasibility_truth
from lab.study.seat import BeliefRequest, StudySeat
from personas.registry import make_personas
from calbench_tui.screens.study_beliefs import BeliefGridScreen, could_host_row


class _View:
    def __init__(self, calendar):
        self.calendar = calendar


def test_the_own_row_uses_the_truths_notion():
    cal = (None, Errand(1, 10), Errand(2, 100, blocked=True), MeetingCopy(3))
    assert could_host_row(_View(cal), 4) == [True, True, False, False]


async def test_the_grid_asks_the_truths_question_and_shows_the_own_row_by_it():
    from textual.app import App

    from calbench_tui.app import screen_text

    start = _View((None, Errand(1, 10), Errand(2, 100, blocked=True), MeetingCopy(3)))
    after = _View((MeetingCopy(5), Errand(1, 10), Errand(2, 100, blocked=True), MeetingCopy(3)))
    req = BeliefRequest(round=2, seat=0, num_slots=4, targets=(1,), view=after, messages=(), start_view=start)

    class Host(App):
        def on_mount(self):
            self.push_screen(BeliefGridScreen(req))

    app = Host()
    async with app.run_test(size=(140, 30)) as pilot:
        for _ in range(200):
            text = screen_text(app)
            if "round 3 started" in text:
                break
            await pilot.pause(0.01)
    flat = " ".join(text.split())
    assert "After round 3: as round 3 started, could each agent have taken the meeting" in flat
    assert "surely could not (a blocked errand or a meeting was there)" in flat
    assert "surely busy" not in flat and "surely free" not in flat
    you = next(line.strip() for line in text.splitlines() if line.strip().startswith("you "))
    # slot 0 was free as the round started (the meeting came later): ✓, as its truth
    assert you.split()[1:5] == ["✓", "✓", "✗", "✗"]


def test_the_own_row_is_the_truth_at_the_start_of_the_round():
    """In a real game the participant's own row (from the start view the engine hands the
    grid) equals feasibility_truth — what beliefs.csv scores — for that seat and round."""
    task = generate_scenario(21)
    got: list[BeliefRequest] = []

    async def ask(req):
        got.append(req)
        return {}

    async def go():
        seats = make_personas("imap", task.num_agents)
        seats[1] = StudySeat(seats[1], model="sim", talk_seconds=None, decision_seconds=None,
                             rounds=set(range(len(task.meetings))), targets="all", ask_beliefs=ask,
                             watched_rounds=True)  # every round, the seat's meeting or not
        return await run_game(task, seats, GameConfig(deterministic=True))

    res = asyncio.run(go())
    events = res.trace["events"]
    assert len(got) == len(task.meetings)
    changed = 0
    for req in got:
        assert req.start_view is not None
        own = could_host_row(req.start_view, req.num_slots)
        assert own == feasibility_truth(task, events, req.round, req.seat)
        changed += own != could_host_row(req.view, req.num_slots)
    assert changed  # the view after the round differs: the moment matters
