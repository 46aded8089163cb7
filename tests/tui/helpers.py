"""Drive a CalBench app with key presses only, like a person following the on-screen hints.

The driver *reads* the app's state to know what is on screen (whose turn it is, which
screen is up) but *acts* only through ``pilot.press`` — every move of the human seat goes
through the bindings, the composer and the batch builder, never through Python calls.
"""

from __future__ import annotations

import asyncio
import time

from calbench_tui.app import CalBenchApp, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.end import EndScreen
from engine.rules import BatchOutcome


#: How long a wait may take before the test fails: a bound on a broken test, never a speed check,
#: so it is generous (two CPU-burning processes beside the suite slow a game by keys several times).
PATIENCE = 120.0


async def wait_for(pilot, predicate, timeout: float = PATIENCE, what: str = "a condition") -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}; screen:\n{screen_text(pilot.app)}")
        await asyncio.sleep(0.005)  # (pilot.pause would force a full repaint each time)


async def wait_painted(pilot, *texts: str, timeout: float = PATIENCE, what: str | None = None,
                       flat: bool = False) -> str:
    """Wait until every one of ``texts`` is on the screen as painted (``screen_text``), not
    merely in a widget's state; returns that screen.  ``flat``: compare with the screen's
    words joined by single spaces (text wrapped over lines).  ``timeout`` only bounds a broken test."""
    t0 = time.monotonic()
    while True:
        text = screen_text(pilot.app)
        seen = " ".join(text.split()) if flat else text
        if all(t in seen for t in texts):
            return text
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what or texts!r} on the screen; screen:\n{text}")
        await asyncio.sleep(0.02)


def human_waiting(app: CalBenchApp) -> bool:
    gs = app.game_screen
    if app.status in ("completed", "failed", "stopped"):
        return True
    if isinstance(app.screen, (DecisionScreen, EndScreen)):
        return True
    return gs is not None and gs.pending is not None and app.screen is gs


async def press_to_slot(pilot, widget, slot: int) -> None:
    """Move a cursor-bearing widget (calendar, batch builder) to ``slot`` with up/down keys."""
    n = len(widget.calendar) if hasattr(widget, "calendar") else widget.plan.num_slots
    delta = (slot - widget.cursor) % n
    keys = ["down"] * delta if delta <= n // 2 else ["up"] * (n - delta)
    if keys:
        await pilot.press(*keys)


async def speak_turn(pilot, app: CalBenchApp, log: list[str] | None = None) -> None:
    """One CHEAP_TALK turn, IMAP-style: ask / answer costs, propose the cheapest, end the turn."""
    gs = app.game_screen
    obs = gs.pending.obs
    m = obs.meeting
    if obs.is_participant and obs.view.seat == min(m.participants):
        if obs.turn == 0:
            await pilot.press("r")
        elif gs.model.reported and not gs.model.my_proposal:
            await pilot.press("p")  # the cursor sits on the cheapest common slot
        elif not gs.model.my_proposal:
            # Nobody answered in costs (free-text peers): propose our own first free slot.
            cal = gs.calendar.calendar
            free = [s for s, it in enumerate(cal) if it is None]
            if free:
                await press_to_slot(pilot, gs.calendar, free[0])
                await pilot.press("p")
    elif obs.is_participant and gs.model.cost_request and any(
            d.payload and d.payload.get("kind") == "cost_request" for d in obs.inbox):
        await pilot.press("c")
    if log is not None:
        log.append(screen_text(app))
    await pilot.press("e")


async def decide(pilot, app: CalBenchApp, log: list[str] | None = None) -> None:
    ds = app.screen
    assert isinstance(ds, DecisionScreen)
    if log is not None:
        log.append(screen_text(app))
    if not ds.decision:
        await pilot.press("n")
        return
    plan = ds.plan
    if plan.target is None or not isinstance(plan.check(), BatchOutcome):
        # No agreed slot: pick our own cheapest (a free slot, else a movable errand's).
        cal = plan.calendar
        free = [s for s, it in enumerate(cal) if it is None]
        target = free[0] if free else next(s for s, it in enumerate(cal)
                                           if it is not None and not getattr(it, "blocked", True))
        await press_to_slot(pilot, ds.builder, target)
        await pilot.press("enter")
    await pilot.press("s")
    if not isinstance(plan.check(), BatchOutcome):
        await pilot.press("s")  # submit anyway: the engine rejects it and we retry


async def play_to_end(pilot, app: CalBenchApp, *, log: list[str] | None = None, timeout: float = 4 * PATIENCE,
                      stop_after_rounds: int | None = None) -> None:
    """Play the human seat by keys until the end screen (or until ``stop_after_rounds``)."""
    t0 = time.monotonic()
    while True:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"the game did not finish in {timeout}s; screen:\n{screen_text(app)}")
        await wait_for(pilot, lambda: human_waiting(app), what="the human's turn")
        if isinstance(app.screen, EndScreen):
            await wait_painted(pilot, "GAME OVER", what="the end screen painted")  # not only pushed
            return
        if app.status in ("failed", "stopped"):
            raise AssertionError(f"game {app.status}: {app.error}")
        if stop_after_rounds is not None and app.game_screen.round >= stop_after_rounds:
            return
        if isinstance(app.screen, DecisionScreen):
            await decide(pilot, app, log)
        elif app.game_screen is not None and app.game_screen.pending is not None:
            await speak_turn(pilot, app, log)
        elif app.status == "completed":
            await wait_for(pilot, lambda: isinstance(app.screen, EndScreen), what="the end screen")
        await asyncio.sleep(0)
