"""Issue 30: study data that nothing a participant does can reset, fake or blur.

Below the screens: a driver that quits (raises, as ctrl+q cancels the runner) in the
middle of a step, and the same participant run again."""

from __future__ import annotations


import pytest

from lab.study.model import load_study
from lab.study.runner import StudyRunner
from lab.study.simulate import SimulatedDriver
from saves.store import Store
from studykit import SCRIPTED_ONLY, example_text


class Quit(Exception):
    """The participant pressed ctrl+q (the runner's task is cancelled; here: raised)."""


class Person(SimulatedDriver):
    """A real (not simulated) participant answering by script; ``script`` says what each
    step does, a step left out answers as the simulated driver does."""

    simulated = False

    def __init__(self, study, pid, **script):
        super().__init__(study, pid)
        self.script = script
        self.offered: list[str] = []
        self.prior_seen: list = []
        self.goodbyes: list[str] = []

    async def quiz(self, questions, *, prior=(), record=None):
        self.prior_seen = list(prior)
        plan = self.script.get("quiz")
        if plan is None:
            return await super().quiz(questions)
        out = []
        tried = {}
        for r in prior:
            tried[int(r["item"])] = max(tried.get(int(r["item"]), 0), int(r["attempt"]))
        for k, choice in plan:
            if choice == "quit":
                raise Quit()
            tried[k] = tried.get(k, 0) + 1
            rec = {"item": k, "response": choice, "attempt": tried[k]}
            out.append(rec)
            if record is not None:
                await record(rec)
        return list(prior) + out

    async def questionnaire(self, q, *, game=None, prior=(), record=None):
        done = {a["item"] for a in prior}
        plan = self.script.get(f"q:{q.id}")
        if plan is None:
            return await super().questionnaire(q, game=game)
        out = list(prior)
        for it in q.items:
            if it.id in done:
                continue
            self.offered.append(it.id)
            if plan.get(it.id) == "quit":
                raise Quit()
            a = {"item": it.id, "response": plan.get(it.id)}
            out.append(a)
            if record is not None:
                await record(a)
        return out

    async def goodbye(self, outcome):
        self.goodbyes.append(outcome)


def _study(tmp_path, *, quiz_max: int | None = None, extra_items: str = "", replace_extra: dict | None = None):
    replace = dict(SCRIPTED_ONLY)
    replace.update(replace_extra or {})
    if quiz_max is not None:
        expl = 'explanation = "Everyone in the meeting must place it in the same slot in the same round."'
        replace[expl] = expl + f"\nmax_attempts = {quiz_max}"
    if extra_items:
        old = ('{ id = "experience", text = "How often do you schedule meetings with others?", type = "choice", '
               'choices = ["rarely", "monthly", "weekly", "daily"] },')
        replace[old] = old + "\n" + extra_items
    p = tmp_path / "study.toml"
    p.write_text(example_text(**replace))
    return load_study(p)


async def _run(study, store, pid, drv):
    r = StudyRunner(study, store, pid, drv)
    try:
        await r.run()
    except Quit:
        return r, "quit"
    return r, None


# -- item 1: quiz attempts count across quits ------------------------------------------------
async def test_quiz_attempts_count_across_a_quit_and_a_second_wrong_answer_screens_out(tmp_path):
    study = _study(tmp_path, quiz_max=2)
    wrong = (study.quiz[0].answer + 1) % len(study.quiz[0].choices)
    async with await Store.open(tmp_path / "s.db") as store:
        _, how = await _run(study, store, "P001", Person(study, "P001", quiz=[(0, wrong), (0, "quit")]))
        assert how == "quit"
        drv = Person(study, "P001", quiz=[(0, wrong)])
        r, how = await _run(study, store, "P001", drv)
        assert how is None
        # the second run knew of the first try: this one is try 2
        assert [(int(a["item"]), a["attempt"]) for a in drv.prior_seen] == [(0, 1)]
        row = await r.db.participant("P001")
        assert row["state"] == "screened_out" and drv.goodbyes == ["screened_out"]
        quiz = [(a["item"], a["attempt"], a["correct"]) for a in await r.db.answers("P001")
                if a["questionnaire"] == "quiz"]
        assert quiz == [("0", 1, 0), ("0", 2, 0)]  # every attempt kept


