"""``calbench rescore`` (issue 23 step 2): stored games scored again with today's scorers.

Real saved games (a scripted game played through ``lab.session.run_session`` into a real
store), a stored figure changed behind the store's back, then the command line.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from engine.game import GameConfig
from engine.generate import generate_scenario
from engine.scoring import versions
from lab.session import Session, run_session
from personas.registry import make_personas
from saves.store import Store

DONE = "cccccccc-0000-0000-0000-000000000003"
IN_PLAY = "aaaaaaaa-0000-0000-0000-000000000001"


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "saves.db")

    async def build():
        async with await Store.open(path) as store:
            task = generate_scenario(3)
            session = Session(task, make_personas("imap", task.num_agents), GameConfig(), DONE, "imap", "run:test")
            assert (await run_session(session, store=store, stream=True)).status == "completed"
            # a person's game, created as the app creates it before the first event: in play
            other = generate_scenario(5)
            await store.create_game(IN_PLAY, task_row=other.to_row(),
                                    config={"human_seat": 0, "app": "calbench-play"},
                                    agents="human,imap,imap,imap,imap", settings_key="play:test",
                                    started_at="2026-01-01T00:00:00Z")
    asyncio.run(build())
    return path


def _metrics(path: str, gid: str = DONE) -> dict:
    con = sqlite3.connect(path)
    try:
        return json.loads(con.execute("SELECT metrics FROM games WHERE game_id = ?", (gid,)).fetchone()[0])
    finally:
        con.close()


def _tamper(path: str, **changes) -> dict:
    """Change stored figures as an estimator bug would have written them; return the true ones."""
    m = _metrics(path)
    true = {"vps": m["vps"], "seat0_vps": m["per_seat"][0]["vps"], "coordination_rate": m["coordination_rate"]}
    m["vps"] = changes["vps"]
    m["per_seat"][0]["vps"] = changes["seat0_vps"]
    con = sqlite3.connect(path)
    con.execute("UPDATE games SET metrics = ? WHERE game_id = ?", (json.dumps(m), DONE))
    con.execute("UPDATE seat_results SET vps = ? WHERE game_id = ? AND agent_id = 0", (changes["seat0_vps"], DONE))
    con.commit()
    con.close()
    return true


def test_the_session_records_the_scorer_versions(db):
    con = sqlite3.connect(db)
    extra = json.loads(con.execute("SELECT extra FROM games WHERE game_id = ?", (DONE,)).fetchone()[0])
    con.close()
    assert extra["scoring"] == {k: v for k, v in versions().items() if k in ("outcome", "vps", "leaks")}


def test_rescore_restores_a_changed_stored_metric_and_keeps_the_old_value(cli, db):
    true = _tamper(db, vps=99.25, seat0_vps=41.5)
    rc, out, err = cli("trace", DONE, "--db", db)
    assert rc == 1  # the tampered figure does not verify

    rc, out, err = cli("rescore", "--db", db, "--games", DONE[:8])
    assert rc == 0, err
    assert f"{DONE[:8]}  rescored: 2 figure(s)" in out
    assert f"metrics.vps: 99.25 -> {true['vps']:.6g}" in out
    assert f"metrics.per_seat[0].vps: 41.5 -> {true['seat0_vps']:.6g}" in out
    m = _metrics(db)
    assert m["vps"] == true["vps"] and m["per_seat"][0]["vps"] == true["seat0_vps"]
    con = sqlite3.connect(db)
    seat_vps = con.execute("SELECT vps FROM seat_results WHERE game_id = ? AND agent_id = 0", (DONE,)).fetchone()[0]
    extra = json.loads(con.execute("SELECT extra FROM games WHERE game_id = ?", (DONE,)).fetchone()[0])
    con.close()
    assert seat_vps == true["seat0_vps"]
    (entry,) = extra["rescored"]
    assert entry["changed"] == {"metrics.per_seat[0].vps": [41.5, true["seat0_vps"]],
                                "metrics.vps": [99.25, true["vps"]]}
    assert entry["to"] == extra["scoring"]
    rc, out, err = cli("trace", DONE, "--db", db)
    assert rc == 0, out + err  # verifies again
    rc, out, err = cli("rescore", "--db", db, "--games", DONE)
    assert rc == 0 and f"{DONE[:8]}  unchanged" in out


def test_a_dry_run_writes_nothing(cli, db):
    _tamper(db, vps=99.25, seat0_vps=41.5)
    before = _metrics(db)
    rc, out, err = cli("rescore", "--db", db, "--dry-run")
    assert rc == 0, err
    assert f"{DONE[:8]}  would change: 2 figure(s)" in out and "nothing written" in out
    assert _metrics(db) == before


def test_a_game_in_play_is_refused_and_left_alone(cli, db):
    con = sqlite3.connect(db)
    row = con.execute("SELECT status, metrics, extra FROM games WHERE game_id = ?", (IN_PLAY,)).fetchone()
    con.close()
    rc, out, err = cli("rescore", "--db", db, "--games", IN_PLAY[:8])
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "a person is still playing it" in err and "Traceback" not in err
    rc, out, err = cli("rescore", "--db", db)  # every game: the one in play is skipped, with one line
    assert rc == 0, err
    assert f"{IN_PLAY[:8]}  skipped: a person is still playing it" in out
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, metrics, extra FROM games WHERE game_id = ?", (IN_PLAY,)).fetchone() == row
    con.close()


@pytest.mark.parametrize("ids, says", [(["nosuchgame"], "no saved game matches 'nosuchgame'"),
                                       (["c", "a"], None), ([" "], "--games: an empty game id")])
def test_bad_ids_give_one_line(cli, db, ids, says):
    rc, out, err = cli("rescore", "--db", db, "--games", *ids)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    if says:
        assert says in err


def test_a_missing_database_is_one_line(cli, tmp_path):
    rc, out, err = cli("rescore", "--db", str(tmp_path / "none.db"))
    assert rc == 2 and err.count("\n") == 1 and "no save database" in err


def test_trace_names_the_scorer_versions_when_a_figure_differs(cli, db):
    """A game scored by an older scorer: verify says so, and points at rescore."""
    _tamper(db, vps=99.25, seat0_vps=41.5)
    con = sqlite3.connect(db)
    extra = json.loads(con.execute("SELECT extra FROM games WHERE game_id = ?", (DONE,)).fetchone()[0])
    extra["scoring"]["vps"] = 0
    con.execute("UPDATE games SET extra = ? WHERE game_id = ?", (json.dumps(extra), DONE))
    con.commit()
    con.close()
    rc, out, err = cli("trace", DONE, "--db", db)
    assert rc == 1
    assert "vps 0" in out and f"today's scorers are outcome 1, vps {versions()['vps']}" in out
    assert "calbench rescore" in out
    rc, out, err = cli("rescore", "--db", db, "--games", DONE)
    assert rc == 0 and "vps 0" in out and "->" in out


def test_an_llm_game_with_reflection_and_a_judge_is_scored_again_without_asking_anyone(
        cli, tmp_path, monkeypatch, threaded_mock):
    """All five scorers ran and are recorded; rescore restores the reflection and judge
    figures from the stored reflections and judge readings, with no request to any model."""
    url, server = threaded_mock(policy="judge")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    db = str(tmp_path / "j.db")
    rc, out, err = cli("run", "--tasks", "canonical:0", "--agents", "llm:seat-model,imap,llm:seat-model,imap,imap",
                       "--db", db, "--base-url", url, "--reflection", "--judge", "judge-model", "--max-turns", "6",
                       "--json")
    assert rc == 0, err
    (g,) = json.loads(out)["games"]
    gid = g["game_id"]
    con = sqlite3.connect(db)
    extra = json.loads(con.execute("SELECT extra FROM games WHERE game_id = ?", (gid,)).fetchone()[0])
    assert extra["scoring"] == versions()  # outcome, vps, leaks, reflection, judge
    m = json.loads(con.execute("SELECT metrics FROM games WHERE game_id = ?", (gid,)).fetchone()[0])
    true_refl, true_judge = m["reflection_vps"]["calibrated_total"], m["judge_vps"]["calibrated_total"]
    m["reflection_vps"]["calibrated_total"] = true_refl + 3.5
    m["judge_vps"]["calibrated_total"] = true_judge + 7.25
    con.execute("UPDATE games SET metrics = ? WHERE game_id = ?", (json.dumps(m), gid))
    con.commit()
    con.close()
    calls = len(server.records)

    rc, out, err = cli("rescore", "--db", db, "--games", gid)
    assert rc == 0, err
    assert "rescored: 2 figure(s)" in out
    assert "metrics.reflection_vps.calibrated_total" in out and "metrics.judge_vps.calibrated_total" in out
    m = _metrics(db, gid)
    assert m["reflection_vps"]["calibrated_total"] == true_refl
    assert m["judge_vps"]["calibrated_total"] == true_judge
    assert len(server.records) == calls  # scoring again asks no model
