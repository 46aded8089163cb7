"""Issue 24 (3): a live game has one owner.

A game in play is held by a lease (pid + heartbeat) in the save database.  A second
process that tries to resume it is refused in one line naming the owner, and nothing it
would have rewritten (the live player's events) is touched; once the owner is gone
(SIGKILL) the lease is stale and a resume takes it over.  Real processes, a real SQLite file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from engine.game import GameConfig, resume_point
from engine.generate import generate_scenario
from lab.session import Session, run_session
from personas.registry import make_personas
from saves.store import Store

from .helpers import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
GID = "11111111-2222-3333-4444-555555555555"

# A terminal that is playing seat 0: the person never answers, so the game waits on them.
HOLDER = r"""
import asyncio, inspect, sys
from engine.game import GameConfig
from engine.generate import generate_scenario
from lab.session import Session, run_session
from personas.human import HumanPersona
from personas.registry import make_personas
from saves.store import Store

async def main(db, gid):
    task = generate_scenario(5)
    seats = make_personas("human,imap,imap,imap,imap", task.num_agents, humans={0: HumanPersona(lambda request: None)})
    session = Session(task, seats, GameConfig(), gid, "human,imap,imap,imap,imap", "play:test",
                      {"human_seat": 0, "app": "calbench-play"})
    store = await Store.open(db)
    kw = {"owner": "calbench-play"} if "owner" in inspect.signature(run_session).parameters else {}
    await run_session(session, store=store, stream=True, **kw)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _events(db: str, gid: str) -> list[tuple]:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT seq, type, data FROM events WHERE game_id = ? ORDER BY seq", (gid,)).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


@pytest.fixture
def live_game(tmp_path):
    db = str(tmp_path / "live.db")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, db, GID], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        # the game has started and waits for the person at seat 0 (its first talk turn)
        assert wait_until(lambda: any(t == "turn_start" or t == "round_start" for _, t, _ in _events(db, GID))
                          or proc.poll() is not None, 60.0), "holder never started"
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.3)  # let the bots' first moves land too
        yield db, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def _resume(db: str, gid: str, **kw):
    store = await Store.open(db)
    try:
        trace = await store.load_trace(gid)
        task = generate_scenario(5)
        seats = make_personas("imap", task.num_agents)
        session = Session(task, seats, GameConfig(), gid, "imap", "play:test", {"human_seat": 0})
        return await run_session(session, store=store, stream=True,
                                 resume_upto=resume_point(trace["events"]), **kw)
    finally:
        await store.close()


def test_second_process_is_refused_and_touches_nothing(live_game):
    """Before: a second process resuming the game deleted the live player's events after
    the last complete round and went on writing seqs the live process writes too.  After:
    refused in one line naming the owner's role and pid; every event is still there."""
    from saves.lease import LeaseHeld

    db, proc = live_game
    before = _events(db, GID)
    assert before
    with pytest.raises(LeaseHeld) as err:
        asyncio.run(_resume(db, GID))
    line = str(err.value)
    assert "\n" not in line and f"pid {proc.pid}" in line and "calbench-play" in line
    assert _events(db, GID) == before
    assert proc.poll() is None  # the live player plays on


