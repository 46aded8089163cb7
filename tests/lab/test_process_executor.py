"""The local worker processes of a scripted suite (lab/executors.ProcessExecutor).

Forked workers play, the driver process is the only writer of the database: the same
games as one process, nothing twice, and a worker that dies costs only the chunks it held.
"""

from __future__ import annotations

import sqlite3

import pytest

from engine.taskref import resolve_tasks
from lab import runner
from lab.executors import FAULT_ENV, process_executor

from .helpers import game_rows, run, traces


def test_worker_processes_save_the_same_games_as_one_process(tmp_path, capsys):
    args = ["--tasks", "canonical:0-19", "--agents", "imap,dsm-welfare,imap,sdmap,dsm-private", "--deterministic"]
    one = run(capsys, *args, "--db", str(tmp_path / "one.db"), "--concurrency", "1")
    two = run(capsys, *args, "--db", str(tmp_path / "two.db"), "--concurrency", "2")
    assert two == one  # ids, metrics and the summary, in task order
    a, b = traces(str(tmp_path / "one.db")), traces(str(tmp_path / "two.db"))
    assert a == b and len(a) == 20
    con = sqlite3.connect(str(tmp_path / "two.db"))
    try:  # the driver dropped its claims at the end, and wrote each game once
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*), COUNT(DISTINCT task_id) FROM games").fetchone() == (20, 20)
    finally:
        con.close()


def test_a_worker_that_dies_costs_only_the_chunks_it_held(tmp_path, monkeypatch):
    fault = tmp_path / "fault"
    fault.mkdir()
    monkeypatch.setenv(FAULT_ENV, str(fault))  # the first chunk to start kills its worker (inherited by fork)
    tasks = resolve_tasks("canonical:0-23")
    settings = runner.RunSettings(deterministic=True)
    db = str(tmp_path / "die.db")
    games = runner.run_cli_suite(tasks, "imap", db=db, settings=settings,
                                 executor=process_executor(2, chunk=3, ahead=2))
    assert (fault / "died").exists()
    rows = game_rows(db)
    assert len(rows) == 24 and len({r[1] for r in rows}) == 24  # every task once, none twice
    failed = [g for g in games if g.status == "failed"]
    # the chunks of three the dead worker held (one or two, as it died before or after the
    # second reached it; a chunk it never got went to the other worker)
    assert len(failed) in (3, 6)
    assert all("the worker process died" in g.error for g in failed)
    assert sum(1 for r in rows if r[2] == "completed") == 24 - len(failed)  # the other worker played the rest
    monkeypatch.delenv(FAULT_ENV)
    again = runner.run_cli_suite(tasks, "imap", db=db, settings=settings, resume=True,
                                 executor=process_executor(2, chunk=3))
    assert [g.status for g in again] == ["completed"] * 24  # --resume plays the failed ones again
    assert {r[2] for r in game_rows(db)} == {"completed"} and len(game_rows(db)) == 24


@pytest.mark.parametrize("processes", [1, 3])
def test_any_number_of_workers_plays_every_task_once(tmp_path, processes):
    tasks = resolve_tasks("canonical:0-6")
    db = str(tmp_path / "n.db")
    games = runner.run_cli_suite(tasks, "sdmap", db=db, settings=runner.RunSettings(deterministic=True),
                                 executor=process_executor(processes, chunk=2))
    assert [g.task_id for g in games] == [t.task_id for t in tasks]
    assert {g.status for g in games} == {"completed"} and len(game_rows(db)) == 7


def test_the_workers_are_forked_while_no_other_thread_runs(tmp_path, monkeypatch, capsys):
    """A fork copies only the calling thread: a lock held by another thread (the store's,
    the progress bar's) would stay held in the worker forever.  ``calbench run`` forks first."""
    import threading

    from lab.executors import ProcessExecutor

    seen = []
    real = ProcessExecutor.start

    def start(self, *a, **kw):
        seen.append(sorted(t.name for t in threading.enumerate()))
        return real(self, *a, **kw)

    monkeypatch.setattr(ProcessExecutor, "start", start)
    doc = run(capsys, "--tasks", "canonical:0-19", "--agents", "imap", "--db", str(tmp_path / "t.db"))
    assert len(doc["games"]) == 20
    assert seen == [["MainThread"]]


def test_when_every_worker_dies_the_run_says_so_and_keeps_what_it_wrote(tmp_path, monkeypatch):
    from lab.executors import ExecutorError

    fault = tmp_path / "fault"
    fault.mkdir()
    monkeypatch.setenv(FAULT_ENV, str(fault))
    tasks = resolve_tasks("canonical:0-11")
    db = str(tmp_path / "all.db")
    with pytest.raises(ExecutorError, match=r"every worker process died; \d+ game\(s\) were not played .*--resume"):
        runner.run_cli_suite(tasks, "imap", db=db, settings=runner.RunSettings(deterministic=True),
                             executor=process_executor(1, chunk=2, ahead=2))
    rows = game_rows(db)
    assert rows and {r[2] for r in rows} == {"failed"} and len(rows) <= 4  # the chunks it held, saved failed
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # claims dropped: --resume plays all
    finally:
        con.close()
    monkeypatch.delenv(FAULT_ENV)
    again = runner.run_cli_suite(tasks, "imap", db=db, settings=runner.RunSettings(deterministic=True),
                                 resume=True, executor=process_executor(1, chunk=2))
    assert [g.status for g in again] == ["completed"] * 12


def test_a_chunk_yields_each_game_as_it_ends(monkeypatch):
    """``iter_chunk`` (the Ray task, a streaming generator) hands back a game before the next
    one starts: the driver writes it and advances progress per game, not per chunk."""
    from lab.executors import _Chunk, iter_chunk
    from personas.spec import AgentsSpec

    started = []
    real = runner.play_one

    async def play_one(task, gid, *a, **kw):
        started.append(gid)
        return await real(task, gid, *a, **kw)

    monkeypatch.setattr(runner, "play_one", play_one)
    tasks = resolve_tasks("canonical:0-2")
    ids = ("a", "b", "c")
    stream = iter_chunk(_Chunk(tuple(tasks), ids, AgentsSpec.parse("imap"), runner.RunSettings(deterministic=True),
                               1, False))
    game, summary = next(stream)
    assert started == ["a"] and game.game_id == "a" and summary.status == "completed"
    assert [g.game_id for g, _ in stream] == ["b", "c"] and started == ["a", "b", "c"]
