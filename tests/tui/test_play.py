"""Whole games played as seat 2 by key presses only, against scripted seats; the save is checked.

Every action of the human seat goes through the bindings (``r`` ask costs, ``c`` share
costs, ``p`` propose, ``e`` end turn, the batch builder's ``enter``/``m``/``←→``/``s``),
the composer (typing + ``enter``) and ``ctrl+q``; the saved game is read back from a
temporary SQLite database.
"""

from __future__ import annotations

import json

import pytest

from calbench_tui.app import make_app, screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.end import EndScreen
from calbench_tui.settings import Settings
from engine.trace import fold_trace
from saves.store import Store

from .helpers import play_to_end, wait_for, wait_painted

SIZE = (80, 24)


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "play.db")
    yield s
    await s.close()


async def test_seat2_plays_a_whole_game_against_imap_and_it_is_saved(store, tmp_path):
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, export_dir=str(tmp_path / "out")),
                   store=store)
    async with app.run_test(size=SIZE) as pilot:
        await play_to_end(pilot, app)
        assert isinstance(app.screen, EndScreen)
        await wait_painted(pilot, "GAME OVER", "meetings scheduled")
        result = app.result
        # Export the trace, try the replay.
        await pilot.press("x")
        exported = list((tmp_path / "out").glob("calbench-*.json"))
        assert len(exported) == 1
        assert json.loads(exported[0].read_text())["game_id"] == app.game_id
        await pilot.press("v")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ReplayScreen", what="the replay screen")
        await pilot.press("escape")
        assert isinstance(app.screen, EndScreen)
        # The saved-games list is reachable from the end screen and shows this game.
        await pilot.press("g")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SavedGamesScreen" and app.screen.loaded,
                       what="the saved games list")
        assert app.game_id in [g["game_id"] for g in app.screen.games]
        await pilot.press("escape")
        assert isinstance(app.screen, EndScreen)
    # The default table: a generated 5-seat scenario, IMAP everywhere else, DMs only.
    cfg = result.trace["config"]
    assert [a["model"] for a in cfg["agents"]] == ["imap", "imap", "human", "imap", "imap"]
    assert cfg["channels"] == ["dm"] and cfg["num_agents"] == 5 and cfg["human_seat"] == 2
    # Played by keys, following the IMAP protocol: every meeting scheduled at oracle cost.
    assert result.metrics["meetings_scheduled"] == result.metrics["meetings_total"] == 5
    assert result.metrics["total_excess_burden"] == 0
    human_msgs = [e for e in result.trace["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2]
    kinds = {e["data"]["payload"]["kind"] for e in human_msgs if e["data"].get("payload")}
    assert {"cost_request", "costs", "decision"} <= kinds
    # The save: completed, every event, a seat row per seat, and it folds cleanly.
    saved = await store.load_trace(app.game_id)
    assert saved["saved"]["status"] == "completed"
    assert [e["seq"] for e in saved["events"]] == list(range(len(result.trace["events"])))
    assert saved["metrics"]["meetings_scheduled"] == 5
    assert fold_trace(saved).verified
    rows = await store.game_results(game_ids=[app.game_id])
    assert sorted(r["agent_id"] for r in rows) == [0, 1, 2, 3, 4]
    assert [r["persona"] for r in rows if r["agent_id"] == 2] == ["human"]


async def test_a_message_half_typed_left_and_taken_up_again_is_continued(store):
    """esc leaves the composer for the calendar with the words kept; i comes back to them and
    the next keys add to them (they are not selected, so nothing typed is replaced)."""
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                       what="the first turn")
        await pilot.press("i", *"Free at")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.focused is not app.game_screen.query_one("#composer"),
                       what="the composer left")
        await pilot.press("i", *" 11?")
        await wait_painted(pilot, "Free at 11?")


