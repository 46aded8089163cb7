"""The help screen: the game in a few lines, its phases, and every key (with its remappable id)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

GAME = """\
CalBench — schedule meetings without giving your calendar away.

{agents} each hold a private calendar of slots: free, an errand (movable, at its \
cost), a blocked errand (immovable), or a meeting. One meeting comes up each round; its \
participants must all put it in the same slot. Moving an errand costs its value. Nobody \
sees anyone else's calendar: you only know what you are told.

Each round has four phases:
• TALK — participants take turns in order; on your turn send messages, then end the \
turn (e). Anyone written to by DM or in the all-agent chat joins in.
• VOLUNTARY — if you were contacted but are not in the meeting, you may move your own \
items to help (or do nothing).
• DECISION — every participant submits one batch: moves, then the meeting's slot. All \
batches apply together, and only if every one of them is valid.
• RESOLUTION — the meeting counts if every copy sits in the same slot.

The other seats follow IMAP by default: the initiator (the lowest id) asks the others \
for their cost per slot (r), they answer (c), the initiator proposes the cheapest common \
slot (p), and everyone schedules it in DECISION.

At the end you see your cost against the best possible schedule (the oracle), your \
fairness, and how much your messages revealed (VPS, label leaks).
"""


#: The paragraph about the partners in a blinded study game: the game, never their protocol.
PARTNERS = """\
Your partners are the other seats, each shown as Agent and its number. They play by the \
same rules as you. To agree on a slot you can ask the others for their cost per slot (r), tell them \
yours (c), propose a slot (p), accept (a) or decline (d) a proposal, then put the meeting \
in the agreed slot in DECISION.
"""


#: The last paragraph in a study: its games end on how many meetings were scheduled, nothing more.
STUDY_END = """\
At the end of each game you see how many of its meetings were scheduled.
"""

_NUMBERS = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten"}


def partners_text(names: list[str]) -> str | None:
    """The paragraph about the other seats when they are not all IMAP (the default one says
    IMAP): each protocol at the table in its one line (``engine.protocols.Seat.words``)."""
    from engine import protocols

    distinct = list(dict.fromkeys(n for n in names if n and n != "human"))
    if not distinct or distinct == [protocols.default_seat()]:  # the paragraph above says it
        return None
    lines = []
    for name in distinct:
        found = protocols.seat(name)
        if found is not None:
            lines.append(f"• {name}: {found[0].words}")
        elif name.startswith("llm"):
            lines.append(f"• {name}: a language model, reading and writing messages like you")
        else:
            lines.append(f"• {name}")
    return "The other seats here play:\n" + "\n".join(lines) + "\n"


def game_text(blind: bool, *, num_agents: int | None = None, study: bool = False,
              partners: list[str] | None = None) -> str:
    """The game in a few lines; ``blind`` (a study game): nothing about the partners' protocol.
    ``num_agents``: the seats of the task at hand (else "The agents"); ``study``: the end of a
    game is said as the study shows it (the meetings scheduled), not the play app's figures;
    ``partners``: the persona name of every seat (the paragraph about them names the protocols
    at the table when they are not all IMAP)."""
    agents = ("The agents" if not num_agents else f"{_NUMBERS.get(num_agents, num_agents)} agents")
    text = GAME.replace("{agents}", agents)
    mixed = None if blind or not partners else partners_text(partners)
    if blind or mixed:
        start = text.index("The other seats follow")
        end = text.index("At the end you see")
        text = text[:start] + (PARTNERS if blind else mixed) + "\n" + text[end:]
    if study:
        text = text[:text.index("At the end you see")] + STUDY_END
    return text


def keys_text(app) -> Text:
    """Every key of every screen, as currently mapped, in readable names (no internal ids)."""
    from ..keys import keys_label
    from ..widgets.calendar import CalendarView
    from .decision import DecisionScreen
    from .end import EndScreen
    from .game import GameScreen
    from .games import SavedGamesScreen
    from .replay import ReplayScreen

    keymap = getattr(app, "_keymap", {}) or {}
    out = Text()
    app_bindings = [b for b in type(app).BINDINGS if isinstance(b, Binding)]
    groups = [("Everywhere", app_bindings),
              ("Talk (your turn)", GameScreen.BINDINGS + CalendarView.BINDINGS),
              ("Batch builder (DECISION, VOLUNTARY)", DecisionScreen.BINDINGS),
              ("End screen", EndScreen.BINDINGS),
              ("Saved games", SavedGamesScreen.BINDINGS),
              ("Replay", [b for b in ReplayScreen.BINDINGS if not (b.id or "").startswith("replay.seat")
                          or b.id == "replay.seat"])]
    for title, bindings in groups:
        out.append(f"\n{title}\n", style="bold")
        for b in bindings:
            if not isinstance(b, Binding) or not b.description:
                continue
            out.append(f"  {keys_label(b, keymap):<18}", style="bold cyan")
            # wrapped by hand under its own column (fits the 80-column help box)
            words = b.description + (f" — {b.tooltip}" if b.tooltip else "")
            lines = textwrap.wrap(words, 44) or [""]
            out.append(lines[0][:len(b.description)])
            out.append(lines[0][len(b.description):], style="dim")
            for more in lines[1:]:
                out.append("\n" + " " * 20 + more, style="dim")
            out.append("\n")
        if title.startswith("Replay"):
            out.append(f"  {'0 … 9':<18}", style="bold cyan")
            out.append("show that seat in the Seat view\n")
    out.append("\nOn the calendar: ↑/↓ move the cursor ▸, space marks slots (for propose and share costs). "
               "In the composer: enter queues a message, esc leaves it. [ and ] switch threads.\n")
    out.append("What you write and what a quick key sends go where the line above the composer says: in a "
               "DM thread to that seat, in a chat thread to that chat. From the Feed, d and c (when asked) answer "
               "whoever proposed or asked, and a too unless you opened the meeting (then it tells everyone in it).\n")
    out.append("ctrl+p opens the command palette: every action of the screen you are on, by name.\n")
    out.append("Keys can be remapped in a keys.toml file (calbench-play --list-keys prints their names).\n",
               style="dim")
    return out


class HelpScreen(ModalScreen):
    """The instructions and every key.  ``intro=True``: shown as a game starts (see the app)."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close"),
        Binding("h", "skip_intro", "Don't show before each game", id="help.skip_intro", show=False),
    ]

    def __init__(self, *, intro: bool = False) -> None:
        super().__init__()
        self.intro = intro

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help") as box:
            box.border_subtitle = ("esc starts the game" if self.intro else "esc closes") + " · ↓ or page down for more"
            if self.intro:
                yield Static(Text("Before you start: how the game works (esc starts the game)", style="bold reverse"))
            task = getattr(self.app, "game_task", None)
            yield Static(Text(game_text(bool(getattr(self.app, "blind_partners", False)),
                                        num_agents=getattr(task, "num_agents", None),
                                        study=getattr(self.app, "study", None) is not None,
                                        partners=self._partners(task))), id="help-game")
            yield Static(keys_text(self.app), id="help-keys")
            yield Static(self._closing_words(), id="help-close")

    def _partners(self, task) -> list[str] | None:
        """The persona name of every seat of the game at hand, when the app knows them."""
        spec = getattr(self.app, "agents_spec", None)
        if task is None or not callable(spec):
            return None
        try:
            return spec(task.num_agents).split(",")
        except Exception:  # noqa: BLE001 - a spec the game could not seat: the default paragraph
            return None

    def _closing_words(self) -> Text:
        t = Text()
        if self.intro:
            t.append("esc starts the game · ? shows this again at any time", style="bold")
            t.append("\nh: don't show this at the start of the next games (until calbench-play is closed)",
                     style="dim")
        else:
            t.append("esc closes this help · ? opens it again at any time", style="bold")
        return t

    def action_skip_intro(self) -> None:
        if hasattr(self.app, "intro_each_game"):
            self.app.intro_each_game = False
            self.notify("The instructions will not open by themselves again in this session (? still shows them).")

    def action_close(self) -> None:
        self.dismiss(None)
