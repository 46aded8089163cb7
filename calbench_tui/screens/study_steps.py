"""The non-game screens of a study (``calbench study run``): consent, instructions, the
comprehension quiz, questionnaires and the thank-you screen.  Each is dismissed with its
result; the study app awaits them in order (``push_screen_wait``).  Keys only, no mouse
needed; every screen says which keys it takes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Markdown, Static

from ..widgets.keybar import KeyBar

_CSS = """
StudyTextScreen, QuizScreen, QuestionnaireScreen, ThanksScreen, GoodbyeScreen { align: center top; }
#study-body { width: 100%; max-width: 96; height: 1fr; padding: 1 2; }
#study-head { height: auto; padding: 0 2; background: $panel; text-style: bold; }
#study-feedback { height: auto; padding: 0 2; }
#study-input { margin: 0 2; }
"""


class StudyTextScreen(Screen):
    """Markdown to read; ``y`` agrees (consent) or ``enter`` continues; ``n`` declines (consent)."""

    DEFAULT_CSS = _CSS
    BINDINGS = [
        Binding("enter", "go", "Continue", id="study_continue"),
        Binding("y", "agree", "I agree", id="study_agree"),
        Binding("n", "decline", "I do not agree", id="study_decline"),
    ]

    def __init__(self, markdown: str, *, title: str, consent: bool = False) -> None:
        super().__init__()
        self.markdown = markdown
        self.title_text = title
        self.consent = consent

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="study-head")
        with VerticalScroll(id="study-body"):
            yield Markdown(self.markdown)
        yield KeyBar()

    def check_action(self, action: str, parameters) -> bool | None:
        if action in ("agree", "decline"):
            return self.consent
        if action == "go":
            return not self.consent
        return True

    def action_go(self) -> None:
        self.dismiss(True)

    def action_agree(self) -> None:
        self.dismiss(True)

    def action_decline(self) -> None:
        self.dismiss(False)


class QuizScreen(Screen):
    """One question at a time; number keys answer; a wrong answer is explained right under
    the question and the question asked again; the next question starts clean.  A question
    with ``max_attempts`` answered wrong that often ends the quiz (the participant is
    screened out).  Dismissed with every attempt ``{item, response, attempt}``."""

    DEFAULT_CSS = _CSS + """
    QuizScreen #quiz-box { height: 1fr; }
    QuizScreen #study-body { height: auto; }
    QuizScreen #study-feedback { margin: 1 0 0 0; }
    """
    BINDINGS = [Binding(str(k), f"answer({k})", str(k), show=False, id=f"quiz_{k}") for k in range(1, 10)]

    def __init__(self, questions: list[Any], *, prior: list[dict[str, Any]] = (),
                 record: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> None:
        """``prior``: the attempts made before a quit (``{item, response, attempt}``): the quiz
        continues at the first question not yet right, at the next try.  ``record`` is awaited
        with each attempt as it is given (stored before the next key is taken)."""
        super().__init__()
        self.questions = questions
        self.records: list[dict[str, Any]] = [dict(r) for r in prior]
        self.record = record
        self.index = 0
        self.attempt = 1
        while self.index < len(questions):
            mine = [r for r in self.records if int(r["item"]) == self.index]
            if not any(int(r["response"]) == questions[self.index].answer for r in mine):
                self.attempt = max((int(r["attempt"]) for r in mine), default=0) + 1
                break
            self.index += 1
        self.wrong = sum(1 for r in self.records if int(r["response"]) != questions[int(r["item"])].answer)
        self._busy = False

    def compose(self) -> ComposeResult:
        yield Static("", id="study-head")
        with VerticalScroll(id="quiz-box"):  # the feedback sits right under the question
            yield Static("", id="study-body")
            yield Static("", id="study-feedback")
        yield KeyBar()

    def on_mount(self) -> None:
        if self.index >= len(self.questions):  # every question was right before a quit
            self.dismiss(self.records)
            return
        self._show()

    def _show(self, feedback: Text | None = None) -> None:
        q = self.questions[self.index]
        limit = getattr(q, "max_attempts", None)
        self.query_one("#study-head", Static).update(
            f"Quiz · question {self.index + 1} of {len(self.questions)}"
            + (f" · try {self.attempt} of {limit}" if limit is not None
               else f" · try {self.attempt}" if self.attempt > 1 else ""))
        body = Text(q.question + "\n\n", style="bold")
        for k, c in enumerate(q.choices):
            body.append(f"  {k + 1}  ", style="bold reverse")
            body.append(f" {c}\n")
        body.append("\nPress the number of your answer.", style="dim")
        if limit is not None:
            left = limit - self.attempt + 1
            body.append(f"\nTries are limited: {limit} for this question"
                        + (f" ({left} left, this one included)." if left < limit else ".")
                        + " If none of them is right, the study ends here.", style="bold")
        self.query_one("#study-body", Static).update(body)
        self.query_one("#study-feedback", Static).update(feedback or "")

    async def action_answer(self, k: int) -> None:
        if self._busy or self.index >= len(self.questions):
            return
        q = self.questions[self.index]
        if not 1 <= k <= len(q.choices):
            return
        choice = k - 1
        rec = {"item": self.index, "response": choice, "attempt": self.attempt}
        self.records.append(rec)
        if self.record is not None:  # stored before anything else: a quit right after keeps it
            self._busy = True
            try:
                await self.record(dict(rec))
            finally:
                self._busy = False
        if choice != q.answer:
            self.wrong += 1
            if getattr(q, "max_attempts", None) is not None and self.attempt >= q.max_attempts:
                self.dismiss(self.records)  # out of tries: the runner screens the participant out
                return
            self.attempt += 1
            fb = Text("Not quite. ", style="bold red")
            fb.append(q.explanation)
            fb.append(" Try again.", style="bold")
            self._show(fb)
            return
        self.index += 1
        self.attempt = 1
        if self.index >= len(self.questions):
            self.dismiss(self.records)
            return
        self._show()  # a new question starts without the last one's feedback


class QuestionnaireScreen(Screen):
    AUTO_FOCUS = None
    """Items one at a time.  Likert and choice: number keys (``0`` is 10, ``-`` is 11 on an
    11-point scale); text: type, then ``enter`` (empty is allowed for optional items)."""

    DEFAULT_CSS = _CSS
    BINDINGS = ([Binding(str(k % 10), f"pick({k})", str(k), show=False, id=f"item_{k}") for k in range(1, 11)]
                + [Binding("minus", "pick(11)", "11", show=False, id="item_11"),
                   Binding("s", "skip", "Skip (optional)", id="item_skip")])

    def __init__(self, questionnaire: Any, *, subtitle: str = "", prior: list[dict[str, Any]] = (),
                 record: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
                 drafts: dict[str, str] | None = None,
                 keep: Callable[[str, str], Awaitable[None]] | None = None) -> None:
        """``prior``: the answers given before a quit: those items are never offered again.
        ``record`` is awaited with each answer as it is given.  ``drafts``: written answers
        typed before a quit and not given (item -> text), put back in the box; ``keep`` is
        awaited with (item, text) when :meth:`save_draft` finds the box changed (the study app
        calls it every half second and when it ends, as it copies a game's unsent words)."""
        super().__init__()
        self.q = questionnaire
        self.subtitle = subtitle
        self.answers: list[dict[str, Any]] = [dict(a) for a in prior]
        self.record = record
        self.keep = keep
        self._done = {a["item"] for a in self.answers}
        self._kept: dict[str, str] = dict(drafts or {})  # item -> the text the store holds for it
        self._lock = asyncio.Lock()  # an answer and the copy of its draft never interleave
        self.index = 0
        self._skip_answered()
        self._busy = False

    def _skip_answered(self) -> None:
        while self.index < len(self.q.items) and self.q.items[self.index].id in self._done:
            self.index += 1

    def compose(self) -> ComposeResult:
        yield Static("", id="study-head")
        yield Static("", id="study-body")
        # select_on_focus off: a written answer put back after a quit is continued, never replaced
        # by the first key when the box gets the focus again (a click, the page's tab regaining it)
        yield Input(placeholder="type your answer, then enter", id="study-input", select_on_focus=False)
        yield Static("", id="study-feedback")
        yield KeyBar()

    def on_mount(self) -> None:
        if self.index >= len(self.q.items):  # everything was answered before a quit
            self.dismiss(self.answers)
            return
        self._show()

    @property
    def item(self):
        return self.q.items[self.index]

    def check_action(self, action: str, parameters) -> bool | None:
        if self.index >= len(self.q.items):
            return False
        it = self.item
        if action == "skip":
            return it.optional and it.type != "text"
        if action == "pick":
            if it.type == "text":
                return False
            n = it.points if it.type == "likert" else len(it.choices)
            return parameters[0] <= n
        return True

    def _show(self) -> None:
        it = self.item
        title = self.q.title or self.q.id
        self.query_one("#study-head", Static).update(
            f"{title}{' · ' + self.subtitle if self.subtitle else ''} · {self.index + 1} of {len(self.q.items)}")
        body = Text(it.text + "\n\n", style="bold")
        box = self.query_one("#study-input", Input)
        if it.type == "likert":
            body.append(f"  1 = {it.low}   …   {it.points} = {it.high}\n\n")
            for k in range(1, it.points + 1):
                body.append(f" {k} ", style="bold reverse")
                body.append(" ")
            body.append("\n\nPress a number.", style="dim")
        elif it.type == "choice":
            for k, c in enumerate(it.choices):
                body.append(f"  {k + 1}  ", style="bold reverse")
                body.append(f" {c}\n")
            body.append("\nPress the number of your answer.", style="dim")
        else:
            body.append("Type your answer and press enter" + (" (or leave it empty)." if it.optional else "."),
                        style="dim")
        box.display = it.type == "text"
        box.disabled = it.type != "text"  # a hidden input must not take the number keys
        box.value = self._kept.get(it.id, "") if it.type == "text" else ""
        box.cursor_position = len(box.value)
        if it.type == "text":
            box.focus()
        else:
            self.set_focus(None)
        self.query_one("#study-body", Static).update(body)
        self.query_one("#study-feedback", Static).update("")
        self.refresh_bindings()

    async def save_draft(self) -> None:
        """Copy the written answer being typed to the store (``keep``) when it changed since the
        last copy; nothing on a choice or scale item, or once the item is answered."""
        if self.keep is None:
            return
        async with self._lock:  # an answer being stored holds it: the item it was for is then done
            if self.index >= len(self.q.items) or self.item.type != "text":
                return
            item = self.item.id
            try:
                text = self.query_one("#study-input", Input).value
            except Exception:  # not composed (yet)
                return
            if item in self._done or text == self._kept.get(item, ""):
                return
            await self.keep(item, text)
            self._kept[item] = text

    async def _record(self, response: Any) -> None:
        if self._busy or self.index >= len(self.q.items):
            return
        ans = {"item": self.item.id, "response": response}
        self.answers.append(ans)
        self._done.add(ans["item"])
        if self.record is not None:  # stored before the next item: a quit keeps it, a resume skips it
            self._busy = True
            try:
                async with self._lock:  # its draft row goes with it (saves.study.add_answers)
                    await self.record(dict(ans))
            finally:
                self._busy = False
        self.index += 1
        self._skip_answered()
        if self.index >= len(self.q.items):
            self.dismiss(self.answers)
        else:
            self._show()

    async def action_pick(self, k: int) -> None:
        it = self.item
        await self._record(k if it.type == "likert" else it.choices[k - 1])

    async def action_skip(self) -> None:
        await self._record(None)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text and not self.item.optional:
            self.query_one("#study-feedback", Static).update(Text("Please write an answer.", style="bold red"))
            return
        await self._record(text)


class ThanksScreen(Screen):
    """The end: the completion code, the payment (``[payment]``) and the pool's return link
    (``[pool] return_url``); ``enter`` or ``q`` closes the app."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("enter", "close", "Close", id="thanks_close"),
                Binding("q", "close", "Close", show=False, id="thanks_q")]

    def __init__(self, code: str, *, payment: dict | None = None, return_link: str | None = None) -> None:
        super().__init__()
        self.code = code
        self.payment = payment
        self.return_link = return_link

    def compose(self) -> ComposeResult:
        yield Static("Thank you", id="study-head")
        body = Text("\nYou have finished the study. Thank you for taking part!\n\n")
        body.append("Your completion code:  ")
        body.append(f" {self.code} ", style="bold reverse")
        body.append("\n\nWrite it down or copy it now; you will need it to be credited.")
        if self.payment:
            p = self.payment
            cur = p.get("currency", "")
            body.append("\n\nYou earned:  ")
            body.append(f" {cur}{p['total']:.2f} ", style="bold reverse")
            body.append(f"\n  {cur}{p['show_up']:.2f} for taking part + {cur}{p['bonus']:.2f} bonus "
                        f"({p['meetings']} of your meetings scheduled)")
        if self.return_link:
            body.append("\n\nTo finish, open this link (it takes you back and credits you):\n")
            body.append(self.return_link, style=f"bold underline link {self.return_link}")
        yield Static(body, id="study-body")
        yield KeyBar()

    def action_close(self) -> None:
        self.dismiss(True)


class GoodbyeScreen(Screen):
    """The end for a participant who declined consent, was screened out by the quiz or ran over
    the pool's time limit, with the pool's code and return link for that outcome when there are
    any; ``enter`` or ``q`` closes the app.  Nothing more is asked, now or on a later run."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("enter", "close", "Close", id="goodbye_close"),
                Binding("q", "close", "Close", show=False, id="goodbye_q")]

    WORDS = {
        "declined": "You chose not to take part. Nothing more will be asked.\n\nThank you for your time.",
        "screened_out": "The questions about the rules were not answered right within the tries allowed, so "
                        "the study ends here for you.\n\nThank you for your time.",
        "timed_out": "The time allowed for this study has run out, so it ends here for you.\n\n"
                     "Thank you for your time.",
    }

    def __init__(self, outcome: str, *, code: str | None = None, return_link: str | None = None) -> None:
        super().__init__()
        self.outcome = outcome
        self.code = code
        self.return_link = return_link

    def compose(self) -> ComposeResult:
        yield Static("Goodbye", id="study-head")
        body = Text("\n" + self.WORDS.get(self.outcome, self.WORDS["declined"]))
        if self.code:
            body.append("\n\nYour code for the study's website:  ")
            body.append(f" {self.code} ", style="bold reverse")
        if self.return_link:
            body.append("\n\nTo finish, open this link (it takes you back to the study's website):\n")
            body.append(self.return_link, style=f"bold underline link {self.return_link}")
        body.append("\n\nPress enter to close.")
        yield Static(body, id="study-body")
        yield KeyBar()

    def action_close(self) -> None:
        self.dismiss(True)


class NoticeScreen(Screen):
    """A short message between steps (a game's result); ``enter`` continues."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("enter", "go", "Continue", id="notice_continue")]

    def __init__(self, title: str, text: Text | str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="study-head")
        yield Static(self.text, id="study-body")
        yield KeyBar()

    def action_go(self) -> None:
        self.dismiss(True)
