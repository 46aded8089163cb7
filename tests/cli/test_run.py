"""``calbench run`` and the headless suite runner, on small real suites with a temp database."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from lab import runner
from calbench_cli.cli import main
from engine.seats import PassivePersona
from engine.taskref import resolve_tasks
from saves.store import Store

SUITE = "canonical:0-3,45-46"  # four uniform tasks and two varied ones (5 agents, 3 participants)


def run_json(capsys, *args) -> dict:
    rc = main(["run", *args, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def saved(db) -> dict[str, dict]:
    """game_id -> {status, task_id, agents, settings_key, metrics} as the store holds them."""
    async def go():
        async with await Store.open(db) as store:
            games = await store.list_games()
            out = {}
            for g in games:
                tr = await store.load_trace(g["game_id"])
                out[g["game_id"]] = {"status": g["status"], "task_id": g["task_id"], "agents": g["agents"],
                                     "settings_key": tr["saved"]["settings_key"], "metrics": tr["metrics"],
                                     "events": len(tr["events"])}
            return out
    return asyncio.run(go())


def test_json_matches_the_saved_games(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    doc = run_json(capsys, "--tasks", SUITE, "--agents", "imap", "--db", db, "--concurrency", "1")
    assert set(doc) == {"games", "summary"}
    games = doc["games"]
    assert [g["task_id"] for g in games] == [t.task_id for t in resolve_tasks(SUITE)]
    keys = {"game_id", "task_id", "cost_mode", "agents", "status", "coordination", "meetings_scheduled",
            "meetings_total", "excess_cost", "messages_per_meeting", "fairness", "vps",
            "infra_failures", "config_failures", "agent_failures", "tokens"}
    assert all(set(g) == keys for g in games)
    db_games = saved(db)
    assert set(db_games) == {g["game_id"] for g in games}
    for g in games:
        s = db_games[g["game_id"]]
        m = s["metrics"]
        assert s["status"] == g["status"] == "completed"
        assert s["agents"] == g["agents"] == "imap"
        assert s["events"] > 20  # the whole trace was saved, not only the metrics
        assert g["coordination"] == m["coordination_rate"]
        assert g["meetings_scheduled"] == m["meetings_scheduled"] and g["meetings_total"] == 5
        assert g["excess_cost"] == pytest.approx(m["excess"])
        assert g["fairness"] == pytest.approx(m["fairness"])
        assert g["vps"] == pytest.approx(m["vps"])
        assert g["messages_per_meeting"] == pytest.approx(m["messages_per_meeting"])
    assert [g["cost_mode"] for g in games] == ["uniform"] * 4 + ["varied"] * 2
    # The summary: one row per cost setting, pooled over that setting's games.
    summary = {row["cost_mode"]: row for row in doc["summary"]}
    assert set(summary) == {"uniform", "varied"}
    uni = [g for g in games if g["cost_mode"] == "uniform"]
    row = summary["uniform"]
    assert row["persona"] == "imap" and row["games"] == 4
    assert row["coordination"] == pytest.approx(sum(g["coordination"] for g in uni) / 4)
    assert row["excess"] == pytest.approx(sum(g["excess_cost"] for g in uni) / 4)  # 5 seats in every game
    assert row["fairness"] == pytest.approx(sum(g["fairness"] for g in uni) / 4)
    assert row["vps"] == pytest.approx(sum(g["vps"] for g in uni) / 4)


def test_all_imap_sends_two_messages_per_meeting(tmp_path, capsys):
    doc = run_json(capsys, "--tasks", SUITE, "--agents", "imap", "--db", str(tmp_path / "r.db"))
    for row in doc["summary"]:
        assert row["coordination"] == 1.0
        assert row["messages_per_meeting"] == pytest.approx(2.0)
    assert all(g["messages_per_meeting"] == pytest.approx(2.0) for g in doc["games"])


def test_table_has_the_paper_columns_split_by_cost_setting(tmp_path, capsys):
    assert main(["run", "--tasks", SUITE, "--agents", "imap", "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    for col in ("Coord.", "Excess", "Msgs.", "Fair.", "VPS", "Uniform Cost", "Varied Cost"):
        assert col in out
    assert "100.0" in out and "2.00" in out


def test_mixed_spec_one_persona_per_seat(tmp_path, capsys):
    spec = "imap,imap,dsm-welfare,imap,imap"
    db = str(tmp_path / "r.db")
    doc = run_json(capsys, "--tasks", "canonical:0-1", "--agents", spec, "--db", db)
    assert [row["persona"] for row in doc["summary"]] == [spec]
    assert all(g["agents"] == spec and g["status"] == "completed" for g in doc["games"])

    async def models():
        async with await Store.open(db) as store:
            tr = await store.load_trace(doc["games"][0]["game_id"])
            return [a["model"] for a in tr["config"]["agents"]]
    assert asyncio.run(models())[2] != asyncio.run(models())[0]


def test_unknown_persona_lists_the_valid_names(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", "canonical:0",
                           "--agents", "imap,imap,telepath,imap,imap", "--db", str(tmp_path / "r.db")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "telepath" in proc.stderr
    for name in ("imap", "sdmap", "dsm-welfare", "dsm-private"):
        assert name in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["--agents", "imap,imap"], ["2 seats", "5"]),
    (["--agents", "imap", "--channel", "carrier-pigeon"], ["carrier-pigeon", "dm, participant, all"]),
    (["--agents", "imap", "--shard", "3/2"], ["--shard"]),
    (["--agents", "imap", "--max-turns", "0"], ["--max-turns"]),
])
def test_user_mistakes_are_one_line(tmp_path, capsys, args, words):
    rc = main(["run", "--tasks", "canonical:0", "--db", str(tmp_path / "r.db"), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("calbench: error:") and err.count("\n") == 1
    for w in words:
        assert w in err


def test_a_row_of_the_authors_file(tmp_path, capsys, authors_tasks_path):
    doc = run_json(capsys, "--tasks", f"{authors_tasks_path}:0", "--agents", "sdmap", "--db", str(tmp_path / "r.db"))
    (g,) = doc["games"]
    assert g["task_id"] == "b001_easy_2a_2p_d0p6_c1_1" and g["status"] == "completed"
    assert g["cost_mode"] == "uniform" and g["meetings_total"] == 5


def test_bad_task_reference_is_a_user_error(tmp_path, capsys):
    rc = main(["run", "--tasks", str(tmp_path / "nope.jsonl"), "--agents", "imap", "--db", str(tmp_path / "r.db")])
    assert rc == 2
    assert "no such file" in capsys.readouterr().err


def test_shards_cover_the_suite_exactly_once(tmp_path, capsys):
    db1, db2 = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    one = run_json(capsys, "--tasks", SUITE, "--agents", "sdmap", "--db", db1, "--shard", "1/2")
    two = run_json(capsys, "--tasks", SUITE, "--agents", "sdmap", "--db", db2, "--shard", "2/2")
    ids = [t.task_id for t in resolve_tasks(SUITE)]
    got1 = [g["task_id"] for g in one["games"]]
    got2 = [g["task_id"] for g in two["games"]]
    assert got1 == ids[0::2] and got2 == ids[1::2]
    assert sorted(got1 + got2) == sorted(ids)
    # Their databases merge with `calbench import OTHER.db` into one suite...
    assert main(["import", "--db", db1, db2]) == 0
    assert f"{len(two['games'])} imported" in capsys.readouterr().err
    assert main(["import", "--db", db1, db2]) == 0  # a second merge adds nothing
    assert "0 imported" in capsys.readouterr().err
    merged = saved(db1)
    assert sorted(g["task_id"] for g in merged.values()) == sorted(ids)
    assert len({g["settings_key"] for g in merged.values()}) == 1
    # ...which a resumed run of the whole suite recognises as complete.
    whole = run_json(capsys, "--tasks", SUITE, "--agents", "sdmap", "--db", db1, "--resume")
    assert sorted(g["game_id"] for g in whole["games"]) == sorted(merged)


def _crash_leftover(db, task, spec, settings):
    """A game of ``task`` left 'running' in ``db``, as a killed run leaves it."""
    key = runner.settings_key(spec, settings)

    async def go():
        async with await Store.open(db) as store:
            await store.create_game("crashed-game-0001", task_row=task.to_row(), config={}, agents=spec,
                                    settings_key=key, started_at="2026-01-01T00:00:00+00:00")
            sink = store.sink("crashed-game-0001", durable=True)
            await sink.emit({"seq": 0, "type": "game_start", "timestamp": "t",
                             "data": {"round": -1, "turn": -1, "phase": "GAME_START", "agent_id": None}})
            await sink.aclose()
    asyncio.run(go())


def test_resume_reruns_crashed_games_and_skips_completed_ones(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    tasks = resolve_tasks(SUITE)
    # A first run that got through two tasks, then died in the third.
    first = run_json(capsys, "--tasks", "canonical:0-1", "--agents", "imap", "--db", db)
    assert len(first["games"]) == 2
    _crash_leftover(db, tasks[2], "imap", runner.RunSettings())
    # A game with other settings is not this run's business.
    other = run_json(capsys, "--tasks", "canonical:3", "--agents", "imap", "--max-turns", "9", "--db", db)

    doc = run_json(capsys, "--tasks", SUITE, "--agents", "imap", "--db", db, "--resume")
    games = saved(db)
    assert games["crashed-game-0001"]["status"] == "stopped"
    played_now = {g["game_id"] for g in doc["games"]} - {g["game_id"] for g in first["games"]}
    assert sorted(games[gid]["task_id"] for gid in played_now) == sorted(t.task_id for t in tasks[2:])
    # The first two tasks were not played again; the report still covers the whole suite.
    assert {g["game_id"] for g in first["games"]} <= {g["game_id"] for g in doc["games"]}
    assert sorted(g["task_id"] for g in doc["games"]) == sorted(t.task_id for t in tasks)
    assert sum(1 for g in games.values() if g["status"] == "completed") == len(tasks) + 1
    assert other["games"][0]["game_id"] not in {g["game_id"] for g in doc["games"]}

    # ...with the same figures as when they were played (read back from the database).
    now = {g["game_id"]: g for g in doc["games"]}
    for g in first["games"]:
        for k in ("coordination", "meetings_scheduled", "meetings_total", "excess_cost", "messages_per_meeting",
                  "fairness", "vps", "cost_mode", "status", "task_id"):
            assert now[g["game_id"]][k] == pytest.approx(g[k]), k

    # Resuming a finished suite plays nothing new.
    again = run_json(capsys, "--tasks", SUITE, "--agents", "imap", "--db", db, "--resume")
    assert {g["game_id"] for g in again["games"]} == {g["game_id"] for g in doc["games"]}
    assert len(saved(db)) == len(games)


def test_deterministic_runs_give_identical_results(tmp_path, capsys):
    a = run_json(capsys, "--tasks", "canonical:0-1", "--agents", "dsm-private", "--deterministic",
                 "--db", str(tmp_path / "a.db"))
    b = run_json(capsys, "--tasks", "canonical:0-1", "--agents", "dsm-private", "--deterministic",
                 "--db", str(tmp_path / "b.db"))
    assert a == b
    rc = main(["run", "--tasks", "canonical:0-1", "--agents", "dsm-private", "--deterministic",
               "--db", str(tmp_path / "a.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "--resume" in err


def test_deterministic_resume_replaces_the_crashed_game_of_the_same_id(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    tasks = resolve_tasks("canonical:0-1")
    settings = runner.RunSettings(deterministic=True)
    key = runner.settings_key("imap", settings)
    gid = runner._game_ids(key, tasks, True)[1]

    async def crash():
        async with await Store.open(db) as store:
            await store.create_game(gid, task_row=tasks[1].to_row(), config={}, agents="imap", settings_key=key,
                                    started_at="2026-01-01T00:00:00+00:00")
    asyncio.run(crash())
    doc = run_json(capsys, "--tasks", "canonical:0-1", "--agents", "imap", "--deterministic", "--resume",
                   "--db", db)
    assert [g["game_id"] for g in doc["games"]] == runner._game_ids(key, tasks, True)
    games = saved(db)
    assert len(games) == 2 and games[gid]["status"] == "completed" and games[gid]["events"] > 20


def test_processes_play_the_same_games(tmp_path, capsys):
    one = run_json(capsys, "--tasks", SUITE, "--agents", "dsm-welfare", "--deterministic", "--concurrency", "1",
                   "--db", str(tmp_path / "a.db"))
    two = run_json(capsys, "--tasks", SUITE, "--agents", "dsm-welfare", "--deterministic", "--concurrency", "2",
                   "--db", str(tmp_path / "b.db"))
    assert one == two
    assert len(saved(str(tmp_path / "b.db"))) == 6


def test_channels_reach_the_game_config(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    doc = run_json(capsys, "--tasks", "canonical:0", "--agents", "imap", "--channel", "dm,participant,all",
                   "--max-turns", "7", "--retries", "1", "--db", db)

    async def cfg():
        async with await Store.open(db) as store:
            return (await store.load_trace(doc["games"][0]["game_id"]))["config"]
    c = asyncio.run(cfg())
    assert c["channels"] == ["dm", "participant_groupchat", "all_groupchat"]
    assert c["max_turns_per_round"] == 7 and c["decision_retries"] == 1


# -- the runner API -----------------------------------------------------------------------
class Broken(PassivePersona):
    kind = "test"
    model = "broken"

    async def register(self, briefing):
        raise RuntimeError("this persona cannot start")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failing_game_is_saved_failed_and_the_suite_goes_on(tmp_path, stream):
    tasks = resolve_tasks("canonical:0-2")

    def seats(task):
        if task.task_id == "canonical-001":
            return [Broken() for _ in range(task.num_agents)]
        return [PassivePersona() for _ in range(task.num_agents)]
    seats.spec = "passive-or-broken"
    async with await Store.open(str(tmp_path / "r.db")) as store:
        games = await runner.run_suite(tasks, seats, store=store,
                                       settings=runner.RunSettings(stream_events=stream))
        rows = {g["task_id"]: g for g in await store.list_games()}
        failed = await store.load_trace(rows["canonical-001"]["game_id"])
    assert [g.status for g in games] == ["completed", "failed", "completed"]
    assert "cannot start" in games[1].error
    assert rows["canonical-001"]["status"] == "failed"
    assert rows["canonical-000"]["status"] == rows["canonical-002"]["status"] == "completed"
    assert "cannot start" in failed["error"]
    summary = runner.summarise(games)
    assert summary[0]["games"] == 2 and summary[0]["failed"] == 1


async def test_cancelling_a_streamed_suite_marks_its_game_stopped(tmp_path):
    tasks = resolve_tasks("canonical:0")
    started = asyncio.Event()

    class Slow(PassivePersona):
        async def speak(self, obs):
            started.set()
            await asyncio.sleep(30)

    async with await Store.open(str(tmp_path / "r.db")) as store:
        run = asyncio.ensure_future(runner.run_suite(tasks, lambda t: [Slow() for _ in range(t.num_agents)],
                                                     store=store, settings=runner.RunSettings(stream_events=True)))
        await asyncio.wait_for(started.wait(), 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        games = await store.list_games()
    assert [g["status"] for g in games] == ["stopped"]


def test_settings_key_ignores_secrets_and_plumbing():
    from personas.llm.settings import LLMSettings

    a = runner.RunSettings(llm=LLMSettings(model="m", api_key_env="KEY_A", concurrency=2, timeout=5))
    b = runner.RunSettings(llm=LLMSettings(model="m", api_key_env="KEY_B", concurrency=9, timeout=50))
    c = runner.RunSettings(llm=LLMSettings(model="m", temperature=0.7))
    assert runner.settings_key("llm:m", a) == runner.settings_key("llm:m", b)
    assert runner.settings_key("llm:m", a) != runner.settings_key("llm:m", c)
    # LLM settings do not split scripted suites.
    assert runner.settings_key("imap", a) == runner.settings_key("imap", runner.RunSettings())
    assert runner.settings_key("imap", runner.RunSettings(max_turns=9)) != runner.settings_key("imap", a)
    assert "KEY_A" not in json.dumps(a.key_fields("llm:m"))


# -- LLM seats through the command line (real HTTP to the loopback mock) -------------------
@pytest.fixture
def mock_url(threaded_mock):
    """The loopback mock served from its own thread, so the CLI can run its own event loop."""
    return threaded_mock(policy="cooperative", latency=0.005)


def test_llm_seats_with_settings_and_no_key_in_the_database(tmp_path, capsys, monkeypatch, mock_url):
    url, server = mock_url
    monkeypatch.setenv("CALBENCH_TEST_SECRET", "sk-do-not-store-me-123")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "r.db")
    spec = "llm:mock-model,imap,imap,imap,imap"
    doc = run_json(capsys, "--tasks", "canonical:0", "--agents", spec, "--db", db, "--base-url", url,
                   "--api-key-env", "CALBENCH_TEST_SECRET", "--temperature", "0.3", "--max-tokens", "300",
                   "--timeout", "20", "--llm-concurrency", "2", "--max-turns", "4")
    (g,) = doc["games"]
    assert g["status"] == "completed" and g["agents"] == spec
    assert len(server.records) > 0  # the seat really talked to the endpoint
    with open(db, "rb") as fh:
        assert b"sk-do-not-store-me-123" not in fh.read()

    async def trace():
        async with await Store.open(db) as store:
            return await store.load_trace(g["game_id"])
    tr = asyncio.run(trace())
    assert tr["config"]["agents"][0]["model"] == "llm:mock-model"
    # The LLM settings are part of the run's identity: another temperature is another run.
    key = tr["saved"]["settings_key"]
    again = run_json(capsys, "--tasks", "canonical:0", "--agents", spec, "--db", db, "--base-url", url,
                     "--api-key-env", "CALBENCH_TEST_SECRET", "--temperature", "0.3", "--max-tokens", "300",
                     "--max-turns", "4", "--resume")
    assert [x["game_id"] for x in again["games"]] == [g["game_id"]]  # same run: nothing new to play
    other = run_json(capsys, "--tasks", "canonical:0", "--agents", spec, "--db", db, "--base-url", url,
                     "--temperature", "0.9", "--max-tokens", "300", "--max-turns", "4", "--resume")
    assert other["games"][0]["game_id"] != g["game_id"]
    assert saved(db)[other["games"][0]["game_id"]]["settings_key"] != key


def test_llm_games_run_concurrently(tmp_path, capsys, monkeypatch, mock_url):
    url, server = mock_url
    server.latency = 0.05
    # The first request waits at the endpoint until a second one comes (bounded, so a run that plays
    # one game at a time fails below instead of hanging): the games overlap however loaded the machine is.
    chat, state = server._chat, {"asked": 0, "two": None}

    async def held(req, messages):
        state["two"] = state["two"] or asyncio.Event()
        state["asked"] += 1
        if state["asked"] >= 2:
            state["two"].set()
        try:
            await asyncio.wait_for(state["two"].wait(), 60)
        except asyncio.TimeoutError:
            pass
        return await chat(req, messages)

    server._chat = held
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    doc = run_json(capsys, "--tasks", "canonical:0-1", "--agents", "llm:m,imap,imap,imap,imap", "--base-url", url,
                   "--concurrency", "2", "--max-turns", "4", "--db", str(tmp_path / "r.db"))
    assert [g["status"] for g in doc["games"]] == ["completed", "completed"]
    assert server.max_in_flight == 2  # one LLM seat per game: two requests at once means two games at once


def test_personas_file_gives_a_bare_llm_seat_its_model(tmp_path, capsys, monkeypatch, mock_url):
    url, _ = mock_url
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    toml = tmp_path / "personas.toml"
    toml.write_text(f'[defaults]\nbase_url = "{url}"\n\n[seats.1]\nmodel = "from-the-file"\n')
    db = str(tmp_path / "r.db")
    doc = run_json(capsys, "--tasks", "canonical:0", "--agents", "imap,llm,imap,imap,imap", "--db", db,
                   "--personas", str(toml), "--max-turns", "4")

    async def models():
        async with await Store.open(db) as store:
            tr = await store.load_trace(doc["games"][0]["game_id"])
            return [a["model"] for a in tr["config"]["agents"]]
    assert asyncio.run(models())[1] == "llm:from-the-file"


def test_llm_seat_without_a_key_is_a_user_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:gpt-4o-mini", "--api-key-env", "NO_SUCH_KEY_VAR",
               "--db", str(tmp_path / "r.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "NO_SUCH_KEY_VAR" in err and "Traceback" not in err


def test_persona_names_are_case_insensitive_for_resume(tmp_path, capsys):
    db = str(tmp_path / "case.db")
    first = run_json(capsys, "--tasks", "canonical:0", "--agents", "IMAP", "--db", db)
    assert first["games"][0]["agents"] == "imap"
    again = run_json(capsys, "--tasks", "canonical:0", "--agents", "imap", "--db", db, "--resume")
    assert [g["game_id"] for g in again["games"]] == [first["games"][0]["game_id"]]  # nothing replayed
    assert len(saved(db)) == 1


# -- review fixes: zero values, --llm-retries, failure counts, URLs, recorded settings ------
def _load(db, gid):
    async def go():
        async with await Store.open(db) as store:
            return await store.load_trace(gid)
    return asyncio.run(go())


def test_llm_settings_are_recorded_and_the_key_is_nowhere(tmp_path, capsys, monkeypatch, mock_url):
    url, server = mock_url
    secret = "sk-unique-secret-7f3a9c1e5b"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "r.db")
    spec = "imap,llm:mock-model,imap,imap,imap"
    doc = run_json(capsys, "--tasks", "canonical:0", "--agents", spec, "--db", db,
                   "--base-url", url.replace("http://", "http://user:pw@"),
                   "--temperature", "0", "--max-tokens", "300", "--timeout", "20", "--llm-retries", "2",
                   "--max-turns", "3")
    (g,) = doc["games"]
    assert g["status"] == "completed" and len(server.records) > 0
    assert g["infra_failures"] == 0 and doc["summary"][0]["infra_failures"] == 0
    tr = _load(db, g["game_id"])
    llm = tr["config"]["llm"]
    assert llm[0] is None and llm[2:] == [None, None, None]
    s = llm[1]
    assert s["model"] == "mock-model" and s["variant"] is None
    assert s["temperature"] == 0  # --temperature 0 is kept, not dropped
    assert (s["max_tokens"], s["timeout"], s["retries"]) == (300, 20.0, 2)
    assert s["api_key_env"] == "OPENAI_API_KEY"
    assert s["base_url"] == url  # no user:password, no query string
    # The key is nowhere: not in the database (nor its WAL), not in the exported trace.
    files = [p for p in tmp_path.iterdir() if p.name.startswith("r.db")]
    assert files
    for p in files:
        assert secret.encode() not in p.read_bytes(), p.name
    assert "user:pw" not in json.dumps(tr)
    out = tmp_path / "export.json"
    assert main(["export", g["game_id"], "--db", db, "-o", str(out)]) == 0
    assert secret not in out.read_text()
    assert "pw@" not in out.read_text()


def test_a_dead_endpoint_is_refused_before_any_game(tmp_path, capsys, monkeypatch):
    """An endpoint that does not answer at the start is one line before any game is played
    (it used to play the suite, every call failing after its retries: 4 min 27 s for two games
    against a closed port, found by hand)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "r.db")
    rc = main(["run", "--tasks", "canonical:0-1", "--agents", "llm:m,imap,imap,imap,imap", "--db", db,
               "--base-url", "http://127.0.0.1:1/v1"])
    out, err = capsys.readouterr()
    assert rc == 2 and "the LLM endpoint http://127.0.0.1:1/v1 does not answer" in err and "--base-url" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "r.db").exists() or not saved(db)