async def test_quiz_every_attempt_is_kept_over_two_quits_and_a_pass(tmp_path):
    study = _study(tmp_path)  # no max_attempts: three wrong answers, two quits, then right
    q0 = study.quiz[0]
    wrong = (q0.answer + 1) % len(q0.choices)
    async with await Store.open(tmp_path / "s.db") as store:
        for _ in range(2):
            assert (await _run(study, store, "P001", Person(study, "P001", quiz=[(0, wrong), (0, "quit")])))[1]
        drv = Person(study, "P001", quiz=[(0, wrong), (0, q0.answer), (1, study.quiz[1].answer)],
                     **{"q:pre": {"experience": "weekly"}})
        r, _ = await _run(study, store, "P001", drv)
        quiz = [(a["item"], a["attempt"], a["correct"]) for a in await r.db.answers("P001")
                if a["questionnaire"] == "quiz"]
        assert quiz == [("0", 1, 0), ("0", 2, 0), ("0", 3, 0), ("0", 4, 1), ("1", 1, 1)]
        steps = {s["name"]: s for s in await r.db.steps("P001")}
        assert steps["quiz"]["data"]["retries"] == 3 and steps["quiz"]["data"]["attempts"] == 5


# -- item 2: questionnaire answers saved as given; a resume never offers an answered item --------
ATTN = ('  { id = "attn", text = "To show you read this, pick weekly.", type = "choice", '
        'choices = ["rarely", "monthly", "weekly", "daily"], answer = 2 },\n'
        '  { id = "age", text = "Your age group?", type = "choice", choices = ["young", "old"] },')


async def test_a_half_done_questionnaire_is_kept_and_the_attention_check_is_not_asked_again(tmp_path):
    study = _study(tmp_path, extra_items=ATTN)
    async with await Store.open(tmp_path / "s.db") as store:
        first = Person(study, "P001", **{"q:pre": {"experience": "daily", "attn": "rarely", "age": "quit"}})
        _, how = await _run(study, store, "P001", first)
        assert how == "quit" and first.offered == ["experience", "attn", "age"]
        second = Person(study, "P001", **{"q:pre": {"experience": "weekly", "attn": "weekly", "age": "old"}})
        # stop at the practice game: the questionnaire step is what is checked
        second.game_started = _quit_at_game
        r, how = await _run(study, store, "P001", second)
        assert second.offered == ["age"]  # the answered items are never offered again
        ans = {a["item"]: (a["response"], a["correct"]) for a in await r.db.answers("P001")
               if a["questionnaire"] == "pre"}
        assert ans == {"experience": ("daily", None), "attn": ("rarely", 0), "age": ("old", None)}
        step = next(s for s in await r.db.steps("P001") if s["name"] == "questionnaire:pre")
        assert step["completed_at"] and step["data"]["attention_failed"] == 1


WHY = '  { id = "why", text = "Why that often?", type = "text" },'


class Typist(Person):
    """Types a written answer into the box (``keep``, as the app's live copy does) and quits
    before pressing enter; on the next run it finishes what the box holds."""

    def __init__(self, study, pid, typed: str, *, quit_: bool):
        super().__init__(study, pid)
        self.typed, self.quit_ = typed, quit_
        self.drafts_seen: dict = {}

    async def questionnaire(self, q, *, game=None, prior=(), record=None, drafts=None, keep=None):
        if q.id != "pre":
            return await super().questionnaire(q, game=game, prior=prior, record=record)
        self.drafts_seen = dict(drafts or {})
        out = list(prior)
        done = {a["item"] for a in prior}
        for it in q.items:
            if it.id in done:
                continue
            if it.id != "why":
                a = {"item": it.id, "response": "weekly"}
            else:
                box = self.drafts_seen.get("why", "")
                if self.quit_:
                    await keep("why", box + self.typed)
                    raise Quit()
                a = {"item": "why", "response": box + self.typed}
            await record(a)
            out.append(a)
        return out


async def test_a_written_answer_typed_before_a_quit_is_back_in_its_box(tmp_path):
    study = _study(tmp_path, extra_items=WHY)
    async with await Store.open(tmp_path / "s.db") as store:
        r, how = await _run(study, store, "P001", Typist(study, "P001", "Team calls every", quit_=True))
        assert how == "quit"
        assert [(d["questionnaire"], d["item"], d["text"]) for d in await r.db.answer_drafts("P001")] == \
            [("pre", "why", "Team calls every")]
        again = Typist(study, "P001", " Monday", quit_=False)
        again.game_started = _quit_at_game  # the questionnaire step is what is checked
        r, how = await _run(study, store, "P001", again)
        assert again.drafts_seen == {"why": "Team calls every"}  # offered back, as typed
        ans = {a["item"]: a["response"] for a in await r.db.answers("P001") if a["questionnaire"] == "pre"}
        assert ans == {"experience": "weekly", "why": "Team calls every Monday"}
        assert await r.db.answer_drafts("P001") == []  # the answer took its place


