"""What the player sees while talking (issue 29.5), by keys with Pilot, reading what is painted.

The rules themselves (which slot ``a`` may agree to, whom a quick action goes to, which thread
fits a round, what a seat outside a meeting may know of it) are the seat model's and are tested
there (tests/personas/test_seat_model.py); these tests check that the screen follows them.
"""

from __future__ import annotations

from calbench_tui.app import make_app
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from lab.gamespec import resolve_task

from .helpers import decide, play_to_end, wait_for, wait_painted

WIDE = (160, 50)


def _app(task: str = "canonical:6", **kw):
    # canonical:6: M1 (0, 1, 3) without seat 2, M2 (2, 3, 4), M3 (0, 1, 3) without seat 2 again
    return make_app(settings=Settings(seat=2, deterministic=True, cursor_blink=False, show_help=False, **kw),
                    task=resolve_task(task))


def _feed(gs) -> str:
    """The feed's words, whatever the wrapping."""
    return " ".join(" ".join(line.text.strip() for line in gs.chat.log_for("feed").lines).split())


def _told(app, words: str) -> bool:
    return any(words in n.message for n in app._notifications)


def _my_turn(app) -> bool:
    gs = app.game_screen
    return gs is not None and gs.pending is not None and app.screen is gs


async def test_a_round_outside_the_meeting_ends_with_what_the_seat_may_know():
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        # Round 1 is played without seat 2: it ends with what seat 2 may know, not "Round over."
        await wait_painted(pilot, "Round 1 is over.", what="round 1's outcome for a seat outside it")
        feed = _feed(app.game_screen)
        assert ("Round 1 is over. M1 was for Agents 0, 1, 3; you were not in it, so whether it was scheduled is "
                "theirs to know (you see only your own calendar). This round your calendar did not change; your "
                "cost so far: 0.") in feed
        assert "Round over." not in feed


async def test_a_new_round_resets_a_dm_thread_with_a_seat_outside_the_new_meeting():
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: _my_turn(app), what="the first turn (M2, with Agents 3 and 4)")
        gs = app.game_screen
        await pilot.press("left_square_bracket")  # from the feed back to the last thread: DM4
        await wait_painted(pilot, "▸DM4", "i writes to Agent 4 (DM)", what="the DM4 thread")
        while gs.model.round < 2:  # pass the talk, build a batch
            await wait_for(pilot, lambda: _my_turn(app) or isinstance(app.screen, DecisionScreen)
                           or gs.model.round >= 2, what="a turn, the batch builder or round 3")
            if isinstance(app.screen, DecisionScreen):
                await decide(pilot, app)
            elif _my_turn(app):
                await pilot.press("e")
        # M3 is for 0, 1 and 3: a DM to Agent 4 is no longer a thread of this meeting
        text = await wait_painted(pilot, "▸Feed", what="the feed again at round 3")
        assert "▸DM4" not in text and gs.chat.active == "feed"


async def test_talk_keys_on_the_batch_builder_and_the_end_screen_say_why_they_do_nothing():
    app = _app()
    async with app.run_test(size=WIDE, notifications=True) as pilot:  # the notices are painted
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen) or _my_turn(app),
                       what="the first turn")
        while not isinstance(app.screen, DecisionScreen):
            await wait_for(pilot, lambda: _my_turn(app) or isinstance(app.screen, DecisionScreen),
                           what="a turn or the batch builder")
            if _my_turn(app):
                await pilot.press("e")
        await wait_painted(pilot, "DECISION", "Meet here", what="the batch builder")
        await pilot.press("a")
        await wait_painted(pilot, "a (Accept) is a key of", what="why a does nothing in the batch builder")
        assert _told(app, "a (Accept) is a key of the talk, and this round's talk is over: build your batch here")
        await play_to_end(pilot, app)
        assert isinstance(app.screen, EndScreen)
        await pilot.press("p")
        await wait_painted(pilot, "The game is over: p", what="why p does nothing on the end screen")
        assert _told(app, "The game is over: p (Propose) was a key of the talk.")


async def test_the_command_palette_lists_this_apps_actions_only():
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await wait_for(pilot, lambda: _my_turn(app), what="the first turn")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Propose", "Accept", "Take back", "Help", "Quit"} <= titles
        assert not titles & {"Copy selected text", "Focus Next", "Focus Previous", "Page Down", "Scroll Up"}
        await pilot.press("ctrl+p")
        await pilot.press(*"focus")  # Textual's "Focus Next" / "Focus Previous": not actions of this app
        await wait_painted(pilot, "No matches found", what="no Textual command in the palette")
        await pilot.press(*["backspace"] * 5, *"take back")
        await wait_painted(pilot, "Take back", "key: u", what="the app's own action")
