"""Issue 20, item 1 by keys: a participant writes a message, ends the turn, quits with
ctrl+q in the same round; the same command again says the round starts again, and the
message is in the trace and in messages.csv, marked interrupted."""

from __future__ import annotations

import csv

from calbench_tui.app import screen_text
from calbench_tui.screens.game import GameScreen
from calbench_tui.study_app import make_study_app
from engine.protocol import MESSAGE_EVENTS
from lab.study.export import export_study
from saves.store import Store

from .helpers import PATIENCE, wait_for
from .test_study_run import is_waiting, small_study, step_by_keys

WORDS = "I am free at slots 5 and 13"


def my_turn(app) -> bool:
    gs = app.screen
    return isinstance(gs, GameScreen) and gs.pending is not None and not gs.pending.done \
        and gs.pending.obs.__class__.__name__ == "TurnObservation"


async def to_my_turn(pilot, app) -> None:
    """Every step by keys up to the participant's first talk turn."""
    seen: list[str] = []
    while not my_turn(app):
        await wait_for(pilot, lambda: is_waiting(app), timeout=PATIENCE, what="the next step")
        if my_turn(app):
            break
        await step_by_keys(pilot, app, seen)


async def test_quit_mid_round_then_resume_keeps_the_message_and_says_the_round_restarts(tmp_path):
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P010", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await to_my_turn(pilot, app)
            gs = app.screen
            rnd, step = gs.round, app.current_step
            await pilot.press("i", *WORDS, "enter", "escape", "e")
            # the partners answer; the next request of this round comes (a turn or the decision)
            await wait_for(pilot, lambda: is_waiting(app) and app.screen is not gs or
                           (my_turn(app) and gs.pending.obs.turn > 0), timeout=PATIENCE, what="the partners' answers")
            assert app.game_screen.round == rnd and app.current_step == step
            await pilot.press("ctrl+q")
        gid = next(s for s in await app.runner.db.steps("P010") if s["name"] == step)["game_id"]
        sent = [e for e in await store.load_events(gid) if e["type"] in MESSAGE_EVENTS
                and e["data"].get("content") == WORDS]
        assert sent, "the message was not sent before the quit"

        app2 = make_study_app(study, participant="P010", store=store, base=tmp_path)
        async with app2.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app2.screen, GameScreen)
                           and "starts again" in screen_text(app2), timeout=PATIENCE,
                           what="the notice that the round starts again")
            text = " ".join(screen_text(app2).split())
            assert f"stopped during round {rnd + 1}, so round {rnd + 1} starts again" in text
            await pilot.press("ctrl+q")
        trace = await store.load_trace(gid)
        kept = [e for e in trace["interrupted_events"] if e["type"] in MESSAGE_EVENTS]
        assert [e["seq"] for e in kept if e["data"]["content"] == WORDS] == [e["seq"] for e in sent]
        assert not any(e["data"].get("content") == WORDS for e in trace["events"] if e["type"] in MESSAGE_EVENTS)
        # the game is still in play (stopped again mid-round), which the export leaves out unless
        # the researcher asks to see it (saves.guard): ask, as for a look at a session under way
        await export_study(study, store, tmp_path / "data", reveal=True)
    with open(tmp_path / "data" / "messages.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["text"] == WORDS]
    assert rows and all(r["interrupted"] == "1" and r["game_id"] == gid for r in rows)


async def test_ctrl_q_on_the_belief_grid_then_the_same_command_shows_the_grid_again(tmp_path):
    from calbench_tui.screens.study_beliefs import BeliefGridScreen

    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P011", store=store, base=tmp_path)
        seen: list[str] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, BeliefGridScreen):
                await wait_for(pilot, lambda: is_waiting(app), timeout=PATIENCE, what="the next step")
                if isinstance(app.screen, BeliefGridScreen):
                    break
                await step_by_keys(pilot, app, seen)
            step = app.current_step
            # the grid after the participant's last round ("last": the last one they took part in)
            rnd = app.screen.req.round
            after = f"After round {rnd + 1}"
            await wait_for(pilot, lambda: after in screen_text(app), what="the grid painted")
            await pilot.press("ctrl+q")
        app2 = make_study_app(study, participant="P011", store=store, base=tmp_path)
        async with app2.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app2.screen, BeliefGridScreen)
                           and after in screen_text(app2), timeout=PATIENCE,
                           what="the belief grid that was cut short")
            assert app2.current_step == step
            await pilot.press("7", "enter")
            await wait_for(pilot, lambda: is_waiting(app2) and not isinstance(app2.screen, BeliefGridScreen),
                           timeout=PATIENCE, what="the step after the grid")
            await pilot.press("ctrl+q")
        gid = next(s for s in await app2.runner.db.steps("P011") if s["name"] == step)["game_id"]
        async with store._db.execute("SELECT round, MAX(belief) FROM study_beliefs WHERE game_id = ? GROUP BY round",
                                     (gid,)) as cur:
            assert await cur.fetchall() == [(rnd, 3)]
