"""Issue 30 by keys: what a participant does at the screens can neither reset nor blur the
study's data — a wrong quiz answer and ctrl+q keep the try; a queued and a half-typed message
survive ctrl+q (drafts.csv) and the turn cut short is timed (partial); a blank belief cell is
drawn apart from a typed 0 and stored blank; ctrl+q at consent is a decline."""

from __future__ import annotations

import csv

from textual.app import App

from calbench_tui.app import screen_text
from calbench_tui.screens.study_beliefs import BeliefGridScreen
from calbench_tui.screens.study_steps import GoodbyeScreen, QuestionnaireScreen, QuizScreen, StudyTextScreen
from calbench_tui.study_app import make_study_app
from lab.study.export import export_study
from lab.study.seat import BeliefRequest
from saves.store import Store

from .helpers import PATIENCE, wait_for, wait_painted
from .test_study_interrupted import to_my_turn
from .test_study_run import is_waiting, small_study, step_by_keys

QUEUED = "I can do slot 3"
TYPED = "and maybe slot"


def _limited(tmp_path, tries: int = 2):
    study = small_study(tmp_path)
    p = tmp_path / "study.toml"
    expl = 'explanation = "Everyone in the meeting must place it in the same slot in the same round."'
    p.write_text(p.read_text().replace(expl, expl + f"\nmax_attempts = {tries}"))
    from lab.study.model import load_study

    return load_study(p)


async def _to_quiz(pilot, app):
    seen: list[str] = []
    while not isinstance(app.screen, QuizScreen):
        await wait_for(pilot, lambda: is_waiting(app) or app.error, timeout=PATIENCE, what="the next step")
        assert not app.error, app.error
        if isinstance(app.screen, QuizScreen):
            break
        await step_by_keys(pilot, app, seen)


async def test_wrong_quiz_answer_ctrl_q_and_the_same_command_is_try_2_and_a_second_wrong_screens_out(tmp_path):
    study = _limited(tmp_path)
    q = study.quiz[0]
    wrong = str((q.answer + 1) % len(q.choices) + 1)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P001", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await _to_quiz(pilot, app)
            # the quiz says up front that tries are limited
            await wait_painted(pilot, "try 1 of 2", "Tries are limited: 2 for this question", flat=True)
            await pilot.press(wrong)
            await wait_painted(pilot, "Not quite", "try 2 of 2")
            await pilot.press("ctrl+q")
        app2 = make_study_app(study, participant="P001", store=store, base=tmp_path)
        async with app2.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app2.screen, QuizScreen), timeout=PATIENCE, what="the quiz")
            await wait_painted(pilot, "question 1 of 2", "try 2 of 2", "1 left", flat=True)
            await pilot.press(wrong)
            await wait_for(pilot, lambda: isinstance(app2.screen, GoodbyeScreen), timeout=PATIENCE,
                           what="the goodbye of a participant screened out")
            await pilot.press("enter")
        assert app2.left == "screened_out"
        quiz = [(a["item"], a["attempt"], a["correct"]) for a in await app2.runner.db.answers("P001")
                if a["questionnaire"] == "quiz"]
        assert quiz == [("0", 1, 0), ("0", 2, 0)]


