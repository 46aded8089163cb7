"""LLM seats as an operator meets them: the report per LLM setting, what replay shows of a
call, the words a person reads when a seat fails, a run's exit status when a game fails,
endpoint numbers past 64 bits, and what a personas file's extra_body may not set
(issue 22 items 7-9, issue 24 items 12 and 16)."""

from __future__ import annotations

import json

import pytest

from engine.observe import seat_event
from personas.llm.factory import PersonasFileError, load_personas
from personas.llm.settings import LLMSettings

from test_llm_faults import obs_for, seated

AGENTS = "imap,llm:tiny,imap,imap,imap"


# -- issue 22.9: the report per LLM setting ---------------------------------------------------
def test_report_rows_group_by_llm_setting_with_latency_retries_and_failure_kinds(cli, threaded_mock, tmp_path):
    url, server = threaded_mock(policy="chaos", seed=3)
    db = str(tmp_path / "r.db")
    for mt in ("600", "700"):  # the same agents string, two reply budgets: two rows
        rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", AGENTS, "--base-url", url,
                            "--max-tokens", mt, "--db", db, "--llm-retries", "3")
        assert rc == 0, err
    rc, out, err = cli("report", "--json", "--db", db)
    assert rc == 0, err
    rows = json.loads(out)["llm_calls"]
    assert [(r["model"], r["max_tokens"], r["structured"]) for r in rows] == [("tiny", 600, "auto"),
                                                                               ("tiny", 700, "auto")]
    for r in rows:
        assert r["endpoint"] == url and r["games"] == 1 and r["seats"] == 1
        assert r["calls"] > 0 and r["requests"] >= r["calls"]
        assert r["latency_median_ms"] is not None and r["latency_p95_ms"] >= r["latency_median_ms"]
    # chaos: 429s and 500s are retried (and counted); failures are listed by kind
    assert sum(r["retries"] for r in rows) > 0
    kinds = {k for r in rows for k in r["failures"]}
    assert all(k in {"unreadable", "length", "timeout", "unreachable", "rate_limited", "server_error",
                                "endpoint_error", "context_overflow"} or k.startswith("rejected:") for k in kinds)
    rc, out, _err = cli("report", "--db", db)
    assert rc == 0 and "LLM calls by setting" in out and "Failures by kind" in out


def test_one_model_for_every_seat_is_its_own_row_in_the_report(cli, threaded_mock, tmp_path):
    """``--agents llm:X`` (one entry: every seat) files each seat under ``llm:X``, as the
    list ``llm:X,llm:X,...`` does; two models are two rows, never one ``llm`` row (found by
    hand: both models' 40 seats in one row named ``llm``)."""
    url, _server = threaded_mock()
    db = str(tmp_path / "r.db")
    for spec in ("llm:tiny", "llm:small", ",".join(["llm:small"] * 5)):
        rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", spec, "--base-url", url, "--db", db)
        assert rc == 0, err
    rc, out, err = cli("report", "--json", "--db", db)
    assert rc == 0, err
    groups = {r["group"]: r["seats"] for r in json.loads(out)["table"]}
    assert groups == {"llm:tiny": 5, "llm:small": 10}, groups


def test_a_rejected_batch_is_reported_by_its_rule(cli, threaded_mock, tmp_path):
    url, server = threaded_mock()
    server.inject("invalid_batch", count=2, phase="DECISION")
    db = str(tmp_path / "r.db")
    rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", AGENTS, "--base-url", url, "--db", db)
    assert rc == 0, err
    rc, out, _ = cli("report", "--json", "--db", db)
    (row,) = json.loads(out)["llm_calls"]
    assert any(k.startswith("rejected:") for k in row["failures"]), row["failures"]


# -- issue 22.9: what replay shows of a call ---------------------------------------------------
async def test_replay_shows_attempts_finish_reason_latency_and_context_budget(make_settings, task):
    from calbench_tui.screens.replay import call_lines
    from calbench_devtools.mock_endpoint import MockLLMServer

    async with MockLLMServer(context_limit=6000, advertise_context=True) as server:
        p, seat = await seated(make_settings(server, timeout=0.4, retries=2), task)
        server.inject("hang", seconds=0.6)
        reply = await p.speak(obs_for(task, seat))
    assert reply.error is None
    lines = call_lines({"latency_ms": reply.latency_ms, "extra": reply.extra})
    text = "\n".join(lines)
    assert "call: 2 attempts (retried after timeout" in lines[0] and "finish_reason stop" in lines[0]
    assert "attempt 1: timeout — timeout: no answer for 0.4 s" in text
    assert "attempt 2: ok" in text and "silence limit 0.8 s" in text and "streamed" in text
    assert "context budget: window 6000 (models)" in text and "prompt ≈" in text


