"""Issue 15 (1) and (2): workers die with their parent, a run claims what it plays,
``--resume`` never plays a task twice, two runs of one suite share the work or the second
is refused.  Real processes, real signals, a real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from saves.lease import current_owner
from saves.store import Store

from .helpers import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from kill_resume import alive, big_suite, children_of, counts, run_cmd  # noqa: E402


def _completed(db: str) -> int:
    if not os.path.exists(db):
        return 0
    try:
        con = sqlite3.connect(db, timeout=30)
        try:
            return con.execute("SELECT COUNT(*) FROM games WHERE status = 'completed'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.fixture
def suite(tmp_path):
    tasks = str(tmp_path / "big.jsonl")
    big_suite(tasks, 240)
    return tasks, str(tmp_path / "x.db")


@pytest.mark.parametrize("sig", ["KILL", "TERM"])
def test_kill_then_resume_plays_every_task_once(suite, sig):
    """Before (main): 661 of 720 tasks completed twice after kill -9 at 2 s and an
    immediate --resume; the two workers lived on under PID 1 for ~150 s.  After: 0."""
    tasks, db = suite
    first = subprocess.Popen(run_cmd(tasks, db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: _completed(db) >= 16, 120.0, 0.02), first.stderr.read() if first.poll() is not None else ""
        workers = children_of(first.pid)
        assert len(workers) >= 1  # a scripted suite of 240 tasks runs in worker processes
        first.send_signal(getattr(signal, f"SIG{sig}"))
        first.wait(timeout=30)
        assert wait_until(lambda: not any(alive(w) for w in workers), 2.0, 0.02), "a worker outlived its parent"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    before = counts(db)
    assert before["tasks_completed_twice"] == 0 and 0 < before["distinct_tasks"] < 240
    resume = subprocess.run(run_cmd(tasks, db, "--resume"), capture_output=True, text=True, timeout=600)
    assert resume.returncode == 0, resume.stderr
    said = [line for line in resume.stderr.splitlines() if line.startswith("resume:")]
    assert said and f"{before['distinct_tasks']} of 240 tasks completed already" in said[0]
    after = counts(db)
    assert after == {"completed_games": 240, "distinct_tasks": 240, "tasks_completed_twice": 0}
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # a clean end drops its claims
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_two_resumed_runs_at_once_share_the_work(suite):
    """Before (main): two '--concurrency 1 --resume' runs of one suite into one database
    completed every task twice (360 of 360).  After: 0, and both finish."""
    tasks, db = suite
    cmd = run_cmd(tasks, db, "--concurrency", "1", "--resume")
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ea, eb = a.communicate(timeout=600)[1], b.communicate(timeout=600)[1]
    assert a.returncode == 0 and b.returncode == 0, ea + eb
    assert counts(db) == {"completed_games": 240, "distinct_tasks": 240, "tasks_completed_twice": 0}


def test_a_second_run_without_resume_is_refused_in_one_line(suite):
    tasks, db = suite
    first = subprocess.Popen(run_cmd(tasks, db, "--concurrency", "1"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _completed(db) >= 1, 120.0, 0.02)
        second = subprocess.run(run_cmd(tasks, db), capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "another calbench run" in lines[0] and "--resume" in lines[0]
        assert f"pid {first.pid}" in lines[0]
    finally:
        first.send_signal(signal.SIGINT)
        try:
            first.wait(timeout=60)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
    assert counts(db)["tasks_completed_twice"] == 0


SLEEPER = "import time; time.sleep(600)"


async def test_claims_respect_live_owners_and_take_over_stale_ones(tmp_path):
    from saves.lease import Owner, process_start

    db = str(tmp_path / "c.db")
    other = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        live = Owner(current_owner().host, other.pid, process_start(other.pid), other.pid)
        async with await Store.open(db) as store:
            got = await store.claim_units("k", [("t1#0", "t1", "g1"), ("t2#0", "t2", "g2")], live)
            assert got == {"t1#0": "claimed", "t2#0": "claimed"}
            me = current_owner(os.getpid())
            assert await store.claim_units("k", [("t1#0", "t1", "g1"), ("t3#0", "t3", "g3")], me) == {
                "t1#0": "taken", "t3#0": "claimed"}
            assert await store.claim_units("k2", [("t1#0", "t1", "g1")], me) == {"t1#0": "claimed"}  # other key
            other.kill()
            other.wait()
            assert await store.claim_units("k", [("t1#0", "t1", "g1")], me) == {"t1#0": "stale"}
            # a pid given to a new process is not the claim's owner (start time differs)
            fake = Owner(live.host, os.getpid(), "1", None)
            await store.claim_units("k", [("t4#0", "t4", "g4")], fake)
            assert await store.claim_units("k", [("t4#0", "t4", "g4")], me) == {"t4#0": "stale"}
            # a completed task is done, whoever claimed it
            await store.import_trace({"game_id": "g5", "events": [], "task": None, "config": {"task_id": "t5"},
                                      "saved": {"settings_key": "k", "status": "completed", "agents": "imap"}})
            assert await store.claim_units("k", [("t5#0", "t5", "g5"), ("t5#1", "t5", "g6")], me) == {
                "t5#0": "done", "t5#1": "claimed"}
            assert await store.release_claims("k", me) == 4
            assert {c["unit"] for c in await store.claims("k")} == {"t2#0"}  # the dead owner's leftover
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_die_with_parent_in_a_grandchild(tmp_path):
    """A process that called die_with_parent is gone as soon as its parent is SIGKILLed."""
    script = (
        "import os, sys, time\n"
        "from lab.lease import die_with_parent\n"
        "parent = os.getpid()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    die_with_parent(parent)\n"
        "    time.sleep(600)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    time.sleep(0.3)
    assert alive(child)
    proc.kill()
    proc.wait()
    try:
        assert wait_until(lambda: not alive(child), 2.0, 0.02)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_resume_report_line():
    from lab.lease import ResumeReport

    r = ResumeReport(total=720, completed=600, marked_stopped=2, stale_claims=16, held_by_others=8,
                     other_pids=[4242], to_play=112)
    assert r.line() == ("resume: 600 of 720 tasks completed already; 2 game(s) a crash left running marked "
                        "stopped; 16 task(s) claimed by a run that is gone, taken over; 8 being played by another "
                        "run (pid 4242), left to it; playing 112")
    assert json.dumps(r.__dict__)


async def test_resume_leaves_a_live_runs_game_running_and_stops_a_dead_ones(tmp_path):
    """``--resume`` marks games a crash left running as stopped — not those a live process plays."""
    from engine.generate import generate_scenario
    from lab.lease import prepare_resume_claims
    from saves.lease import Owner, process_start

    db = str(tmp_path / "r.db")
    tasks = [generate_scenario(s) for s in (1, 2)]
    other = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        owner = Owner(current_owner().host, other.pid, process_start(other.pid), other.pid)
        async with await Store.open(db) as store:
            for t, gid in zip(tasks, ("g1", "g2")):
                await store.create_game(gid, task_row=t.to_row(), config={}, agents="llm:m", settings_key="k",
                                        started_at="2026-01-01T00:00:00+00:00")
            await store.claim_units("k", [(f"{tasks[0].task_id}#0", tasks[0].task_id, "g1")], owner)
            keep, report = await prepare_resume_claims(store, "k", tasks, ["g1", "g2"])
            status = {g["game_id"]: g["status"] for g in await store.list_games()}
            assert status == {"g1": "running", "g2": "stopped"}
            assert keep == [0, 1] and report.held_by_others == 1 and report.to_play == 1
            assert f"pid {other.pid}" in report.line()
            other.kill()
            other.wait()
            keep, report = await prepare_resume_claims(store, "k", tasks, ["g1", "g2"])
            assert {g["game_id"]: g["status"] for g in await store.list_games()} == {"g1": "stopped",
                                                                                   "g2": "stopped"}
            assert report.stale_claims == 1 and report.to_play == 2
            assert await store.claims("k") == []  # the dead run's claim is tidied away
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


async def test_the_other_shard_of_a_suite_played_at_once_is_no_conflict(tmp_path):
    """Two shards of one suite into one database at the same time (``--shard 1/2`` and
    ``2/2``): the live claims of the other shard are on other tasks, so no ``--resume`` is
    needed; a live claim on one of this run's own tasks still refuses it in one line (found
    by hand: the second shard was refused as "another calbench run ... is playing this suite")."""
    from saves.lease import Owner, process_start
    from lab.lease import OtherRunActive, check_other_runs

    db = str(tmp_path / "r.db")
    other = subprocess.Popen([sys.executable, "-c", SLEEPER])
    try:
        owner = Owner(current_owner().host, other.pid, process_start(other.pid), other.pid)
        async with await Store.open(db) as store:
            await store.claim_units("k", [("t1#0", "t1", "g1")], owner)  # shard 1/2 plays t1
            assert await check_other_runs(store, "k", resume=False, db=db, units=["t2#0"]) == []
            with pytest.raises(OtherRunActive, match=f"pid {other.pid}"):
                await check_other_runs(store, "k", resume=False, db=db, units=["t1#0", "t2#0"])
            with pytest.raises(OtherRunActive):  # no units given: any live claim under the key
                await check_other_runs(store, "k", resume=False, db=db)
    finally:
        other.kill()
        other.wait()
