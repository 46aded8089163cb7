"""The belief grid (``[beliefs]`` of a study): after a chosen round the participant marks,
for each chosen seat, every slot of that seat's calendar on −3..3 — −3 surely busy,
0 no idea, +3 surely free (the scale of the paper's reflection probe, F.3).

Fast by keyboard: arrows move; ``1``..``7`` set −3..+3 and step right (so a row is typed
like a number); ``+``/``-`` nudge; ``0`` or space clears to 0; ``enter`` submits the grid.
The participant's own calendar is shown above for reference.  Dismissed with
``{target: [belief per slot]}``.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from ..widgets.keybar import KeyBar

LEVELS = {-3: ("−3", "bold white on red"), -2: ("−2", "white on dark_red"), -1: ("−1", "red"),
          0: (" ·", "dim"), 1: ("+1", "green"), 2: ("+2", "black on green"), 3: ("+3", "bold black on bright_green")}


class BeliefGridScreen(Screen):
    DEFAULT_CSS = """
    BeliefGridScreen { align: center top; }
    #bg-head { height: auto; padding: 0 2; background: $panel; text-style: bold; }
    #bg-grid { height: auto; padding: 1 2; }
    #bg-help { height: auto; padding: 0 2; color: $text-muted; }
    """
    BINDINGS = ([Binding(str(k), f"set({k - 4})", f"{k - 4:+d}", show=False, id=f"belief_{k}") for k in range(1, 8)]
                + [Binding("left", "move(0,-1)", "◂", show=False, id="belief_left"),
                   Binding("right", "move(0,1)", "▸", show=False, id="belief_right"),
                   Binding("up", "move(-1,0)", "▴", show=False, id="belief_up"),
                   Binding("down", "move(1,0)", "▾", show=False, id="belief_down"),
                   Binding("plus,equals_sign", "nudge(1)", "+1", id="belief_plus"),
                   Binding("minus", "nudge(-1)", "−1", id="belief_minus"),
                   Binding("0,space", "set_here(0)", "Clear", id="belief_clear"),
                   Binding("enter", "submit", "Done", id="belief_submit")])

    def __init__(self, request, *, title: str = "") -> None:
        super().__init__()
        self.req = request
        self.title_text = title
        self.grid: dict[int, list[int]] = {t: [0] * request.num_slots for t in request.targets}
        self.row = 0
        self.col = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="bg-head")
        yield Static("", id="bg-grid")
        yield Static(Text("1 2 3 4 5 6 7 = −3 −2 −1 0 +1 +2 +3 (then the next slot) · arrows move · "
                          "+/− nudge · 0 clears · enter when done.  −3 surely busy · 0 no idea · +3 surely free."),
                     id="bg-help")
        yield KeyBar()

    def on_mount(self) -> None:
        self._draw()

    def _draw(self) -> None:
        r = self.req
        self.query_one("#bg-head", Static).update(
            f"{self.title_text + ' · ' if self.title_text else ''}After round {r.round + 1}: what do you believe "
            f"about the other seats' calendars?")
        t = Text(no_wrap=True)
        t.append("slot     ")
        for k in range(r.num_slots):
            t.append(f"{k:>3}")
        t.append("\nyou      ")
        cal = getattr(r.view, "calendar", ())
        for k in range(r.num_slots):
            it = cal[k] if k < len(cal) else None
            t.append("  ·" if it is None else "  ■", style="dim")
        t.append("\n")
        for i, target in enumerate(r.targets):
            t.append(f"\nseat {target:<4}")
            for k, v in enumerate(self.grid[target]):
                label, style = LEVELS[v]
                if i == self.row and k == self.col:
                    style = "bold reverse"
                t.append(" " + label, style=style)
        self.query_one("#bg-grid", Static).update(t)

    @property
    def target(self) -> int:
        return self.req.targets[self.row]

    def action_move(self, dr: int, dc: int) -> None:
        self.row = (self.row + dr) % len(self.req.targets)
        self.col = (self.col + dc) % self.req.num_slots
        self._draw()

    def action_set(self, v: int) -> None:
        self.grid[self.target][self.col] = v
        if self.col + 1 < self.req.num_slots:
            self.col += 1
        elif self.row + 1 < len(self.req.targets):
            self.row, self.col = self.row + 1, 0
        self._draw()

    def action_set_here(self, v: int) -> None:
        self.grid[self.target][self.col] = v
        self._draw()

    def action_nudge(self, d: int) -> None:
        row = self.grid[self.target]
        row[self.col] = max(-3, min(3, row[self.col] + d))
        self._draw()

    def action_submit(self) -> None:
        self.dismiss({t: list(v) for t, v in self.grid.items()})