async def test_an_answer_draft_is_exported_kept_blank_deleted_and_withdrawn(tmp_path):
    from saves.study import StudyStore

    study = _study(tmp_path, extra_items=WHY)
    async with await Store.open(tmp_path / "s.db") as store:
        r, how = await _run(study, store, "P001", Typist(study, "P001", "Because", quit_=True))
        db = StudyStore(store, study.name)
        from lab.study.export import study_rows

        rows = (await study_rows(study, store))["drafts.csv"]
        assert [(x["kind"], x["questionnaire"], x["item"], x["text"], x["game_id"], x["round"]) for x in rows] == \
            [("answer", "pre", "why", "Because", None, None)]
        step = (await db.answer_drafts("P001"))[0]["step"]
        await db.keep_answer_draft("P001", step, "pre", "why", "   ")  # a box emptied: nothing to keep
        assert await db.answer_drafts("P001") == []
        await db.keep_answer_draft("P001", step, "pre", "why", "Again")
        assert (await db.withdraw("P001"))["study_answer_drafts"] == 1
        assert await db.answer_drafts("P001") == []


class AfterGameTypist(Person):
    """Answers everything until the first after-game questionnaire, types into its written
    item and quits there."""

    async def questionnaire(self, q, *, game=None, prior=(), record=None, drafts=None, keep=None):
        if q.id != "game":
            return await super().questionnaire(q, game=game, prior=prior, record=record)
        self.game_id = game.game_id
        await keep("notes", "We agreed fast")
        raise Quit()


async def test_an_after_game_answer_draft_names_its_game(tmp_path):
    from lab.study.export import study_rows

    notes = ('{ id = "notes", text = "Anything about this game?", type = "text", optional = true },\n  '
             '{ id = "satisfied",')
    study = _study(tmp_path, replace_extra={'{ id = "satisfied",': notes})
    async with await Store.open(tmp_path / "s.db") as store:
        drv = AfterGameTypist(study, "P001")
        _, how = await _run(study, store, "P001", drv)
        assert how == "quit" and drv.game_id
        rows = (await study_rows(study, store, reveal=True))["drafts.csv"]
        assert [(x["kind"], x["questionnaire"], x["item"], x["text"], x["game_id"]) for x in rows] == \
            [("answer", "game", "notes", "We agreed fast", drv.game_id)]


async def _quit_at_game(ctx):
    raise Quit()


# -- items 4-7: what the export says -------------------------------------------------------------
class Asked(Person):
    """Completes the study, keeping every belief grid it was asked (with the game's task)."""

    def __init__(self, study, pid):
        super().__init__(study, pid)
        self.requests = []

    async def beliefs(self, ctx, req):
        self.requests.append((ctx.task, req))
        return await super().beliefs(ctx, req)


class Marks(Asked):
    """On every grid it types 0 in the first cell and leaves the second blank."""

    async def beliefs(self, ctx, req):
        grid = await super().beliefs(ctx, req)
        return {t: [0, None] + list(row[2:]) for t, row in grid.items()}


def _csv(path):
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def pilot_db(tmp_path):
    """A study's own database after a dry run and one real participant who finished."""
    import asyncio

    from lab.study.check import dry_run

    study = _study(tmp_path)
    db = tmp_path / "s.db"

    async def go():
        async with await Store.open(db) as store:
            assert (await dry_run(study, store))["ok"]
            drv = Marks(study, "P001")
            r, how = await _run(study, store, "P001", drv)
            assert how is None and r.outcome is None
            return drv

    return study, tmp_path / "study.toml", db, asyncio.run(go())


ANALYSIS = ("steps.csv", "games.csv", "messages.csv", "beliefs.csv", "questionnaires.csv", "timings.csv",
            "assignment.csv", "payments.csv", "message_audit.csv", "drafts.csv", "participants.csv")


def test_export_flags_every_row_simulated_or_not_and_leaves_the_dry_run_out_by_default(cli, pilot_db, tmp_path):
    study, path, db, _ = pilot_db
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(tmp_path / "real"))
    assert rc == 0, err
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(tmp_path / "all"),
                     "--include-simulated")
    assert rc == 0, err
    for name in ANALYSIS:
        real, every = _csv(tmp_path / "real" / name), _csv(tmp_path / "all" / name)
        header = open(tmp_path / "real" / name).readline().strip().split(",")
        assert "simulated" in header, f"{name} has no simulated column"
        assert all(r["simulated"] == "0" and r["participant"] == "P001" for r in real), name
        assert {r["simulated"] for r in every if r["participant"].startswith("sim-")} <= {"1"}, name
        if name != "drafts.csv":  # nobody quit with words unsent
            assert real and any(r["participant"].startswith("sim-") for r in every), name


