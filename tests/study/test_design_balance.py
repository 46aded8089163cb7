"""Issue 20 items 8-10, 12-15 and the lab extras, below the screens: a participant who
declines is final and gives up their slot; ids are checked against the study's pattern
and a look-alike id is not registered silently; the next arrival takes the lowest open
slot; a timed-out decision ends at once; the quiz screens out; attention checks,
payments, pool ids and the randomisation record reach the export; the dry run starts its
own mock or says what to start; status shows partner failures and the cycle's open rows."""

from __future__ import annotations

import asyncio
import csv
import sqlite3
from datetime import datetime, timedelta, timezone

from lab.study.model import load_study
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from personas.human import HumanPersona
from saves.store import Store
from saves.study import StudyStore
from studykit import SCRIPTED_ONLY, example_text


class Person(SimulatedDriver):
    """A scripted stand-in for a real participant (not simulated), recording what was asked."""

    simulated = False

    def __init__(self, study, pid, *, consent: bool = True, quiz_wrong_first: bool = False):
        super().__init__(study, pid)
        self.agree = consent
        self.quiz_wrong_first = quiz_wrong_first
        self.goodbyes: list[str] = []
        self.thanked: dict = {}

    async def consent(self, text):
        self.seen.append("consent")
        return self.agree

    async def quiz(self, questions):
        if not self.quiz_wrong_first:
            return await super().quiz(questions)
        q = questions[0]  # wrong, then right (a screen would not ask again past max_attempts)
        return [{"item": 0, "response": (q.answer + 1) % len(q.choices), "attempt": 1},
                {"item": 0, "response": q.answer, "attempt": 2}] + \
            [{"item": k, "response": x.answer, "attempt": 1} for k, x in enumerate(questions) if k]

    async def goodbye(self, outcome):
        self.goodbyes.append(outcome)

    async def thanks(self, code, **info):
        self.thanked = {"code": code, **info}
        self.seen.append("thanks")


async def test_a_participant_who_declines_is_final_gets_a_goodbye_and_frees_the_slot(scripted_study, tmp_path):
    path, study = scripted_study
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Person(study, "P001", consent=False)
        r = StudyRunner(study, store, "P001", drv)
        await r.run()  # no exception: declining is an ending, not an error
        row = await r.db.participant("P001")
        assert row["state"] == "declined" and row["slot"] == 0 and drv.goodbyes == ["declined"]
        assert r.outcome == "declined"
        # the same command again: no consent screen, the goodbye again, nothing else
        drv2 = Person(study, "P001")
        await StudyRunner(study, store, "P001", drv2).run()
        assert drv2.seen == [] and drv2.goodbyes == ["declined"]
        # the next arrival takes the slot the decliner gave up
        other = StudyRunner(study, store, "P002", Person(study, "P002"))
        assert (await other.enroll())["slot"] == 0


async def test_the_next_arrival_takes_the_lowest_slot_given_up(scripted_study, tmp_path):
    """Completed and active participants hold their slot; declined, withdrawn and stalled
    ones give it up; status lists the cycle's rows nobody holds."""
    from lab.study.status import format_status, study_status

    path, study = scripted_study
    async with await Store.open(tmp_path / "s.db") as store:
        db = StudyStore(store, study.name)
        for pid in ("A", "B", "C", "D", "E"):
            await StudyRunner(study, store, pid, Person(study, pid)).enroll()
        assert [p["slot"] for p in await db.participants()] == [0, 1, 2, 3, 4]
        await db.complete_participant("A", "CB-X")
        await db.set_outcome("B", "declined")
        await db.withdraw("C")
        old = (datetime.now(timezone.utc) - timedelta(minutes=30)).isoformat()
        async with store._tx() as con:  # D started 30 minutes ago and did nothing since: stalled
            await con.execute("UPDATE study_participants SET started_at = ? WHERE participant = 'D'", (old,))
            await con.execute("UPDATE study_steps SET started_at = ? WHERE participant = 'D' AND step = 0", (old,))
        st = await study_status(study, store)
        assert [u["slot"] for u in st["cycle"]["unfilled"]] == [1, 2, 3]
        text = format_status(st)
        assert "Cycle 1 (4 rows): 3 unfilled" in text and "row 2 (slot 1)" in text and "1 declined" in text
        slots = []
        for pid in ("F", "G", "H", "I"):
            slots.append((await StudyRunner(study, store, pid, Person(study, pid)).enroll())["slot"])
        assert slots == [1, 2, 3, 5]  # E holds 4 (active), so the one after the cycle's last open row is 5


