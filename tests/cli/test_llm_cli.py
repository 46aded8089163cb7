"""`calbench run --judge` and `calbench report --prices` (issue 12), real HTTP to the mock."""

from __future__ import annotations

import asyncio
import json

import pytest

from calbench_cli.cli import main
from saves.store import Store


@pytest.fixture
def judge_mock(threaded_mock):
    """The loopback mock served from its own thread, so the CLI can run its own event loop."""
    return threaded_mock(policy="judge")


def load(db: str, gid: str) -> dict:
    async def go():
        async with await Store.open(db) as store:
            return await store.load_trace(gid)
    return asyncio.run(go())


def test_run_with_a_judge_then_report_tokens_money_and_the_three_vps(tmp_path, capsys, monkeypatch, judge_mock):
    url, server = judge_mock
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "j.db")
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:seat-model,imap,llm:seat-model,imap,imap",
               "--db", db, "--base-url", url, "--reflection", "--judge", "judge-model", "--max-turns", "6", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    (g,) = json.loads(out.out)["games"]
    assert g["config_failures"] == g["infra_failures"] == g["agent_failures"] == 0
    tr = load(db, g["game_id"])
    n_msgs = sum(1 for e in tr["events"] if e["type"].endswith("_sent"))
    assert tr["judge"]["model"] == "judge-model" and len(tr["judge"]["records"]) == n_msgs
    m = tr["metrics"]
    assert {"vps", "reflection_vps", "judge_vps"} <= set(m) and m["judge_vps"]["messages"] == n_msgs
    assert {r.model for r in server.records} == {"seat-model", "judge-model"}
    # the game's tokens in the run's JSON: seats and judge, from the endpoint's usage
    assert g["tokens"]["prompt_tokens"] > 0 and g["tokens"]["calls"] == len(server.records)

    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "EUR"\n[models."seat-model"]\nprompt = 2.0\ncached = 0.5\ncompletion = 8.0\n'
                      '[models."judge-model"]\nprompt = 1.0\ncompletion = 1.0\n')
    assert main(["report", "--db", db, "--prices", str(prices), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    (row,) = rep["llm"]["rows"]
    assert rep["llm"]["currency"] == "EUR" and row["games"] == 1
    t = g["tokens"]
    assert row["prompt_tokens"] == t["prompt_tokens"] and row["cached_tokens"] == t["cached_tokens"]
    # money by hand: seat calls at the seat price (cached at the cached price), judge calls at the judge's
    from engine.usage import token_usage

    u = token_usage(tr["events"], tr["judge"]["records"])
    s, j = u["game"], u["judge"]
    want = ((s["prompt_tokens"] - s["cached_tokens"]) * 2.0 + s["cached_tokens"] * 0.5 + s["completion_tokens"] * 8.0
            + (j["prompt_tokens"] - j["cached_tokens"]) * 1.0 + j["cached_tokens"] * 1.0
            + j["completion_tokens"] * 1.0) / 1e6
    assert row["money_per_game"] == pytest.approx(want)
    assert row["judge_vps"] == m["judge_vps"]["calibrated_total"]
    assert row["reflection_vps"] == m["reflection_vps"]["calibrated_total"]

    assert main(["report", "--db", db, "--prices", str(prices)]) == 0
    text = capsys.readouterr().out
    assert "LLM seats: tokens per game" in text and "EUR/game" in text and "Judge VPS" in text


@pytest.mark.parametrize("content, words", [
    ("[models.x]\nprompt = 1\n", "needs completion"),
    ("[models.x]\nprompt = -1\ncompletion = 1\n", "must be a number"),
    ("price = 3\n", "unknown key"),
    ("[models.x\n", "not valid TOML"),
])
def test_a_bad_prices_file_is_one_line(tmp_path, capsys, content, words):
    db = tmp_path / "e.db"
    assert main(["run", "--tasks", "canonical:0", "--agents", "imap", "--db", str(db)]) == 0
    capsys.readouterr()
    f = tmp_path / "p.toml"
    f.write_text(content)
    assert main(["report", "--db", str(db), "--prices", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_judge_options_need_a_judge(tmp_path, capsys):
    rc = main(["run", "--tasks", "canonical:0", "--agents", "imap", "--db", str(tmp_path / "x.db"),
               "--judge-base-url", "http://127.0.0.1:9/v1"])
    assert rc == 2 and "need --judge MODEL" in capsys.readouterr().err


def test_an_interrupted_run_prints_the_command_that_continues_it(monkeypatch):
    import argparse

    from calbench_cli import cli

    monkeypatch.setattr("sys.argv", ["calbench", "run", "--tasks", "canonical:0-9", "--agents", "llm:x",
                                     "--db", "my runs.db"])
    hint = cli._resume_hint(argparse.Namespace(command="run"))
    assert hint.endswith("Continue with: calbench run --tasks canonical:0-9 --agents llm:x --db 'my runs.db' --resume")
    assert cli._resume_hint(argparse.Namespace(command="report")) == ""