def test_an_endpoint_failing_mid_suite_counts_infra_failures_and_exits_1(tmp_path, capsys, monkeypatch,
                                                                       threaded_mock):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url, server = threaded_mock()
    server.inject("500", count=10_000)  # it answers the check, then fails every call
    db = str(tmp_path / "r.db")
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m,imap,imap,imap,imap", "--db", db,
               "--base-url", url, "--llm-retries", "0", "--max-turns", "2", "--json"])
    out, err = capsys.readouterr()
    assert rc == 1, err
    assert "1 game(s) had infrastructure failures" in err and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1
    doc = json.loads(out)
    (g,) = doc["games"]
    assert g["status"] == "completed"
    tr = _load(db, g["game_id"])
    timeouts = [e for e in tr["events"] if e["type"] == "seat_timeout"]
    assert timeouts and all(e["data"]["error"] == "infra_error" for e in timeouts)
    assert g["infra_failures"] == len(timeouts)
    assert g["agent_failures"] == len([e for e in tr["events"] if e["type"] == "parse_error"])
    row = doc["summary"][0]
    assert row["infra_failures"] == len(timeouts) and row["games_with_infra_failures"] == 1
    # The table shows the column.
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m,imap,imap,imap,imap", "--db", db,
               "--base-url", url, "--llm-retries", "0", "--max-turns", "2"])
    out, _ = capsys.readouterr()
    assert rc == 1 and "Infra fail." in out


