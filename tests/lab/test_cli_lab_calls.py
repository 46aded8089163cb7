"""The lab calls behind ``calbench report | oracle | scenario | rescore | mock-llm``, called
directly (no command line): what they return and the one-line errors they raise."""

from __future__ import annotations

import pytest

from lab.oracle_check import OracleCheckError, check_tasks, load_tasks
from lab.report.saved import ReportError, report_from_db
from lab.rescore import RescoreRefused, rescore_db
from lab.scenario import ScenarioError, scenario_task

from .test_archive import _human_game_started, _save


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("calls") / "r.db")
    _save(path, seed=3)
    _human_game_started(path)
    return path


def test_report_from_db_counts_completed_games_and_leaves_a_game_in_play_out(db):
    saved = report_from_db(db)
    assert [r["game_id"] for r in saved.rows][:1] == ["game-0003-abcdefgh"]
    assert {t["game_id"] for t in saved.traces} == {"game-0003-abcdefgh"}
    assert saved.report["table"] and saved.written == [] and "plots" not in saved.report
    assert report_from_db(db, tasks="seed:4").rows == []  # another task: nothing


@pytest.mark.parametrize("kw,says", [({"group_by": "colour"}, "--group-by must be one of persona, model, cost_mode"),
                                     ({"plot": "out/"}, "give a file name such as results.png"),
                                     ({"plot": "/no/such/folder/r.png"}, "the folder /no/such/folder does not exist"),
                                     ({"tasks": "nonsense:1"}, "nonsense:1"),
                                     ({"prices": "/no/such/prices.toml"}, "prices.toml")])
def test_report_options_are_one_line_errors(db, kw, says):
    with pytest.raises(ReportError, match=says.replace("(", r"\(")):
        report_from_db(db, **kw)


def test_report_writes_the_three_plots(db, tmp_path):
    saved = report_from_db(db, plot=str(tmp_path / "r.png"))
    assert sorted(p.rsplit("/", 1)[-1] for p in saved.written) == ["r-fairness.png", "r-messages.png", "r.png"]
    assert all((tmp_path / p.rsplit("/", 1)[-1]).stat().st_size > 0 for p in saved.written)


def test_oracle_check_agrees_with_a_generated_task_and_counts_progress():
    tasks = load_tasks("seed:3")
    ticks = []
    done = check_tasks(tasks, time_limit=30, advance=lambda: ticks.append(1))
    [row] = done.rows
    assert row["task_id"] == tasks[0].task_id and row["status"] == "agree" and row["reason"] == ""
    assert (done.agree, done.disagree, len(ticks)) == (1, 0, 1)
    with pytest.raises(OracleCheckError, match="--time-limit must be a positive number"):
        check_tasks(tasks, time_limit=0)
    with pytest.raises(OracleCheckError):
        load_tasks("/no/such/tasks.jsonl")


def test_scenario_task_generates_or_looks_up_exactly_one():
    t = scenario_task(seed=7)
    assert t.seed == 7 and t.num_agents == 5
    assert scenario_task(task="seed:7").to_row() == t.to_row()
    small = scenario_task(seed=1, agents=3, slots=8, meetings=2, participants=2, blocked=1, density=0.5)
    assert (small.num_agents, small.num_slots, len(small.meetings)) == (3, 8, 2)
    with pytest.raises(ScenarioError, match="--task needs a reference"):
        scenario_task(task=" ")
    with pytest.raises(ScenarioError, match="names 2 tasks; name exactly one"):
        scenario_task(task="canonical:0-1")
    with pytest.raises(ScenarioError, match="--time-limit must be a positive"):
        scenario_task(seed=0, time_limit=0)


def test_rescore_db_finds_nothing_to_change_and_refuses_an_empty_id(db):
    results = rescore_db(db, dry_run=True)
    assert {r.game_id: r.status for r in results}["game-0003-abcdefgh"] == "unchanged"
    with pytest.raises(RescoreRefused, match="--games: an empty game id"):
        rescore_db(db, [" "])


@pytest.mark.parametrize("kw,says", [({"port": 70000}, "--port must be 0..65535, not 70000"),
                                     ({"latency": -1}, "--latency must be 0 or more"),
                                     ({"slowgen": 61.0}, "--slowgen must be more than 0 and at most 60"),
                                     ({"context_limit": 10}, "--context-limit must be at least 64")])
def test_the_mock_endpoint_refuses_bad_options_before_it_listens(kw, says):
    from calbench_devtools.mock_endpoint import MockOptionError, serve_until_stopped

    def ready(server):
        raise AssertionError("it started")

    with pytest.raises(MockOptionError, match=says):
        serve_until_stopped(ready=ready, **kw)
