"""The meeting card: the incoming meeting, your private label for it, your cost so far."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class MeetingCard(Widget):
    DEFAULT_CSS = """
    MeetingCard { height: auto; padding: 0 1; background: $boost; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.meeting = None  # engine.observe.MeetingView or a dict from round_start
        self.seat: int | None = None
        self.penalty = 0
        self.is_participant: bool | None = None
        self.outcome: str | None = None

    def set_meeting(self, meeting, seat: int | None, penalty: int | None = None) -> None:
        self.meeting = meeting
        self.seat = seat
        if penalty is not None:
            self.penalty = penalty
        self.outcome = None
        self.refresh(layout=True)

    def set_penalty(self, penalty: int) -> None:
        self.penalty = penalty
        self.refresh()

    def set_outcome(self, text: str | None) -> None:
        self.outcome = text
        self.refresh(layout=True)

    def _get(self, key):
        m = self.meeting
        if m is None:
            return None
        return m.get(key) if isinstance(m, dict) else getattr(m, key, None)

    def render(self) -> Text:
        t = Text()  # wraps: the meeting's title is read whole, also at 80 columns
        if self.meeting is None:
            t.append("No meeting yet", style="dim")
            t.append(f" · your cost so far {self.penalty}")
            return t
        mid = self._get("id")
        parts = list(self._get("participants") or [])
        mine = self.seat in parts
        t.append(f"M{mid}", style="bold reverse")
        t.append(" " + ", ".join("you" if p == self.seat else str(p) for p in parts))
        if not mine:
            t.append(" (not you)", style="dim")
        t.append(" · cost so far ")
        t.append(str(self.penalty), style="bold")
        label = self._get("label") if mine else None
        t.append("\n")
        if label:
            t.append("“" + label + "”", style="italic")
        elif not mine:
            t.append("You speak only if someone writes to you.", style="dim")
        if self.outcome:
            t.append("\n" + self.outcome)
        return t
