"""`calbench run --prompt compact --llm-calls-per-round N` (issue 22 items 3 and 12), real HTTP to the mock."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from calbench_cli.cli import main
from saves.store import Store


def load(db: str, gid: str) -> dict:
    async def go():
        async with await Store.open(db) as store:
            return await store.load_trace(gid)
    return asyncio.run(go())


def test_run_with_the_compact_prompt_and_a_call_cap(tmp_path, capsys, monkeypatch, threaded_mock):
    url, server = threaded_mock(policy="sloppy", sloppy_mode="copycat")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "c.db")
    rc = main(["run", "--tasks", "canonical:0", "--agents", "imap,llm:small,imap,imap,imap", "--db", db,
               "--base-url", url, "--prompt", "compact", "--llm-calls-per-round", "2", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    (g,) = json.loads(out.out)["games"]
    tr = load(db, g["game_id"])
    assert tr["config"]["llm"][1]["prompt"] == "compact" and tr["config"]["llm"][1]["max_calls_per_round"] == 2
    system = next(e["data"]["system_prompt"] for e in tr["events"]
                  if e["type"] == "agent_registered" and e["data"]["agent_id"] == 1)
    assert system.startswith("# CalBench. You are Agent 1")
    talk = Counter(r.phase for r in server.records if r.seat == 1)
    rounds = {e["data"]["round"] for e in tr["events"] if e["type"] == "turn_end" and e["data"]["agent_id"] == 1}
    assert 0 < talk["CHEAP_TALK"] <= 2 * len(rounds)


def test_a_bad_call_cap_is_one_line(capsys):
    rc = main(["run", "--tasks", "canonical:0", "--agents", "imap,llm:x,imap,imap,imap",
               "--base-url", "http://127.0.0.1:9/v1", "--llm-calls-per-round", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "--llm-calls-per-round must be at least 1" in err and "Traceback" not in err


def test_run_with_the_literal_model_and_each_decision_setting(tmp_path, capsys, monkeypatch, threaded_mock):
    """`--llm-decision slot` (default) and `batch` reach the seat and its saved settings; with
    the literal model the slot it meant is scheduled only under `slot` (issue 31)."""
    url, server = threaded_mock(policy="literal")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for mode in ("slot", "batch"):
        db = str(tmp_path / f"{mode}.db")
        server.decisions.clear()
        rc = main(["run", "--tasks", "canonical:0", "--agents", "imap,llm:small,imap,imap,imap", "--db", db,
                   "--base-url", url, "--llm-decision", mode, "--json"])
        out = capsys.readouterr()
        assert rc == 0, out.err
        (g,) = json.loads(out.out)["games"]
        tr = load(db, g["game_id"])
        assert tr["config"]["llm"][1]["decision"] == mode
        meant_written = [(d["meant"], d["wrote"]) for d in server.decisions]
        assert meant_written and (all(m == w for m, w in meant_written) if mode == "slot"
                                  else any(m != w for m, w in meant_written))
    with pytest.raises(SystemExit) as exit_:  # argparse: usage and one line
        main(["run", "--tasks", "canonical:0", "--agents", "imap,llm:x,imap,imap,imap",
              "--base-url", "http://127.0.0.1:9/v1", "--llm-decision", "moves"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--llm-decision: invalid choice: 'moves'" in err and "Traceback" not in err
