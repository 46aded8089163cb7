"""The one game session: created, run and ended the same way for every driver."""

from __future__ import annotations

import asyncio

import pytest

from engine.events import ListSink
from engine.game import GameConfig
from engine.taskref import resolve_tasks
from lab.session import Session, run_session
from personas.registry import make_personas
from saves.store import Store


def _task():
    return resolve_tasks("canonical:3")[0]


def _session(task, seats=None, game_id="g-1"):
    seats = seats or make_personas("imap", task.num_agents)
    return Session(task=task, seats=seats, config=GameConfig(deterministic=True), game_id=game_id,
                   agents="imap", settings_key="k1", extra_config={"app": "test"})


class Broken:
    """A persona that cannot even be briefed: the engine cannot play around that."""

    kind = "scripted"
    model = None

    async def register(self, seat):
        raise RuntimeError("the persona broke")


async def test_streamed_session_is_saved_completed_with_every_event(tmp_path):
    task = _task()
    listener = ListSink()
    async with await Store.open(tmp_path / "s.db") as store:
        out = await run_session(_session(task), store=store, stream=True, listeners=[listener])
        assert out.status == "completed" and out.error is None
        trace = await store.load_trace("g-1")
    assert trace["saved"]["status"] == "completed"
    assert [e["seq"] for e in trace["events"]] == [e["seq"] for e in listener.events]
    assert trace["metrics"] == out.trace["metrics"]


async def test_batch_session_goes_to_the_saver_and_matches_the_streamed_one(tmp_path):
    task = _task()
    got = []

    async def saver(trace):
        got.append(trace)

    out = await run_session(_session(task), store=None, stream=False, saver=saver)
    assert got and got[0]["saved"]["status"] == "completed" and got[0]["saved"]["settings_key"] == "k1"
    async with await Store.open(tmp_path / "s.db") as store:
        streamed = await run_session(_session(task, game_id="g-2"), store=store, stream=True)
    assert out.trace["metrics"] == streamed.trace["metrics"]


async def test_a_failing_persona_is_saved_failed_with_error_text_and_traceback(tmp_path):
    task = _task()
    seats = make_personas("imap", task.num_agents)
    seats[0] = Broken()
    async with await Store.open(tmp_path / "s.db") as store:
        out = await run_session(_session(task, seats), store=store, stream=True)
        games = await store.list_games()
        trace = await store.load_trace("g-1")
    assert out.status == "failed" and "the persona broke" in (out.error or "")
    assert games[0]["status"] == "failed"
    assert "RuntimeError: the persona broke" in trace.get("error", "")
    assert "Traceback" in trace.get("error_traceback", "")


async def test_a_cancelled_session_is_marked_stopped_and_keeps_its_events(tmp_path):
    task = _task()

    class Slow:
        kind = "scripted"
        model = None

        async def register(self, seat):
            return None

        async def speak(self, obs):
            await asyncio.sleep(30)

        volunteer = decide = speak

    seats = make_personas("imap", task.num_agents)
    seats[task.meetings[0].participants[0]] = Slow()
    async with await Store.open(tmp_path / "s.db") as store:
        job = asyncio.ensure_future(run_session(_session(task, seats), store=store, stream=True))
        await asyncio.sleep(0.3)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        games = await store.list_games()
        events = await store.load_events("g-1")
    assert games[0]["status"] == "stopped"
    assert events and events[0]["type"] == "game_start"


async def test_a_broken_after_measurement_never_costs_the_game(tmp_path):
    task = _task()

    async def broken(trace):
        raise RuntimeError("the judge fell over")

    async with await Store.open(tmp_path / "s.db") as store:
        out = await run_session(_session(task), store=store, stream=True, after=broken)
        trace = await store.load_trace("g-1")
    assert out.status == "completed" and trace["saved"]["status"] == "completed"
    assert trace["after_error"] == "RuntimeError: the judge fell over"
    assert trace["metrics"]["coordination_rate"] == out.trace["metrics"]["coordination_rate"]


async def test_a_packing_saver_gets_the_game_without_renders_and_the_store_reads_the_same(tmp_path):
    """A batch game whose saver packs its events (``packs_events``, the suite runner's) is
    played without calendar renders; with a listener, a measurement after the game, or a
    plain saver it keeps them.  Saved through the runner's packing, both read back alike."""
    from engine.events import UNWRITTEN
    from lab.runner import prepared
    from lab.session import packs_events

    task = _task()
    got: dict[str, dict] = {}

    async def plain(trace):
        got[trace["game_id"]] = trace

    packing = packs_events(lambda trace: plain(trace))

    def unwritten(trace):
        return sum(v is UNWRITTEN for e in trace["events"] for v in e["data"].values())

    await run_session(_session(task, game_id="plain"), stream=False, saver=plain)
    await run_session(_session(task, game_id="packed"), stream=False, saver=packing)
    await run_session(_session(task, game_id="heard"), stream=False, saver=packing, listeners=[ListSink()])

    async def after(events):
        return None

    await run_session(_session(task, game_id="measured"), stream=False, saver=packing, after=after)
    assert unwritten(got["packed"]) > 20
    assert unwritten(got["plain"]) == unwritten(got["heard"]) == unwritten(got["measured"]) == 0
    async with await Store.open(tmp_path / "s.db") as store:
        for gid in ("plain", "packed"):
            await store.write_games([prepared(got[gid], task)])
        a, b = await store.load_trace("plain"), await store.load_trace("packed")
    assert [e["data"] for e in a["events"]] == [e["data"] for e in b["events"]]
    assert a["metrics"] == b["metrics"]
