"""Issue 20 items 8, 11, 12, 13 and the lab extras, on the participant's screens, by keys:
declining consent ends politely with exit 0; partners are "Agent N" everywhere in a study
game (seat bar, feed, failures, help) unless the condition reveals them; a decision that
runs out says what happened in the participant's words; quiz feedback sits under its
question and is gone on the next one, and max_attempts screens out; the completion
screen shows the payment and the pool's return link."""

from __future__ import annotations

import asyncio
import json

from calbench_tui.app import screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.game import GameScreen
from calbench_tui.screens.help import HelpScreen
from calbench_tui.screens.study_steps import GoodbyeScreen, QuizScreen, StudyTextScreen, ThanksScreen
from calbench_tui.study_app import make_study_app
from calbench_tui.widgets.seats import SeatsBar
from engine.generate import generate_scenario
from lab.study.example import EXAMPLE
from lab.study.model import load_study
from saves.store import Store

from .helpers import PATIENCE, wait_for
from .test_study_run import is_waiting, step_by_keys


def study_file(tmp_path, *, partners: str = '"imap"', llm: str = "", extra: dict | None = None):
    """The example on small tasks (4 seats, 8 slots, 2 meetings); ``partners`` for both conditions."""
    rows = [generate_scenario(seed, num_agents=4, num_slots=8, num_meetings=2, participants_per_meeting=2,
                              blocked=1).to_row() for seed in (1, 2, 3)]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (EXAMPLE.replace('partners = ["llm:mock-model", "imap", "imap", "imap"]', f"partners = {partners}")
            .replace('partners = "imap"', f"partners = {partners}")
            .replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]',
                     'pool = ["tasks.jsonl:1", "tasks.jsonl:2"]')
            .replace('practice = "seed:99"', 'practice = "tasks.jsonl:0"'))
    if llm:
        text = text.replace('base_url = "http://127.0.0.1:8765/v1"', llm)
    for old, new in (extra or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    p = tmp_path / "study.toml"
    p.write_text(text)
    return load_study(p)


async def to_first_game(pilot, app) -> None:
    seen: list[str] = []
    while not isinstance(app.screen, GameScreen):
        await wait_for(pilot, lambda: is_waiting(app) or app.error, timeout=PATIENCE, what="the next step")
        assert not app.error, app.error
        if isinstance(app.screen, GameScreen):
            break
        await step_by_keys(pilot, app, seen)


def seat_bar(app) -> str:
    gs = app.game_screen
    bar = gs.query_one(SeatsBar)
    return screen_text(app).splitlines()[bar.region.y]


async def test_partners_are_agent_n_everywhere_in_a_study_game(tmp_path, monkeypatch):
    """One LLM partner on an endpoint that is down, two IMAP partners: the seat bar, the feed
    and the help name no protocol and no model, and the failure reads 'Agent N did not answer'."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    study = study_file(tmp_path, partners='["llm:mock-model", "imap", "imap"]',
                       llm='base_url = "http://127.0.0.1:9/v1"\nretries = 0',
                       extra={"timeout = 60": "timeout = 1"})
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await to_first_game(pilot, app)
            await wait_for(pilot, lambda: "Agent" in seat_bar(app), what="the seat bar")
            await wait_for(pilot, lambda: "did not answer" in screen_text(app), timeout=PATIENCE,
                           what="the failed partner's note")
            bar, text = seat_bar(app), screen_text(app)
            for word in ("imap", "mock", "llm", "infra", "IMAP"):
                assert word not in bar, bar
                assert word not in text, text
            assert "you" in bar and "no answer" in bar
            assert "⟨" not in text  # no payload tag telling a protocol partner from an LLM one
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
            await wait_for(pilot, lambda: "Your partners are the other seats" in screen_text(app), what="help text")
            assert "IMAP" not in screen_text(app)
            await pilot.press("escape")
            await pilot.press("ctrl+q")


async def test_a_condition_may_reveal_the_partners(tmp_path):
    study = study_file(tmp_path, extra={'cost = "task"': 'cost = "task"\nreveal_partners = true'})
    assert study.conditions[0].reveal_partners
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await to_first_game(pilot, app)
            await wait_for(pilot, lambda: "imap" in seat_bar(app), what="the named partners")
            await pilot.press("ctrl+q")


async def test_declining_consent_ends_with_a_goodbye_and_exit_0(tmp_path):
    study = study_file(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, StudyTextScreen), what="consent")
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, GoodbyeScreen)
                           and "chose not to take part" in screen_text(app), what="the goodbye")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.left == "declined" and app.return_code is not None, what="exit")
        assert app.return_code == 0 and not app.error and not app.finished
        # the same command again: the goodbye at once, no consent screen
        app2 = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app2.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app2.screen, GoodbyeScreen), what="the goodbye again")
            await pilot.press("enter")
        assert app2.return_code == 0


async def test_quiz_feedback_sits_under_the_question_and_clears_then_max_attempts_screens_out(tmp_path):
    study = study_file(tmp_path, extra={'answer = 2\nexplanation = "Your calendar is private':
                                        'answer = 2\nmax_attempts = 1\nexplanation = "Your calendar is private'})
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            await wait_for(pilot, lambda: isinstance(app.screen, StudyTextScreen), what="consent")
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, StudyTextScreen) and not app.screen.consent,
                           what="instructions")
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, QuizScreen), what="the quiz")
            q0 = study.quiz[0]
            await pilot.press(str((q0.answer + 1) % len(q0.choices) + 1))  # wrong
            await wait_for(pilot, lambda: "Not quite" in screen_text(app), what="the feedback")
            lines = screen_text(app).splitlines()
            fb = next(i for i, line in enumerate(lines) if "Not quite" in line)
            press = next(i for i, line in enumerate(lines) if "Press the number of your answer" in line)
            assert 0 < fb - press <= 3, "\n".join(lines)  # right under the question, not at the bottom
            await pilot.press(str(q0.answer + 1))
            await wait_for(pilot, lambda: "question 2 of 2" in screen_text(app), what="the next question")
            assert "Not quite" not in screen_text(app) and "Right." not in screen_text(app)
            q1 = study.quiz[1]
            await pilot.press(str((q1.answer + 1) % len(q1.choices) + 1))  # wrong, and only one try
            await wait_for(pilot, lambda: isinstance(app.screen, GoodbyeScreen)
                           and "tries allowed" in screen_text(app), what="the fail-out screen")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.return_code is not None, what="exit")
        assert app.left == "screened_out" and app.return_code == 0
        row = await app.runner.db.participant("P1")
        assert row["state"] == "screened_out"


async def test_timeout_and_rejections_in_the_participants_words_and_the_thanks_screen(tmp_path):
    """No move placed when the decision runs out: one note in plain words, never the engine's
    rule text; the batch builder says "Pick a slot for the meeting first"; the completion
    screen shows the payment and the pool's return link."""
    study = study_file(tmp_path, extra={
        # long enough for a loaded machine to paint the decision and the test to press a key
        # before it runs out; short enough to wait out the practice game's other decisions
        "decision_seconds = 120": "decision_seconds = 15",
        'on_decision_timeout = "submit"': 'on_decision_timeout = "no_move"',
        '# return_url = "https://app.prolific.com/submissions/complete?cc={code}"':
            'return_url = "https://pool.example/done?cc={code}"'})
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path, pool_id="pool-77")
        async with app.run_test(size=(160, 50)) as pilot:
            await to_first_game(pilot, app)
            picked = False
            # the practice game: pass every talk turn, never place the meeting
            while app.current_step == "game:0":
                await wait_for(pilot, lambda: is_waiting(app) or app.current_step != "game:0", timeout=PATIENCE,
                               what="a turn")
                s = app.screen
                if isinstance(s, DecisionScreen) and s.decision and not picked and s.plan.target is None:
                    await pilot.press("s")
                    await wait_for(pilot, lambda: "Pick a slot for the meeting first" in screen_text(app),
                                   what="the participant's words")
                    picked = True
                    assert "schedule action" not in screen_text(app)
                    await wait_for(pilot, lambda: not isinstance(app.screen, DecisionScreen), timeout=PATIENCE,
                                   what="the decision to run out")
                elif isinstance(s, GameScreen) and s.pending is not None and not s.pending.done:
                    await pilot.press("e")
                elif not isinstance(s, (GameScreen, DecisionScreen)):
                    break
                await asyncio.sleep(0.05)
            seen: list[str] = []
            while not app.finished:
                await wait_for(pilot, lambda: is_waiting(app) or app.finished, timeout=PATIENCE, what="the next step")
                if app.finished:
                    break
                if isinstance(app.screen, ThanksScreen):
                    text = screen_text(app)
                    assert "You earned" in text and "£" in text
                    # the bonus counts the participant's own meetings (a game's end counts them all)
                    assert " of your meetings scheduled)" in " ".join(text.split())
                    assert f"https://pool.example/done?cc={app.code}" in text
                await step_by_keys(pilot, app, seen)
        assert picked, "no decision without a preselected slot came up"
        events = await store.load_events((await app.runner.db.steps("P1"))[4]["game_id"])
        notes = [e for e in events if e["type"] == "human_input" and e["data"].get("timed_out")
                 and e["data"].get("request") == "decide"]
        assert notes and {n["data"]["timeout_outcome"] for n in notes} == {"no_move"}
        assert (await app.runner.db.participant("P1"))["pool_id"] == "pool-77"


