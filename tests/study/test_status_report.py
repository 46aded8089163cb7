"""The live monitor and the study report (Table 2 by condition and seat kind, bootstrap CIs, observer VPS)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

from lab.study.check import dry_run
from lab.study.report import bootstrap_ci, study_table
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from lab.study.status import study_status
from saves.store import Store


def test_bootstrap_ci_brackets_the_mean_and_is_reproducible():
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    m, lo, hi = bootstrap_ci(xs, seed=3)
    assert m == 4.0 and lo < m < hi and lo >= 1.0 and hi <= 10.0
    assert bootstrap_ci(xs, seed=3) == (m, lo, hi)
    assert bootstrap_ci([]) == (None, None, None) and bootstrap_ci([2.5]) == (2.5, 2.5, 2.5)


async def test_status_shows_steps_stalls_and_completions(scripted_study, tmp_path):
    path, study = scripted_study

    class StopsAtQuestionnaire(SimulatedDriver):
        async def questionnaire(self, q, *, game=None):
            if q.id == "game":
                raise asyncio.CancelledError
            return await super().questionnaire(q, game=game)

    async with await Store.open(tmp_path / "s.db") as store:
        await StudyRunner(study, store, "A", SimulatedDriver(study, "A"), deterministic=False).run()
        try:
            await StudyRunner(study, store, "B", StopsAtQuestionnaire(study, "B"), deterministic=False).run()
        except asyncio.CancelledError:
            pass
        st = await study_status(study, store)
        rows = {r["participant"]: r for r in st["participants"]}
        assert rows["A"]["state"] == "completed" and rows["A"]["completion_code"].startswith("CB-")
        assert rows["B"]["state"] == "active" and rows["B"]["step"] == "questionnaire:game@1"
        assert rows["B"]["games_done"] == 2 and rows["B"]["games"] == 3
        assert "game:0" in rows["B"]["seconds_per_step"]
        later = await study_status(study, store, now=datetime.now(timezone.utc) + timedelta(minutes=30))
        assert {r["participant"]: r["state"] for r in later["participants"]} == {"A": "completed", "B": "stalled"}
        assert later["counts"] == {"active": 0, "stalled": 1, "completed": 1, "declined": 0, "screened_out": 0,
                                   "timed_out": 0}


def test_report_study_by_condition_and_kind(cli, scripted_study, tmp_path):
    path, study = scripted_study
    db = tmp_path / "s.db"

    async def go():
        async with await Store.open(db) as store:
            assert (await dry_run(study, store))["ok"]
            return await study_table(study, store, include_simulated=True, reps=200)

    t = asyncio.run(go())
    rows = {(r["condition"], r["kind"]): r for r in t["rows"]}
    assert set(rows) == {("scripted", "human"), ("scripted", "protocol"), ("llm", "human"), ("llm", "protocol")}
    # 4 participants, one real game per condition each; 4 other seats per game
    assert rows[("scripted", "human")]["n"] == 4 and rows[("scripted", "protocol")]["n"] == 16
    obs = rows[("llm", "human")]["observer_vps"]
    assert obs["n"] == 4 and obs["low"] <= obs["mean"] <= obs["high"]
    assert rows[("llm", "protocol")]["observer_vps"]["mean"] is None
    rc, out, err = cli("report", "--study", str(path), "--db", str(db))
    assert rc == 0 and "no completed games yet" in out  # simulated participants are left out by default
    rc, out, err = cli("report", "--study", str(path), "--db", str(db), "--include-simulated", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["games"] == 8 and len(d["rows"]) == 4
    rc, out, err = cli("report", "--study", str(path), "--db", str(db), "--include-simulated")
    assert "Obs. VPS" in out and "scripted   human     4" in out
    rc, out, err = cli("study", "status", str(path), "--db", str(db))
    assert rc == 0 and "4 completed" in out
