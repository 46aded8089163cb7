"""The replay screen driven by keys (Pilot): steps, round jumps, views, the verification badge.

Traces: one of ours (scripted IMAP on generated scenario 3), one with prompts, replies
and thinking (a test persona), a tampered copy, and the paper authors' traces (skipped
cleanly when ../shared/compat is absent).  Nothing here calls a persona during replay:
the screen folds the recorded events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import json

import pytest
from doubles import PlanPersona
from textual.app import App

from calbench_tui.app import screen_text
from calbench_tui.screens.end import EndScreen
from calbench_tui.replay_app import ReplayApp
from calbench_tui.screens.replay import ReplayScreen
from calbench_tui.widgets.calendar import CalendarView
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.model import Task, item_from_json
from engine.oracle import solve
from engine.privacy import belief_updates
from personas.registry import make_personas

from ..tui.helpers import wait_for, wait_painted

SIZE = (150, 44)


def run_sync(coro):
    """Run a coroutine to the end on a fresh loop in another thread (safe inside or outside a loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def _imap_trace(seed: int = 3) -> dict:
    res = run_sync(run_game(generate_scenario(seed), make_personas("imap", 5), GameConfig(deterministic=True)))
    return json.loads(json.dumps(res.trace))


class Chatty(PlanPersona):
    """PlanPersona that also records a text prompt, thinking and a raw reply (like an LLM seat)."""

    kind = "test"
    model = "chatty"

    def prompt(self, obs):
        return f"PROMPT for seat {obs.view.seat}, round {obs.round}, turn {getattr(obs, 'turn', '-')}"

    async def speak(self, obs):
        reply = await super().speak(obs)
        return dataclasses.replace(reply, thinking=f"seat {obs.view.seat} ponders round {obs.round}",
                                   raw={"choices": [{"message": {"content": "RAW-REPLY"}}]})


def _chatty_trace() -> dict:
    task = generate_scenario(11)
    plan = solve(task).assignments
    res = run_sync(run_game(task, [Chatty(plan) for _ in range(task.num_agents)], GameConfig(deterministic=True)))
    return json.loads(json.dumps(res.trace))


@pytest.fixture(scope="module")
def ours() -> dict:
    return _imap_trace()


@pytest.fixture(scope="module")
def chatty() -> dict:
    return _chatty_trace()


def first_index(trace: dict, etype: str, **where) -> int:
    for i, ev in enumerate(trace["events"]):
        if ev["type"] == etype and all(ev["data"].get(k) == v for k, v in where.items()):
            return i
    raise AssertionError(f"no {etype} {where}")


async def goto(pilot, screen: ReplayScreen, index: int) -> None:
    """Walk to an event with the keys only: ``]`` while a whole round lies before it, then arrows."""
    starts = screen.model.round_starts
    while any(screen.pos < k <= index for k in starts):
        await pilot.press("right_square_bracket")
    after = next((k for k in starts if k > index), None)
    if after is not None and after - index < index - screen.pos:
        await pilot.press("right_square_bracket")  # closer from the next round's start
    while screen.pos != index:
        await pilot.press("right" if screen.pos < index else "left")
    await pilot.pause()


# ---------------------------------------------------------------------------------------
async def test_steps_round_jumps_and_ends(ours):
    app = ReplayApp(ours)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        assert isinstance(s, ReplayScreen) and s.pos == 0
        n = len(ours["events"])
        await wait_painted(pilot, f"event 1/{n} (seq 0)")
        await pilot.press("right")
        assert s.pos == 1
        await pilot.press("left", "left")
        assert s.pos == 0  # never before the first event
        starts = [i for i, e in enumerate(ours["events"]) if e["type"] == "round_start"]
        assert len(starts) == 5
        await pilot.press("right_square_bracket")
        assert s.pos == starts[0] and ours["events"][s.pos]["data"]["round"] == 0
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert s.pos == starts[2]
        await pilot.press("right", "right", "left_square_bracket")  # mid-round: back to this round's start
        assert s.pos == starts[2]
        await pilot.press("left_square_bracket")
        assert s.pos == starts[1]
        await pilot.press("end")
        assert s.pos == n - 1 and ours["events"][s.pos]["type"] == "game_end"
        # game_end carries the number of rounds as its round: no "round 6/5" (found by hand)
        status = str(s.status_text())
        assert f"event {n}/{n}" in status and "round" not in status.split("\n")[-1], status
        await pilot.press("left")  # the last round's last event
        assert " · round 5/5 · " in str(s.status_text())
        await pilot.press("end")
        await pilot.press("right", "right_square_bracket")
        assert s.pos == n - 1  # nothing after the end
        await pilot.press("home")
        assert s.pos == 0
        await pilot.pause()
        # The timeline follows the cursor: its highlighted option is the current event.
        tl = s.query_one("#timeline")
        assert tl.get_option_at_index(tl.highlighted).id == "ev0"
        # ...and moving in the timeline with up/down moves the replay too.
        tl.focus()
        await pilot.press("down", "down")
        await pilot.pause()
        assert s.pos == 2


async def test_calendars_view_shows_each_batch_as_it_lands(ours):
    app = ReplayApp(ours)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        i = first_index(ours, "batch_applied")
        ev = ours["events"][i]["data"]
        await goto(pilot, s, i)
        text = screen_text(app)
        assert "★" in text  # the meeting just placed is marked
        slot = next(a["slot"] for a in ev["actions"] if a["type"] == "schedule")
        folded = s.model.calendars_at(s.pos)[ev["agent_id"]]
        assert folded == tuple(item_from_json(it) for it in ev["calendar_after"])
        assert folded[slot].meeting_id == ev["actions"][-1]["meeting_id"]
        # One step back, the meeting is not on that calendar yet (nothing is read from later events).
        await pilot.press("left")
        before = s.model.calendars_at(s.pos)[ev["agent_id"]]
        assert getattr(before[slot], "meeting_id", None) != ev["actions"][-1]["meeting_id"]
        # At the end, the folded calendars are the recorded final state.
        await pilot.press("end")
        final = [[item_from_json(it) for it in cal] for cal in ours["final_state"]["calendars"]]
        assert [list(c) for c in s.model.calendars_at(s.pos)] == final


async def test_seat_view_is_that_seat_at_that_moment(chatty):
    trace = chatty
    r0 = trace["events"][first_index(trace, "round_start")]["data"]["meeting"]
    first, other = r0["speaker_order"][0], r0["speaker_order"][1]
    msg = first_index(trace, "dm_sent", from_agent=first, to_agent=other)
    app = ReplayApp(trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        await goto(pilot, s, msg)
        await pilot.press(str(other))  # seat view on the recipient
        content = trace["events"][msg]["data"]["content"]
        text = await wait_painted(pilot, f"Agent {other} (chatty)", "Inbox this round (1)", content)
        assert s.active_view() == "seat" and s.view_seat == other
        assert f"Agent {other} (chatty)" in text
        assert "Inbox this round (1)" in text and content in text
        assert "PROMPT for seat" not in text  # it has not had its turn yet at this moment
        # Its turn comes: now the prompt it was sent is there.
        turn = next(k for k in range(msg, len(trace["events"])) if trace["events"][k]["type"] == "turn_start"
                    and trace["events"][k]["data"]["agent_id"] == other)
        await goto(pilot, s, turn)
        text = await wait_painted(pilot, f"PROMPT for seat {other}, round 0, turn 0")
        assert f"PROMPT for seat {other}, round 0, turn 0" in text
        # Its own calendar, as it was then, with its own private labels.
        cv = s.query_one("#seat-calendar", CalendarView)
        task = Task.from_row(trace["task"])
        assert cv.calendar == s.model.calendars_at(s.pos)[other]
        own = next((task.labels.errands.get((other, it.errand_id)) for it in cv.calendar
                    if it is not None and hasattr(it, "errand_id")), None)
        if own is not None:
            assert own.text[:30] in text
        # The first speaker at that moment: its reply, thinking and raw reply.
        await pilot.press(str(first))
        text = await wait_painted(pilot, f"seat {first} ponders round 0", "Inbox this round (0)")
        assert f"seat {first} ponders round 0" in text and "RAW-REPLY" in text
        assert "Inbox this round (0)" in text
        # The same seat one round later sees that round's prompt, not the old one.
        await pilot.press("right_square_bracket")
        await pilot.press("right", "right", "right")
        await pilot.pause()
        r1 = trace["events"][s.pos]["data"]["round"]
        assert r1 == 1
        await wait_painted(pilot, "round 1")


async def test_messages_and_beliefs_views(ours):
    trace = ours
    i = first_index(trace, "dm_sent")
    costs = next(k for k, e in enumerate(trace["events"]) if e["type"] == "dm_sent"
                 and (e["data"].get("payload") or {}).get("kind") == "costs")
    task = Task.from_row(trace["task"])
    rows = [u for u in belief_updates(task, trace["events"]) if u["seq"] == trace["events"][costs]["seq"]]
    assert rows, "an IMAP costs reply moves beliefs"
    app = ReplayApp(trace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        await goto(pilot, s, i)
        await pilot.press("m")
        text = await wait_painted(pilot, "1 message(s) so far")
        assert "1 message(s) so far" in text and trace["events"][i]["data"]["content"][:30] in text
        await goto(pilot, s, costs)
        await pilot.press("b")
        text = await wait_painted(pilot, f"Belief updates caused by event {trace['events'][costs]['seq']}")
        assert "imap_costs" in text
        moved = sum(abs(u["after"] - 0.5) - abs(u["before"] - 0.5) for u in rows)
        assert f"VPS moved by {moved:+.3f}" in text
        # The sender is the target, the recipient the observer: one pair moved this round.
        sender, reader = trace["events"][costs]["data"]["from_agent"], trace["events"][costs]["data"]["to_agent"]
        assert {(u["target"], u["observer"]) for u in rows} == {(sender, reader)}
        # A non-message event moves nothing.
        await pilot.press("home")
        await pilot.pause()
        await wait_painted(pilot, "This event moves no belief.")
        # By the end, the running VPS per target is the game's per-target VPS.
        await pilot.press("end")
        await pilot.pause()
        _, per_target = s.model.vps_so_far(s.pos)
        assert per_target == pytest.approx(trace["metrics"]["per_target_vps"], abs=1e-6)


async def test_badge_verified_and_where_a_tampered_copy_stops_matching(ours):
    app = ReplayApp(ours)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await wait_painted(pilot, "✓ verified: all 5 rounds match")
    bad = copy.deepcopy(ours)
    k = first_index(bad, "batch_applied", round=2)
    del bad["events"][k]  # a batch of round 2 goes missing
    app = ReplayApp(bad)
    async with app.run_test(size=SIZE) as pilot:
        s = app.screen
        assert not s.model.verified
        res2 = first_index(bad, "resolution", round=2)
        text = await wait_painted(pilot, "✗ stops matching")
        # (shown from 1, as in the game: the trace's round 2 is the third round)
        assert f"✗ stops matching at round 3 (event {bad['events'][res2]['seq']})" in text
        await goto(pilot, s, res2)
        await wait_painted(pilot, "✗ differs from the record")
        # Earlier rounds still verify.
        assert [r["matches"] for r in s.model.fold.rounds[:2]] == [True, True]
    # Only the recorded state hash of round 1 changed: still caught.
    bad = copy.deepcopy(ours)
    k = first_index(bad, "resolution", round=1)
    bad["events"][k]["data"]["state_hash"] = "0" * 16
    app = ReplayApp(bad)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await wait_painted(pilot, f"✗ stops matching at round 2 (event {bad['events'][k]['seq']})")


async def test_autoplay_speed_and_pause(ours):
    app = ReplayApp(ours)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        await pilot.press("plus", "plus", "plus")  # 32 events a second
        await pilot.press("space")
        assert s.playing
        await wait_for(pilot, lambda: s.pos > 2, what="autoplay to move")  # not a fixed sleep: a loaded machine plays less in it
        await pilot.press("space")
        assert not s.playing
        moved = s.pos
        assert moved > 2
        await pilot.pause(0.2)
        assert s.pos == moved  # paused means paused
        await pilot.press("minus")
        await wait_painted(pilot, "paused at 16 events/s")


async def test_the_authors_traces_replay_by_folding(compat_dir):
    for path in sorted(compat_dir.glob("authors_trace_*.json")):
        trace = json.loads(path.read_text())
        app = ReplayApp(trace)
        async with app.run_test(size=SIZE) as pilot:
            s = app.screen
            text = await wait_painted(pilot, "✓ verified")
            assert "✓ verified" in text and "authors' harness" in text, path.name
            # Their events carry no seq: the index stands in for it.
            await pilot.press("end")
            final = [[item_from_json(it) for it in cal] for cal in trace["final_state"]["calendars"]]
            assert [list(c) for c in s.model.calendars_at(s.pos)] == final
            assert s.model.beliefs, path.name  # typed messages, read from their JSON content
            if "_imap_" not in path.name:
                continue
            # A seat view shows the prompt their harness recorded for that seat.
            i = first_index(trace, "turn_start")
            seat = trace["events"][i]["data"]["agent_id"]
            await pilot.press("home")
            await goto(pilot, s, i)
            await pilot.press(str(seat))
            await pilot.pause()
            prompt = trace["events"][i]["data"]["prompt_sent"]
            await wait_painted(pilot, prompt.strip().splitlines()[0])
            # An IMAP costs reply moves the requester's belief about the replier.
            j = next(k for k, e in enumerate(trace["events"]) if e["type"] == "dm_sent" and '"costs"' in e["data"]["content"])
            await goto(pilot, s, j)
            await pilot.press("b")
            text = await wait_painted(pilot, f"Belief updates caused by event {j}")
            assert f"Belief updates caused by event {j}" in text and "imap_costs" in text
    # A tampered authors' trace is caught too.
    trace = json.loads(sorted(compat_dir.glob("authors_trace_*imap*.json"))[0].read_text())
    k = first_index(trace, "batch_applied")
    trace["events"][k]["data"]["actions"][-1]["slot"] = (trace["events"][k]["data"]["actions"][-1]["slot"] + 1) % 16
    app = ReplayApp(trace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_painted(pilot, "✗")
        assert not app.screen.model.verified


async def test_escape_closes_and_seat_argument_opens_the_seat_view(ours):
    app = ReplayApp(ours, seat=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s = app.screen
        assert s.active_view() == "seat" and s.view_seat == 3
        assert "A3 (you)" not in screen_text(app)  # the seat view, not the calendars table
        await pilot.press("c")
        await pilot.pause()
        await wait_painted(pilot, "A3 (you)")
        await pilot.press("escape")
        await pilot.pause()
        assert app.return_code == 0


class EndHost(App):
    def __init__(self, trace):
        super().__init__()
        self.trace = trace

    def on_mount(self) -> None:
        self.push_screen(EndScreen(self.trace, seat=2))


async def test_reachable_from_the_end_screen(ours):
    app = EndHost(ours)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, EndScreen)
        await pilot.press("v")
        await pilot.pause()
        assert isinstance(app.screen, ReplayScreen)
        assert app.screen.model.trace["game_id"] == ours["game_id"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, EndScreen)