async def test_a_written_answer_half_typed_survives_ctrl_q_and_is_back_in_its_box(tmp_path):
    small_study(tmp_path)
    p = tmp_path / "study.toml"
    first = '{ id = "experience", text = "How often do you schedule meetings with others?", type = "choice", '
    assert first in p.read_text()
    p.write_text(p.read_text().replace(first, '{ id = "why", text = "What makes scheduling hard for you?", '
                                              'type = "text" },\n  ' + first))
    from lab.study.model import load_study

    study = load_study(p)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P004", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            seen: list[str] = []
            while not isinstance(app.screen, QuestionnaireScreen):
                await wait_for(pilot, lambda: is_waiting(app) or app.error, timeout=PATIENCE, what="the next step")
                assert not app.error, app.error
                if not isinstance(app.screen, QuestionnaireScreen):
                    await step_by_keys(pilot, app, seen)
            await wait_painted(pilot, "What makes scheduling hard for you?")
            await pilot.press(*"Too many time zones")
            await wait_painted(pilot, "Too many time zones")
            await pilot.press("ctrl+q")
        db = app.runner.db
        assert [(d["item"], d["text"]) for d in await db.answer_drafts("P004")] == [("why", "Too many time zones")]
        app2 = make_study_app(study, participant="P004", store=store, base=tmp_path)
        async with app2.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app2.screen, QuestionnaireScreen), timeout=PATIENCE,
                           what="the questionnaire again")
            await wait_painted(pilot, "What makes scheduling hard for you?", "Too many time zones")
            box = app2.screen.query_one("#study-input")
            app2.screen.set_focus(None)  # the focus leaves the box and comes back (a click, a tab)
            box.focus()
            await pilot.pause()
            await pilot.press(*" and holidays", "enter")
            await wait_painted(pilot, "How often do you schedule meetings with others?")
            await pilot.press("ctrl+q")
        answers = {a["item"]: a["response"] for a in await db.answers("P004") if a["questionnaire"] == "pre"}
        assert answers == {"why": "Too many time zones and holidays"}
        assert await db.answer_drafts("P004") == []


async def test_ctrl_q_at_consent_is_a_decline(tmp_path):
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P002", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, StudyTextScreen) and app.screen.consent,
                           timeout=PATIENCE, what="the consent screen")
            await wait_painted(pilot, "ctrl+q", "records that you do not take part", flat=True)
            await pilot.press("ctrl+q")
        assert app.left == "declined"
        from saves.study import StudyStore

        row = await StudyStore(store, study.name).participant("P002")
        assert row["state"] == "declined"


async def test_ctrl_q_at_consent_still_shows_the_pools_code_for_a_decline(tmp_path):
    """A pool participant who leaves at consent by ctrl+q needs the pool's code for it ([pool.declined]):
    the goodbye screen shows it (without a code or link the app closes at once, as above)."""
    small_study(tmp_path)
    p = tmp_path / "study.toml"
    p.write_text(p.read_text() + '\n[pool.declined]\ncode = "C1NOCONSENT"\n'
                 'return_url = "https://pool.example/back?cc={code}"\n')
    from lab.study.model import load_study

    study = load_study(p)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P002", store=store, base=tmp_path, pool_id="5f3c")
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, StudyTextScreen) and app.screen.consent,
                           timeout=PATIENCE, what="the consent screen")
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: isinstance(app.screen, GoodbyeScreen), timeout=PATIENCE,
                           what="the goodbye screen")
            await wait_painted(pilot, "C1NOCONSENT", "https://pool.example/back?cc=C1NOCONSENT", flat=True)
            await pilot.press("enter")
        assert app.left == "declined" and app.code == "C1NOCONSENT"


async def test_queued_and_typed_words_survive_ctrl_q_and_the_turn_cut_short_is_timed(tmp_path):
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P003", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await to_my_turn(pilot, app)
            gs = app.screen
            rnd, turn = gs.round, gs.pending.obs.turn
            await pilot.press("i", *QUEUED, "enter")
            await wait_for(pilot, lambda: gs.model.outbox, timeout=PATIENCE, what="the message queued")
            await pilot.press(*TYPED)
            gid = app.game_id
            await pilot.press("ctrl+q")
        db = app.runner.db
        drafts = [(d["round"], d["kind"], d["text"]) for d in await db.drafts("P003")]
        assert drafts == [(rnd, "queued", QUEUED), (rnd, "composer", TYPED)]
        partial = [t for t in await db.timings("P003") if t["partial"]]
        assert [(t["game_id"], t["phase"], t["round"], t["turn"]) for t in partial] == [(gid, "talk", rnd, turn)]
        await export_study(study, store, tmp_path / "data", reveal=True)
    with open(tmp_path / "data" / "drafts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["round"], r["kind"], r["text"], r["simulated"]) for r in rows] == [
        (str(rnd + 1), "queued", QUEUED, "0"), (str(rnd + 1), "composer", TYPED, "0")]
    with open(tmp_path / "data" / "timings.csv", newline="") as fh:
        cut = [r for r in csv.DictReader(fh) if r["partial"] == "1"]
    assert len(cut) == 1 and cut[0]["round"] == str(rnd + 1)