async def test_talk_by_composer_and_decide_by_batch_keys(store):
    """Free text through the composer, and a batch built by hand in the builder."""
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        gs = None
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                       what="the first turn")
        gs = app.game_screen
        # Round 1: seat 2 opens meeting M1 (participants 2, 3, 4) with plain English to both.
        await pilot.press("i")
        await pilot.press(*"Free at 11?")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(gs.model.outbox) == 2, what="two queued DMs")  # the feed's default
        # audience: the other participants, by DM
        await pilot.press("escape", "u")  # leave the composer, take the last one back ...
        assert len(gs.model.outbox) == 1
        await pilot.press("e")  # ... and send the other, ending the turn
        await wait_for(pilot, lambda: app.screen is not gs or gs.pending is not None
                       or isinstance(app.screen, DecisionScreen), what="the next step")
        feed = " ".join(line.text.strip() for line in app.game_screen.chat.log_for("feed").lines)
        assert "you → Agent 3 (DM): Free at 11?" in feed
        # Pass the rest of the talk; the bots answer free text politely.
        while not isinstance(app.screen, DecisionScreen):
            await wait_for(pilot, lambda: gs.pending is not None or isinstance(app.screen, DecisionScreen),
                           what="a turn or the decision")
            if gs.pending is not None:
                await pilot.press("e")
        ds = app.screen
        # Build a batch by hand: put the meeting on an errand, move the errand, change its destination.
        cal = ds.plan.calendar
        target = next(s for s, it in enumerate(cal) if it is not None and not getattr(it, "blocked", True))
        while ds.builder.cursor != target:
            await pilot.press("down")
        await pilot.press("enter")
        assert ds.plan.target == target and target in ds.plan.moves  # the errand must move: suggested
        first = ds.plan.moves[target]
        await pilot.press("right")
        assert ds.plan.moves[target] != first
        await wait_for(pilot, lambda: "✓ valid" in screen_text(app), what="the engine's verdict")
        await pilot.press("x")  # undo the move: the engine's own rule 7 message shows at once
        assert target not in ds.plan.moves
        await wait_for(pilot, lambda: "Rule 7" in screen_text(app) or "still holds" in screen_text(app),
                       what="the engine's rule 7 message")
        await pilot.press("m")  # move it again (to the cheapest destination)
        assert target in ds.plan.moves
        await pilot.press("s")
        if app.screen is ds and ds.armed_warning:
            # the partners answered "Slot 11 works for me": the talk was about slot 11, not this
            # one, and the builder asks for a second s
            await pilot.press("s")
        await wait_for(pilot, lambda: app.screen is not ds, what="the builder to close")
        await play_to_end(pilot, app)
        assert isinstance(app.screen, EndScreen)
    saved = await store.load_trace(app.game_id)
    assert saved["saved"]["status"] == "completed"
    texts = [e["data"]["content"] for e in saved["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2]
    assert "Free at 11?" in texts
    # What the person did is in the trace: one human_input event right before each of the
    # seat's replies (SPEC §12), and only for the human's seat.
    ev = saved["events"]
    inputs = [i for i, e in enumerate(ev) if e["type"] == "human_input"]
    replies = [i for i, e in enumerate(ev) if e["type"] in ("turn_end", "decide_end") and e["data"]["agent_id"] == 2]
    assert inputs and [i + 1 for i in inputs] == replies
    assert all(ev[i]["data"]["agent_id"] == 2 and ev[i]["data"]["source"] == "human" for i in inputs)
    first = ev[inputs[0]]["data"]
    assert first["request"] == "speak" and first["text"] == "Free at 11?" and first["response_ms"] >= 0
    assert first["actions"] == [{"type": "dm", "to": 3, "content": "Free at 11?"}]
    decided = next(ev[i]["data"] for i in inputs if ev[i]["data"]["request"] == "decide")
    assert {(a["type"], a.get("slot", a.get("from_slot"))) for a in decided["actions"]} == {
        ("schedule", target), ("reschedule", target)}  # the batch built by hand above
    assert not any("human_input" in (e["data"].get("extra") or {}) for e in ev)


async def test_rejected_batch_shows_the_conflict_and_retries_left(store):
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True), store=store)
    async with app.run_test(size=SIZE) as pilot:
        while not isinstance(app.screen, DecisionScreen):
            await wait_for(pilot, lambda: (app.game_screen is not None and app.game_screen.pending is not None)
                           or isinstance(app.screen, DecisionScreen), what="a turn")
            if not isinstance(app.screen, DecisionScreen):
                await pilot.press("e")
        ds = app.screen
        blocked = next((s for s, it in enumerate(ds.plan.calendar) if getattr(it, "blocked", False)), None)
        assert blocked is not None
        while ds.builder.cursor != blocked:
            await pilot.press("down")
        await pilot.press("enter")  # a blocked errand: the meeting cannot go there
        await wait_for(pilot, lambda: "✗" in screen_text(app), what="the engine's rejection")
        await pilot.press("s")  # first press only warns
        assert app.screen is ds
        await pilot.press("s")  # second press submits anyway
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen) and app.screen is not ds
                       and "Rejected:" in screen_text(app), what="the retry")
        text = screen_text(app)
        assert "Rejected:" in text and "retries left" in text and "attempt 2/4" in text
        await play_to_end(pilot, app)
    saved = await store.load_trace(app.game_id)
    rejected = [e for e in saved["events"] if e["type"] == "batch_rejected" and e["data"]["agent_id"] == 2]
    assert rejected and rejected[0]["data"]["attempt"] == 0