async def test_a_blinded_game_in_the_phrasebooks_words(tmp_path):
    """phrasebook = "scripted": the partners' messages and the participant's own quick actions
    read as a person writes, tagged as a person tags them; no protocol wording on screen."""
    study = study_file(tmp_path, extra={'cost = "task"': 'cost = "task"\nphrasebook = "scripted"',
                                        "decision_seconds = 120": "decision_seconds = 15"})
    tags = ("⟨question⟩", "⟨answer⟩", "⟨proposal⟩", "⟨agreement⟩")
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P1", store=store, base=tmp_path)
        async with app.run_test(size=(160, 50)) as pilot:
            await to_first_game(pilot, app)
            assert app.seat_model.voice is not None
            sent = False
            while not any(t in screen_text(app) for t in tags) or not sent:
                await wait_for(pilot, lambda: is_waiting(app) or any(t in screen_text(app) for t in tags),
                               timeout=PATIENCE, what="a turn or a tagged message")
                s = app.screen
                if isinstance(s, GameScreen) and s.pending is not None and not s.pending.done:
                    if app.seat_model.seat in app.seat_model.participants:
                        await pilot.press("r")  # ask the others' costs: a quick action
                        sent = sent or bool(app.seat_model.outbox)
                    await pilot.press("e")
                await asyncio.sleep(0.05)
            text = screen_text(app)
            for protocol_words in ("asks your costs", "costs for meeting", "PENDING", "IMPOSSIBLE",
                                   "Decision for meeting", "⟨cost_request⟩", "⟨costs⟩", "⟨decision⟩", "⟨reply⟩"):
                assert protocol_words not in text, text
            mine = [line for line in text.splitlines() if "you →" in line]
            assert mine and not any("meeting M" in line or "Agent" in line.split(":", 1)[-1] for line in mine), mine
            await pilot.press("ctrl+q")
