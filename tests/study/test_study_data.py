"""Issue 30: study data that nothing a participant does can reset, fake or blur.

Below the screens: a driver that quits (raises, as ctrl+q cancels the runner) in the
middle of a step, and the same participant run again."""

from __future__ import annotations

import math

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


def _study(tmp_path, *, quiz_max: int | None = None, extra_items: str = ""):
    replace = dict(SCRIPTED_ONLY)
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


async def _quit_at_game(ctx):
    raise Quit()
