"""A study served on several hosts, one database each, merged with ``calbench import A.db B.db
--db all.db`` (issue 34, "Beyond one host"): the study's own tables come with the games, so
``study export`` / ``study status`` / ``report --study`` on the merged database see every
host's participants; a participant saved twice with other rows, or a host that ran another
study file, is refused in one line (exit 2, nothing of that database written); merging again
changes nothing; dry runs and the links' key stay on their host."""

from __future__ import annotations

import asyncio
import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.events import EventSink
from lab.study.model import load_study
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from personas.person_like import PersonLikePersona
from saves.store import Store
from saves.study import STUDY_TABLES
from studykit import SCRIPTED_ONLY, example_text


class Typed(PersonLikePersona):
    """The person-like seat with each answer marked as a person's (a ``human_input`` event, as a
    participant's screen leaves), so the games verify when a merge imports them."""

    async def speak(self, obs):
        return _typed(await super().speak(obs), "speak")

    async def volunteer(self, obs):
        return _typed(await super().volunteer(obs), "volunteer")

    async def decide(self, obs):
        return _typed(await super().decide(obs), "decide")


def _typed(reply, request: str):
    reply.extra = {**(reply.extra or {}), "human_input": {"request": request}}
    return reply


class Person(SimulatedDriver):
    """A scripted stand-in for a real participant (not simulated), who may decline consent."""

    simulated = False

    def __init__(self, study, pid, *, consent: bool = True):
        super().__init__(study, pid)
        self.agree = consent

    async def consent(self, text):
        self.seen.append("consent")
        return self.agree

    def human_persona(self, ctx):
        self.person = Typed(ctx.game.seat, seed=f"{self.study.study.seed}:{self.participant}:{ctx.game.index}")
        return self.person

    async def goodbye(self, outcome):
        pass


class QuitsAtTheLastQuestionnaire(Person):
    """Leaves (a closed tab) at the questionnaire after the games: active, with its games done."""

    async def questionnaire(self, q, *, game=None):
        if q.id == "post":
            raise asyncio.CancelledError
        return await super().questionnaire(q, game=game)


class Cut(EventSink):
    """Ends the session (a closed tab, a killed terminal) at the N-th event of a game."""

    def __init__(self, driver, n: int) -> None:
        self.driver, self.n, self.seen = driver, n, 0

    async def emit(self, event):
        self.seen += 1
        if self.seen == self.n:
            self.driver.task.cancel()


class QuitsInTheSecondGame(Person):
    """Leaves in the middle of game 1: their game is stopped (a person may resume it)."""

    task: asyncio.Task | None = None

    def listeners(self, ctx):
        return [*super().listeners(ctx), *([Cut(self, 40)] if ctx.game.index == 1 else [])]


async def _host(study_path: Path, db: Path, people: list[tuple[str, type, dict]]) -> None:
    study = load_study(study_path)
    async with await Store.open(db) as store:
        for pid, driver, kw in people:
            drv = driver(study, pid, **kw)
            drv.task = asyncio.ensure_future(StudyRunner(study, store, pid, drv).run())
            try:
                await drv.task
            except asyncio.CancelledError:
                pass


def _counts(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in (*STUDY_TABLES, "games", "events", "event_blobs", "seat_results")}
    finally:
        con.close()


