"""The Inspect AI task ``calbench/calbench`` and ``calbench export --inspect`` (issue 32, items 2-3).

Models: Inspect's ``mockllm/model`` and the project's loopback mock endpoint over real HTTP
through Inspect's ``openai-api`` provider — never a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

import calbench

# Skipped without the extra; Inspect AI (~580 modules) is imported by the tests that use it,
# not at collection, where every worker would import (and on a fresh clone compile) it.
pytestmark = [pytest.mark.extras, pytest.mark.skipif(find_spec("inspect_ai") is None,
                                                     reason="Inspect AI is not installed (pip install 'calbench[inspect]')")]

SCORED = {"coordination", "excess_cost", "fairness", "vps", "vps_typed", "vps_free_text", "leaks"}
INSPECT = Path(sys.executable).with_name("inspect")


def _only_log(folder: Path):
    from inspect_ai.log import read_eval_log

    logs = sorted(folder.glob("*.eval"))
    assert len(logs) == 1, logs
    return read_eval_log(str(logs[0]))


def test_inspect_eval_with_mockllm_resolves_the_entry_point_and_scores_each_game(tmp_path):
    """`inspect eval calbench/calbench --model mockllm/model -T tasks=canonical:0-1 -T seats=1`,
    the command line of the issue: 2 samples, each scored; the figures are the saved game's."""
    db = tmp_path / "games.db"
    # Inspect's mockllm counts tokens with tiktoken, which fetches its o200k_base table on first
    # use: a closed loopback proxy keeps that attempt on this machine (it fails at once; the seat's
    # calls are then recorded as infrastructure failures and the games still end and are scored)
    env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    proc = subprocess.run([str(INSPECT), "eval", "calbench/calbench", "--model", "mockllm/model",
                           "-T", "tasks=canonical:0-1", "-T", "seats=1", "-T", "agents=imap", "-T", f"db={db}",
                           "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = _only_log(tmp_path / "logs")
    assert log.status == "success" and log.eval.task_registry_name == "calbench/calbench"
    assert len(log.samples) == 2
    saved = {g["game_id"]: g for g in calbench.load_games(str(db))}
    assert len(saved) == 2
    for sample in log.samples:
        assert set(sample.scores) == SCORED
        game = saved[sample.scores["coordination"].metadata["game_id"]]
        assert game["agents"] == "imap,llm:mockllm/model,imap,imap,imap"
        assert sample.scores["coordination"].value == game["coordination"]
        assert sample.scores["excess_cost"].value == game["excess_cost"]
        # the seat's prompts and replies are the sample's messages, and Inspect made the calls
        seat1 = [m for m in sample.messages if (m.metadata or {}).get("seat") == 1]
        assert seat1[0].role == "system" and "Agent 1" in seat1[0].text
        assert {m.role for m in seat1} >= {"system", "user"}
        calls = [e for e in sample.events if e.event == "model"]
        assert calls and all(e.model == "mockllm/model" for e in calls)
        assert len(calls) == sum(1 for m in seat1 if m.role == "user")  # one Inspect call per prompt
    assert {m.name for s in log.results.scores for m in s.metrics.values()} == {"mean", "stderr"}


def test_inspect_through_openai_api_at_the_loopback_mock_plays_the_game_calbench_run_plays(threaded_mock, tmp_path):
    """Inspect's OpenAI-compatible provider pointed at `calbench mock-llm` (real HTTP): the LLM
    seat plays real turns, and each game is the one `calbench run` plays with the same endpoint."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    from calbench.inspect_task import calbench as calbench_task

    base_url, _server = threaded_mock(policy="cooperative")
    logs = inspect_eval(calbench_task(tasks="canonical:0-1", seats=1, agents="imap"), model="openai-api/local/mock",
                        model_base_url=base_url, model_args={"api_key": "none"}, log_dir=str(tmp_path / "logs"),
                        display="none")
    log = read_eval_log(logs[0].location)
    assert log.status == "success" and len(log.samples) == 2
    direct = calbench.run(tasks="canonical:0-1", agents="imap,llm:mock,imap,imap,imap", base_url=base_url,
                          db=str(tmp_path / "direct.db"))
    by_task = {r["task_id"]: r for r in direct.records}
    for sample in sorted(log.samples, key=lambda s: s.metadata["index"]):
        ref = by_task[sample.metadata["task_id"]]
        assert sample.scores["coordination"].value == ref["coordination"] > 0.4
        assert sample.scores["vps"].value == ref["vps"]
        assert sample.scores["excess_cost"].value == ref["excess_cost"]
        replies = [m.text for m in sample.messages if m.role == "assistant" and m.metadata["seat"] == 1]
        sent = [a for r in replies for a in json.loads(r)["actions"]]
        assert any(a["type"] == "dm" for a in sent)  # it talked, in its own envelope


def _scripted_games(tmp_path) -> str:
    db = str(tmp_path / "games.db")
    calbench.run(tasks="canonical:0-1", agents="imap", db=db)
    return db


def test_export_all_inspect_reads_back_with_the_figures_of_calbench_games(tmp_path, cli):
    db = _scripted_games(tmp_path)
    rc, _out, err = cli("export", "--all", "--inspect", "-o", str(tmp_path / "logs"), "--db", db)
    assert rc == 0, err
    assert "wrote 2 game(s)" in err
    log = _only_log(tmp_path / "logs")
    assert len(log.samples) == 2
    rc, out, _err = cli("games", "--json", "--db", db)
    games = {g["game_id"]: g for g in json.loads(out)["games"]}
    for sample in log.samples:
        assert sample.scores["coordination"].value == games[sample.id]["coordination"]
        assert sample.scores["excess_cost"].value == games[sample.id]["excess_cost"]
    from inspect_ai.analysis import samples_df

    df = samples_df(log.location)
    assert sorted(df["score_coordination"]) == sorted(g["coordination"] for g in games.values())


def test_export_inspect_one_game_and_the_no_peeking_guard(tmp_path, cli):
    db = _scripted_games(tmp_path)
    first = calbench.load_games(db)[0]["game_id"]
    rc, _out, err = cli("export", first[:8], "--inspect", "-o", str(tmp_path / "one"), "--db", db)
    assert rc == 0, err
    assert [s.id for s in _only_log(tmp_path / "one").samples] == [first]
    # a game a person is still playing: refused by name, left out of --all
    from engine.taskref import resolve_tasks
    from saves.store import on_store

    task = resolve_tasks("canonical:2")[0]

    async def running(store):
        await store.create_game("humangame-1", task_row=task.to_row(),
                                config={"agents": [{"type": "human", "kind": "human"}] + [{"type": "imap"}] * 4},
                                agents="human,imap,imap,imap,imap", settings_key="play", started_at="2026-01-01")

    on_store(db, running)
    rc, _out, err = cli("export", "humangame", "--inspect", "-o", str(tmp_path / "peek"), "--db", db)
    assert rc == 2 and "--reveal-all-seats" in err and "Traceback" not in err
    assert not (tmp_path / "peek").exists()
    rc, _out, err = cli("export", "--all", "--inspect", "-o", str(tmp_path / "all"), "--db", db)
    assert rc == 0 and "skipped game humangam" in err and "wrote 2 game(s)" in err
    assert len(_only_log(tmp_path / "all").samples) == 2


def test_export_inspect_mistakes_are_one_line(tmp_path, cli):
    db = _scripted_games(tmp_path)
    rc, _out, err = cli("export", "--inspect", "-o", str(tmp_path / "x"), "--db", db)
    assert rc == 2 and "one game (name it) or every game (--all)" in err
    rc, _out, err = cli("export", "--all", "--inspect", "-o", "-", "--db", db)
    assert rc == 2 and "give a directory" in err
