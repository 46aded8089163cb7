"""Finished games keep their events as one lean blob; games in play and stopped ones keep rows."""

from __future__ import annotations

import pytest

from engine.game import GameConfig, run_game
from engine.generate import generate_scenario
from personas.registry import make_personas
from saves.codec import decode_events, encode_events
from saves.store import Store


@pytest.fixture
async def store(tmp_path):
    s = await Store.open(tmp_path / "b.db")
    yield s
    await s.close()


async def played(seed=4, protocol="imap"):
    task = generate_scenario(seed)
    res = await run_game(task, make_personas(protocol, task.num_agents), GameConfig(deterministic=True))
    return task, res.trace


async def counts(store, gid):
    rows = await store._db.execute_fetchall("SELECT COUNT(*) FROM events WHERE game_id = ?", (gid,))
    blobs = await store._db.execute_fetchall("SELECT COUNT(*) FROM event_blobs WHERE game_id = ?", (gid,))
    return rows[0][0], blobs[0][0]


def saved(trace, status):
    return {**trace, "saved": {"agents": "imap", "settings_key": "k", "status": status, "source": "calbench"}}


def test_codecs_roundtrip_with_and_without_a_task_row():
    import asyncio

    task, trace = asyncio.run(played())
    for row, codec in ((trace["task"], "lean-zstd"), (None, "json-zstd")):
        c, n, last, blob = encode_events(trace["events"], row)
        assert (c, n, last) == (codec, len(trace["events"]), trace["events"][-1]["seq"])
        assert decode_events(c, blob, row) == trace["events"]


def test_trusted_packing_stores_what_checked_packing_stores():
    """Trusted events are packed without orjson's non-string-key option when they allow it; a
    game whose data holds an integer key (a persona's extra field) is still packed, and both
    ways decode to the same events; a value JSON cannot hold is refused, never stored as text."""
    import asyncio

    task, trace = asyncio.run(played())
    events = trace["events"]
    plain = [encode_events(events, task=task, trusted=t) for t in (True, False)]
    assert plain[0] == plain[1]
    odd = [dict(e, data=dict(e["data"], extra={3: "x"})) if e["type"] == "turn_end" else e for e in events]
    packed = [encode_events(odd, task=task, trusted=t) for t in (True, False)]
    assert packed[0] == packed[1]
    back = decode_events(packed[0][0], packed[0][3], trace["task"])
    assert [e["data"].get("extra") for e in back if e["type"] == "turn_end"][0] == {"3": "x"}
    bad = [dict(e, data=dict(e["data"], extra={"when": object()})) if e["type"] == "turn_end" else e for e in events]
    with pytest.raises(TypeError):
        encode_events(bad, task=task, trusted=True)


async def test_completed_import_is_a_blob_and_loads_back_equal(store):
    _, trace = await played()
    assert await store.import_trace(saved(trace, "completed"))
    assert await counts(store, trace["game_id"]) == (0, 1)
    back = await store.load_trace(trace["game_id"])
    assert back["events"] == trace["events"]
    assert await store.load_events(trace["game_id"], from_seq=10) == trace["events"][10:]


async def test_stopped_import_keeps_rows(store):
    _, trace = await played()
    assert await store.import_trace(saved({**trace, "stopped": True}, "stopped"))
    assert await counts(store, trace["game_id"]) == (len(trace["events"]), 0)


async def test_streamed_game_is_packed_when_it_ends_and_a_failed_one_can_be_reopened(store):
    task, trace = await played(seed=9)
    gid = trace["game_id"]
    await store.create_game(gid, task_row=trace["task"], config={}, agents="imap", settings_key="k",
                            started_at="2026-01-01T00:00:00+00:00")
    async with store.sink(gid, durable=True) as sink:
        for ev in trace["events"]:
            await sink.emit(ev)
    assert await counts(store, gid) == (len(trace["events"]), 0)
    await store.finish_game(gid, trace, status="failed")
    assert await counts(store, gid) == (0, 1)
    assert (await store.load_trace(gid))["events"] == trace["events"]
    kept = await store.reopen_game(gid, 20)  # back to rows, the later events dropped
    assert kept == trace["events"][:21]
    assert await counts(store, gid) == (21, 0)
    assert await store.delete_game(gid)
    assert await counts(store, gid) == (0, 0)
