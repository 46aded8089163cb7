"""What a first-time participant reads, pinned by Pilot (issue 13): each test drives the real
app by keys, at 160×50 or 80×24, and reads the screen as text."""

from __future__ import annotations

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.settings import Settings

from .helpers import speak_turn, wait_for

WIDE = (160, 50)
SMALL = (80, 24)


def _settings(**kw) -> Settings:
    kw.setdefault("seat", 2)
    kw.setdefault("seed", 7)
    return Settings(deterministic=True, cursor_blink=False, **kw)


def _my_turn(app) -> bool:
    gs = app.game_screen
    return gs is not None and gs.pending is not None and app.screen is gs


async def test_messages_that_arrive_in_a_hidden_thread_wrap_at_the_pane_width():
    """Issue 13.1: open another thread, end the turn, come back: the feed is wrapped at its
    real width, not at 20 columns."""
    app = make_app(settings=_settings())
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: _my_turn(app), what="the first turn")
        await pilot.press("r", "right_square_bracket")  # ask costs, then look at the DM0 thread
        assert app.game_screen.chat.active == "dm:0"
        await pilot.press("e")
        await wait_for(pilot, lambda: _my_turn(app) and app.game_screen.reported, what="the answers")
        await pilot.press("left_square_bracket")
        assert app.game_screen.chat.active == "feed"
        await pilot.pause()
        text = screen_text(app)
        # The bots' answers arrived while the feed was hidden: each reads on one wide line.
        assert "Agent 4 → you (DM): Agent 4's costs for meeting M1 — free:" in text, text
        log = app.game_screen.chat.log_for("feed")
        assert max(len(line.text.rstrip()) for line in log.lines) > 60


async def _to_decision(pilot, app, *, round_: int = 0) -> DecisionScreen:
    """Play the talk by the IMAP routine until DECISION of round ``round_`` opens (deciding earlier rounds)."""
    from .helpers import decide, human_waiting

    while True:
        await wait_for(pilot, lambda: human_waiting(app), what="the human's turn")
        if isinstance(app.screen, DecisionScreen):
            if app.screen.obs.round == round_ and app.screen.decision:
                return app.screen
            await decide(pilot, app)
        else:
            await speak_turn(pilot, app)


async def test_decision_warns_when_the_meeting_goes_to_a_slot_nobody_talked_about():
    app = make_app(settings=_settings())
    async with app.run_test(size=WIDE) as pilot:
        ds = await _to_decision(pilot, app)
        assert ds.talk and ds.plan.target == ds.talk[0]
        assert "✓ valid: the engine would accept this batch" in screen_text(app)
        other = next(s for s, it in enumerate(ds.plan.calendar) if it is None and s not in ds.talk)
        from .helpers import press_to_slot

        await press_to_slot(pilot, ds.builder, other)
        await pilot.press("enter")
        text = " ".join(str(ds.query_one("#check").render()).split())
        assert "⚠" in screen_text(app)
        assert f"The talk was about slot {ds.talk[0]}, but you place M1 at slot {other}" in text
        await pilot.press("s")  # first press: the warning again, nothing sent
        assert app.screen is ds and not ds.request.done
        await pilot.press("s")
        await wait_for(pilot, lambda: ds.request.done, what="the batch to be sent")


async def test_decision_warns_that_moving_a_scheduled_meeting_breaks_it():
    app = make_app(settings=_settings())
    async with app.run_test(size=WIDE) as pilot:
        ds = await _to_decision(pilot, app, round_=1)  # M2 (0, 1, 2); M1 (2, 3, 4) is on the calendar
        from engine.model import MeetingCopy

        from .helpers import press_to_slot

        m1 = next(s for s, it in enumerate(ds.plan.calendar) if isinstance(it, MeetingCopy))
        await press_to_slot(pilot, ds.builder, m1)
        await pilot.press("m")
        text = " ".join(str(ds.query_one("#check").render()).split())
        assert f"Moving M1 from slot {m1}" in text and "breaks it: Agents 3 and 4 keep their copies" in text


async def test_a_message_typed_during_decision_is_sent_on_the_next_turn(tmp_path):
    app = make_app(settings=_settings())
    async with app.run_test(size=WIDE) as pilot:
        ds = await _to_decision(pilot, app)
        await pilot.press("t")  # back to the talk view
        await pilot.press("i", *"see you all", "enter", "escape")
        # one DM to each other participant of M1
        assert [(m.content, m.to) for m in app.game_screen.outbox] == [("see you all", 3), ("see you all", 4)]
        await pilot.press("b")
        assert isinstance(app.screen, DecisionScreen) and app.screen.request is ds.request
        await pilot.press("s")
        # Round 2 (M2 with 0, 1, 2): the message is still queued at seat 2's first turn ...
        await wait_for(pilot, lambda: _my_turn(app) and app.game_screen.round == 1, what="round 2's turn")
        assert [m.content for m in app.game_screen.outbox] == ["see you all"] * 2
        assert "still queued" in screen_text(app)
        await pilot.press("e")
        await wait_for(pilot, lambda: not app.game_screen.outbox)
        feed = "\n".join(line.text for line in app.game_screen.chat.log_for("feed").lines)
        assert "see you all" in feed.split("Round 2/5")[-1]
        assert "dropped" not in feed
