"""The seats bar: each seat's kind and state (thinking…, waiting, done, slow, failed).

It shows nothing private: the kind of persona is public (the game's config), the state is
what the whole table can see (who is taking a turn).  A seat that takes long is shown as
``slow Ns``; one whose answer timed out or could not be read as ``failed``.

A served table's human seat whose participant is not connected reads ``left`` (the table's
presence frames say who is connected), whatever the turn events say meanwhile, until the
participant is back: the bar keeps the two facts apart — the turn state the events set
(:meth:`SeatsBar.set_state`) and the presence the table reports (:meth:`SeatsBar.set_away`)
— and :meth:`SeatsBar.describe` is the one place that reads both.

Blinded (a study game, unless its condition reveals the partners): every partner is
``Agent N`` and nothing names its protocol or model; a seat that failed reads ``no answer``.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widget import Widget

from engine import protocols

SLOW_AFTER = 8.0  # seconds


class SeatsBar(Widget):
    DEFAULT_CSS = """
    SeatsBar { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.kinds: list[str] = []
        self.states: list[str] = []
        self.since: list[float] = []
        self.failed: list[str | None] = []
        self.seat: int | None = None
        self.blind = False
        #: seats whose participant is not connected (a served table's presence; not reset by a
        #: new game start or round, which say nothing about who is connected)
        self.away: set[int] = set()

    def on_mount(self) -> None:
        self.set_interval(min(1.0, SLOW_AFTER / 2), self._tick)

    def _tick(self) -> None:
        if any(s == "thinking" and time.monotonic() - t >= SLOW_AFTER for s, t in zip(self.states, self.since)):
            self.refresh()

    def setup(self, kinds: list[str], seat: int | None, *, blind: bool = False) -> None:
        self.blind = blind
        self.kinds = ["agent"] * len(kinds) if blind else list(kinds)
        self.states = ["waiting"] * len(kinds)
        self.since = [time.monotonic()] * len(kinds)
        self.failed = [None] * len(kinds)
        self.seat = seat
        self.refresh()

    def set_state(self, agent: int, state: str) -> None:
        if 0 <= agent < len(self.states):
            if self.states[agent] != state:
                self.since[agent] = time.monotonic()
            self.states[agent] = state
            if state == "thinking":
                self.failed[agent] = None
            self.refresh()

    def set_away(self, away: "set[int] | list[int]") -> None:
        """The seats whose participant is not connected now (every other seat is)."""
        away = {a for a in away if isinstance(a, int)}
        if away != self.away:
            self.away = away
            self.refresh()

    def set_failed(self, agent: int, why: str) -> None:
        if 0 <= agent < len(self.failed):
            self.failed[agent] = why
            self.refresh()

    def all(self, state: str) -> None:
        for a in range(len(self.states)):
            self.set_state(a, state)

    def describe(self, agent: int) -> str:
        st = self.states[agent]
        if agent in self.away and agent != self.seat:
            return "left"  # before any turn state: the seat's turns time out while nobody is there
        if self.failed[agent]:
            return "no answer" if self.blind else "failed"
        if st == "thinking":
            if agent == self.seat:
                return "playing"
            waited = time.monotonic() - self.since[agent]
            return f"slow {waited:.0f}s" if waited >= SLOW_AFTER else "thinking…"
        return st

    def render(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        n = len(self.kinds)
        avail = (self.size.width or 80) - 2 - (n - 1)
        width = max(8, avail // max(n, 1))
        for a in range(n):
            if a:
                t.append("│", style="dim")
            kind = "you" if a == self.seat else self.kinds[a]
            desc = self.describe(a)
            cell = blind_cell(a, a == self.seat, desc, width) if self.blind else fit_cell(a, kind, desc, width)
            style = ""
            if desc in ("failed", "no answer") or desc.startswith("slow"):
                style = "bold red"
            elif desc == "left":
                style = "bold yellow"
            elif desc in ("thinking…", "playing"):
                style = "bold"
            elif desc == "done":
                style = "green"
            if a == self.seat:
                style += " underline"
            t.append(f"{cell:<{width}}", style=style.strip())
        return t


#: Short forms of the persona kinds, used when a seat's cell is too narrow for the full name
#: (a protocol's seats declare theirs: ``engine.protocols.Seat.short``).
KIND_SHORT = {"passive": "pasv", "human": "hum"}


def kind_short(kind: str) -> str:
    found = protocols.seat(kind)
    return KIND_SHORT.get(kind) or (found[0].short if found and found[0].short else kind)
#: Short forms of the states, used after the kind has been shortened.
STATE_SHORT = {"thinking…": "think…", "waiting": "wait", "playing": "play", "no answer": "no ans"}


def blind_cell(agent: int, me: bool, desc: str, width: int) -> str:
    """``"Agent 3 waiting"`` (``"you playing"`` for the participant) fitted into ``width`` columns."""
    name = "you" if me else f"Agent {agent}"
    short = STATE_SHORT.get(desc, "slow" if desc.startswith("slow") else desc)
    for cell in (f"{name} {desc}", f"{name} {short}", f"{'you' if me else f'A{agent}'} {short}"):
        if len(cell) <= width:
            return cell
    return f"{'you' if me else f'A{agent}'} {short}"[:width]


def fit_cell(agent: int, kind: str, desc: str, width: int) -> str:
    """``"3:sdmap waiting"`` fitted into ``width`` columns.  The protocol's name is what the
    setup screen and the help call it, so it is kept whole where the short state fits
    (``3:sdmap wait``); only a name too long even then takes its short form (``dsm-welfare``
    → ``dsmW``), and only then an ellipsis — never a kind cut mid-word like ``sdma``."""
    def cell(k: str, d: str) -> str:
        return f"{agent}:{k} {d}"

    # One name per width, whatever the state (a name must not flicker between forms).
    short = kind if len(cell(kind, "think…")) <= width else kind_short(kind)
    if len(cell(short, desc)) <= width:
        return cell(short, desc)
    desc = STATE_SHORT.get(desc, "slow" if desc.startswith("slow") else desc)
    if len(cell(short, desc)) <= width:
        return cell(short, desc)
    room = width - len(cell("", desc))
    if room >= 2:
        return cell(short[: room - 1] + "…", desc)
    return cell(short, desc)[:width]
