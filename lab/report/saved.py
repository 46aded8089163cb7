"""A report over the save database: the work behind ``calbench report`` (without ``--study``).

:func:`report_from_db` reads the completed games (``Store.game_results`` and each game's
trace; games a person is still playing never reach a report), builds the tables
(:func:`lab.report.build_report`), the LLM token and call rows (``lab.llm_costs``,
``lab.llm_calls``) and writes the plots when asked.  The command prints what it returns.
A mistake the user can fix raises :class:`ReportError` (one line).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .stats import GROUP_BY

__all__ = ["ReportError", "SavedReport", "check_plot_path", "load_games", "report_from_db", "suite_tasks"]


class ReportError(Exception):
    """A report option the user can fix (a task reference, --group-by, --plot, --prices): one line."""


@dataclass
class SavedReport:
    rows: list[dict[str, Any]]    # game_results rows of the games reported on
    traces: list[dict[str, Any]]  # their traces
    report: dict[str, Any]        # build_report's dict, with "llm", "llm_calls" and "plots" when there are any
    written: list[str] = field(default_factory=list)  # the plot files written


def suite_tasks(ref: str | None) -> list[Any] | None:
    """The tasks a reference names (None: every task)."""
    if ref is None:
        return None
    from engine.taskref import TaskRefError, resolve_tasks

    try:
        return resolve_tasks(ref)
    except TaskRefError as exc:
        raise ReportError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"--tasks {ref}: {exc}") from None


def load_games(db: str, tasks: list[Any] | None = None,
               include_unverified: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(game_results rows, traces of those games) from the database at ``db``: every game, or
    with ``tasks`` (a suite) only the games played on those very tasks — a game whose task id
    is the suite's but whose saved row holds another scenario (another task file that reuses
    the ids) is left out; a game saved without its row is kept on its id."""
    from lab.archive import with_store
    from lab.lease import same_task
    from saves.guard import admit

    by_id = None if tasks is None else {t.task_id: t for t in tasks}
    ids = None if by_id is None else sorted(by_id)

    def ours(trace: dict[str, Any]) -> bool:
        if by_id is None or not isinstance(trace.get("task"), dict):
            return True
        task = by_id.get(trace.get("task_id") or trace["task"].get("task_id"))
        return task is None or same_task(trace["task"], task)

    async def main(store):
        rows = await store.game_results(task_id=ids, include_unverified=include_unverified)
        gids = list(dict.fromkeys(r["game_id"] for r in rows))
        traces = [await store.load_trace(g) for g in gids]
        # the one guard: a game a person is still playing never reaches a report
        keep = {t["game_id"] for t in traces if admit(t, reveal=False) and ours(t)}
        return [r for r in rows if r["game_id"] in keep], [t for t in traces if t["game_id"] in keep]

    return with_store(db, main)


def check_plot_path(plot: str) -> None:
    """One line unless ``plot`` names a file in an existing folder (the other figures go beside it)."""
    name = os.path.basename(os.path.normpath(plot)) if plot.strip() else ""
    if not name or os.path.isdir(plot) or plot.endswith(("/", os.sep)) or name.startswith("."):
        raise ReportError(f"--plot {plot!r}: give a file name such as results.png "
                          "(results-fairness.png and results-messages.png are written beside it)")
    folder = os.path.dirname(os.path.abspath(plot))
    if not os.path.isdir(folder):
        raise ReportError(f"cannot write {plot}: the folder {folder} does not exist")


def report_from_db(db: str, *, tasks: str | None = None, group_by: str = "persona", leaderboard: bool = False,
                   include_unverified: bool = False, prices: str | None = None,
                   plot: str | None = None) -> SavedReport:
    """The report over the completed games of ``db`` (of the tasks ``tasks`` names, if given):
    Table 1 grouped by ``group_by``, Table 2, regret, first speaker, the leaderboard when
    asked, LLM tokens (money with a ``prices`` TOML file) and calls; the figures written to
    ``plot`` (and beside it) when given."""
    from lab.llm_calls import llm_call_rows
    from lab.llm_costs import PricesError, llm_report, load_prices

    from .plots import write_plots
    from .tables import build_report

    if group_by not in GROUP_BY:
        raise ReportError(f"--group-by must be one of {', '.join(GROUP_BY)}, not {group_by!r}")
    if plot is not None:
        check_plot_path(plot)
    price_table = None
    if prices:
        try:
            price_table = load_prices(prices)
        except PricesError as exc:
            raise ReportError(str(exc)) from None
    rows, traces = load_games(db, suite_tasks(tasks), include_unverified)
    report = build_report(rows, traces, group_by=group_by, with_leaderboard=leaderboard)
    llm = llm_report(traces, price_table)
    if llm["rows"]:
        report["llm"] = {"currency": llm["currency"], "rows": llm["rows"]}
    calls = llm_call_rows(traces)  # per LLM setting: calls, retries, latency, failure kinds (issue 22.9)
    if calls:
        report["llm_calls"] = calls
    written: list[str] = []
    if plot:
        try:
            written = write_plots(report, plot)
        except (OSError, ValueError) as exc:
            raise ReportError(f"cannot write the plots to {plot}: {exc}") from None
        report["plots"] = written
    return SavedReport(rows, traces, report, written)