async def test_ctrl_q_stops_and_resume_finishes_the_game(store, tmp_path):
    settings = Settings(seat=2, seed=11, deterministic=True)
    app = make_app(settings=settings, store=store)
    async with app.run_test(size=SIZE) as pilot:
        await play_to_end(pilot, app, stop_after_rounds=2)  # two rounds complete, the third begun
        await wait_for(pilot, lambda: app.game_screen.pending is not None, what="a turn in round 3")
        game_id = app.game_id
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.status == "stopped"
    saved = await store.load_trace(game_id)
    assert saved["saved"]["status"] == "stopped"
    resolved = [e for e in saved["events"] if e["type"] == "resolution"]
    assert len(resolved) == 2
    # Resume: the complete rounds are folded, play continues at round 3.
    keep = max(e["seq"] for e in resolved)  # (no meeting_broken / reflection after it here)
    # Watch the saved rows of the complete rounds: any delete or (re)insert of one is noted.
    await store._db.execute("CREATE TEMP TABLE touched (op TEXT, seq INTEGER)")
    await store._db.execute(f"CREATE TEMP TRIGGER watch_del AFTER DELETE ON events WHEN OLD.seq <= {keep} "
                            "BEGIN INSERT INTO touched VALUES ('delete', OLD.seq); END")
    await store._db.execute(f"CREATE TEMP TRIGGER watch_ins AFTER INSERT ON events WHEN NEW.seq <= {keep} "
                            "BEGIN INSERT INTO touched VALUES ('insert', NEW.seq); END")
    again = make_app(settings=Settings(resume=game_id[:8], deterministic=True), store=store)
    async with again.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: again.game_screen is not None, what="the resumed game")
        assert again.settings.seat == 2
        await play_to_end(pilot, again, stop_after_rounds=2)
        # The replayed rounds and the new one name the real total, never "Round 3/?".
        feed = "\n".join(line.text for line in again.game_screen.chat.log_for("feed").lines)
        assert "Round 1/5" in feed and "Round 3/5" in feed and "/?" not in feed
        # the person is told that the round cut short starts again (issue 20 item 1)
        assert "stopped during round 3, so round 3 starts again" in " ".join(feed.split())
        await wait_painted(pilot, "Round 3/5")
        await play_to_end(pilot, again)
        assert isinstance(again.screen, EndScreen)
    assert again.game_id == game_id
    final = await store.load_trace(game_id)
    assert final["saved"]["status"] == "completed"
    # the round cut short is kept apart (interrupted_events), not deleted: with it the
    # numbering has no gap, and a round_restarted event accounts for the range
    aside = final["interrupted_events"]
    assert aside and min(e["seq"] for e in aside) == keep + 1
    seqs = sorted(e["seq"] for e in final["events"] + aside)
    assert seqs == list(range(len(seqs)))
    assert [e["data"]["round"] for e in final["events"] if e["type"] == "round_restarted"] == [2]
    assert [e["data"]["round"] for e in final["events"] if e["type"] == "resolution"] == [0, 1, 2, 3, 4]
    assert sum(1 for e in final["events"] if e["type"] == "game_start") == 1
    assert fold_trace(final).verified
    # The complete rounds were kept in place (Store.reopen_game), never written again; the
    # only deletes are the finish moving every row into the game's lean blob (saves/store.py).
    touched = await store._db.execute_fetchall("SELECT op, seq FROM touched")
    assert [t for t in touched if t[0] != "delete"] == []
    assert sorted(seq for _, seq in touched) == list(range(keep + 1))
    assert await store._db.execute_fetchall("SELECT COUNT(*) FROM events WHERE game_id = ?", (game_id,)) == [(0,)]


