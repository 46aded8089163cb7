"""A crash mid-study resumes at the right step with the same assignment; withdraw leaves no
row of the participant; export columns match the codebook; the observer VPS is SPEC §8's loss."""

from __future__ import annotations

import asyncio
import csv
import re
import sqlite3

import pytest

from engine.events import EventSink
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from saves.store import Store


class CrashAt(EventSink):
    """Cancels the study (like ctrl+q or a killed terminal) at the N-th event of a game."""

    def __init__(self, task: asyncio.Task, n: int) -> None:
        self.task, self.n, self.seen = task, n, 0

    async def emit(self, event):
        self.seen += 1
        if self.seen == self.n:
            self.task.cancel()


class CrashingDriver(SimulatedDriver):
    def __init__(self, study, pid, crash_game: int, at_event: int):
        super().__init__(study, pid)
        self.crash_game, self.at_event = crash_game, at_event
        self.task: asyncio.Task | None = None

    def listeners(self, ctx):
        if ctx.game.index == self.crash_game and not ctx.resumed:
            return [CrashAt(self.task, self.at_event)]
        return []


async def test_crash_in_a_game_resumes_at_that_step_with_the_same_assignment(scripted_study, tmp_path):
    path, study = scripted_study
    async with await Store.open(tmp_path / "s.db") as store:
        # someone else arrived first, so this participant has slot 1
        await StudyRunner(study, store, "P000", SimulatedDriver(study, "P000"), deterministic=False).enroll()
        drv = CrashingDriver(study, "P001", crash_game=2, at_event=60)
        r1 = StudyRunner(study, store, "P001", drv)
        await r1.enroll()
        plan = [g.to_json() for g in r1.games]
        drv.task = asyncio.ensure_future(r1.run())
        with pytest.raises(asyncio.CancelledError):
            await drv.task
        step_names = [s["name"] for s in r1.steps]
        crashed = step_names.index("game:2")
        steps = {s["step"]: s for s in await r1.db.steps("P001")}
        assert all(steps[i]["completed_at"] for i in range(crashed))
        assert not steps[crashed]["completed_at"] and steps[crashed]["game_id"]
        gid = steps[crashed]["game_id"]
        async with store._db.execute("SELECT status FROM games WHERE game_id = ?", (gid,)) as cur:
            assert (await cur.fetchone())[0] == "stopped"

        # the same participant comes back: same slot, same plan, same step, same game continued
        drv2 = SimulatedDriver(study, "P001")
        r2 = StudyRunner(study, store, "P001", drv2)
        row = await r2.enroll()
        assert row["slot"] == 1 and [g.to_json() for g in r2.games] == plan and not r2.design_changed
        assert r2.next_step() == crashed
        results = await r2.run()
        assert results[0].name == "game:2" and results[0].data["resumed"] is True
        assert results[0].data["game_id"] == gid and results[0].status == "completed"
        assert drv2.seen[0] == "game:2"  # nothing before the crashed step was asked again
        assert (await r2.db.participant("P001"))["status"] == "completed"
        async with store._db.execute("SELECT status, COUNT(*) FROM games GROUP BY status") as cur:
            assert dict(await cur.fetchall()) == {"completed": 3}
        # the resumed game kept its first rounds, and the round cut short is set aside (not
        # deleted): the game's events and the set-aside ones are numbered without a gap
        trace = await store.load_trace(gid)
        seqs = sorted(e["seq"] for e in trace["events"] + trace["interrupted_events"])
        assert seqs == list(range(len(seqs)))


async def test_crash_in_a_questionnaire_resumes_there(scripted_study, tmp_path):
    path, study = scripted_study

    class Quits(SimulatedDriver):
        async def questionnaire(self, q, *, game=None):
            if q.id == "game" and game.game.index == 1:
                raise asyncio.CancelledError
            return await super().questionnaire(q, game=game)

    async with await Store.open(tmp_path / "s.db") as store:
        r1 = StudyRunner(study, store, "P7", Quits(study, "P7"))
        with pytest.raises(asyncio.CancelledError):
            await r1.run()
        r2 = StudyRunner(study, store, "P7", SimulatedDriver(study, "P7"))
        await r2.enroll()
        assert r2.steps[r2.next_step()]["name"] == "questionnaire:game@1"
        # an edited file does not move a participant who already started
        edited = study.model_copy(update={"conditions": list(reversed(study.conditions))})
        r3 = StudyRunner(edited, store, "P7", SimulatedDriver(edited, "P7"))
        await r3.enroll()
        assert r3.design_changed and [g.condition for g in r3.games] == [g.condition for g in r2.games]
        await r2.run()
        assert r2.driver.seen[0] == "questionnaire:game"


async def _dry(study, path):
    from lab.study.check import dry_run

    async with await Store.open(path) as store:
        return await dry_run(study, store)


