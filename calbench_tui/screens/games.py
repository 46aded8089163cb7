"""Saved games: a list of the games in the save database; open one to replay it, or report on them.

``SavedGamesScreen(store)`` takes an open :class:`saves.store.Store` (its async API runs
on the app's loop).  ``enter`` loads the highlighted game's trace and opens
:class:`~calbench_tui.screens.replay.ReplayScreen` on it; ``r`` opens the report screen
over the completed games; ``c`` continues a stopped game that has a human seat (as
``calbench-play --resume`` does); ``l`` explains the columns; ``f5`` reloads the list;
``escape``/``q`` closes.  "excess" here is the end screen's and the report's number: the
mean of the seats' extra cost over the best schedule, in cost levels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from personas.spec import compact_label as compact_agents

from ..safe_text import SHOW_ID_CHARS, cell
from ..widgets.keybar import KeyBar

#: The columns, numbers first: at 80 columns the table scrolls sideways and must not hide them.
COLUMNS = ("game", "status", "coord.", "excess", "task", "agents", "started", "costs", "source")


def _pct(v: Any) -> str:
    return "—" if v is None else f"{v * 100:.0f}%"


def _num(v: Any) -> str:
    return "—" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))


def _row(g: dict[str, Any]) -> list[Text]:
    """A saved game's cells, one per :data:`COLUMNS`, as plain ``Text`` (a stored label is
    never read as markup, so the width measured below is the width painted)."""
    values = (g["game_id"][:8], g.get("status") or "—", _pct(g.get("coordination")),
              _num(g.get("excess_cost")), g.get("task_id") or "—", compact_agents(g.get("agents")),
              (g.get("started_at") or "—")[:16].replace("T", " "), g.get("cost_mode") or "—",
              g.get("source") or "—")
    return [cell(v, 4 * SHOW_ID_CHARS) for v in values]


def fill_table(table: DataTable, rows: list[tuple[str, list[Text]]]) -> None:
    """Lay the table out for ``rows`` (``(key, cells)``) in one step: every column gets an
    explicit width, the widest of its label and its cells.

    Textual's DataTable sizes auto-width columns later, in its idle handler, and caches the
    lines it renders under a counter that this resize does not bump (Textual issues #4470,
    #3533): a frame painted between ``add_row`` and that handler lays the columns out at their
    labels' widths (``game`` → an id cut to 4 characters, ``status`` → ``stoppe``) and keeps
    them so until a key moves the cursor.  With the widths given here, every frame painted
    after this call — early or late, on a loaded machine or not — shows the same layout."""
    table.clear(columns=True)
    for i, label in enumerate(COLUMNS):
        width = max([cell_len(label), *(cells[i].cell_len for _, cells in rows)])
        table.add_column(label, key=label, width=width)
    for key, cells in rows:
        table.add_row(*cells, key=key)


class SavedGamesScreen(Screen):
    class Resume(Message):
        """The player asks to continue a stopped game (``c``): the app resumes ``game_id``."""

        def __init__(self, game_id: str) -> None:
            super().__init__()
            self.game_id = game_id

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    BINDINGS = [
        Binding("enter", "open", "Replay", id="games.open", priority=True),
        Binding("c", "resume", "Continue", id="games.resume", tooltip="continue a stopped game you played"),
        Binding("r", "report", "Report", id="games.report"),
        Binding("l", "legend", "Legend", id="games.legend", tooltip="what the columns mean"),
        Binding("f5", "reload", "Reload", id="games.reload"),
        Binding("escape,q", "close", "Close", id="games.close"),
    ]

    def __init__(self, store: Any, *, reveal_all_seats: bool = False) -> None:
        super().__init__()
        self.store = store
        self.reveal_all_seats = reveal_all_seats  # open games a human is still playing (peeking)
        self.games: list[dict[str, Any]] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Static(Text("Saved games — excess: mean extra cost per seat, in cost levels (l explains every "
                          "column)", style="bold"), id="games-title")
        yield DataTable(id="games-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="games-note")
        yield KeyBar()

    def on_mount(self) -> None:
        t = self.query_one("#games-table", DataTable)
        fill_table(t, [])  # the header while the list loads
        t.focus()
        self.action_reload()

    @work(exclusive=True, group="games-list")
    async def action_reload(self) -> None:
        note = self.query_one("#games-note", Static)
        if self.store is None:
            note.update(Text("No save database is open.", style="yellow"))
            return
        try:
            games = await self.store.list_games()
        except Exception as exc:
            note.update(Text(f"Could not read the saved games: {exc}", style="red"))
            return
        self.games = games
        fill_table(self.query_one("#games-table", DataTable), [(g["game_id"], _row(g)) for g in games])
        note.update(Text(f"{len(games)} saved game(s)." if games else
                         "No saved games yet: play one (calbench-play), run a suite (calbench run) or import "
                         "traces (calbench import).", style="dim"))
        self.loaded = True

    def selected_game_id(self) -> str | None:
        t = self.query_one("#games-table", DataTable)
        if not self.games or t.cursor_row is None or not 0 <= t.cursor_row < len(self.games):
            return None
        return self.games[t.cursor_row]["game_id"]

    def action_open(self) -> None:
        gid = self.selected_game_id()
        if gid is None:
            self.notify("No game selected.", severity="warning")
            return
        self._open(gid)

    @work(exclusive=True, group="games-open")
    async def _open(self, game_id: str) -> None:
        from engine.trace import TraceError

        from .replay import ReplayScreen

        try:
            from saves.guard import game_in_play, in_play_message

            trace = await self.store.load_trace(game_id)
            if game_in_play(trace) and not self.reveal_all_seats:
                self.notify(in_play_message(trace, "replaying").replace("add --", "start with --"),
                            severity="warning", timeout=10)
                return
            screen = ReplayScreen(trace, seat=_human_seat(trace))
        except TraceError as exc:
            self.notify(f"Game {game_id[:8]} cannot be replayed: {exc}", severity="error", timeout=10)
            return
        except Exception as exc:
            self.notify(f"Could not open game {game_id[:8]}: {exc}", severity="error", timeout=10)
            return
        self.app.push_screen(screen)

    def action_resume(self) -> None:
        gid = self.selected_game_id()
        if gid is None:
            self.notify("No game selected.", severity="warning")
            return
        g = next(x for x in self.games if x["game_id"] == gid)
        if g.get("status") == "completed":
            self.notify(f"Game {gid[:8]} is completed: enter replays it.", severity="warning")
            return
        if not hasattr(self.app, "resume_saved"):  # (the replay app cannot play)
            self.notify(f"Continue it with: calbench-play --resume {gid[:8]}", timeout=10)
            return
        self.post_message(self.Resume(gid))

    def action_legend(self) -> None:
        from .legend import LegendScreen

        self.app.push_screen(LegendScreen())

    def action_report(self) -> None:
        from .report import ReportScreen

        self.app.push_screen(ReportScreen(store=self.store))

    def action_close(self) -> None:
        self.dismiss(None)


def _human_seat(trace: dict[str, Any]) -> int | None:
    from engine.seating import human_seat

    return human_seat(trace.get("config") or {})