async def test_resume_refuses_a_completed_game(store):
    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from personas.registry import make_personas

    task = generate_scenario(3)
    result = await run_game(task, make_personas("imap", 5), GameConfig(deterministic=True))
    trace = dict(result.trace)
    trace["config"] = dict(trace["config"], human_seat=2)
    await store.finish_game(result.game_id, trace, "completed")
    again = make_app(settings=Settings(resume=result.game_id[:8]), store=store)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert again.return_code == 2 and "already completed" in again.error


async def test_play_again_after_the_end_screen(store):
    app = make_app(settings=Settings(seat=2, seed=7, deterministic=True, max_turns_per_round=1), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await play_to_end(pilot, app)
        first = app.game_id
        await pilot.press("n")  # the setup screen, prefilled with the next seed
        from calbench_tui.screens.setup import SetupScreen

        await wait_for(pilot, lambda: isinstance(app.screen, SetupScreen), what="the setup screen")
        await wait_painted(pilot, "Next game")
        assert app.screen.query_one("#seed").value == "8"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.game_id != first and app.game_screen is not None
                       and app.game_screen.pending is not None, what="a new game")
        assert app.game_task.seed == 8 and isinstance(app.screen, type(app.game_screen))
        await pilot.press("ctrl+q")
    assert (await store.load_trace(first))["saved"]["status"] == "completed"


async def test_what_was_queued_and_typed_at_a_quit_is_back_on_resume(store, tmp_path):
    """Found by hand: a person queued an offer, was typing the next one, quit (ctrl+q), and on
    --resume both were gone.  They are kept with the stopped game (its ``unsent``) and put back
    at the first question of the resumed game: the queue is sent with ``e``, the words stay in
    the composer; what is still unsent at the next quit is kept again."""
    app = make_app(settings=Settings(seat=2, seed=11, deterministic=True), store=store)
    async with app.run_test(size=(110, 34)) as pilot:
        await wait_for(pilot, lambda: app.game_screen is not None and app.game_screen.pending is not None,
                       what="seat 2's first talk turn")
        await pilot.press("i", *"Slot 5 or 14 work for me", "enter", *"How about slot")
        await wait_for(pilot, lambda: len(app.seat_model.outbox) == 2, what="the offer queued to both partners")
        game_id = app.game_id
        await pilot.press("ctrl+q")
        await pilot.pause()
    kept = (await store.load_trace(game_id))["unsent"]
    assert kept["seat"] == 2 and kept["composer"] == "How about slot"
    assert [(q["message"]["to"], q["message"]["content"], q["handwritten"]) for q in kept["queued"]] == \
        [(1, "Slot 5 or 14 work for me", True), (4, "Slot 5 or 14 work for me", True)]

    again = make_app(settings=Settings(resume=game_id[:8], deterministic=True), store=store)
    async with again.run_test(size=(110, 34)) as pilot:
        await wait_painted(pilot, "Back from before the stop: 2 queued messages", "queued: 2 messages")
        gs = again.game_screen
        assert [m.content for m in again.seat_model.outbox] == ["Slot 5 or 14 work for me"] * 2
        assert gs.typed() == "How about slot"
        await wait_for(pilot, lambda: gs.pending is not None, what="the restarted round's talk turn")
        await pilot.press("e")  # the queue goes out; the typed words stay where they were
        await wait_for(pilot, lambda: not again.seat_model.outbox, what="the queue sent")
        await pilot.press("ctrl+q")
        await pilot.pause()
    saved = await store.load_trace(game_id)
    sent = [e["data"] for e in saved["events"] if e["type"] == "dm_sent" and e["data"]["from_agent"] == 2]
    assert [(d["to_agent"], d["content"]) for d in sent] == [(1, "Slot 5 or 14 work for me"),
                                                             (4, "Slot 5 or 14 work for me")]
    assert saved["unsent"] == {"seat": 2, "round": kept["round"], "queued": [], "composer": "How about slot"}
