"""The save database: games, events through sinks, results, import/export (saves/store.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from doubles import PlanPersona
from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from engine.oracle import solve
from saves.schema import SCHEMA_VERSION
from saves.sinks import FLUSH_EVERY
from saves.store import GameNotFound, Store, StoreError


def task(seed):
    return generate_scenario(seed)


async def play(t, sink=None, *, game_id=None):
    """One real game, played to the end by plan-following test personas."""
    plan = solve(t).assignments
    return await run_game(t, [PlanPersona(plan) for _ in range(t.num_agents)], GameConfig(deterministic=True),
                          sink, game_id=game_id)


def as_json(obj):
    return json.loads(json.dumps(obj))


@pytest.fixture
async def store():
    s = await Store.open(":memory:")
    yield s
    await s.close()


async def saved_game(store, t, game_id, *, durable=False, settings_key="k", agents="test,test,test,test,test"):
    await store.create_game(game_id, task_row=t.to_row(), config={"seed": t.seed}, agents=agents,
                            settings_key=settings_key, started_at="2026-01-01T00:00:00+00:00")
    sink = store.sink(game_id, durable=durable)
    res = await play(t, sink, game_id=game_id)
    await sink.aclose()
    await store.finish_game(game_id, res.trace)
    return res


async def count_events(store, game_id):
    return len(await store.load_events(game_id))


async def test_open_creates_directories_and_uses_wal(tmp_path):
    path = tmp_path / "deep" / "er" / "calbench.db"
    async with await Store.open(path) as s:
        assert await s.schema_version() == SCHEMA_VERSION
    assert path.exists()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {
        "games", "events", "seat_results", "schema_version"}
    con.close()


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    bad = tmp_path / "notes.db"
    bad.write_text("these are my notes, not a database\n" * 50)
    with pytest.raises(StoreError, match="not a usable CalBench database"):
        await Store.open(bad)


@pytest.mark.parametrize("durable", [True, False])
async def test_game_round_trip_through_a_sink(store, durable):
    t = task(3)
    res = await saved_game(store, t, "game-1", durable=durable)
    loaded = await store.load_trace("game-1")
    original = as_json(res.trace)
    for key, value in original.items():
        assert loaded[key] == value, key
    assert loaded["stopped"] is False and loaded["task"]["task_id"] == t.task_id
    assert loaded["saved"]["agents"] == "test,test,test,test,test" and loaded["saved"]["status"] == "completed"
    games = await store.list_games()
    assert [g["game_id"] for g in games] == ["game-1"]
    g = games[0]
    assert g["status"] == "completed" and g["task_id"] == t.task_id and g["source"] == "calbench"
    assert g["coordination"] == res.metrics["coordination_rate"] and g["excess_cost"] == res.metrics["excess"]
    assert g["cost_mode"] == t.cost_mode


async def test_bulk_sink_commits_at_phase_boundaries(tmp_path):
    path = tmp_path / "bulk.db"
    async with await Store.open(path) as s:
        await s.create_game("g", task_row={"task_id": "t"}, config={}, agents="x", settings_key="k", started_at="t0")
        sink = s.sink("g", durable=False)
        reader = sqlite3.connect(path)  # a second connection sees only what is committed

        def committed():
            return reader.execute("SELECT COUNT(*) FROM events WHERE game_id='g'").fetchone()[0]

        def ev(seq, type_="turn_end"):
            return {"seq": seq, "type": type_, "timestamp": "t", "data": {"round": 0, "turn": 0, "phase": "CHEAP_TALK",
                                                                         "agent_id": 1, "text": "hi"}}

        for i in range(5):
            await sink.emit(ev(i))
        assert committed() == 0  # buffered: no phase boundary yet
        await sink.emit(ev(5, "resolution"))
        await sink.flush()
        assert committed() == 6
        for i in range(6, 6 + FLUSH_EVERY):
            await sink.emit(ev(i))
        assert committed() == 6 + FLUSH_EVERY  # the 200th buffered event triggered a commit
        await sink.emit(ev(6 + FLUSH_EVERY))
        assert committed() == 6 + FLUSH_EVERY
        await s.mark_status("g", "stopped")  # a stopped game's buffered events are kept
        assert committed() == 7 + FLUSH_EVERY
        reader.close()


async def test_durable_sink_commits_every_event(tmp_path):
    path = tmp_path / "live.db"
    async with await Store.open(path) as s:
        await s.create_game("g", task_row={"task_id": "t"}, config={}, agents="x", settings_key="k", started_at="t0")
        sink = s.sink("g", durable=True)
        reader = sqlite3.connect(path)
        for i in range(3):
            await sink.emit({"seq": i, "type": "turn_start", "timestamp": "t",
                             "data": {"round": 0, "turn": i, "phase": "CHEAP_TALK", "agent_id": 0}})
            assert reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] == i + 1
        reader.close()


async def test_closing_the_store_flushes_open_sinks(tmp_path):
    path = tmp_path / "c.db"
    s = await Store.open(path)
    await s.create_game("g", task_row={"task_id": "t"}, config={}, agents="x", settings_key="k", started_at="t0")
    sink = s.sink("g", durable=False)
    await sink.emit({"seq": 0, "type": "game_start", "timestamp": "t",
                     "data": {"round": -1, "turn": -1, "phase": "GAME_START", "agent_id": None}})
    await s.close()
    async with await Store.open(path) as s2:
        assert await count_events(s2, "g") == 1


async def test_sink_for_an_unknown_game_says_so(store):
    sink = store.sink("nope", durable=True)
    with pytest.raises(StoreError, match="create_game"):
        await sink.emit({"seq": 0, "type": "x", "timestamp": "t", "data": {}})


async def test_finish_without_a_sink_saves_all_events(store):
    t = task(4)
    await store.create_game("g", task_row=t.to_row(), config={}, agents="a,b,c,d,e", settings_key="k",
                            started_at="t0")
    res = await play(t, game_id="g")
    await store.finish_game("g", res.trace)
    assert await count_events(store, "g") == len(res.trace["events"])
    rows = await store.game_results()
    assert [r["agent_id"] for r in rows] == list(range(t.num_agents))
    assert [r["persona"] for r in rows] == ["a", "b", "c", "d", "e"]
    for r, seat in zip(rows, res.metrics["per_seat"]):
        assert r["game_id"] == "g" and r["settings_key"] == "k"
        assert r["excess"] == seat["excess"] and r["cost"] == seat["cost"] and r["vps"] == seat["vps"]
        assert r["meetings_scheduled"] == seat["meetings_scheduled"] and r["seat"] == as_json(seat)
        assert r["model"] == "plan"


async def test_finish_game_for_a_game_never_created_inserts_it(store):
    res = await play(task(5), game_id="solo")
    await store.finish_game("solo", res.trace)
    loaded = await store.load_trace("solo")
    assert loaded["events"] == as_json(res.trace["events"])
    assert loaded["saved"]["agents"] == "test,test,test,test,test"


async def test_status_queries_for_resume(store):
    t1, t2, t3 = task(6), task(7), task(8)
    await saved_game(store, t1, "a", settings_key="imap")
    await saved_game(store, t2, "b", settings_key="dsm")
    await store.create_game("c", task_row=t3.to_row(), config={}, agents="x", settings_key="imap", started_at="t1")
    await store.create_game("d", task_row=t2.to_row(), config={}, agents="x", settings_key="dsm", started_at="t2")
    await store.mark_status("d", "failed")
    assert await store.completed_task_ids("imap") == {t1.task_id}
    assert await store.completed_task_ids("dsm") == {t2.task_id}
    assert await store.completed_task_ids("other") == set()
    assert await store.running_game_ids() == ["c"]
    assert await store.running_game_ids("dsm") == []
    assert [g["game_id"] for g in await store.list_games(status="failed")] == ["d"]
    assert [g["game_id"] for g in await store.list_games(task_id=t1.task_id)] == ["a"]
    with pytest.raises(GameNotFound):
        await store.mark_status("zzz", "stopped")
    with pytest.raises(StoreError, match="unknown status"):
        await store.mark_status("c", "paused")


async def test_rerunning_an_unfinished_game_replaces_it_but_a_completed_one_is_kept(store):
    t = task(9)
    await store.create_game("g", task_row=t.to_row(), config={}, agents="x", settings_key="k", started_at="t0")
    sink = store.sink("g", durable=True)
    await sink.emit({"seq": 0, "type": "game_start", "timestamp": "t", "data": {"round": -1}})
    await store.create_game("g", task_row=t.to_row(), config={}, agents="x", settings_key="k", started_at="t1")
    assert await count_events(store, "g") == 0
    assert (await store.list_games())[0]["started_at"] == "t1"
    await saved_game(store, t, "done")
    with pytest.raises(StoreError, match="already saved and completed"):
        await store.create_game("done", task_row=t.to_row(), config={}, agents="x", settings_key="k",
                                started_at="t2")


async def test_load_trace_by_unique_prefix_and_clear_errors(store):
    t = task(10)
    for gid in ("abc-111", "abd-222"):
        await saved_game(store, t, gid)
    assert (await store.load_trace("abc"))["game_id"] == "abc-111"
    assert (await store.load_trace("abd-222"))["game_id"] == "abd-222"
    with pytest.raises(GameNotFound, match="several saved games"):
        await store.load_trace("ab")
    with pytest.raises(GameNotFound, match="no saved game matches 'xyz'"):
        await store.load_trace("xyz")
    with pytest.raises(GameNotFound, match="no saved game matches 'a_c'"):
        await store.load_trace("a_c")  # LIKE wildcards are taken literally


async def test_import_ours_into_a_fresh_store_and_export_again_is_identical(store):
    res = await saved_game(store, task(11), "orig", agents="imap,imap,dsm-welfare,imap,imap", settings_key="s1")
    exported = json.loads(json.dumps(await store.load_trace("orig")))
    async with await Store.open(":memory:") as other:
        assert await other.import_trace(exported) is True
        assert await other.import_trace(exported) is False  # duplicate
        again = await other.load_trace("orig")
        assert again == exported
        assert await other.completed_task_ids("s1") == {res.trace["task"]["task_id"]}
        rows = await other.game_results()
        assert [r["persona"] for r in rows] == ["imap", "imap", "dsm-welfare", "imap", "imap"]


async def test_import_a_bare_trace_of_ours(store):
    res = await play(task(12), game_id="bare")
    trace = as_json(res.trace)
    assert await store.import_trace(trace) is True
    g = (await store.list_games())[0]
    assert g["source"] == "calbench" and g["status"] == "completed" and g["agents"] == "test,test,test,test,test"
    loaded = await store.load_trace("bare")
    for key, value in trace.items():
        assert loaded[key] == value, key


async def test_import_the_authors_traces(store, compat_dir):
    files = sorted(compat_dir.glob("authors_trace_*.json"))
    assert files
    for f in files:
        trace = json.loads(f.read_text())
        assert await store.import_trace(trace) is True
        loaded = await store.load_trace(trace["game_id"])
        for key in trace:
            if key != "events":
                assert loaded[key] == trace[key], key
        # events keep everything; a 'seq' (their position) is added, as SPEC §12 shapes events
        assert [{k: v for k, v in e.items() if k != "seq"} for e in loaded["events"]] == trace["events"]
        assert [e["seq"] for e in loaded["events"]] == list(range(len(trace["events"])))
        assert "task" not in loaded and loaded["saved"]["source"] == "authors"
    games = {g["game_id"]: g for g in await store.list_games()}
    assert {g["source"] for g in games.values()} == {"authors"}
    varied = [g for g in games.values() if "varied" in json.dumps(g) or g["cost_mode"] == "varied"]
    assert {g["cost_mode"] for g in games.values()} == {"uniform", "varied"} and varied
    rows = await store.game_results(source="authors")
    assert len(rows) == 5 * len(files)
    one = json.loads(files[0].read_text())
    fs = one["final_state"]
    mine = [r for r in rows if r["game_id"] == one["game_id"]]
    assert [r["cost_shown"] for r in mine] == fs["per_agent_cost"]
    assert [r["excess_shown"] for r in mine] == fs["per_agent_excess_burden"]
    assert [r["messages_sent"] for r in mine] == fs["per_agent_messages_sent"]
    assert all(r["meetings_assigned"] >= r["meetings_scheduled"] for r in mine)


@pytest.mark.parametrize("bad, words", [
    ([1, 2], "expected a JSON object"),
    ({"events": []}, "game_id"),
    ({"game_id": "x"}, "'events'"),
    ({"game_id": "x", "events": [{"type": "a"}]}, "event 0"),
    ({"game_id": "x", "events": [{"seq": 0, "type": "a", "data": {}}, {"seq": 0, "type": "b", "data": {}}]},
     "share one 'seq'"),
])
async def test_a_broken_trace_is_refused_with_a_reason(store, bad, words):
    with pytest.raises(StoreError, match=words):
        await store.import_trace(bad)
    assert await store.list_games() == []


async def test_concurrent_games_share_one_store(store):
    tasks = [task(s) for s in range(20, 26)]

    async def one(i, t):
        await store.create_game(f"g{i}", task_row=t.to_row(), config={}, agents="x", settings_key="k",
                                started_at=f"t{i}")
        sink = store.sink(f"g{i}", durable=i % 2 == 0)
        res = await play(t, sink, game_id=f"g{i}")
        await sink.aclose()
        await store.finish_game(f"g{i}", res.trace)
        return res

    results = await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
    for i, res in enumerate(results):
        assert (await store.load_trace(f"g{i}"))["events"] == as_json(res.trace["events"])
    assert await store.integrity_check() == "ok"


async def test_delete_game_removes_its_events_and_results(store):
    await saved_game(store, task(13), "gone")
    assert await store.delete_game("gone") is True
    assert await store.list_games() == [] and await store.load_events("gone") == []
    assert await store.game_results(status=None) == []
    assert await store.delete_game("gone") is False