def _participants(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {r[0] for r in con.execute("SELECT participant FROM study_participants")}
    finally:
        con.close()


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two hosts of one study with disjoint participants (completed, declined, left mid-study; host B
    also ran a dry-run participant), a third host that reused the id P001, and a fourth that ran
    the study from an edited file."""
    base = tmp_path_factory.mktemp("hosts")
    study = base / "study.toml"
    study.write_text(example_text(**SCRIPTED_ONLY))
    edited = base / "edited.toml"
    edited.write_text(example_text(**SCRIPTED_ONLY).replace("seed = 7 ", "seed = 8 ", 1))
    a, b, c, d = (base / f"study-{h}.db" for h in "ABCD")

    async def build():
        await _host(study, a, [("P001", Person, {}), ("P002", Person, {"consent": False}),
                               ("P003", QuitsInTheSecondGame, {})])
        await _host(study, b, [("P101", Person, {}), ("P102", QuitsAtTheLastQuestionnaire, {}),
                               ("P103", Person, {"consent": False})])
        async with await Store.open(b) as store:  # a dry-run participant on host B
            s = load_study(study)
            await StudyRunner(s, store, "sim-001", SimulatedDriver(s, "sim-001")).run()
        await _host(study, c, [("P001", Person, {"consent": False}), ("P150", Person, {"consent": False})])
        await _host(edited, d, [("P201", Person, {"consent": False})])
    asyncio.run(build())
    return {"study": study, "A": a, "B": b, "C": c, "D": d, "base": base}


def _export(cli, study: Path, db: Path, out: Path) -> dict[str, set[tuple]]:
    rc, _, err = cli("study", "export", str(study), "--db", str(db), "--out", str(out))
    assert rc == 0, err
    files = {}
    for f in sorted(out.glob("*.csv")):
        with f.open(newline="") as fh:
            rows = list(csv.reader(fh))
        files[f.name] = (tuple(rows[0]), {tuple(r) for r in rows[1:]})
    return files


def test_merged_export_is_the_union_of_the_hosts_exports(cli, hosts, tmp_path):
    study, a, b = hosts["study"], hosts["A"], hosts["B"]
    merged = tmp_path / "all.db"
    rc, out, err = cli("import", str(a), str(b), "--db", str(merged))
    assert rc == 0, err
    assert f"merged {a}: study 'pilot-1': 3 participants merged, 0 already saved" in out
    assert f"merged {b}: study 'pilot-1': 3 participants merged, 0 already saved; 1 simulated" in out

    ea, eb, em = (_export(cli, study, db, tmp_path / name) for db, name in ((a, "ea"), (b, "eb"), (merged, "em")))
    assert set(em) == set(ea) == set(eb)
    assert em["participants.csv"][1] and em["games.csv"][1] and em["beliefs.csv"][1] and em["timings.csv"][1]
    for name in em:
        head, rows = em[name]
        assert head == ea[name][0] == eb[name][0]
        assert rows == ea[name][1] | eb[name][1], name
    pids = {r[0] for r in em["participants.csv"][1]}
    assert pids == {"P001", "P002", "P003", "P101", "P102", "P103"}

    # every game step of a merged participant still points at its game, and only their games came;
    # P003's game in play (stopped) is left out, as the import leaves out every such game
    con = sqlite3.connect(merged)
    steps = {g for (g,) in con.execute("SELECT game_id FROM study_steps WHERE game_id IS NOT NULL")}
    games = {r[0] for r in con.execute("SELECT game_id FROM games")}
    con.close()
    con = sqlite3.connect(a)
    stopped = {r[0] for r in con.execute("SELECT game_id FROM games WHERE status = 'stopped'")}
    con.close()
    assert len(stopped) == 1 and steps - games == stopped and games < steps
    assert "a person is still playing it (stopped)" in err
    # the dry run stays on host B, with its games
    assert "sim-001" in _participants(b) and "sim-001" not in _participants(merged)
    # no links' key was made or copied for the merged database
    assert not Path(str(merged) + ".links-key").exists()

    # status and the study report see every host's participants
    rc, out, err = cli("study", "status", str(study), "--db", str(merged), "--json")
    assert rc == 0, err
    st = json.loads(out)
    shown = {p["participant"] for p in st["participants"]}
    assert shown == pids
    rc, out, err = cli("report", "--study", str(study), "--db", str(merged), "--json")
    assert rc == 0, err
    rep_m = json.loads(out)
    rc, out, _ = cli("report", "--study", str(study), "--db", str(a), "--json")
    rep_a = json.loads(out)
    rc, out, _ = cli("report", "--study", str(study), "--db", str(b), "--json")
    rep_b = json.loads(out)
    assert rep_m["games"] == rep_a["games"] + rep_b["games"] > 0


def test_importing_the_same_hosts_again_changes_nothing(cli, hosts, tmp_path):
    a, b = hosts["A"], hosts["B"]
    merged = tmp_path / "all.db"
    assert cli("import", str(a), "--db", str(merged))[0] == 0
    assert cli("import", str(a), str(b), "--db", str(merged))[0] == 0
    before = _counts(merged)
    assert before["study_participants"] == 6 and before["study_beliefs"] > 0 and before["study_timings"] > 0
    rc, out, err = cli("import", str(b), str(a), "--db", str(merged))
    assert rc == 0, err
    assert _counts(merged) == before
    assert f"merged {a}: study 'pilot-1': 0 participants merged, 3 already saved" in out
    assert "0 imported," in err


def test_a_participant_saved_with_other_rows_is_refused_in_one_line(cli, hosts, tmp_path):
    a, b, c = hosts["A"], hosts["B"], hosts["C"]
    merged = tmp_path / "all.db"
    # in one command: C's P001 declined, A's P001 completed
    rc, out, err = cli("import", str(a), str(c), str(b), "--db", str(merged))
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("calbench: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert "participant P001" in errors[0] and str(a) in errors[0] and str(c) in errors[0]
    # nothing of C was written (not its other participant either), and A and B merged
    assert _participants(merged) == {"P001", "P002", "P003", "P101", "P102", "P103"}
    assert _counts(merged) == _counts_of_union(cli, a, b, tmp_path)

    # in a later command: named against the merged database
    rc, out, err = cli("import", str(c), "--db", str(merged))
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("calbench: error:")]
    assert len(errors) == 1 and "participant P001" in errors[0]
    assert str(c) in errors[0] and str(merged) in errors[0]
    assert "P150" not in _participants(merged)


def _counts_of_union(cli, a: Path, b: Path, tmp_path: Path) -> dict[str, int]:
    clean = tmp_path / "clean.db"
    assert cli("import", str(a), str(b), "--db", str(clean))[0] == 0
    return _counts(clean)


def test_a_host_that_ran_another_study_file_is_refused(cli, hosts, tmp_path):
    a, d = hosts["A"], hosts["D"]
    merged = tmp_path / "all.db"
    shutil.copy(a, merged)  # merging into host A's own database works the same
    before = _counts(merged)
    rc, out, err = cli("import", str(d), "--db", str(merged))
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("calbench: error:")]
    assert len(errors) == 1 and "another study file" in errors[0] and str(d) in errors[0]
    assert _counts(merged) == before and "P201" not in _participants(merged)
