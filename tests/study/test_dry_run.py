"""The example study's dry run: one cycle of simulated participants, the LLM condition on
the loopback mock (real HTTP), every game through run_session into the database."""

from __future__ import annotations

import asyncio
import json

from studykit import example_text


async def test_example_dry_run_end_to_end(cli, tmp_path, mock_llm):
    p = tmp_path / "study.toml"
    p.write_text(example_text(mock_llm.base_url))
    db = tmp_path / "s.db"
    # the command line runs its own event loop: in a thread, while the mock serves on this one
    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(db), "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["participants_per_cycle"] == 4 and d["games_per_participant"] == 2
    assert d["dry_run"]["participants"] == 4
    assert d["dry_run"]["games"] == 4 * 3 == d["dry_run"]["completed"]  # 2 games + practice each
    assert d["dry_run"]["steps_completed"] == d["dry_run"]["steps"] == 44
    assert mock_llm.stats()["requests"] > 0  # the LLM seats really talked to the endpoint

    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT status, config, agents FROM games").fetchall()
    assert len(rows) == 12 and {r[0] for r in rows} == {"completed"}
    cfgs = [json.loads(r[1]) for r in rows]
    assert all(c["simulated"] is True and c["study"] == "pilot-1" for c in cfgs)
    assert sum(c["practice"] for c in cfgs) == 4
    assert {c["condition"] for c in cfgs} == {"scripted", "llm"}
    llm_games = [r for r, c in zip(rows, cfgs) if c["condition"] == "llm" and not c["practice"]]
    assert llm_games and all("llm:mock-model" in r[2] for r in llm_games)
    # the participant's seat is 'human' in every game, played by the scripted protocol
    for r, c in zip(rows, cfgs):
        assert r[2].split(",")[c["human_seat"]] == "human"
    # quiz retries are counted, questionnaires answered, beliefs and timings recorded
    assert con.execute("SELECT COUNT(*) FROM study_answers WHERE questionnaire = 'quiz' AND correct = 0").fetchone()[0] == 4
    assert con.execute("SELECT COUNT(DISTINCT participant) FROM study_beliefs").fetchone()[0] == 4
    assert con.execute("SELECT COUNT(*) FROM study_timings WHERE phase = 'decision'").fetchone()[0] > 0
    assert con.execute("SELECT COUNT(*) FROM study_participants WHERE status = 'completed' AND simulated = 1"
                       ).fetchone()[0] == 4
    # a second dry run replaces the first (no duplicates, same completion codes)
    codes = sorted(r[0] for r in con.execute("SELECT completion_code FROM study_participants"))
    con.close()
    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(db))
    assert rc == 0, err
    assert "replaced 4 earlier simulated participants" in out
    con = sqlite3.connect(db)
    assert sorted(r[0] for r in con.execute("SELECT completion_code FROM study_participants")) == codes
    assert con.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 12
    con.close()


class Broken:
    kind = "scripted"
    model = "broken"

    async def register(self, briefing):
        raise RuntimeError("the simulated seat broke")


def test_dry_run_exits_1_when_a_game_fails(cli, scripted_study, tmp_path, monkeypatch):
    from lab.study import simulate

    monkeypatch.setattr(simulate.SimulatedDriver, "human_persona", lambda self, ctx: Broken())
    path, _ = scripted_study
    rc, out, err = cli("study", "check", str(path), "--dry-run", "--db", str(tmp_path / "s.db"))
    assert rc == 1
    assert "0 of 12 games ended" in out and "FAILED sim-001 game:0" in out and "the simulated seat broke" in out
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("Dry run"))
    assert all(i < verdict for i, line in enumerate(lines) if line.strip().startswith("FAILED"))


async def test_dry_run_exits_1_when_the_llm_endpoint_is_down(cli, tmp_path, monkeypatch):
    """Nothing listens on the endpoint: the games end (the LLM seat passes) but the dry run says
    the setup is not ready, naming the failure, and exits 1."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    p = tmp_path / "study.toml"
    # no retries: each retry of a refused call only waits its backoff (152 calls x 0.15 s)
    p.write_text(example_text("http://127.0.0.1:9/v1", **{"timeout = 60": "timeout = 2\nretries = 0"}))
    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(tmp_path / "s.db"))
    assert rc == 1
    failed = [line for line in out.splitlines() if line.strip().startswith("FAILED")]
    assert failed and all("partner call(s) failed" in line for line in failed)
    # only the LLM condition's games (one real game per participant, plus practices that drew it)
    assert 4 <= len(failed) <= 8
