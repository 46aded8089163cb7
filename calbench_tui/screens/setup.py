"""The setup screen: choose the task, your seat, a persona for every other seat, and the channels.

Opens when ``calbench-play`` is started without ``--seat`` (or with ``--setup``).  Every
field is prefilled with the defaults a first-time player can follow: a fresh generated
scenario, seat 2, IMAP bots (the easiest protocol to follow), DMs only.  ``ctrl+s`` (or
the Start button) checks the choices and starts; a mistake is shown in one line.

Focus starts on the first field and Tab walks the fields in reading order.  Each seat's
protocol is described in one line beside its choice.  "Costs" applies to generated
scenarios (an empty task or ``seed:N``); for a task from a suite or a file the screen says
that the task keeps its own costs.  LLM seats are offered only when an endpoint or key is
configured, and the screen says how to configure one.  "Play again" on the end screen
comes back here, prefilled with the next seed.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from engine import protocols
from engine.channels import CHANNEL_LABEL
from engine.generate import DEFAULT_AGENTS
from personas.spec import PASSIVE, SCRIPTED_NAMES, AgentsSpec, PersonaSpecError

from ..widgets.keybar import KeyBar
from ..settings import CHANNEL_ORDER, Settings

#: One line for the passive seat; each protocol's seat declares its own (``engine.protocols``,
#: ``Seat.words``; docs/protocols.md), for a participant who has never heard of them.
PASSIVE_WORDS = "never speaks and never schedules (an empty seat)"


def persona_words(name: str) -> str:
    if name.startswith("llm"):
        return "a language model behind your endpoint; writes free text"
    if name == PASSIVE:
        return PASSIVE_WORDS
    found = protocols.seat(name)
    return found[0].words if found else ""


def persona_choices(llm_available: bool) -> list[str]:
    """The personas the setup screen offers for the other seats (from ``personas.registry``)."""
    names = list(SCRIPTED_NAMES)
    if llm_available:
        model = os.environ.get("CALBENCH_LLM_MODEL") or os.environ.get("OPENAI_MODEL") or "gpt-4o-mini"
        names.append(f"llm:{model}")
    return names


class Form(VerticalScroll, can_focus=False):
    """The scrolling form: Tab goes from field to field, never to the (invisible) container."""


class Tick(Checkbox):
    """A checkbox whose mark itself shows the state (✓ / blank), not only its colour (NO_COLOR)."""

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]
        return "✓" if self.value else " "

    def watch_value(self) -> None:
        self.refresh()


class SetupScreen(Screen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#task"

    BINDINGS = [
        Binding("ctrl+s", "start", "Start", id="setup.start", priority=True),
        Binding("ctrl+g", "saved_games", "Saved games", id="setup.games", priority=True),
    ]

    def __init__(self, settings: Settings, *, num_agents: int = 5, llm_available: bool = False,
                 again: bool = False) -> None:
        super().__init__()
        self.settings = settings
        self.again = again
        self.llm_available = llm_available
        self.num_agents = num_agents
        self.choices = persona_choices(llm_available)

    def compose(self) -> ComposeResult:
        s = self.settings
        seat = s.seat if s.seat is not None else 2
        with Form(id="setup"):
            title = ("[b]Next game[/b] — the same choices with the next seed; change anything, ctrl+s starts."
                     if self.again else "[b]New game[/b] — the defaults are a good first game; ctrl+s starts.")
            yield Static(title, id="title")
            with Horizontal(classes="row"):
                yield Label("Task", classes="lbl")
                yield Input(value=s.task or "", placeholder="empty = a new scenario · seed:7 · canonical:12 · file.jsonl",
                            id="task", compact=True)
            with Horizontal(classes="row"):
                yield Label("Seed", classes="lbl")
                yield Input(value="" if s.seed is None else str(s.seed), placeholder="random", id="seed",
                            compact=True, type="integer")
                yield Label("Costs", classes="lbl2")
                yield Select([(c, c) for c in ("uniform", "varied")], value=s.cost, id="cost",
                             allow_blank=False, compact=True)
            yield Static("", id="cost-note")
            with Horizontal(classes="row"):
                yield Label("Your seat", classes="lbl")
                yield Select([(f"Agent {i}", i) for i in range(self.num_agents)], value=seat, id="seat",
                             allow_blank=False, compact=True)
            with Horizontal(classes="row"):
                yield Label("Channels", classes="lbl")
                for ch, title in ((c, CHANNEL_LABEL[c]) for c in CHANNEL_ORDER):
                    yield Tick(title, value=ch in s.channels, id=f"ch-{ch}", compact=True)
            with Vertical(id="personas"):
                yield Static("[b]Other seats[/b] (IMAP is the easiest to follow)")
                default = self._default_persona()
                for i in range(self.num_agents):
                    with Horizontal(classes="row", id=f"row-{i}"):
                        yield Label(f"Agent {i}", classes="lbl")
                        value = s.seat_personas.get(i, default)
                        if value not in self.choices:
                            value = self.choices[0]
                        yield Select([(c, c) for c in self.choices], value=value, id=f"persona-{i}",
                                     allow_blank=False, compact=True)
                yield Static("", id="persona-words")
                if not self.llm_available:
                    yield Static("[dim]LLM seats appear here when an endpoint is configured: start with "
                                 "--base-url URL, or set OPENAI_API_KEY / OPENAI_BASE_URL.[/dim]", id="llm-note")
            yield Static("", id="error")
            yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)
        yield KeyBar()

    def _default_persona(self) -> str:
        try:
            spec = AgentsSpec.parse(self.settings.agents or "").seats[0].name
        except PersonaSpecError:
            spec = ""
        default = protocols.default_seat()
        return spec if spec in self.choices else (default if default in self.choices else self.choices[0])

    def on_mount(self) -> None:
        for inp in self.query(Input):
            inp.cursor_blink = self.settings.cursor_blink
        self._sync_rows()
        self._cost_note()
        self._persona_words()

    def _persona_words(self) -> None:
        """One line per protocol at the table (each named once), wrapped: nothing is cut at 80 columns."""
        seat = self.query_one("#seat", Select).value
        names = []
        for i in range(self.num_agents):
            if i == seat:
                continue
            v = str(self.query_one(f"#persona-{i}", Select).value)
            if v not in names:
                names.append(v)
        lines = [f"[b]{n}[/b]: {persona_words(n)}" for n in names if persona_words(n)]
        self.query_one("#persona-words", Static).update("\n".join(lines))

    def on_select_changed(self, event: Select.Changed) -> None:
        sid = event.select.id or ""
        if sid == "seat":
            self._sync_rows()
        elif sid == "cost":
            self._cost_note()
        elif sid.startswith("persona-"):
            self._persona_words()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "task":
            self._cost_note()

    def _cost_note(self) -> None:
        """Say when the Costs choice will not apply (a task from a suite or a file keeps its costs)."""
        from ..settings import seed_of_ref

        task = self.query_one("#task", Input).value.strip()
        note = self.query_one("#cost-note", Static)
        if not task or seed_of_ref(task) is not None:
            note.update("")
            note.display = False
            return
        note.display = True
        note.update(f"[yellow]Costs apply to generated scenarios only: {task} keeps the costs it was made "
                    "with (seed:N makes a new scenario with these costs).[/yellow]")

    def _sync_rows(self) -> None:
        seat = self.query_one("#seat", Select).value
        for i in range(self.num_agents):
            row = self.query_one(f"#row-{i}")
            row.display = i != seat
        if self.is_mounted and self.query("#persona-words"):
            self._persona_words()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    def action_saved_games(self) -> None:
        """Browse saved games (replay one, or report on them) without leaving setup."""
        from .games import SavedGamesScreen

        self.app.push_screen(SavedGamesScreen(getattr(self.app, "store", None)))

    def action_start(self) -> None:
        err = self.query_one("#error", Static)
        task = self.query_one("#task", Input).value.strip() or None
        seed_raw = self.query_one("#seed", Input).value.strip()
        try:
            seed = int(seed_raw) if seed_raw else None
        except ValueError:
            err.update("[red]The seed must be a whole number.[/red]")
            return
        channels = tuple(ch for ch in CHANNEL_ORDER if self.query_one(f"#ch-{ch}", Checkbox).value)
        if not channels:
            err.update("[red]Pick at least one channel.[/red]")
            return
        seat = int(self.query_one("#seat", Select).value)
        personas = {i: str(self.query_one(f"#persona-{i}", Select).value)
                    for i in range(self.num_agents) if i != seat}
        from ..settings import seed_of_ref

        if task is not None and seed_of_ref(task) is not None:
            seed = seed_of_ref(task)  # seed:N is a generated scenario: the costs chosen here apply
            task = None
        # the seats of the game to start: the named task's, else a generated scenario's
        num_agents = DEFAULT_AGENTS
        if task is not None:
            try:
                from engine.taskref import resolve_tasks

                tasks = resolve_tasks(task)
            except Exception as exc:
                err.update(f"[red]{exc}[/red]")
                return
            if len(tasks) != 1:
                err.update(f"[red]{task!r} names {len(tasks)} tasks; pick one (e.g. canonical:7).[/red]")
                return
            num_agents = tasks[0].num_agents
        if not 0 <= seat < num_agents:
            err.update(f"[red]That task has {num_agents} seats; pick a seat below it.[/red]")
            return
        # a seat this screen has no row for (the task has more seats) gets the default partner
        spec = ",".join("human" if i == seat else personas.get(i, protocols.default_seat())
                        for i in range(num_agents))
        personas = {i: p for i, p in personas.items() if i < num_agents}
        self.dismiss(self.settings.with_(task=task, seed=seed, cost=str(self.query_one("#cost", Select).value),
                                         seat=seat, channels=channels, seat_personas=personas, agents=spec,
                                         setup=False))