def test_withdraw_leaves_no_row_of_the_participant(cli, scripted_study, tmp_path):
    path, study = scripted_study
    db = tmp_path / "s.db"
    assert asyncio.run(_dry(study, db))["ok"]
    con = sqlite3.connect(db)
    gids = [r[0] for r in con.execute("SELECT game_id FROM study_steps WHERE participant = 'sim-002' "
                                      "AND game_id IS NOT NULL")]
    others = con.execute("SELECT COUNT(*) FROM study_steps WHERE participant != 'sim-002'").fetchone()[0]
    con.close()
    assert len(gids) == 3
    rc, out, err = cli("study", "withdraw", str(path), "--participant", "sim-002", "--db", str(db))
    assert rc == 0, err
    assert "3 games" in out and "study_participants" in out
    con = sqlite3.connect(db)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for t in tables:
        for row in con.execute(f"SELECT * FROM {t}"):
            text = " ".join(str(v) for v in row)
            assert "sim-002" not in text, (t, row)
            assert not any(g in text for g in gids), (t, row)
    assert con.execute("SELECT COUNT(*) FROM study_steps").fetchone()[0] == others
    assert con.execute("SELECT COUNT(*) FROM games").fetchone()[0] == 9
    con.close()
    rc, out, err = cli("study", "withdraw", str(path), "--participant", "sim-002", "--db", str(db))
    assert rc == 2 and "no participant 'sim-002'" in err


def _codebook_columns(md: str) -> dict[str, list[str]]:
    out, current = {}, None
    for line in md.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current and (m := re.match(r"^\| `([a-z_]+)` \|", line)):
            out[current].append(m.group(1))
    return out


def test_export_columns_match_the_codebook(cli, scripted_study, tmp_path):
    path, study = scripted_study
    db = tmp_path / "s.db"
    assert asyncio.run(_dry(study, db))["ok"]
    out = tmp_path / "data"
    rc, text, err = cli("study", "export", str(path), "--db", str(db), "--out", str(out), "--include-simulated")
    assert rc == 0, err
    book = _codebook_columns((out / "codebook.md").read_text())
    files = sorted(p.name for p in out.glob("*.csv"))
    assert sorted(book) == files
    rows = {}
    for name, cols in book.items():
        with open(out / name, newline="") as fh:
            r = csv.DictReader(fh)
            assert r.fieldnames == cols, name
            rows[name] = list(r)
        assert rows[name] or name == "drafts.csv", f"{name} is empty"  # nobody quit with words unsent
    assert len(rows["participants.csv"]) == 4 and {r["simulated"] for r in rows["participants.csv"]} == {"1"}
    assert len({r["game_id"] for r in rows["games.csv"]}) == 12
    human = [r for r in rows["games.csv"] if r["is_participant_seat"] == "1"]
    assert len(human) == 12 and {r["kind"] for r in human} == {"human"}
    assert all(r["observer_vps"] for r in human if r["practice"] == "0")  # beliefs asked in every real game
    assert {r["phase"] for r in rows["timings.csv"]} >= {"talk", "decision", "beliefs"}
    assert {r["belief"] for r in rows["beliefs.csv"]} <= {str(x) for x in range(-3, 4)}
    assert {r["truth"] for r in rows["beliefs.csv"]} == {"0", "1"}
    assert any(r["typed_kind"] == "sdmap:propose" or r["typed_kind"].startswith("imap:")
               for r in rows["messages.csv"])
    assert any(float(r["vps_contribution"]) > 0 for r in rows["messages.csv"])
    quiz = [r for r in rows["questionnaires.csv"] if r["questionnaire"] == "quiz"]
    assert {r["correct"] for r in quiz} == {"0", "1"}
    pd = pytest.importorskip("pandas")
    g = pd.read_csv(out / "games.csv")
    assert g.groupby(["condition", "kind"]).size().to_dict()  # reads with no cleaning
    assert g["coordination"].dtype.kind == "f"


def test_observer_vps_is_spec_8_loss_on_stated_beliefs():
    from engine.privacy import belief_to_feasibility, feasibility_truth, observer_vps
    from engine.taskref import resolve_tasks

    assert [belief_to_feasibility(b) for b in (-3, 0, 3)] == [0.0, 0.5, 1.0]
    task = resolve_tasks("seed:5")[0]
    truth = feasibility_truth(task, [], 0, 1)
    free, busy = truth.index(True), truth.index(False)
    none = observer_vps(task, [], [(0, 0, 1, k, 0) for k in range(task.num_slots)])
    assert none["observer_vps"] == 0 and none["triples"] == 1
    right = observer_vps(task, [], [(0, 0, 1, free, 3), (0, 0, 1, busy, -3)])
    assert right["observer_vps"] == 1.0 and right["observer_vps_calibrated"] == 1.0
    wrong = observer_vps(task, [], [(0, 0, 1, free, -3), (0, 0, 1, busy, 2)])
    assert wrong["observer_vps"] == pytest.approx(0.5 + 1 / 3) and wrong["observer_vps_calibrated"] == 0
    assert wrong["per_target"][1] == pytest.approx(0.5 + 1 / 3) and wrong["estimator_vps"] == 0
    # weighted: a blocked slot weighs 32, a free one 1
    assert right["observer_vps_weighted"] >= right["observer_vps"]


def test_two_dry_runs_of_a_scripted_study_give_the_same_traces(scripted_study, tmp_path):
    """Determinism: same study, same seed, scripted seats (and simulated humans) → same games, byte for byte."""
    import json

    path, study = scripted_study

    async def traces(db):
        from lab.study.check import dry_run

        async with await Store.open(db) as store:
            assert (await dry_run(study, store))["ok"]
            return {g["game_id"]: json.dumps(await store.load_trace(g["game_id"]), sort_keys=True, default=str)
                    for g in await store.list_games()}

    a = asyncio.run(traces(tmp_path / "a.db"))
    b = asyncio.run(traces(tmp_path / "b.db"))
    assert len(a) == 12 and a == b
