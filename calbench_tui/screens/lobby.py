"""Joining a table served elsewhere: the code prompt and the lobby (``calbench-play --join``)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Input, Static

_CSS = """
JoinScreen, LobbyScreen { align: center middle; }
JoinScreen > Vertical, LobbyScreen > Vertical {
    width: 64; max-width: 100%; height: auto; border: round $accent; padding: 1 2;
}
JoinScreen Input { margin-top: 1; }
#join-error { color: $error; height: auto; }
"""


class JoinScreen(Screen[str]):
    """Asks for the join code the researcher gave the participant."""

    DEFAULT_CSS = _CSS
    BINDINGS = [Binding("escape", "cancel", "Leave", id="join_cancel")]

    def __init__(self, url: str, error: str | None = None) -> None:
        super().__init__()
        self.url = url
        self.error = error

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]Join a CalBench table[/b]\n\nType the code you were given, then press Enter.")
            yield Input(placeholder="join code", id="code", max_length=64)
            yield Static(self.error or "", id="join-error")

    def on_mount(self) -> None:
        self.query_one("#code", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        code = event.value.strip()
        if not code:
            self.query_one("#join-error", Static).update("The code is empty.")
            return
        self.dismiss(code)

    def action_cancel(self) -> None:
        self.app.exit()


class LobbyScreen(Screen[None]):
    """Waiting until every person at the table has joined (seat numbers only)."""

    DEFAULT_CSS = _CSS

    def __init__(self, seat: int) -> None:
        super().__init__()
        self.seat = seat
        self.last: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]You are Agent {self.seat}.[/b]\n\nWaiting for the other participants to join…",
                         id="lobby-title")
            yield Static("", id="lobby-status")

    def on_mount(self) -> None:
        if self.last is not None:
            self._show_status(self.last)

    def show(self, frame: dict[str, Any]) -> None:
        """Show who is here; before the screen is mounted, keep it for ``on_mount``."""
        self.last = frame
        if self.is_mounted:
            self._show_status(frame)

    def _show_status(self, frame: dict[str, Any]) -> None:
        present = ", ".join(str(s) for s in frame.get("present") or []) or "none yet"
        waiting = ", ".join(str(s) for s in frame.get("waiting") or []) or "nobody"
        left = frame.get("wait_left_s")
        lines = [f"Here: seats {present}", f"Still waiting for: seats {waiting}"]
        if isinstance(left, (int, float)):
            m, s = divmod(int(left), 60)
            lines.append(f"The table starts without them in {m}:{s:02d} at the latest.")
        for status in self.query("#lobby-status").results(Static):
            status.update("\n".join(lines))
            return
        # mounted but its widgets not yet (a frame that came as the screen was being built)
        self.call_after_refresh(self._show_last)

    def _show_last(self) -> None:
        if self.last is not None and self.is_attached and self.query("#lobby-status"):
            self._show_status(self.last)