# -- issue 22.8: what a person reads ------------------------------------------------------------
async def test_a_failed_seat_is_explained_in_words_outside_study_games(make_settings, task):
    from calbench_tui.screens.game import failure_note
    from engine.game import GameConfig, run_game
    from personas.llm.factory import make_llm_persona
    from calbench_devtools.mock_endpoint import MockLLMServer
    from personas.registry import make_personas

    async with MockLLMServer() as server:
        settings = make_settings(server, timeout=0.3, retries=1)
        seats = list(make_personas("imap", task.num_agents))
        seats[1] = make_llm_persona("llm:m", settings)
        server.inject("hang", count=2, seconds=0.6, seat=1)
        res = await run_game(task, seats, GameConfig(max_turns_per_round=2))
    ev = next(e for e in res.trace["events"] if e["type"] == "seat_timeout")
    assert ev["data"]["reason"] == "timed out after 0.3 s, 2 tries; the endpoint answers slowly"
    other = 0 if ev["data"]["agent_id"] != 0 else 2
    seen = seat_event(ev, other)  # what another seat's screen receives
    assert seen["reason"] == ev["data"]["reason"] and "detail" not in seen
    note = failure_note(1, {**seen, "type": "seat_timeout"})
    assert note == "Agent 1 failed to answer: timed out after 0.3 s, 2 tries; the endpoint answers slowly."
    assert failure_note(1, {**seen, "type": "seat_timeout"}, blinded=True) == "Agent 1 did not answer."


# -- issue 24.12: a failed game; integers past 64 bits -------------------------------------------
def test_a_failed_game_makes_run_exit_1_unless_keep_going(cli, tmp_path, monkeypatch):
    """One game of three fails for real (its persona cannot start); the run saves and prints
    everything, then exits 1 — or 0 with --keep-going."""
    import lab.runner as runner
    from personas.registry import make_personas

    real = runner.make_seats_for

    def seats_for(spec, n, settings):
        if n and settings is not None and getattr(seats_for, "calls", 0) == 1:
            seats_for.calls += 1
            return [Broken() for _ in range(n)]
        seats_for.calls = getattr(seats_for, "calls", 0) + 1
        return real(spec, n, settings)

    class Broken(type(make_personas("passive", 1)[0])):
        kind = "test"

        async def register(self, briefing):
            raise RuntimeError("this persona cannot start")

    monkeypatch.setattr(runner, "make_seats_for", seats_for)
    rc, _out, err = cli("run", "--tasks", "canonical:0-2", "--agents", "passive", "--db", str(tmp_path / "a.db"))
    assert rc == 1 and "1 game(s) failed" in err
    seats_for.calls = 0
    rc, _out, err = cli("run", "--tasks", "canonical:0-2", "--agents", "passive", "--db", str(tmp_path / "b.db"),
                        "--keep-going")
    assert rc == 0 and "1 game(s) failed" in err


def test_numbers_past_64_bits_from_the_endpoint_do_not_fail_the_game(cli, threaded_mock, tmp_path):
    """/v1/models advertises a window of 2^70 tokens and every reply's usage overflows 64 bits:
    the game completes, the trace is saved, and nothing of those numbers is kept."""
    url, server = threaded_mock(context_limit=2**70, advertise_context=True)
    server.inject("bigint", count=1000)
    db = str(tmp_path / "big.db")
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", AGENTS, "--base-url", url, "--db", db,
                       "--json")
    assert rc == 0, err
    (game,) = json.loads(out)["games"]
    assert game["status"] == "completed", game
    rc, out, err = cli("export", game["game_id"], "-o", "-", "--db", db)
    assert rc == 0, err
    assert str(2**70) not in out and str(2**66 + 1) not in out


# -- issue 24.16: reserved keys in extra_body ----------------------------------------------------
@pytest.mark.parametrize("key", ["model", "messages", "stream", "response_format", "max_tokens", "top_p"])
def test_a_personas_file_may_not_replace_what_calbench_sends(tmp_path, key):
    path = tmp_path / "p.toml"
    path.write_text(f'[seats.1]\nmodel = "m"\nextra_body = {{ {key} = "x", min_p = 0.05 }}\n')
    with pytest.raises(PersonasFileError, match=f"extra_body may not set {key}"):
        load_personas(path, LLMSettings(base_url="http://127.0.0.1:9/v1"))


