"""``calbench study run``: one participant walked through every step by keys — consent,
instructions, quiz (a wrong answer explained, then right), the before-questionnaire, a
practice game, two assigned games on the ordinary game screen with a visible countdown,
belief grids, after-game questionnaires, the last questionnaire and the completion code;
then ctrl+q in the middle of a game and a second run that resumes at that step."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from calbench_tui.app import screen_text
from calbench_tui.screens.decision import DecisionScreen
from calbench_tui.screens.game import GameScreen
from calbench_tui.screens.study_beliefs import BeliefGridScreen
from calbench_tui.screens.study_steps import (NoticeScreen, QuestionnaireScreen, QuizScreen, StudyTextScreen,
                                              ThanksScreen)
from calbench_tui.study_app import make_study_app
from calbench_tui.widgets.study_countdown import Countdown
from engine.generate import generate_scenario
from lab.study.example import EXAMPLE
from lab.study.model import load_study
from saves.store import Store

from .helpers import PATIENCE, decide, speak_turn, wait_for, wait_painted


def small_study(tmp_path, *, talk_seconds: str = "90") -> object:
    """The example study on small tasks (4 seats, 8 slots, 2 meetings) with scripted partners."""
    rows = [generate_scenario(seed, num_agents=4, num_slots=8, num_meetings=2, participants_per_meeting=2,
                              blocked=1).to_row() for seed in (1, 2, 3)]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = (EXAMPLE.replace('partners = ["llm:mock-model", "imap", "imap", "imap"]', 'partners = "imap"')
            .replace('pool = ["seed:100", "seed:101", "seed:102", "seed:103"]', 'pool = "tasks.jsonl:1"')
            .replace('practice = "seed:99"', 'practice = "tasks.jsonl:0"')
            .replace("talk_seconds = 90", f"talk_seconds = {talk_seconds}"))
    text = text.replace('pool = "tasks.jsonl:1"', 'pool = ["tasks.jsonl:1", "tasks.jsonl:2"]')
    p = tmp_path / "study.toml"
    p.write_text(text)
    return load_study(p)


def is_waiting(app) -> bool:
    s = app.screen
    if isinstance(s, (StudyTextScreen, QuizScreen, QuestionnaireScreen, BeliefGridScreen, ThanksScreen,
                      NoticeScreen, DecisionScreen)):
        return True
    return isinstance(s, GameScreen) and s.pending is not None and not s.pending.done


async def step_by_keys(pilot, app, seen: list[str], *, quiz_wrong_first: bool = True) -> None:
    s = app.screen
    if isinstance(s, StudyTextScreen):
        seen.append("consent" if s.consent else "instructions")
        await pilot.press("y" if s.consent else "enter")
    elif isinstance(s, QuizScreen):
        q = s.questions[s.index]
        if quiz_wrong_first and s.index == 0 and s.attempt == 1:
            seen.append("quiz")
            await pilot.press(str((q.answer + 1) % len(q.choices) + 1))
            await wait_painted(pilot, "Not quite", q.explanation[:30])
        else:
            await pilot.press(str(q.answer + 1))
    elif isinstance(s, QuestionnaireScreen):
        if s.index == 0:
            seen.append(f"questionnaire:{s.q.id}")
        it = s.item
        if it.type == "text":
            await pilot.press(*"fine", "enter")
        else:
            await pilot.press("2")
    elif isinstance(s, BeliefGridScreen):
        seen.append("beliefs")
        await pilot.press("7", "1", "4", "right", "plus", "enter")
    elif isinstance(s, NoticeScreen):
        seen.append("game over")
        await pilot.press("enter")
    elif isinstance(s, ThanksScreen):
        seen.append("thanks")
        assert app.code in screen_text(app)
        await pilot.press("enter")
    elif isinstance(s, DecisionScreen):
        await decide(pilot, app)
    elif isinstance(s, GameScreen):
        if "game" not in seen[-1:]:
            seen.append("game")
        assert s.query_one(Countdown).shown.strip(), "the countdown bar is empty"
        await speak_turn(pilot, app)


async def test_one_participant_through_every_step_by_keys(tmp_path):
    study = small_study(tmp_path)
    seen: list[str] = []
    countdowns: list[str] = []
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P001", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            while not app.finished:
                await wait_for(pilot, lambda: is_waiting(app) or app.finished or app.error, timeout=PATIENCE,
                               what="the next step")
                if app.error:
                    raise AssertionError(app.error)
                if app.finished:
                    break
                if isinstance(app.screen, GameScreen):
                    countdowns.append(app.screen.query_one(Countdown).shown)
                await step_by_keys(pilot, app, seen)
                await asyncio.sleep(0)
        assert app.finished and app.code and app.code.startswith("CB-")
    order = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert order[:5] == ["consent", "instructions", "quiz", "questionnaire:pre", "game"]
    assert order.count("game over") == 3 and order.count("questionnaire:game") == 2
    assert "beliefs" in order and order[-2:] == ["questionnaire:post", "thanks"]
    assert any("left for your talk turn" in c for c in countdowns)

    con = sqlite3.connect(tmp_path / "s.db")
    assert con.execute("SELECT status, completion_code, simulated FROM study_participants").fetchall() == \
        [("completed", app.code, 0)]
    assert con.execute("SELECT COUNT(*) FROM study_steps WHERE completed_at IS NULL").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM games WHERE status = 'completed'").fetchone()[0] == 3
    quiz = con.execute("SELECT item, attempt, correct FROM study_answers WHERE questionnaire = 'quiz' "
                       "ORDER BY item, attempt").fetchall()
    assert quiz[:2] == [("0", 1, 0), ("0", 2, 1)]  # the retry is counted
    beliefs = con.execute("SELECT belief FROM study_beliefs ORDER BY round, target, slot").fetchall()
    # 7 1 4 typed, right (slot 3 left blank: stored missing, not 0), plus
    assert [b[0] for b in beliefs[:5]] == [3, -3, 0, None, 1]
    games = con.execute("SELECT agents, config FROM games").fetchall()
    assert all(json.loads(c)["participant"] == "P001" and not json.loads(c)["simulated"] for _, c in games)
    assert con.execute("SELECT COUNT(*) FROM study_timings WHERE phase = 'talk'").fetchone()[0] > 0
    con.close()


async def test_ctrl_q_in_a_game_then_the_same_command_resumes_there(tmp_path):
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P002", store=store, base=tmp_path)
        seen: list[str] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while True:
                await wait_for(pilot, lambda: is_waiting(app), timeout=PATIENCE, what="the next step")
                if isinstance(app.screen, GameScreen) and app.current_step == "game:1":
                    break
                await step_by_keys(pilot, app, seen)
            await pilot.press("ctrl+q")
        assert not app.finished and app.current_step == "game:1"
        steps = await app.runner.db.steps("P002")
        open_step = next(s for s in steps if not s["completed_at"])
        assert open_step["name"] == "game:1"
        gid = open_step["game_id"]
        async with store._db.execute("SELECT status FROM games WHERE game_id = ?", (gid,)) as cur:
            assert (await cur.fetchone())[0] == "stopped"

        app2 = make_study_app(study, participant="P002", store=store, base=tmp_path)
        seen2: list[str] = []
        async with app2.run_test(size=(120, 40)) as pilot:
            while not app2.finished:
                await wait_for(pilot, lambda: is_waiting(app2) or app2.finished, timeout=PATIENCE, what="the next step")
                if app2.finished:
                    break
                await step_by_keys(pilot, app2, seen2)
        assert seen2[0] == "game"  # no consent, quiz or practice again
        assert app2.finished
        steps = await app2.runner.db.steps("P002")
        assert next(s for s in steps if s["name"] == "game:1")["game_id"] == gid
        async with store._db.execute("SELECT status FROM games WHERE game_id = ?", (gid,)) as cur:
            assert (await cur.fetchone())[0] == "completed"


async def test_a_participant_who_does_nothing_in_a_game_times_out_visibly(tmp_path):
    """Short limits: the countdown shows, the turn ends and the batch builder closes by itself,
    a notice says so, and every timeout is recorded; the study goes on to the next step.  (The
    talk limit leaves the countdown, which looks five times a second, several looks on a busy
    machine: at 0.6 s a loaded CI run once saw the talk turn end before any look.)"""
    study = small_study(tmp_path, talk_seconds="1.5")
    study = study.model_copy(update={"timing": study.timing.model_copy(update={"decision_seconds": 0.6})})
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P003", store=store, base=tmp_path)
        seen: list[str] = []
        shown: list[str] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while True:  # by keys up to the practice game; never a key in the game itself
                await wait_for(pilot, lambda: is_waiting(app) or isinstance(app.screen, GameScreen), timeout=PATIENCE,
                               what="the next step")
                if isinstance(app.screen, GameScreen):
                    break
                await step_by_keys(pilot, app, seen)
            assert app.current_step == "game:0"
            # hands off the keyboard for the whole practice game
            while app.current_step == "game:0":
                if isinstance(app.screen, (GameScreen, DecisionScreen)):
                    shown.append(app.screen.query_one(Countdown).shown if app.screen.query(Countdown) else "")
                if isinstance(app.screen, NoticeScreen):
                    break
                await asyncio.sleep(0.05)
            await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen), timeout=PATIENCE, what="the game's end")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.current_step == "game:1", timeout=PATIENCE, what="the next game")
            await pilot.press("ctrl+q")
    assert any("left for your talk turn" in s for s in shown), sorted(set(shown))
    assert any("timeouts so far" in s for s in shown)
    con = sqlite3.connect(tmp_path / "s.db")
    rows = con.execute("SELECT phase, timed_out FROM study_timings WHERE game_id = (SELECT game_id FROM study_steps "
                       "WHERE participant = 'P003' AND name = 'game:0')").fetchall()
    assert rows and all(t == 1 for _, t in rows) and {p for p, _ in rows} >= {"talk", "decision"}
    assert con.execute("SELECT status FROM games WHERE game_id = (SELECT game_id FROM study_steps "
                       "WHERE participant = 'P003' AND name = 'game:0')").fetchone()[0] == "completed"
    con.close()


def test_run_refuses_reserved_ids_and_needs_a_terminal(cli, tmp_path):
    small_study(tmp_path)
    path = str(tmp_path / "study.toml")
    rc, out, err = cli("study", "run", path, "--participant", "sim-001", "--db", str(tmp_path / "s.db"))
    assert rc == 2 and "reserved" not in out and "simulated participants" in err
    rc, out, err = cli("study", "run", path, "--participant", "P 1", "--db", str(tmp_path / "s.db"))
    assert rc == 2 and "letters, digits" in err
    rc, out, err = cli("study", "run", path, "--participant", "P1", "--db", str(tmp_path / "s.db"))
    assert rc == 2 and "needs an interactive terminal" in err and "Traceback" not in err


async def test_a_participant_who_finished_gets_the_same_code_again(tmp_path):
    from lab.study.runner import StudyRunner, completion_code
    from lab.study.simulate import SimulatedDriver

    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        drv = SimulatedDriver(study, "P9")
        drv.simulated = False  # a scripted stand-in for a person who already went through
        await StudyRunner(study, store, "P9", drv).run()
        app = make_study_app(study, participant="P9", store=store, base=tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.finished, timeout=PATIENCE, what="the app to see it is done")
        assert app.code == completion_code(study, "P9")