def test_ids_follow_the_pattern_and_a_lookalike_is_not_registered_silently(cli, scripted_study, tmp_path,
                                                                            monkeypatch):
    path, study = scripted_study
    db = tmp_path / "s.db"

    async def register():
        async with await Store.open(db) as store:
            await StudyRunner(study, store, "P001", Person(study, "P001")).enroll()

    asyncio.run(register())
    rc, out, err = cli("study", "run", str(path), "--participant", "p001", "--db", str(db))
    assert rc == 2 and "existing participant P001" in err and "--new-participant" in err and "Traceback" not in err
    rc, out, err = cli("study", "run", str(path), "--participant", "P-001", "--db", str(db))
    assert rc == 2 and "participant_pattern" in err
    # asked at a terminal: "n" registers nobody
    from calbench_cli.commands import study as study_cmd

    monkeypatch.setattr(study_cmd, "_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    rc, out, err = cli("study", "run", str(path), "--participant", "p001", "--db", str(db))
    assert rc == 2 and "not registered" in err
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT participant FROM study_participants")] == ["P001"]
    con.close()
    # confirmed: it goes on (here to the terminal check, as there is no terminal under pytest)
    monkeypatch.setattr(study_cmd, "_interactive", lambda: False)
    rc, out, err = cli("study", "run", str(path), "--participant", "p001", "--new-participant", "--db", str(db))
    assert rc == 2 and "interactive terminal" in err


class CountingAbsent(Person):
    """A participant who never answers; counts how often their decision is asked."""

    def __init__(self, study, pid):
        super().__init__(study, pid)
        self.asked: dict[tuple[int, int], int] = {}

    def human_persona(self, ctx):
        outer, game = self, ctx.game.index

        class Seat(HumanPersona):
            async def decide(self, obs):
                key = (game, obs.round)
                outer.asked[key] = outer.asked.get(key, 0) + 1
                return await super().decide(obs)

        return Seat(lambda req: None)


async def test_one_timeout_ends_the_decision(scripted_study, tmp_path):
    """A decision that runs out with nothing placed is a no move at once: the person is asked
    once per round, not once per engine retry (4 × the limit before)."""
    path, study = scripted_study
    study = study.model_copy(update={"timing": study.timing.model_copy(update={
        "talk_seconds": 0.02, "decision_seconds": 0.05, "on_decision_timeout": "submit"})})
    async with await Store.open(tmp_path / "s.db") as store:
        drv = CountingAbsent(study, "P1")
        results = await StudyRunner(study, store, "P1", drv).run()
        assert all(r.status == "completed" for r in results if r.name.startswith("game:"))
        assert drv.asked and set(drv.asked.values()) == {1}
        gid = next(r.data["game_id"] for r in results if r.name.startswith("game:"))
        inputs = [e["data"] for e in await store.load_events(gid) if e["type"] == "human_input"
                  and e["data"].get("request") == "decide"]
    assert inputs and all(i["timeout_outcome"] == "no_move" for i in inputs)
    assert any(i.get("repeat_of_timeout") for i in inputs)  # the engine's retries, answered at once


def _study_with(tmp_path, extra: str = "", **replace):
    p = tmp_path / "study.toml"
    p.write_text(example_text(**{**SCRIPTED_ONLY, **replace}) + extra)
    return p, load_study(p)


async def test_quiz_max_attempts_screens_out_records_and_frees_the_slot(tmp_path):
    path, study = _study_with(tmp_path, **{'explanation = "Everyone in the meeting must place it in the same '
                                           'slot in the same round."':
                                           'explanation = "Everyone in the meeting must place it in the same '
                                           'slot in the same round."\nmax_attempts = 1'})
    assert study.quiz[0].max_attempts == 1
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Person(study, "P1", quiz_wrong_first=True)
        r = StudyRunner(study, store, "P1", drv)
        await r.run()
        row = await r.db.participant("P1")
        assert row["state"] == "screened_out" and drv.goodbyes == ["screened_out"]
        assert "thanks" not in drv.seen and not any(s.startswith("game") for s in drv.seen)
        answers = await r.db.answers("P1")
        assert [(a["questionnaire"], a["correct"]) for a in answers] == [("quiz", 0)]
        assert (await StudyRunner(study, store, "P2", Person(study, "P2")).enroll())["slot"] == 0


PAY = {'currency = "£"': 'currency = "$"', "show_up = 5.00": "show_up = 4.0", "per_meeting = 0.25": "per_meeting = 0.5",
       "cap = 3.00": "cap = 1.0",
       '# return_url = "https://app.prolific.com/submissions/complete?cc={code}"':
       'return_url = "https://pool.example/done?cc={code}&id={pool_id}"'}

CHECK = ('{ id = "experience", text = "How often do you schedule meetings with others?", type = "choice", '
         'choices = ["rarely", "monthly", "weekly", "daily"] },')


async def test_payment_pool_id_attention_check_and_randomisation_record_in_the_export(tmp_path):
    from lab.study.export import export_study

    extra_item = CHECK + '\n  { id = "attn", text = "To show you read this, pick weekly.", type = "choice", ' \
                         'choices = ["rarely", "monthly", "weekly", "daily"], answer = 2 },'
    path, study = _study_with(tmp_path, **PAY, **{CHECK: extra_item})
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Person(study, "P1")
        r = StudyRunner(study, store, "P1", drv)
        await r.enroll(pool_id="5f3c-pool")
        await r.run()
        code = drv.thanked["code"]
        pay = drv.thanked["payment"]
        assert pay["currency"] == "$" and pay["show_up"] == 4.0 and 0 <= pay["bonus"] <= 1.0
        assert pay["total"] == round(4.0 + min(1.0, 0.5 * pay["meetings"]), 2)
        assert drv.thanked["return_link"] == f"https://pool.example/done?cc={code}&id=5f3c-pool"
        counts = await export_study(study, store, tmp_path / "out")
    assert counts["payments.csv"] == 1 and counts["assignment.csv"] == 3
    rows = list(csv.DictReader(open(tmp_path / "out" / "payments.csv")))
    assert rows[0]["pool_id"] == "5f3c-pool" and float(rows[0]["total"]) == pay["total"]
    part = list(csv.DictReader(open(tmp_path / "out" / "participants.csv")))[0]
    assert part["pool_id"] == "5f3c-pool" and part["status"] == "completed"
    q = [x for x in csv.DictReader(open(tmp_path / "out" / "questionnaires.csv")) if x["item"] == "attn"]
    assert len(q) == 1 and q[0]["correct"] in ("0", "1")
    plan = list(csv.DictReader(open(tmp_path / "out" / "assignment.csv")))
    assert [p["study_game"] for p in plan] == ["0", "1", "2"] and plan[0]["practice"] == "1"
    assert {p["condition_order"] for p in plan} == {"|".join(g.condition for g in r.games if not g.practice)}
    assert all(p["game_id"] and p["task_id"] and p["seat"] and p["cycle"] == "1" and p["cycle_row"] == "1"
               for p in plan)


def test_attention_check_needs_a_right_answer_in_range(tmp_path):
    import pytest

    from lab.study.model import StudyFileError

    bad = CHECK.replace('choices = ["rarely", "monthly", "weekly", "daily"] }',
                        'choices = ["rarely", "monthly", "weekly", "daily"], answer = 9 }')
    with pytest.raises(StudyFileError, match="answer = 9"):
        _study_with(tmp_path, **{CHECK: bad})


async def test_dry_run_mock_starts_the_loopback_llm_itself(cli, tmp_path, monkeypatch):
    """--mock: nothing listens on the file's URL, the dry run starts its own loopback mock."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = tmp_path / "study.toml"
    p.write_text(example_text("http://127.0.0.1:9/v1", **{"timeout = 60": "timeout = 2"}))
    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--mock",
                                           "--db", str(tmp_path / "s.db"))
    assert rc == 0, out + err
    assert "FAILED" not in out and "12 completed" in out and "loopback mock http://127.0.0.1:" in out


async def test_dry_run_with_the_endpoint_down_names_the_url_and_the_fix(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    p = tmp_path / "study.toml"
    # no retries: each retry of a refused call only waits its backoff (152 calls x 0.15 s)
    p.write_text(example_text("http://127.0.0.1:9/v1", **{"timeout = 60": "timeout = 2\nretries = 0"}))
    rc, out, err = await asyncio.to_thread(cli, "study", "check", str(p), "--dry-run", "--db", str(tmp_path / "s.db"))
    assert rc == 1
    lines = out.splitlines()
    assert not any("completed" in line for line in lines if line.startswith("Dry run"))
    fix = [line for line in lines if line.strip().startswith("FIX")]
    assert fix and "http://127.0.0.1:9/v1" in fix[0] and "calbench mock-llm --port 9" in fix[0] and "--mock" in fix[0]
    rc, out, err = cli("study", "init", str(tmp_path / "new.toml"))
    assert rc == 0 and "--dry-run --mock" in out and "calbench mock-llm" in out


async def test_status_shows_partner_failures_and_flags_an_endpoint_down(tmp_path, monkeypatch):
    from lab.study.status import format_status, study_status

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    p = tmp_path / "study.toml"
    p.write_text(example_text("http://127.0.0.1:9/v1", **{"timeout = 60": "timeout = 1\nretries = 0"}))
    study = load_study(p)
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Person(study, "P1")
        await StudyRunner(study, store, "P1", drv).run()
        st = await study_status(study, store)
    row = st["participants"][0]
    assert row["partner_failures"] > 0 and not row["partner_down"]  # finished: nothing to flag now
    assert f"{row['partner_failures']} partner call(s) unanswered" in format_status(st)

    # a participant stopped in a game right after a partner call went unanswered: flagged
    class StopAfterFailure(Person):
        task = None

        def listeners(self, ctx):
            outer = self

            class Sink:
                async def emit(self, event):
                    d = event.get("data") or {}
                    if event.get("type") == "seat_timeout" and d.get("agent_id") != ctx.game.seat:
                        outer.task.cancel()
            return [Sink()] if ctx.condition.uses_llm else []

    async with await Store.open(tmp_path / "s.db") as store:
        drv = StopAfterFailure(study, "P2")
        runner = StudyRunner(study, store, "P2", drv)
        drv.task = asyncio.ensure_future(runner.run())
        try:
            await drv.task
        except asyncio.CancelledError:
            pass
        st = await study_status(study, store)
    row = next(r for r in st["participants"] if r["participant"] == "P2")
    assert row["partner_down"] and row["partner_failures"] >= 1
    assert "PARTNER ENDPOINT DOWN?" in format_status(st)
