"""Issue 20, item 1: a round cut short (ctrl+q, a crash) is played again on resume, but
nothing of it is lost — its events stay in the trace (``interrupted_events``), a
``round_restarted`` event accounts for them, the resumed game still verifies and its
metrics count only the events of the game, and ``messages.csv`` lists the interrupted
messages with ``interrupted = 1``."""

from __future__ import annotations

import asyncio
import csv

import pytest

from engine.events import EventSink
from engine.game import GameConfig, resume_point, run_game
from engine.generate import generate_scenario
from engine.observe import seat_event
from engine.protocol import MESSAGE_EVENTS
from engine.verify import verify_trace
from lab.session import Session, run_session
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from personas.registry import make_personas
from saves.store import Store


class CancelAt(EventSink):
    """Cancels ``task`` (given here or set later) when the first event matching ``when`` is emitted."""

    def __init__(self, when, task=None) -> None:
        self.when, self.task, self.fired = when, task, False

    async def emit(self, event):
        if not self.fired and self.when(event):
            self.fired = True
            self.task.cancel()


def _second_message_of_round(r):
    seen = []

    def when(ev):
        if ev["type"] in MESSAGE_EVENTS and ev["data"]["round"] == r:
            seen.append(ev)
        return len(seen) >= 2
    return when


async def _play(store, task, gid, listeners=(), resume_upto=None):
    seats = make_personas("imap", task.num_agents)
    session = Session(task=task, seats=seats, config=GameConfig(max_turns_per_round=6), game_id=gid,
                      agents="imap", settings_key="k")
    return await run_session(session, store=store, stream=True, listeners=list(listeners), resume_upto=resume_upto)


async def test_a_resumed_game_keeps_the_round_cut_short_and_still_verifies(tmp_path):
    task = generate_scenario(11)
    async with await Store.open(tmp_path / "g.db") as store:
        stop = CancelAt(_second_message_of_round(1))
        stop.task = asyncio.ensure_future(_play(store, task, "g1", [stop]))
        with pytest.raises(asyncio.CancelledError):
            await stop.task
        before = await store.load_events("g1")
        cut_msgs = [e for e in before if e["type"] in MESSAGE_EVENTS and e["data"]["round"] == 1]
        assert len(cut_msgs) == 2
        seen: list[dict] = []

        class Watch(EventSink):
            async def emit(self, event):
                seen.append(event)

        outcome = await _play(store, task, "g1", [Watch()], resume_upto=resume_point(before))
        assert outcome.status == "completed"
        trace = await store.load_trace("g1")
    async with await Store.open(tmp_path / "other.db") as other:  # export → import keeps them too
        assert await other.import_trace(trace, verification="verified")
        assert (await other.load_trace("g1"))["interrupted_events"] == trace["interrupted_events"]

    # every event of the interrupted attempt is kept, as it was, apart from the game's events
    aside = trace["interrupted_events"]
    assert [e["seq"] for e in aside] == [e["seq"] for e in before if e["seq"] > resume_point(before)]
    assert [e["data"]["content"] for e in aside if e["type"] in MESSAGE_EVENTS] == \
        [e["data"]["content"] for e in cut_msgs]
    restarts = [e for e in trace["events"] if e["type"] == "round_restarted"]
    assert len(restarts) == 1 and restarts[0]["data"]["round"] == 1
    assert (restarts[0]["data"]["from_seq"], restarts[0]["data"]["to_seq"]) == (aside[0]["seq"], aside[-1]["seq"])
    # the numbering is accountable: the game's events and the set-aside ones, no gap, no overlap
    seqs = sorted(e["seq"] for e in trace["events"] + aside)
    assert seqs == list(range(len(seqs)))
    # the fold, the state hashes and the recomputed metrics all agree: the attempt never counts
    res = verify_trace(trace)
    assert res.verified, res.problems
    counted = sum(1 for e in trace["events"] if e["type"] in MESSAGE_EVENTS)
    assert trace["metrics"]["total_cheap_talk_messages"] == counted
    # the seats' screens are told that the round starts again (and nothing of the attempt)
    told = [seat_event(e, 0) for e in seen if e["type"] == "round_restarted"]
    assert told and told[0]["round"] == 1 and "from_seq" not in told[0]
    # replay reads the resumed trace and names the restart on its timeline
    from calbench_tui.screens.replay import ReplayModel

    model = ReplayModel(trace)
    assert model.fold.verified
    at = next(i for i, e in enumerate(model.events) if e["type"] == "round_restarted")
    assert "round 2 starts again after a stop" in model.describe(at).plain
    # a tampered trace (the set-aside events dropped) no longer verifies
    bad = dict(trace, interrupted_events=[])
    assert not verify_trace(bad).verified