def test_rounds_count_from_1_in_every_csv_and_every_codebook_entry_says_so(cli, pilot_db, tmp_path):
    from lab.study.export import CODEBOOK

    study, path, db, drv = pilot_db
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(tmp_path / "d"))
    assert rc == 0, err
    for name, (_, cols) in CODEBOOK.items():
        for col, meaning in cols:
            if col == "round":
                assert "counted from 1" in meaning, (name, meaning)
    task, _ = drv.requests[0]
    n = len(task.meetings)
    msgs = _csv(tmp_path / "d" / "messages.csv")
    assert {int(r["round"]) for r in msgs} == set(range(1, n + 1))
    timed = {int(r["round"]) for r in _csv(tmp_path / "d" / "timings.csv") if r["round"]}
    assert min(timed) == 1 and max(timed) <= n
    asked = {(req.round + 1) for _, req in drv.requests}
    assert {int(r["round"]) for r in _csv(tmp_path / "d" / "beliefs.csv")} == asked


def test_a_blank_belief_cell_is_missing_not_0(cli, pilot_db, tmp_path):
    pd = pytest.importorskip("pandas")
    study, path, db, drv = pilot_db
    rc, _, err = cli("study", "export", str(path), "--db", str(db), "--out", str(tmp_path / "d"))
    assert rc == 0, err
    rows = _csv(tmp_path / "d" / "beliefs.csv")
    assert rows
    blank = [r for r in rows if r["slot"] == "1"]
    typed = [r for r in rows if r["slot"] == "0"]
    assert blank and all(r["belief"] == "" and r["feasibility_belief"] == "" for r in blank)
    assert typed and all(r["belief"] == "0" and r["feasibility_belief"] == "0.5" for r in typed)
    b = pd.read_csv(tmp_path / "d" / "beliefs.csv")
    assert b[b.slot == 1].belief.isna().all() and (b[b.slot == 0].belief == 0).all()
    book = (tmp_path / "d" / "codebook.md").read_text()
    assert "left blank" in book and "NaN in pandas" in book


async def test_belief_grids_only_about_rounds_the_participant_took_part_in(tmp_path):
    study = _study(tmp_path)  # targets = "meeting"
    study = study.model_copy(update={"beliefs": study.beliefs.model_copy(update={"rounds": "all"})})
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Asked(study, "P001")
        await _run(study, store, "P001", drv)
    assert drv.requests
    for task, req in drv.requests:
        assert req.seat in task.meetings[req.round].participants, f"asked after round {req.round + 1}, not theirs"
    # and after every round that was theirs
    tasks = {id(t): t for t, _ in drv.requests}
    for t in tasks.values():
        seat = next(req.seat for task, req in drv.requests if task is t)
        mine = {r for r, m in enumerate(t.meetings) if seat in m.participants}
        assert {req.round for task, req in drv.requests if task is t} == mine


async def test_watched_rounds_asks_about_every_round_and_flags_the_ones_only_watched(tmp_path):
    study = _study(tmp_path)
    study = study.model_copy(update={"beliefs": study.beliefs.model_copy(update={"watched_rounds": True,
                                                                                 "rounds": "all"})})
    async with await Store.open(tmp_path / "s.db") as store:
        drv = Marks(study, "P001")
        await _run(study, store, "P001", drv)
        watched = [req for task, req in drv.requests if req.seat not in task.meetings[req.round].participants]
        assert watched and not any(req.took_part for req in watched)
        assert all(req.took_part for task, req in drv.requests if req not in watched)
        rows = {}
        from lab.study.export import study_rows

        for r in (await study_rows(study, store))["beliefs.csv"]:
            rows[(r["game_id"], r["round"])] = r["took_part"]
        assert set(rows.values()) == {0, 1}


# -- item 3 below the screens: the call cut short is timed -------------------------------------
async def test_the_turn_in_progress_at_a_quit_is_timed_partial():
    import asyncio

    from lab.study.seat import StudySeat

    rows = []

    class Thinking:
        async def speak(self, obs):
            await asyncio.sleep(3600)

    async def on_timing(**kw):
        rows.append(kw)

    class Obs:
        round, turn = 2, 1

    seat = StudySeat(Thinking(), model="human", talk_seconds=600, decision_seconds=None, on_timing=on_timing)
    task = asyncio.ensure_future(seat.speak(Obs()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [(r["phase"], r["round_"], r["turn"], r["timed_out"], r.get("partial")) for r in rows] == [
        ("talk", 2, 1, False, True)]
    assert rows[0]["seconds"] > 0
