"""A one-line countdown for study time limits (``[timing]``), docked at the top of the game
and decision screens.  It reads the participant seat's deadline
(``lab.study.seat.StudySeat.deadline``, a ``time.monotonic()`` value set while a talk turn
or decision is waiting) five times a second; when a limit runs out the seat itself ends
the turn or submits, and this bar says so.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from rich.text import Text
from textual.widgets import Static

PHASE = {"talk": "your talk turn", "voluntary": "your move", "decision": "your decision"}


class Countdown(Static):
    DEFAULT_CSS = """
    Countdown { dock: top; height: 1; padding: 0 1; background: $panel-darken-1; }
    """

    def __init__(self, seat: Callable[[], Any], *, title: str = "") -> None:
        super().__init__("")
        self._seat = seat
        self.title_text = title
        self._last_timeouts = 0
        self.shown = ""

    def on_mount(self) -> None:
        self.tick()
        self.set_interval(0.2, self.tick)

    def tick(self) -> None:
        seat = self._seat()
        t = Text(no_wrap=True, overflow="ellipsis")
        if self.title_text:
            t.append(self.title_text, style="bold")
            t.append("  ")
        if seat is not None and seat.deadline is not None:
            left = max(0.0, seat.deadline - time.monotonic())
            style = "bold white on red" if left < 10 else "bold"
            t.append(f" {int(left) // 60}:{int(left) % 60:02d} ", style=style)
            t.append(f" left for {PHASE.get(seat.deadline_phase, 'this step')}")
        if seat is not None and seat.timeouts > self._last_timeouts:
            self._last_timeouts = seat.timeouts
            self.app.notify("Time ran out: your turn ended (recorded as a timeout).", severity="warning", timeout=5)
            app = self.app
            ds = getattr(app, "decision_screen", None)
            if ds is not None and ds.request.done and hasattr(app, "_close_batch_builder"):
                app._close_batch_builder()
        if seat is not None and seat.timeouts:
            t.append(f"   timeouts so far: {seat.timeouts}", style="dim")
        plain = t.plain
        if plain != self.shown:
            self.shown = plain
            self.update(t)
