"""benchmarks/browser_capacity.py walks a participant to the study's first free-text question
by keys (issue 34: "at the first text question within 60 s"): the keys it computes from the
study file, pressed on the real study app, land on that question with its box taking the
typed characters; and the study ``calbench study init`` writes has no such question before
its games (so the benchmark adds one)."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from benchmarks.browser_capacity import echo_words, typed, walk, with_text_question
from calbench_tui.app import screen_text
from calbench_tui.screens.study_steps import QuestionnaireScreen
from calbench_tui.study_app import make_study_app
from lab.study.example import EXAMPLE
from lab.study.model import load_study, parse_study
from saves.store import Store

from .helpers import wait_for, wait_painted


def test_init_study_has_no_text_question_before_the_games():
    with pytest.raises(SystemExit, match="no free-text question"):
        walk(parse_study(EXAMPLE))


def test_the_walk_answers_each_screen_by_its_keys():
    keys = [k for _, k in walk(parse_study(with_text_question(EXAMPLE)))[0]]
    # consent, instructions, the quiz's right answers (choice 1 then 2, 0-based), the choice item
    assert keys == ["y", "\r", "2", "3", "1"]
    checks = EXAMPLE.replace(
        '{ id = "experience",',
        '{ id = "scale", text = "A ten-point scale", type = "likert", points = 11, answer = 10 },\n'
        '  { id = "check", text = "Pick the third", type = "choice", choices = ["a", "b", "c"], answer = 2 },\n'
        '  { id = "experience",')
    steps, question = walk(parse_study(with_text_question(checks)))
    assert [k for _, k in steps][-3:] == ["0", "3", "1"]  # an attention check's right answer; 10 is "0"
    assert question == "How do you usually find a ti"


def test_typed_text_grows_by_one_key():
    a, b = typed(3, 7), typed(3, 8)
    assert len(a) == 7 and b.startswith(a) and a[0] == "Q" and typed(4, 8) != b
    assert echo_words(typed(0, 40)) == typed(0, 40)[-20:]


async def test_the_walk_reaches_the_text_question_on_the_study_app(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(with_text_question(EXAMPLE))
    study = load_study(path)
    steps, question = walk(study)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(100, 32)) as pilot:
            for words, key in steps:
                await wait_painted(pilot, words, what=words)
                await pilot.press({"\r": "enter"}.get(key, key))
            await wait_painted(pilot, question, what="the text question")
            screen = app.screen
            assert isinstance(screen, QuestionnaireScreen) and screen.item.type == "text"
            assert screen.q.id == "pre" and screen.item.id == "planning"
            for n in range(1, 6):
                await pilot.press(typed(0, n)[-1])
            box = screen.query_one("#study-input", Input)
            assert box.has_focus and box.value == typed(0, 5)
            await wait_for(pilot, lambda: echo_words(typed(0, 5)) in screen_text(app), what="the echo")
