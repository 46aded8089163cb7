"""``calbench study run``: one participant's whole study in the terminal.

The app is the terminal *driver* of ``lab.study.runner.StudyRunner``: the runner decides
which step comes next and records it; this app shows each step and returns the person's
answer.  Steps: consent → instructions → quiz → questionnaires → practice → the assigned
games (the ordinary game screen and batch builder, with a countdown bar for the time
limits) → after-game questionnaires → belief grids after the chosen rounds →
questionnaires → thank-you with the completion code.

It extends :class:`calbench_tui.app.CalBenchApp` only to reuse the game screens' wiring
(human requests, events, the batch builder); the game itself is started by the runner
through ``lab.session.run_session``, in the app's ``game`` worker group, so ``ctrl+q``
cancels it the same way: the game is marked stopped, the step stays open, and running the
same command again resumes there.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import messages as textual_messages
from textual import on, work

from engine.phrasebook import Phrasebook
from lab.study.model import Study
from personas.human import HumanPersona
from personas.seat_model import SeatModel

from .app import CalBenchApp
from .messages import AppSink
from .screens.game import GameScreen
from .screens.study_beliefs import BeliefGridScreen
from .screens.study_steps import (GoodbyeScreen, NoticeScreen, QuestionnaireScreen, QuizScreen, StudyTextScreen,
                                  ThanksScreen)
from .settings import Settings
from .widgets.study_countdown import Countdown

__all__ = ["StudyApp", "make_study_app"]

DRAFT_SAVE_EVERY = 0.5  # seconds between two looks at what is written and not sent (saved when it changed)


class TerminalDriver:
    """The runner's driver: each step is a screen, awaited until dismissed."""

    simulated = False

    def __init__(self, app: "StudyApp") -> None:
        self.app = app

    async def _show(self, screen) -> Any:
        return await self.app.push_screen_wait(screen)

    async def consent(self, text: str) -> bool:
        return await self._show(StudyTextScreen(text, title="Consent", consent=True))

    async def instructions(self, text: str) -> None:
        await self._show(StudyTextScreen(text, title="Instructions"))

    async def quiz(self, questions, *, prior=(), record=None) -> list[dict[str, Any]]:
        return await self._show(QuizScreen(list(questions), prior=list(prior), record=record))

    async def questionnaire(self, q, *, game=None, prior=(), record=None, drafts=None,
                            keep=None) -> list[dict[str, Any]]:
        sub = ""
        if game is not None:
            sub = "about the practice game" if game.game.practice else f"about game {game.game.index}"
        return await self._show(QuestionnaireScreen(q, subtitle=sub, prior=list(prior), record=record,
                                                    drafts=drafts, keep=keep))

    async def beliefs(self, ctx, req) -> dict[int, list[int]]:
        return await self._show(BeliefGridScreen(req, title=self._game_title(ctx)))

    def human_persona(self, ctx) -> HumanPersona:
        self.app.human = HumanPersona(self.app._on_human_request)
        return self.app.human

    def draft(self):
        """The batch on screen when a decision runs out of time: submitted if it is valid."""
        ds = self.app.decision_screen
        return None if ds is None else ds.draft()

    def listeners(self, ctx):
        return [AppSink(self.app, ctx.game.seat)]

    def _game_title(self, ctx) -> str:
        g = ctx.game
        if g.practice:
            return "Practice game"
        total = sum(1 for x in self.app.runner.games if not x.practice)
        return f"Game {g.index if self.app.runner.games[0].practice else g.index + 1} of {total}"

    async def game_started(self, ctx) -> None:
        app = self.app
        g, task = ctx.game, ctx.task
        app.settings = app.settings.with_(seat=g.seat, channels=ctx.condition.channel_names())
        app.game_task = task
        app.game_id = ctx.game_id
        app.status = "running"
        # blinded unless the condition says otherwise: partners are "Agent N" on every screen
        app.blind_partners = not ctx.condition.reveal_partners
        app.seat_model = SeatModel(g.seat, ctx.condition.channel_names(), task.num_agents,
                                   num_rounds=len(task.meetings))
        if ctx.condition.phrasebook != "off":  # the quick actions in the phrasebook's words (engine/phrasebook.py)
            app.seat_model.voice = Phrasebook(ctx.game_id)
        gs = GameScreen(app.seat_model, blind=app.blind_partners, participant_words=True)
        app.game_screen = gs
        await app.push_screen(gs)
        app.countdown_seat = ctx.seat_persona
        await gs.mount(Countdown(lambda: app.countdown_seat, title=self._game_title(ctx)), before=0)
        if g.practice:
            gs.note(Text("This is a practice game: it does not count.", style="bold"))

    async def game_over(self, ctx, outcome) -> None:
        app = self.app
        await app.settle_drafts(completed=outcome.status == "completed")
        app._close_batch_builder()
        app.status = outcome.status
        app.countdown_seat = None
        res = outcome.result
        if outcome.status == "completed" and res is not None:
            m = res.trace.get("metrics") or {}
            text = Text(f"\n{self._game_title(ctx)} is over: {m.get('meetings_scheduled', '?')} of "
                        f"{m.get('meetings_total', '?')} meetings were scheduled.\n\nPress enter to continue.")
        elif app.blind_partners:  # the error text may name a partner's model or endpoint
            text = Text("\nThe game stopped because of a technical problem. It is recorded; "
                        "press enter to continue with the study.")
        else:
            text = Text(f"\nThe game stopped because of a problem ({outcome.error}). It is recorded; "
                        "press enter to continue with the study.")
        while app.screen is not app.game_screen and len(app.screen_stack) > 1:
            app.pop_screen()
        if app.screen is app.game_screen:
            app.pop_screen()
        app.game_screen = None
        await self._show(NoticeScreen("Game over", text))

    def timed_out(self, phase: str, outcome: str | None) -> None:
        """A call of the participant's ran out of time: say what happened, in their words."""
        from .wording import TIMEOUT_WORDS

        gs = self.app.game_screen
        app_model = self.app.seat_model
        words = TIMEOUT_WORDS.get((phase, outcome or ""))
        if gs is None or not words:
            return
        if phase == "decision" and app_model is not None:
            app_model.decision_timed_out()
        gs.note(Text(words, style="bold"))

    async def goodbye(self, outcome: str | None, *, code: str | None = None, return_link: str | None = None,
                      **_: Any) -> None:
        """The participant declined consent, was screened out by the quiz or is over the pool's time
        limit: the end, politely, with the pool's code and return link for that outcome when the
        study file gives them ([pool.declined] ...)."""
        self.app.left = outcome
        self.app.code = code
        self.app.return_link = return_link
        if self.app.leaving and not (code or return_link):
            return  # ctrl+q at consent: recorded; closed without another screen, unless the pool has a code for it
        await self._show(GoodbyeScreen(outcome or "declined", code=code, return_link=return_link))

    async def thanks(self, code: str, *, payment=None, return_link: str | None = None, pool_code: str | None = None,
                     **_: Any) -> None:
        code = pool_code or code  # the pool's own completion code, when [pool.completed] sets one
        self.app.code = code
        self.app.payment = payment
        self.app.return_link = return_link
        await self._show(ThanksScreen(code, payment=payment, return_link=return_link))