async def test_two_interruptions_of_one_round_keep_both_attempts(tmp_path):
    task = generate_scenario(12)
    async with await Store.open(tmp_path / "g.db") as store:
        for _ in range(2):
            stop = CancelAt(_second_message_of_round(2))
            events = await store.load_events("g2") if await _exists(store, "g2") else None
            stop.task = asyncio.ensure_future(_play(store, task, "g2", [stop],
                                                    resume_upto=resume_point(events) if events else None))
            with pytest.raises(asyncio.CancelledError):
                await stop.task
        kept = await store.interrupted_events("g2")
        events = await store.load_events("g2")
        assert await _play(store, task, "g2", resume_upto=resume_point(events))
        trace = await store.load_trace("g2")
    assert [e["seq"] for e in trace["interrupted_events"]][:len(kept)] == [e["seq"] for e in kept]
    assert sum(1 for e in trace["interrupted_events"] if e["type"] == "round_restarted") == 1
    assert sum(1 for e in trace["interrupted_events"] if e["type"] in MESSAGE_EVENTS) == 4
    assert verify_trace(trace).verified


async def _exists(store, gid):
    async with store._db.execute("SELECT 1 FROM games WHERE game_id = ?", (gid,)) as cur:
        return await cur.fetchone() is not None


def test_the_engine_alone_sets_the_cut_round_aside():
    """run_game given every event of a stopped run keeps the tail as interrupted, not dropped."""
    task = generate_scenario(13)

    async def go():
        full = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True))
        events = full.trace["events"]
        cut = next(i for i, e in enumerate(events) if e["type"] == "turn_end" and e["data"]["round"] == 3)
        again = await run_game(task, make_personas("imap", task.num_agents), GameConfig(deterministic=True),
                               resume_events=events[:cut + 1], game_id=full.game_id)
        return full, again, events[:cut + 1]

    full, again, stopped = asyncio.run(go())
    tail = [e for e in stopped if e["seq"] > resume_point(stopped)]
    assert again.trace["interrupted_events"] == tail
    assert again.trace["metrics"]["coordination_rate"] == full.trace["metrics"]["coordination_rate"]
    assert "interrupted_events" not in full.trace  # a game never cut short has none
    assert verify_trace(again.trace).verified


class CrashingDriver(SimulatedDriver):
    """Quits (like ctrl+q) after the second message of round 1 of the first real game."""

    def __init__(self, study, pid):
        super().__init__(study, pid)
        self.task = None

    def listeners(self, ctx):
        if ctx.game.index == 1 and not ctx.resumed:
            return [CancelAt(_second_message_of_round(0), self.task)]
        return []


def test_messages_csv_keeps_the_interrupted_messages_marked(cli, scripted_study, tmp_path):
    path, study = scripted_study
    db = tmp_path / "s.db"

    async def go():
        async with await Store.open(db) as store:
            drv = CrashingDriver(study, "P001")
            r1 = StudyRunner(study, store, "P001", drv)
            drv.task = asyncio.ensure_future(r1.run())
            with pytest.raises(asyncio.CancelledError):
                await drv.task
            gid = next(s for s in await r1.db.steps("P001") if s["name"] == "game:1")["game_id"]
            cut = [e for e in await store.load_events(gid) if e["type"] in MESSAGE_EVENTS]
            await StudyRunner(study, store, "P001", SimulatedDriver(study, "P001")).run()
            return gid, cut

    gid, cut = asyncio.run(go())
    assert len(cut) == 2
    out = tmp_path / "data"
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(out), "--include-simulated")
    assert rc == 0, err
    with open(out / "messages.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["game_id"] == gid]
    marked = [r for r in rows if r["interrupted"] == "1"]
    assert [(int(r["seq"]), r["text"]) for r in marked] == [(e["seq"], e["data"]["content"]) for e in cut]
    assert all(r["vps_contribution"] == "" for r in marked)
    live = [r for r in rows if r["interrupted"] == "0"]
    assert live and all(r["vps_contribution"] != "" for r in live)
    # the round was played again after the interrupted messages
    assert min(int(r["seq"]) for r in live if r["round"] == "1") > max(int(r["seq"]) for r in marked)
    assert "`interrupted`" in (out / "codebook.md").read_text()


def test_timings_of_the_interrupted_attempt_are_marked(cli, scripted_study, tmp_path):
    """timings.csv: the rows timed in the attempt cut short say interrupted = 1, the replay's 0."""
    path, study = scripted_study
    db = tmp_path / "s.db"

    async def go():
        async with await Store.open(db) as store:
            drv = CrashingDriver(study, "P2")
            r1 = StudyRunner(study, store, "P2", drv, deterministic=False)
            drv.task = asyncio.ensure_future(r1.run())
            with pytest.raises(asyncio.CancelledError):
                await drv.task
            gid = next(s for s in await r1.db.steps("P2") if s["name"] == "game:1")["game_id"]
            before = len([t for t in await r1.db.timings("P2") if t["game_id"] == gid])
            await StudyRunner(study, store, "P2", SimulatedDriver(study, "P2"), deterministic=False).run()
            return gid, before

    gid, before = asyncio.run(go())
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(tmp_path / "data"),
                     "--include-simulated")
    assert rc == 0, err
    with open(tmp_path / "data" / "timings.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["game_id"] == gid]
    assert before and sum(r["interrupted"] == "1" for r in rows) == before
    assert any(r["interrupted"] == "0" and r["round"] == "1" for r in rows)