def test_reserved_extra_body_is_refused_on_the_command_line_in_one_line(cli, tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[defaults]\nextra_body = { model = "other", messages = [] }\n')
    rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", AGENTS, "--base-url", "http://127.0.0.1:9/v1",
                        "--personas", str(path))
    assert rc == 2 and "extra_body may not set messages, model" in err and "Traceback" not in err


async def test_allowed_extra_body_keys_still_reach_the_endpoint_and_sampling_is_sent(make_settings, task):
    from calbench_devtools.mock_endpoint import MockLLMServer

    async with MockLLMServer() as server:
        p, seat = await seated(make_settings(server, extra_body={"min_p": 0.05}, top_p=0.9, seed=7, stop=["END"],
                                             repeat_penalty=1.1, frequency_penalty=0.2), task)
        reply = await p.speak(obs_for(task, seat))
        assert reply.error is None
        assert server.records[-1].sampling == {"min_p": 0.05, "top_p": 0.9, "seed": 7, "stop": ["END"],
                                               "repeat_penalty": 1.1, "frequency_penalty": 0.2}


def test_transport_settings_do_not_change_a_runs_key_but_sampling_does():
    """``calbench run --resume`` finds the games of a run by its settings key: how patient the
    transport is (streaming, the deadline, timeouts) does not change what a game is; sampling does."""
    from lab.runner import RunSettings, settings_key

    def key(**kw):
        return settings_key(AGENTS, RunSettings(llm=LLMSettings(base_url="http://127.0.0.1:9/v1", **kw)))

    assert key() == key(stream=False, request_deadline=5, timeout=3)
    assert key() != key(top_p=0.5) and key() != key(seed=3) and key() != key(stop=["END"])


def test_resume_plays_again_a_game_whose_endpoint_failed_and_counts_the_games_it_kept(cli, threaded_mock, tmp_path):
    """A game whose endpoint failed past its retries is completed with infrastructure
    failures: its scores do not measure the agent.  ``--resume`` once the endpoint is back
    sets it aside (kept, marked stopped, out of every report) and plays its task again, and
    the resumed suite's failure counts include the games it did not play again (found by
    hand: "2 of 2 tasks completed already; playing 0", exit 0, the failures gone)."""
    url, server = threaded_mock()
    db = str(tmp_path / "r.db")
    args = ("run", "--tasks", "canonical:0-1", "--agents", AGENTS, "--base-url", url, "--db", db,
            "--llm-retries", "0", "--json")
    server.inject("500", count=1, phase="CHEAP_TALK")  # the first game's first call: an endpoint failure
    rc, out, err = cli(*args)
    first = {g["task_id"]: g for g in json.loads(out)["games"]}
    assert rc == 1 and "infrastructure failures" in err
    assert sorted(g["infra_failures"] for g in first.values()) == [0, 1]
    bad, good = sorted(first, key=lambda t: -first[t]["infra_failures"])

    rc, out, err = cli(*args, "--resume")
    assert rc == 0, err
    assert "1 of 2 tasks completed already" in err and "1 game(s) whose endpoint failed set aside" in err
    doc = json.loads(out)
    again = {g["task_id"]: g for g in doc["games"]}
    assert again[bad]["game_id"] != first[bad]["game_id"] and again[bad]["infra_failures"] == 0  # played again
    assert again[good]["game_id"] == first[good]["game_id"]  # kept, read back...
    assert again[good]["agent_failures"] == first[good]["agent_failures"] is not None  # ...with its counts
    assert doc["summary"][0]["infra_failures"] == 0

    rc, out, _ = cli("games", "--db", db, "--json")
    status = {g["game_id"]: g["status"] for g in json.loads(out)["games"]}
    assert status[first[bad]["game_id"]] == "stopped"  # kept, out of the reports
    rc, out, _ = cli("report", "--db", db, "--json")
    assert json.loads(out)["games"] == 2


def test_personas_settings_for_a_seat_that_is_no_llm_are_refused_in_one_line(cli, tmp_path):
    """``[seats.1]`` in a personas file for a seat ``--agents`` makes ``imap``: its settings
    would be ignored without a word (found by hand), so the run says so before any game."""
    path = tmp_path / "p.toml"
    path.write_text('[seats.1]\nmodel = "x"\ntemperature = 0.2\n')
    rc, _out, err = cli("run", "--tasks", "canonical:0", "--agents", "llm:m,imap,imap,llm:m,imap",
                        "--base-url", "http://127.0.0.1:9/v1", "--personas", str(path))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "[seats.1] gives LLM settings, but seat 1 is imap" in err