def test_agent_failures_are_counted_apart():
    events = [{"type": "seat_timeout", "data": {"error": "infra_error"}},
              {"type": "parse_error", "data": {"error": "parse_error"}},
              {"type": "parse_error", "data": {"error": "undeliverable"}},
              {"type": "turn_end", "data": {}}]
    assert runner.failure_counts(events) == (1, 2)
    games = [runner.GameSummary("a", "t", "uniform", "llm:m", "completed", infra_failures=3, agent_failures=1),
             runner.GameSummary("b", "t", "uniform", "llm:m", "completed", infra_failures=0, agent_failures=2),
             runner.GameSummary("c", "t", "uniform", "llm:m", "completed", infra_failures=None, agent_failures=None)]
    (row,) = runner.summarise(games)
    assert (row["infra_failures"], row["agent_failures"], row["games_with_infra_failures"]) == (3, 3, 1)


@pytest.mark.parametrize("args, message", [
    (["--llm-concurrency", "0"], "--llm-concurrency must be at least 1"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--timeout", "0"], "--timeout must be more than 0 seconds"),
    (["--timeout", "-3"], "--timeout must be more than 0 seconds"),
    (["--llm-retries", "-1"], "--llm-retries must be 0 or more"),
    (["--base-url", "notaurl"], "--base-url: 'notaurl' is not an http(s) URL"),
    (["--base-url", "http:///v1"], "--base-url:"),
    (["--api-key-env", "sk-123"], "--api-key-env: must be the NAME"),
])
def test_bad_llm_options_are_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m", "--db", str(tmp_path / "r.db"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "api_key_env" not in err


def test_bad_openai_base_url_env_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000")
    rc = main(["run", "--tasks", "canonical:0", "--agents", "llm:m", "--db", str(tmp_path / "r.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "$OPENAI_BASE_URL" in err and len(err.strip().splitlines()) == 1


def test_zero_temperature_and_llm_retries_reach_the_settings(monkeypatch):
    from calbench_cli.commands import run as run_cmd

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    parser = __import__("argparse").ArgumentParser()
    sub = parser.add_subparsers()
    run_cmd.register(sub)
    args = parser.parse_args(["run", "--tasks", "canonical:0", "--agents", "llm:m", "--base-url",
                              "http://127.0.0.1:9/v1", "--temperature", "0", "--llm-retries", "0", "--retries", "5"])
    base, per_seat = run_cmd.build_llm_settings(args, "llm:m")
    assert base.temperature == 0.0 and base.retries == 0 and per_seat is None
    assert args.retries == 5  # the decision retry budget stays apart


def test_resume_and_report_never_take_another_suites_games_that_reuse_its_task_ids(tmp_path, capsys):
    """Two task files that name different scenarios with the same ids (``suite generate``
    names tasks by their cell, as the authors do): ``--resume`` of the second into the
    database of the first refuses in one line instead of taking the first suite's games as
    its own, and ``report --tasks`` counts only the games played on the file's own tasks.
    The same rows written in another key order are the same suite."""
    from engine.generate import generate_scenario

    def write(path, seeds, *, sort_keys=False):
        rows = []
        for n, seed in enumerate(seeds, 1):
            row = generate_scenario(seed).to_row()
            row["task_id"] = f"cell_{n}"
            rows.append(json.dumps(row, sort_keys=sort_keys))
        path.write_text("\n".join(rows) + "\n")
        return str(path)

    a = write(tmp_path / "a.jsonl", [11, 12])
    b = write(tmp_path / "b.jsonl", [13, 14])
    a_again = write(tmp_path / "a2.jsonl", [11, 12], sort_keys=True)
    db = str(tmp_path / "x.db")
    first = run_json(capsys, "--tasks", a, "--agents", "imap", "--db", db)
    assert len(first["games"]) == 2

    rc = main(["run", "--tasks", b, "--agents", "imap", "--db", db, "--resume", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and not out
    assert "2 task(s) of this suite (cell_1, cell_2)" in err and "use another --db" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert len(saved(db)) == 2  # nothing played, nothing taken

    again = run_json(capsys, "--tasks", a_again, "--agents", "imap", "--db", db, "--resume")
    assert {g["game_id"] for g in again["games"]} == {g["game_id"] for g in first["games"]}
    assert len(saved(db)) == 2

    assert main(["report", "--db", db, "--tasks", b]) == 0
    assert "0 games" in capsys.readouterr().out
    assert main(["report", "--db", db, "--tasks", a, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["games"] == 2
