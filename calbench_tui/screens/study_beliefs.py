"""The belief grid (``[beliefs]`` of a study): after a chosen round the participant marks,
for each chosen seat, every slot of that seat's calendar on −3..3 (the scale of the
paper's reflection probe, F.3).

The question is the privacy measure's own notion (SPEC §8, ``engine.privacy``): could that
seat have taken the round's meeting in this slot *as the round started* — the slot free,
or holding only an errand they could move?  −3 surely not (a blocked errand or a meeting
there), 0 no idea, +3 surely yes.  The truth a mark is scored against is taken at the same
moment, and the participant's own row above the grid shows their own calendar by the same
notion at the same moment (✓ could, ✗ could not), so the question, the truth and the
example agree.

Fast by keyboard: arrows move; ``1``..``7`` set −3..+3 and step right (so a row is typed
like a number); ``+``/``-`` nudge; ``0`` or space clears the cell back to blank; ``enter``
submits the grid.  Every cell starts blank (" ·"): a blank is *no answer* (stored as missing),
drawn apart from a typed 0 (" 0", "no idea", an answer).  Rows are "Agent N", as every other
screen names the seats.  Dismissed with ``{target: [belief per slot, None = blank]}``.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from ..widgets.keybar import KeyBar

LEVELS = {-3: ("−3", "bold white on red"), -2: ("−2", "white on dark_red"), -1: ("−1", "red"),
          0: (" 0", "bold"), 1: ("+1", "green"), 2: ("+2", "black on green"), 3: ("+3", "bold black on bright_green"),
          None: (" ·", "dim")}  # None: left blank (no answer), drawn apart from a typed 0


def could_host_row(view, num_slots: int) -> list[bool]:
    """Per slot of ``view``'s calendar: could its seat take a meeting there (free, or a movable
    errand)?  The same notion as the truth the marks are scored against (``engine.privacy``)."""
    from engine.privacy import slot_feasible

    cal = list(getattr(view, "calendar", ()) or ())
    return [slot_feasible(cal[k] if k < len(cal) else None) for k in range(num_slots)]


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
                   Binding("0,space", "clear", "Blank", id="belief_clear"),
                   Binding("enter", "submit", "Done", id="belief_submit")])

    def __init__(self, request, *, title: str = "") -> None:
        super().__init__()
        self.req = request
        self.title_text = title
        self.grid: dict[int, list[int | None]] = {t: [None] * request.num_slots for t in request.targets}
        self.row = 0
        self.col = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="bg-head")
        yield Static("", id="bg-grid")
        yield Static(Text("1 2 3 4 5 6 7 = −3 −2 −1 0 +1 +2 +3 (then the next slot) · arrows move · "
                          "+/− nudge · 0 makes a cell blank again · enter when done.\n"
                          "· = blank (no answer, recorded as missing) · 0 = no idea (typed with 4).\n"
                          "−3 surely could not (a blocked errand or a meeting was there) · 0 no idea · "
                          "+3 surely could (the slot was free, or held only an errand they could move)."),
                     id="bg-help")
        yield KeyBar()

    def on_mount(self) -> None:
        self._draw()

    def _draw(self) -> None:
        r = self.req
        n = r.round + 1
        watched = "" if getattr(r, "took_part", True) else (
            f" You were not in round {n}'s meeting: this study asks about it all the same — mark only what "
            "you could tell from what you saw.")
        self.query_one("#bg-head", Static).update(
            f"{self.title_text + ' · ' if self.title_text else ''}After round {n}: as round {n} started, could "
            f"each agent have taken the meeting in each slot (free, or only an errand they could move)?{watched}")
        t = Text(no_wrap=True)
        t.append("slot     ")
        for k in range(r.num_slots):
            t.append(f"{k:>3}")
        t.append("\nyou      ")
        own = could_host_row(r.start_view if r.start_view is not None else r.view, r.num_slots)
        for ok in own:
            t.append("  ✓" if ok else "  ✗", style="green" if ok else "red")
        t.append(f"\n         ✓ could · ✗ could not: your own calendar as round {n} started", style="dim")
        t.append("\n")
        for i, target in enumerate(r.targets):
            t.append(f"\n{'Agent ' + str(target):<9}")
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

    def action_clear(self) -> None:
        self.grid[self.target][self.col] = None
        self._draw()

    def action_nudge(self, d: int) -> None:
        row = self.grid[self.target]
        row[self.col] = max(-3, min(3, (row[self.col] or 0) + d))
        self._draw()

    def action_submit(self) -> None:
        self.dismiss({t: list(v) for t, v in self.grid.items()})
