"""The help screen: the game in a few lines, its phases, and every key (with its remappable id)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

GAME = """\
CalBench — schedule meetings without giving your calendar away.

Five agents each hold a private calendar of slots: free, an errand (movable, at its \
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


def keys_text(app) -> Text:
    """Every key of the game, decision and end screens, as currently mapped."""
    from .decision import DecisionScreen
    from .end import EndScreen
    from .game import GameScreen

    keymap = getattr(app, "_keymap", {}) or {}
    out = Text()
    groups = [("Everywhere", type(app).BINDINGS), ("Talk", GameScreen.BINDINGS),
              ("Batch builder", DecisionScreen.BINDINGS), ("End screen", EndScreen.BINDINGS)]
    for title, bindings in groups:
        out.append(f"\n{title}\n", style="bold")
        for b in bindings:
            if not isinstance(b, Binding) or not b.description:
                continue
            keys = keymap.get(b.id, b.key) if b.id else b.key
            out.append(f"  {keys:<22}", style="bold cyan")
            out.append(f"{b.description}")
            if b.id:
                out.append(f"  [{b.id}]", style="dim")
            out.append("\n")
    out.append("\nOn the calendar: ↑/↓ move, space marks slots for propose / share costs. "
               "In the composer: enter queues a message, escape leaves. [ and ] switch threads.\n")
    out.append("Remap any key by its [id] in keys.toml in your config directory "
               "(e.g. ~/.config/calbench/keys.toml):  [keys]  end_turn = \"ctrl+t\"\n", style="dim")
    return out


class HelpScreen(ModalScreen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text(GAME), id="help-game")
            yield Static(keys_text(self.app), id="help-keys")
            yield Static(Text("escape closes this help · ? opens it again at any time", style="bold"))

    def action_close(self) -> None:
        self.dismiss(None)
