"""The report screen: the tables of ``calbench report`` and its charts, drawn in the terminal.

``ReportScreen(report=...)`` shows a report built by :func:`lab.report.build_report`;
``ReportScreen(store=...)`` builds one from the save database's completed games (in a
worker; the folding and the oracle run in a thread).  The charts are the ones
``--plot`` writes as images — the privacy–cost plane, fairness by group, messages
against excess — drawn with characters (``report_view.text_charts``).  ``g`` cycles the
grouping (persona → model → cost setting), ``f5`` rebuilds, ``escape``/``q`` closes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

import lab.report as reporting

from .. import report_view
from ..widgets.keybar import KeyBar


async def load_report(store: Any, *, group_by: str = "persona", task_ids: Any = None,
                      with_leaderboard: bool = True) -> dict[str, Any]:
    """Read the completed games (and their traces) and build the report."""
    rows = await store.game_results(task_id=task_ids)
    gids: list[str] = []
    for r in rows:
        if r["game_id"] not in gids:
            gids.append(r["game_id"])
    traces = [await store.load_trace(g) for g in gids]
    return await asyncio.to_thread(reporting.build_report, rows, traces, group_by=group_by,
                                   with_leaderboard=with_leaderboard)


class ReportScreen(Screen):
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    BINDINGS = [
        Binding("g", "group_by", "Group by", id="report.group_by"),
        Binding("f5", "reload", "Rebuild", id="report.reload"),
        Binding("l", "legend", "Legend", id="report.legend", tooltip="what the numbers mean"),
        Binding("escape,q", "close", "Close", id="report.close"),
    ]

    def __init__(self, report: dict[str, Any] | None = None, *, store: Any = None, group_by: str = "persona",
                 rows: list[dict[str, Any]] | None = None, traces: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.report = report
        self.store = store
        self.rows = rows
        self.traces = traces
        self.group_by = report["group_by"] if report else group_by

    def compose(self) -> ComposeResult:
        yield Static(id="report-status")
        with VerticalScroll(id="report-scroll"):
            yield Static(id="report-tables", classes="report-block")
            yield Static(id="report-charts", classes="report-block")
        yield KeyBar()  # the project's key bar, as on every other screen (not Textual's Footer)

    def on_mount(self) -> None:
        self.query_one("#report-scroll", VerticalScroll).focus()  # ↑/↓, pgup/pgdn, home/end scroll
        if self.report is not None:
            self.render_report()
        else:
            self.action_reload()

    @work(exclusive=True, group="report")
    async def action_reload(self) -> None:
        status = self.query_one("#report-status", Static)
        status.update(Text("Building the report…", style="dim"))
        try:
            if self.rows is not None:
                self.report = await asyncio.to_thread(reporting.build_report, self.rows, self.traces,
                                                      group_by=self.group_by, with_leaderboard=True)
            elif self.store is not None:
                self.report = await load_report(self.store, group_by=self.group_by)
            else:
                status.update(Text("Nothing to report: no save database is open.", style="yellow"))
                return
        except Exception as exc:
            status.update(Text(f"The report could not be built: {exc}", style="red"))
            return
        self.render_report()

    def render_report(self) -> None:
        from rich.console import Group

        rep = self.report
        assert rep is not None
        self.query_one("#report-status", Static).update(Text(
            f"Report over {rep['games']} completed game(s), {rep['seats']} seats · grouped by "
            f"{rep['group_by'].replace('_', ' ')} (g to change)", style="bold"))
        parts = report_view.report_renderables(rep)
        self.query_one("#report-tables", Static).update(Group(*parts))
        charts = report_view.text_charts(rep, width=max(30, min(90, self.size.width - 20)))
        self.query_one("#report-charts", Static).update(Group(Text("Charts (as --plot writes them)", style="bold underline"),
                                                              *charts))

    def action_group_by(self) -> None:
        if self.store is None and self.rows is None:
            self.notify("This report was built elsewhere; it cannot be regrouped here.", severity="warning")
            return
        order = reporting.GROUP_BY
        self.group_by = order[(order.index(self.group_by) + 1) % len(order)]
        self.action_reload()

    def action_legend(self) -> None:
        from .legend import LegendScreen

        self.app.push_screen(LegendScreen())

    def action_close(self) -> None:
        self.dismiss(None)
