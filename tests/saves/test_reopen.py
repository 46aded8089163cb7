"""Reopening a stopped game for ``--resume`` (Store.reopen_game): one transaction, kept rows untouched."""

from __future__ import annotations

import sqlite3

import pytest

from doubles import PlanPersona
from engine.events import ListSink
from engine.game import GameConfig, resume_point, run_game
from engine.generate import generate_scenario
from engine.oracle import solve
from engine.trace import fold_trace
from saves.store import GameNotFound, Store, StoreError

GID = "reopen-1"


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "reopen.db")
    yield s
    await s.close()


def seats(t):
    plan = solve(t).assignments
    return [PlanPersona(plan) for _ in range(t.num_agents)]


async def stopped_game(store, t, *, cut_round=2):
    """A game saved as a stopped run would leave it: events up to a turn inside ``cut_round``."""
    full = await run_game(t, seats(t), GameConfig(deterministic=True), game_id=GID)
    events = full.trace["events"]
    cut = next(e["seq"] for e in events if e["type"] == "turn_end" and e["data"]["round"] == cut_round)
    await store.create_game(GID, task_row=t.to_row(), config={"seed": t.seed}, agents="plan",
                            settings_key="k", started_at="2026-01-01T00:00:00+00:00")
    async with store.sink(GID, durable=True) as sink:
        for ev in events:
            if ev["seq"] <= cut:
                await sink.emit(ev)
    await store.mark_status(GID, "stopped")
    return full


async def watch_rows(store, upto_seq):
    """Note every delete or (re)insert of an event row with seq <= upto_seq (temp triggers)."""
    await store._db.execute("CREATE TEMP TABLE touched (op TEXT, seq INTEGER)")
    for op, row in (("DELETE", "OLD"), ("INSERT", "NEW")):
        await store._db.execute(f"CREATE TEMP TRIGGER watch_{op} AFTER {op} ON events WHEN {row}.seq <= {upto_seq} "
                                f"BEGIN INSERT INTO touched VALUES ('{op}', {row}.seq); END")


async def touched(store):
    return await store._db.execute_fetchall("SELECT * FROM touched")


async def status(store, game_id):
    return (await store.load_trace(game_id))["saved"]["status"]


async def test_reopen_keeps_the_complete_rounds_and_drops_the_rest(store):
    t = generate_scenario(5)
    full = await stopped_game(store, t)
    stored = await store.load_events(GID)
    keep = resume_point(stored)
    assert stored[-1]["seq"] > keep  # a round was cut short
    assert [e for e in stored if e["seq"] <= keep][-1]["type"] == "resolution"
    await watch_rows(store, keep)

    kept = await store.reopen_game(GID, keep)

    assert kept == [e for e in stored if e["seq"] <= keep]
    assert await store.load_events(GID) == kept  # the later events are gone
    assert await status(store, GID) == "running"
    assert (await store.load_trace(GID))["ended_at"] is None
    assert await touched(store) == []

    # The engine continues after the kept events; nothing of them is written again.
    sink = store.sink(GID, durable=True)
    listened = ListSink()

    class Both:
        async def emit(self, ev):
            await sink.emit(ev)
            await listened.emit(ev)

    again = await run_game(t, seats(t), GameConfig(deterministic=True), Both(), game_id=GID, resume_events=kept)
    await sink.aclose()
    assert listened.events[0]["seq"] == keep + 1
    assert await touched(store) == []  # the kept rows were never deleted or written again while playing
    await store.finish_game(GID, again.trace, "completed")
    final = await store.load_trace(GID)
    assert final["saved"]["status"] == "completed"
    assert [e["seq"] for e in final["events"]] == list(range(len(final["events"])))
    assert final["events"][: len(kept)] == kept
    # Finishing moved every row into the game's lean blob, in the finishing transaction.
    assert await store._db.execute_fetchall("SELECT COUNT(*) FROM events WHERE game_id = ?", (GID,)) == [(0,)]
    assert await store._db.execute_fetchall("SELECT events FROM event_blobs WHERE game_id = ?",
                                            (GID,)) == [(len(final["events"]),)]
    assert fold_trace(final).verified
    assert ([e["data"]["state_hash"] for e in final["events"] if e["type"] == "resolution"]
            == [e["data"]["state_hash"] for e in full.trace["events"] if e["type"] == "resolution"])


async def test_reopen_before_any_resolution_keeps_the_game_start(store):
    t = generate_scenario(6)
    await stopped_game(store, t, cut_round=0)
    stored = await store.load_events(GID)
    keep = resume_point(stored)
    kept = await store.reopen_game(GID, keep)
    assert {e["type"] for e in kept} == {"game_start", "agent_registered"}
    assert len(kept) == 1 + t.num_agents and kept[-1]["seq"] == keep


async def test_a_completed_game_is_refused_and_left_alone(store):
    t = generate_scenario(5)
    await store.create_game(GID, task_row=t.to_row(), config={}, agents="plan", settings_key="k",
                            started_at="2026-01-01T00:00:00+00:00")
    async with store.sink(GID) as sink:
        res = await run_game(t, seats(t), GameConfig(deterministic=True), sink, game_id=GID)
    await store.finish_game(GID, res.trace, "completed")
    n = len(await store.load_events(GID))
    with pytest.raises(StoreError, match=f"game {GID} is completed; only a stopped game can be reopened"):
        await store.reopen_game(GID, 3)
    assert len(await store.load_events(GID)) == n and await status(store, GID) == "completed"


async def test_unknown_game_and_bad_seq(store):
    with pytest.raises(GameNotFound, match="no saved game nope"):
        await store.reopen_game("nope", 0)
    with pytest.raises(StoreError, match="keep_upto_seq"):
        await store.reopen_game("nope", -5)


async def test_a_failure_inside_the_reopen_changes_nothing(store):
    """The delete and the status change are one transaction: if the second fails, the first is undone."""
    t = generate_scenario(5)
    await stopped_game(store, t)
    stored = await store.load_events(GID)
    await store._db.execute("CREATE TEMP TRIGGER no_running BEFORE UPDATE OF status ON games "
                            "WHEN NEW.status = 'running' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
    with pytest.raises(sqlite3.DatabaseError, match="disk on fire"):
        await store.reopen_game(GID, resume_point(stored))
    assert await store.load_events(GID) == stored
    assert await status(store, GID) == "stopped"


async def test_unsent_words_are_kept_with_a_stopped_game_through_a_reopen_and_dropped_when_it_completes(store):
    """``Store.keep_unsent``: what the person had queued and typed at a stop rides in the game's
    extra fields (the trace's ``unsent``), survives the reopen of ``--resume``, is forgotten by
    None, and a completed game never takes one (calbench-play: tests/tui/test_play.py)."""
    t = generate_scenario(5)
    full = await stopped_game(store, t)
    kept = {"seat": 2, "round": 2, "queued": [], "composer": "How about slot 7? key sk-" + "a" * 40}
    await store.keep_unsent(GID, kept)
    got = (await store.load_trace(GID))["unsent"]
    assert got["composer"].startswith("How about slot 7?") and "a" * 40 not in got["composer"]  # redacted like all text
    await store.reopen_game(GID, resume_point(await store.load_events(GID)))
    assert (await store.load_trace(GID))["unsent"] == got
    await store.keep_unsent(GID, None)
    assert "unsent" not in await store.load_trace(GID)
    await store.keep_unsent(GID, kept)
    await store.finish_game(GID, full.trace)
    assert "unsent" not in await store.load_trace(GID)
    await store.keep_unsent(GID, kept)  # completed: left alone
    assert "unsent" not in await store.load_trace(GID)