def test_calbench_play_resume_refused_in_one_line(live_game):
    db, proc = live_game
    before = _events(db, GID)
    out = subprocess.run([os.path.join(BIN, "calbench-play"), "--resume", GID[:8], "--db", db],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert f"pid {proc.pid}" in lines[0] and "calbench-play" in lines[0], lines[0]
    assert _events(db, GID) == before


def test_stale_lease_is_taken_over(live_game):
    """The owner is killed (no clean end, its lease row stays): a resume takes it over and
    finishes the game."""
    db, proc = live_game
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    con = sqlite3.connect(db)
    held = con.execute("SELECT pid FROM claims WHERE unit = ?", (f"game:{GID}",)).fetchall()
    con.close()
    assert held == [(proc.pid,)]  # the dead process's lease is still recorded ...
    out = asyncio.run(_resume(db, GID))  # ... and taken over
    assert out.status == "completed"
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT status FROM games WHERE game_id = ?", (GID,)).fetchone() == ("completed",)
        assert con.execute("SELECT COUNT(*) FROM claims WHERE unit = ?", (f"game:{GID}",)).fetchone() == (0,)
    finally:
        con.close()


def test_lease_api_refuses_live_and_takes_over_stale(tmp_path):
    """The API other drivers build on (lab.lease.Lease): one holder at a time, a heartbeat,
    release on exit, takeover of a holder whose process is gone."""
    from lab.lease import Lease, LeaseHeld, participant_subject
    from saves.lease import Owner, current_owner

    db = str(tmp_path / "api.db")

    async def main():
        store = await Store.open(db)
        try:
            subject = participant_subject("pilot", "P01")
            async with Lease(store, subject, role="study run", heartbeat=0.01) as lease:
                first = (await store.lease(subject))["heartbeat"]
                for _ in range(1000):  # the heartbeat renews it (every 10 ms here)
                    await asyncio.sleep(0.01)
                    if (await store.lease(subject))["heartbeat"] > first:
                        break
                assert (await store.lease(subject))["heartbeat"] > first
                # another live process (our parent: alive, another pid) cannot take it
                other = Owner(lease.owner.host, os.getppid(), "", None)
                status, holder = await store.take_lease(subject, other, role="serve")
                assert status == "taken" and holder["role"] == "study run" and holder["pid"] == os.getpid()
            assert await store.lease(subject) is None  # released on exit
            # a holder whose pid is gone: stale, taken over
            dead = Owner(current_owner().host, 2 ** 22 + 12345, "1", None)
            assert (await store.take_lease(subject, dead, role="serve"))[0] == "claimed"
            async with Lease(store, subject, role="study run") as lease:
                assert lease.took_over is not None and lease.took_over["pid"] == dead.pid
            # a holder on another host that stopped beating: stale after LEASE_STALE_SECONDS
            far = Owner("elsewhere.invalid", 4242, "1", None)
            await store.take_lease(subject, far, role="serve")
            with pytest.raises(LeaseHeld):
                await Lease(store, subject, role="study run").acquire()
            await store._db.execute("UPDATE claims SET claimed_at = '2000-01-01T00:00:00+00:00' WHERE unit = ?",
                                    (subject,))
            async with Lease(store, subject, role="study run") as lease:
                assert lease.took_over["host"] == "elsewhere.invalid"
        finally:
            await store.close()

    asyncio.run(main())


async def test_a_served_game_in_play_is_held_by_serve(tmp_path):
    """``serve`` holds the lease of its table's game: another terminal's ``calbench-play
    --resume`` of it is refused in one line naming serve and this process."""
    from engine.taskref import hydrate_labels, resolve_tasks
    from lab.remote_bot import RemoteBot
    from lab.server import TableServer
    from lab.table import Table
    from saves.lease import game_subject

    db = tmp_path / "t.db"
    store = await Store.open(db)
    task = hydrate_labels(resolve_tasks("canonical:3")[0])
    table = Table(task, ["human", "imap", "human", "imap", "imap"], GameConfig(deterministic=True),
                  game_id="table-live", store=store, hold_seconds=60)
    server = TableServer([table], port=0)
    await server.start()
    tasks = []
    try:
        codes = {c["seat"]: c["code"] for c in table.codes()}
        tasks = [asyncio.ensure_future(RemoteBot(server.url, codes[0], stop_after=2).run()),
                 asyncio.ensure_future(RemoteBot(server.url, codes[2]).run()),
                 asyncio.ensure_future(table.run())]
        await asyncio.wait_for(tasks[0], 30)  # seat 0 went quiet mid-game: the table holds it, in play
        held = await store.lease(game_subject("table-live"))
        assert held is not None and held["role"] == "serve" and held["pid"] == os.getpid() and held["alive"]
        proc = await asyncio.create_subprocess_exec(
            os.path.join(BIN, "calbench-play"), "--resume", "table-li", "--db", str(db),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        lines = [ln for ln in err.decode().splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, err
        assert "serve" in lines[0] and f"pid {os.getpid()}" in lines[0]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.stop()
        await store.close()