class StudyApp(CalBenchApp):
    """One participant (see the module docstring)."""

    def __init__(self, study: Study, *, participant: str, store: Any = None, store_path: str | None = None,
                 base: Path | None = None, settings: Settings | None = None, pool_id: str | None = None) -> None:
        super().__init__(settings=settings or Settings(seat=0, setup=False), store=store, store_path=store_path)
        self.study = study
        self.participant = participant
        self.base = base
        self.runner = None
        self.code: str | None = None
        self.finished = False
        self.current_step: str | None = None
        self.countdown_seat = None
        self.pool_id = pool_id  # the online pool's id for this participant (from the browser link)
        self.left: str | None = None  # declined | screened_out: the participant left for good
        self.leaving = False  # ctrl+q at consent: a decline, closed without the goodbye screen
        self.payment: dict | None = None
        self.return_link: str | None = None
        self.blind_partners = True  # partners are "Agent N" (the help says nothing of their protocol)
        self.participant_words = True  # the engine's rejections said in the participant's words
        # the live copy of what is written and not sent (docs/study-guide.md, "a live copy"): the rows of
        # this sitting in study_drafts, and what they hold (rewritten only when it changes)
        self._draft_ids: list[int] = []
        self._draft_copy: tuple[str, list[dict[str, Any]]] | None = None
        self._draft_lock = asyncio.Lock()
        self._signals: list[int] = []  # the signals this app turned into ExitApp (given back at the exit)

    async def on_mount(self, event) -> None:
        event.prevent_default()  # not the play app's mount (setup screen, a game of its own)
        if self.store is None and self.store_path:
            from saves.store import Store

            self.store = await Store.open(self.store_path)
            self._own_store = True
        self.title = self.study.study.title or self.study.name
        # a closed terminal (SIGHUP) or a stop (SIGTERM) ends the app as a closed browser tab
        # does: through ExitApp, so the last drafts are saved and the turn in progress timed
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, lambda: self.post_message(textual_messages.ExitApp()))
                self._signals.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, no signals here
                pass
        self.set_interval(DRAFT_SAVE_EVERY, self.save_drafts, name="drafts")
        self.run_study()

    @work(exclusive=True, group="game", exit_on_error=False)
    async def run_study(self) -> None:
        from lab.study.runner import StudyRunner

        def on_step(i: int, name: str) -> None:
            self.current_step = name

        self.runner = StudyRunner(self.study, self.store, self.participant, TerminalDriver(self), base=self.base,
                                  on_step=on_step)
        from lab.lease import Lease, LeaseHeld, participant_subject

        # One live session per participant (a second tab, terminal or server is refused in one
        # line; a session whose process is gone is taken over and resumes at its step).
        lease = Lease(self.store, participant_subject(self.study.name, self.participant), role="study run",
                      what=f"participant {self.participant}'s session")
        try:
            await lease.acquire()
        except LeaseHeld as exc:
            self.error = str(exc)
            self.exit(return_code=2)
            return
        try:
            await self._run_study_held()
        finally:
            await lease.release()

    async def _run_study_held(self) -> None:
        from lab.study.runner import QuizFailed

        try:
            row = await self.runner.enroll(pool_id=self.pool_id)
            self.code = row.get("completion_code")  # already finished: the code they were given
            if self.runner.design_changed:
                self.notify("The study file changed since this participant started; their stored "
                            "assignment and steps are kept.", severity="warning", timeout=10)
            step = self.runner.next_step()
            self.current_step = self.runner.steps[step]["name"] if step is not None else None
            await self.runner.run()
        except QuizFailed as exc:
            self.error = f"participant {self.participant} stopped: {exc}"
            self.exit(return_code=1)
            return
        except Exception as exc:  # a broken file or database: one line, never a traceback
            self.error = f"{type(exc).__name__}: {exc}"
            self.exit(return_code=2)
            return
        if self.runner.outcome is not None:  # declined or screened out: final, exit 0
            self.left = self.runner.outcome
        else:
            self.finished = True
        self.current_step = None
        self.exit(return_code=0)

    def unsent(self) -> list[dict[str, Any]]:
        """What the participant wrote in the game in play but had not sent: the queued messages
        (the outbox, sent at the end of their turn) and the composer's text (enter not pressed)."""
        m, gs = self.seat_model, self.game_screen
        if m is None or gs is None or self.status != "running":
            return []
        rnd = m.round if isinstance(m.round, int) and m.round >= 0 else None

        def to(msg) -> list[int]:
            if msg.to is not None:
                return [msg.to]
            seats = range(m.num_agents) if msg.type == "all_groupchat" else m.participants
            return [p for p in seats if p != m.seat]

        out = [{"round": rnd, "kind": "queued", "channel": msg.type, "text": msg.content, "recipients": to(msg)}
               for msg in m.outbox]
        typed = gs.typed()
        if typed.strip():
            out.append({"round": rnd, "kind": "composer", "channel": None, "text": typed, "recipients": []})
        return out

    async def save_drafts(self) -> None:
        """Bring the live copy of the unsent messages up to date (called every DRAFT_SAVE_EVERY
        seconds, and when the app ends, by any way).  Only while a game runs: a stopped game keeps
        the copy made before it stopped.  On a questionnaire, the written answer being typed is
        copied the same way (``QuestionnaireScreen.save_draft``)."""
        screen = self.screen_stack[-1] if self.screen_stack else None
        if isinstance(screen, QuestionnaireScreen):
            try:
                await screen.save_draft()
            except Exception:  # a store that cannot take it must not stop the study; tried again next time
                pass
        if self.runner is None or not self.game_id or self.status != "running":
            return
        async with self._draft_lock:
            if self.status != "running":
                return
            copy = (self.game_id, self.unsent())
            if copy == self._draft_copy:
                return
            try:
                self._draft_ids = await self.runner.db.replace_drafts(self.participant, copy[0], copy[1],
                                                                      self._draft_ids)
                self._draft_copy = copy
            except Exception:  # a store that cannot take it must not stop the game; tried again next time
                pass

    async def settle_drafts(self, *, completed: bool) -> None:
        """A game ended: completed, everything written was sent or belongs to a finished game (the
        live copy is dropped); otherwise (a stop, an error) the copy stays as the game left it."""
        async with self._draft_lock:
            if completed and self._draft_ids and self.runner is not None and self._draft_copy is not None:
                try:
                    await self.runner.db.replace_drafts(self.participant, self._draft_copy[0], [], self._draft_ids)
                except Exception:
                    pass
            self._draft_ids, self._draft_copy = [], None

    @on(textual_messages.ExitApp)
    async def _save_drafts_at_exit(self) -> None:
        """Every way the app ends passes here before the screens close (ctrl+q, a closed browser
        tab or a stopped host — textual-serve's "quit" —, SIGTERM, SIGHUP): the last copy."""
        await self.save_drafts()
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals = []

    def _unsent_now(self) -> None:
        """A participant's unsent words are kept as study data (``study_drafts``, :meth:`save_drafts`), not here."""
        return None

    async def action_quit_game(self) -> None:
        """ctrl+q: at consent it is a decline (recorded, final, as ``n``); in a game what the
        participant wrote but had not sent is stored first (drafts.csv), then the game stops as
        in the play app (the step stays open; the same command resumes)."""
        s = self.screen
        if isinstance(s, StudyTextScreen) and s.consent and self.runner is not None:
            self.leaving = True  # no goodbye screen (they asked to leave), unless it has the pool's code
            s.action_decline()
            return  # the runner records the decline and the app exits like after ``n``
        await self.save_drafts()  # before the game stops (then nothing is "running" to copy)
        await super().action_quit_game()

    def open_batch_builder(self, request) -> None:
        super().open_batch_builder(request)
        ds = self.decision_screen
        if ds is not None and self.countdown_seat is not None:
            ds.call_after_refresh(lambda: ds.mount(Countdown(lambda: self.countdown_seat, title="Decision"),
                                                   before=0) if ds.is_attached else None)


def make_study_app(study: Study, *, participant: str, store: Any = None, store_path: str | None = None,
                   base: Path | None = None, pool_id: str | None = None) -> StudyApp:
    return StudyApp(study, participant=participant, store=store, store_path=store_path, base=base, pool_id=pool_id)
