"""The on-disk oracle cache: solved once per task content, the same answers, never in the way."""

from __future__ import annotations

import sqlite3

import pytest

from engine.generate import generate_scenario
from engine.metrics import oracle_cached
from engine.oracle import result_from_json, result_to_json, solve
from engine.model import Task
from lab import oracle_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CALBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "oracle.sqlite"


def fresh(task: Task) -> Task:
    return Task.from_row(task.row)


def test_result_json_roundtrip():
    for seed in (1, 2, 3):
        r = solve(generate_scenario(seed))
        assert result_from_json(result_to_json(r)) == r


def test_saved_results_come_back_equal_for_the_same_content(cache):
    task = generate_scenario(21)
    full = oracle_cached(task, None)
    part = oracle_cached(task, (task.meetings[0].id,))
    assert oracle_cache.save(task) == 2
    assert oracle_cache.save(task) == 0  # nothing new
    again = fresh(task)
    assert oracle_cache.load(again) == 2
    assert again.cache[("oracle", None)] == full
    assert again.cache[("oracle", (task.meetings[0].id,))] == part
    # the same scenario under another name reuses the answer; another scenario does not
    renamed = Task.from_row({**task.row, "task_id": "another-name"})
    assert oracle_cache.load(renamed) == 2
    assert oracle_cache.load(generate_scenario(22)) == 0


def test_another_solver_version_misses(cache, monkeypatch):
    import engine.oracle

    task = generate_scenario(5)
    oracle_cached(task, None)
    oracle_cache.save(task)
    monkeypatch.setattr(engine.oracle, "ORACLE_VERSION", engine.oracle.ORACLE_VERSION + 1)
    assert oracle_cache.load(fresh(task)) == 0


def test_off_and_broken_caches_are_skipped(tmp_path, monkeypatch):
    task = generate_scenario(8)
    oracle_cached(task, None)
    monkeypatch.setenv("CALBENCH_CACHE", "off")
    assert oracle_cache.save(task) == 0 and oracle_cache.load(fresh(task)) == 0
    folder = tmp_path / "junk"
    folder.mkdir()
    (folder / "oracle.sqlite").write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("CALBENCH_CACHE", str(folder))
    assert oracle_cache.save(task) == 0 and oracle_cache.load(fresh(task)) == 0  # no exception, no answer


def test_a_suite_fills_the_cache_and_replays_the_same_games(cache, tmp_path, cli):
    import json

    args = ["run", "--tasks", "canonical:0-5", "--agents", "sdmap", "--deterministic", "--json"]
    rc, first, _ = cli(*args, "--db", str(tmp_path / "a.db"))
    assert rc == 0
    con = sqlite3.connect(cache)
    n = con.execute("SELECT COUNT(DISTINCT task_hash) FROM oracle").fetchone()[0]
    con.close()
    assert n == 6
    rc, second, _ = cli(*args, "--db", str(tmp_path / "b.db"))
    assert rc == 0
    assert json.loads(first) == json.loads(second)