async def _queue_and_type(pilot, app):
    await to_my_turn(pilot, app)
    gs = app.screen
    await pilot.press("i", *QUEUED, "enter")
    await wait_for(pilot, lambda: gs.model.outbox, timeout=PATIENCE, what="the message queued")
    await pilot.press(*TYPED)
    return gs.round, app.game_id


async def test_a_closed_browser_tab_keeps_the_queued_and_typed_words(tmp_path, monkeypatch):
    """A closed tab (or a stopped host) ends the served app by textual-serve's "quit", which the
    web driver turns into ExitApp (SIGTERM too) — not ctrl+q: the drafts are kept all the same,
    by the exit alone (the live copy's timer is set out of reach here)."""
    from textual.messages import ExitApp

    import calbench_tui.study_app as study_app

    monkeypatch.setattr(study_app, "DRAFT_SAVE_EVERY", 3600.0)
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P004", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            rnd, gid = await _queue_and_type(pilot, app)
            app.post_message(ExitApp())  # what the web driver does when the page's socket closes
            await wait_for(pilot, lambda: not app.is_running, timeout=PATIENCE, what="the app to end")
        drafts = [(d["game_id"], d["round"], d["kind"], d["text"]) for d in await app.runner.db.drafts("P004")]
        assert drafts == [(gid, rnd, "queued", QUEUED), (gid, rnd, "composer", TYPED)]


async def test_drafts_are_saved_while_typed_and_a_sent_message_leaves_the_copy(tmp_path):
    """The copy is live: in the database while the participant is still at the game (a killed
    process loses nothing older than DRAFT_SAVE_EVERY), rewritten, never duplicated, and a
    message sent is no draft any more."""
    study = small_study(tmp_path)
    async with await Store.open(tmp_path / "s.db") as store:
        app = make_study_app(study, participant="P005", store=store, base=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            rnd, gid = await _queue_and_type(pilot, app)
            db = app.runner.db
            want = [(rnd, "queued", QUEUED), (rnd, "composer", TYPED)]
            got: list = []

            async def saved():
                got[:] = [(d["round"], d["kind"], d["text"]) for d in await db.drafts("P005")]
                return got == want

            for _ in range(int(PATIENCE * 10)):
                if await saved():
                    break
                await pilot.pause(0.1)
            assert got == want, got  # saved with the app still running
            gs = app.screen
            await pilot.press(*["backspace"] * len(TYPED), "escape", "e")  # the queued message is sent
            await wait_for(pilot, lambda: not gs.model.outbox, timeout=PATIENCE, what="the message sent")
            for _ in range(int(PATIENCE * 10)):
                if not await db.drafts("P005"):
                    break
                await pilot.pause(0.1)
            assert await db.drafts("P005") == []
            await pilot.press("ctrl+q")
        assert await db.drafts("P005") == []


class _View:
    def __init__(self, cal):
        self.calendar = cal
        self.seat = 0
        self.num_agents = 3
        self.num_slots = len(cal)


def _grid_app(req):
    class Host(App):
        result = None

        def on_mount(self):
            self.push_screen(BeliefGridScreen(req), callback=lambda r: setattr(self, "result", r))

    return Host()


async def test_the_grid_draws_a_typed_0_apart_from_a_blank_and_keeps_the_blank_blank():
    req = BeliefRequest(round=0, seat=0, num_slots=4, targets=(1, 2), view=_View((None,) * 4), messages=())
    app = _grid_app(req)
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_painted(pilot, "Agent 1", "Agent 2")
        text = screen_text(app)
        assert "seat 1" not in text  # the seats are Agent N here too
        await pilot.press("4", "5")  # slot 0: a typed 0 (no idea), slot 1: +1; slots 2, 3 left blank
        await wait_painted(pilot, "+1")
        row = next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("Agent 1"))
        assert row.split()[2:6] == ["0", "+1", "·", "·"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.result is not None, what="the grid submitted")
    assert app.result == {1: [0, 1, None, None], 2: [None] * 4}


