"""The phase banner: round k/M, phase, talk turn t/budget and whose turn it is.

(The engine's "sweep" — every speaker once — is a *turn* on the participant's screens: the
chat numbers messages r1·2 = round 1, turn 2.)"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

PHASE_WORDS = {
    "GAME_START": "starting",
    "CHEAP_TALK": "talk",
    "VOLUNTARY": "voluntary moves",
    "DECISION": "decision",
    "RESOLUTION": "resolution",
    "GAME_END": "game over",
}


class PhaseBanner(Widget):
    DEFAULT_CSS = """
    PhaseBanner { height: 1; background: $primary-background; color: $text; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    PhaseBanner.-mine { background: $warning-darken-2; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.round = -1
        self.rounds = 0
        self.phase = "GAME_START"
        self.sweep = 0
        self.budget = 0
        self.speaker: int | None = None
        self.seat: int | None = None
        self.note = ""

    def update_state(self, **kw) -> None:
        for k, v in kw.items():
            setattr(self, k, v)
        mine = self.speaker is not None and self.speaker == self.seat
        if mine != self.has_class("-mine"):
            self.set_class(mine, "-mine")
        self.refresh()

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        if self.round >= 0:
            t.append(f"Round {self.round + 1}/{self.rounds}", style="bold")
            t.append(" · ")
        t.append(PHASE_WORDS.get(self.phase, self.phase.lower()).upper(), style="bold")
        if self.phase == "CHEAP_TALK" and self.budget:
            t.append(f" turn {self.sweep + 1}/{self.budget}")
        if self.speaker is not None:
            t.append(" · ")
            if self.speaker == self.seat:
                t.append("YOUR TURN", style="bold reverse")
            else:
                t.append(f"Agent {self.speaker}'s turn")
        if self.note:
            t.append(" · " + self.note, style="italic")
        return t