async def test_a_grid_about_a_round_the_participant_only_watched_says_so():
    req = BeliefRequest(round=1, seat=0, num_slots=3, targets=(1, 2), view=_View((None,) * 3), messages=(),
                        took_part=False)
    app = _grid_app(req)
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_painted(pilot, "You were not in round 2's meeting", flat=True)


async def test_help_in_a_study_game_counts_the_tasks_seats_and_promises_no_figures_the_study_hides():
    from calbench_tui.screens.help import HelpScreen
    from engine.generate import generate_scenario

    task = generate_scenario(1, num_agents=4, num_slots=8, num_meetings=2, participants_per_meeting=2)

    class Host(App):
        game_task = task
        study = object()  # a study's app
        blind_partners = True

        def on_mount(self):
            self.push_screen(HelpScreen())

    app = Host()
    async with app.run_test(size=(120, 60)) as pilot:
        text = await wait_painted(pilot, "Four agents each hold a private calendar",
                                  "how many of its meetings were scheduled", flat=True)
        flat = " ".join(text.split())
        assert "Five agents" not in flat and "VPS" not in flat and "best possible schedule" not in flat


def test_end_screen_has_one_yardstick_the_tasks_optimum_and_explains_failed_meetings():
    """Issue 30 item 10: with meetings failed the headline said "the best schedule costs 3, your
    share 0" (the oracle re-solved on the scheduled meetings) while the replay and the task say
    6 and 2; a failed meeting still showed a "best" slot."""
    import asyncio

    from rich.console import Console

    from calbench_tui.screens.end import EndScreen
    from engine.game import GameConfig, run_game
    from engine.generate import generate_scenario
    from engine.metrics import oracle_cached
    from personas.registry import make_personas

    task = generate_scenario(1)
    seats = make_personas("imap", task.num_agents)
    seats[0] = make_personas("passive", 1)[0]  # never schedules: its meetings fail
    trace = asyncio.run(run_game(task, seats, GameConfig(deterministic=True))).trace
    m = trace["metrics"]
    opt = oracle_cached(task, None)
    assert m["meetings_scheduled"] < m["meetings_total"]
    assert sum(r["oracle_cost"] for r in m["per_seat"]) != opt.cost_levels  # the two yardsticks differ here
    screen = EndScreen(trace, seat=0)
    head = " ".join(screen._headline().plain.split())
    assert f"costs {opt.cost_levels}" in head and f"your share in the best schedule {opt.agent_costs_levels[0]}" in head
    failed = [mt.id for mt in task.meetings if mt.id not in set(m["scheduled_meeting_ids"])]
    assert f"M{failed[0]}" in head and "no best slot" in head
    c = Console(width=160, record=True)
    c.print(screen._schedules())
    rows = {line.split()[0]: line for line in c.export_text().splitlines() if line.strip().startswith("M")}
    for mid in failed:
        assert rows[f"M{mid}"].rstrip().endswith("– (failed)")
    held = [mt.id for mt in task.meetings if mt.id in set(m["scheduled_meeting_ids"])]
    assert held and all("slot" in rows[f"M{mid}"].split("slot", 1)[1] for mid in held)


def test_replay_and_end_screen_explain_a_negative_vps():
    from calbench_tui.screens.end import EndScreen
    from calbench_tui.screens.replay import HOW_TO_READ

    vps = dict(HOW_TO_READ)["VPS"]
    assert "negative" in vps and "back toward" in vps
    seats = [{"cost": 0, "oracle_cost": 0, "excess": 0, "meetings_scheduled": 1, "meetings_assigned": 1,
              "vps": 17.8, "vps_typed": 18.5, "vps_free_text": -0.7}]
    trace = {"metrics": {"per_seat": seats, "excess": 0, "meetings_scheduled": 1, "meetings_total": 1, "vps": 17.8}}
    head = " ".join(EndScreen(trace, seat=0)._headline().plain.split())
    assert "A part below 0 is a message that moved a guess back toward" in head
