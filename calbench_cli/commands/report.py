"""``calbench report``: the paper's tables, regret, first-speaker effect, leaderboard and plots.

Reads the completed games of the save database (``Store.game_results`` plus each game's
trace) and prints Table 1 (per persona, model or cost setting), Table 2 (per protocol),
completion-conditioned regret and the first-speaker effect, split by cost setting.
``--leaderboard`` adds OpenSkill ratings (SPEC §11); ``--plot FILE.png`` writes the
privacy–cost plane to FILE.png, fairness to FILE-fairness.png and messages against
excess to FILE-messages.png; ``--tui`` shows it all on the app's report screen.
The numbers are defined in docs/reports.md, gathered by one call to
:func:`lab.report.saved.report_from_db` and printed by ``calbench_tui/report_view.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..lab_errors import one_line
from . import UserError, add_db_option, existing_db, require_terminal


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="tables, leaderboard and plots over saved games",
        description="Report on the completed games of the save database: the paper's Table 1 (per persona, "
                    "model or cost setting: N, Meetings, Coord., Excess, Messages/mtg, Fairness, VPS) and "
                    "Table 2 (per protocol), split by cost setting, with completion-conditioned regret and "
                    "the first-speaker effect. See docs/reports.md.")
    add_db_option(p)
    p.add_argument("--tasks", metavar="REF", default=None,
                   help="only games of these tasks (canonical, canonical:0-44, seed:N, PATH.jsonl, ...)")
    p.add_argument("--group-by", metavar="KEY", default=None,
                   help="Table 1 rows: persona (default), model or cost_mode (not with --study: its rows are "
                        "conditions by seat kind)")
    p.add_argument("--json", action="store_true", help='print {"table": [...], "protocols": [...], ...} as JSON')
    p.add_argument("--csv", action="store_true",
                   help="print Table 1 as CSV (with --leaderboard: the leaderboard instead)")
    p.add_argument("--leaderboard", action="store_true",
                   help="add OpenSkill ratings per metric with score margins, μ ± σ and an MMR")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="write FILE.png (privacy–cost plane), FILE-fairness.png and FILE-messages.png; with "
                        "--study: FILE.png, one panel per measure by condition and seat kind with 95%% intervals")
    p.add_argument("--tui", action="store_true", help="show the report and its charts in the terminal app")
    p.add_argument("--prices", metavar="FILE.toml", default=None,
                   help="prices per million tokens per model ([models.\"NAME\"] prompt, cached, completion) to "
                        "show money per game beside the LLM tokens (see docs/llm.md)")
    p.add_argument("--study", metavar="STUDY.toml", default=None,
                   help="a pilot study's Table 2 by condition and seat kind (human / LLM / protocol) with N, "
                        "95%% bootstrap intervals and the human-observer VPS (see 'calbench study')")
    p.add_argument("--include-simulated", action="store_true",
                   help="with --study: count the simulated participants of the dry run too")
    p.add_argument("--include-unverified", action="store_true",
                   help="also count imported traces that did not verify (stored with 'import --keep-unverified')")
    p.set_defaults(handler=handle_report)


def llm_table(llm: dict[str, Any]):
    """LLM seats: tokens (and money) per game, failures by whose fault, the three VPS readings."""
    from calbench_tui.safe_text import markup, safe_table

    t = safe_table(title="LLM seats: tokens per game, failures, privacy readings", title_justify="left")
    money = any(r.get("money_per_game") is not None for r in llm["rows"])
    cols = ["Agents", "N", "Prompt tok.", "Cached", "Compl. tok."] + ([f"{llm.get('currency') or ''}/game"]
                                                                     if money else [])
    cols += ["Infra fail.", "Config fail.", "Agent fail.", "VPS", "Refl. VPS", "Judge VPS"]
    for c in cols:
        t.add_column(c, justify="left" if c == "Agents" else "right")

    def f(v, pat="{:,.0f}"):
        return "–" if v is None else pat.format(v)

    for r in llm["rows"]:
        cells = [r["agents"], str(r["games"]), f(r["prompt_tokens"]), f(r["cached_share"], "{:.0%}"),
                 f(r["completion_tokens"])]
        if money:
            cells.append(f(r["money_per_game"], "{:.4f}") + (" *" if r.get("unpriced") else ""))
        cells += [str(r["infra_failures"]), str(r["config_failures"]), str(r["agent_failures"]),
                  f(r["vps"], "{:.2f}"), f(r["reflection_vps"], "{:.2f}"), f(r["judge_vps"], "{:.2f}")]
        t.add_row(*cells)
    if money and any(r.get("unpriced") for r in llm["rows"]):
        t.caption = "* some models have no price: " + ", ".join(sorted({markup(m, 80) for r in llm["rows"]
                                                                        for m in r["unpriced"]}))
    return t


def llm_calls_table(rows: list[dict[str, Any]]):
    """LLM calls per setting (model, endpoint, structured, max_tokens): counts, latency, failure kinds."""
    from rich.table import Table

    t = Table(title="LLM calls by setting: per seat requests, capped turns, retries, latency, failures by kind",
              title_justify="left")
    for c in ("Model", "Endpoint", "Structured", "Max tok.", "Games", "Seats", "Requests/seat", "Capped/seat",
              "Retries", "Median s", "p95 s", "Failures by kind"):
        t.add_column(c, justify="left" if c in ("Model", "Endpoint", "Structured", "Failures by kind") else "right")

    def sec(v):
        return "–" if v is None else f"{v / 1000:.1f}"

    for r in rows:
        kinds = ", ".join(f"{k} {n}" for k, n in r["failures"].items()) or "none"
        seats = r["seats"] or 1
        t.add_row(str(r["model"]), str(r["endpoint"] or "(default)"), str(r["structured"]),
                  str(r["max_tokens"] if r["max_tokens"] is not None else "–"), str(r["games"]), str(r["seats"]),
                  f"{r['requests'] / seats:.1f}", f"{r.get('capped_turns', 0) / seats:.1f}", str(r["retries"]),
                  sec(r["latency_median_ms"]), sec(r["latency_p95_ms"]), kinds)
    return t


def handle_report(args) -> int:
    if args.study:
        from .study import report_study

        return report_study(args)
    if sum(map(bool, (args.json, args.csv, args.tui))) > 1:
        raise UserError("choose one of --json, --csv and --tui")
    from lab.report.saved import ReportError, report_from_db

    args.group_by = args.group_by or "persona"
    path = existing_db(args.db)
    with one_line(ReportError):
        saved = report_from_db(path, tasks=args.tasks, group_by=args.group_by, leaderboard=args.leaderboard,
                               include_unverified=args.include_unverified, prices=args.prices, plot=args.plot)
    if args.tui:
        require_terminal("calbench report --tui")
        _show_in_app(saved.rows, saved.traces, args.group_by)
    elif args.json:
        import lab.report as reporting

        print(json.dumps(reporting.public(saved.report), indent=2, ensure_ascii=False))
    elif args.csv:
        import lab.report as reporting

        sys.stdout.write(reporting.report_csv(saved.report))
    else:
        _print_report(saved.report, saved.written, path, args.tasks)
    return 0


def report_app(rows: list[dict[str, Any]], traces: list[dict[str, Any]], group_by: str) -> Any:
    """The app of ``report --tui``: the report screen alone, with the project's key bar and key names."""
    from textual.app import App

    from calbench_tui.keys import ReadableKeys
    from calbench_tui.screens.report import ReportScreen

    class ReportApp(ReadableKeys, App):
        TITLE = "CalBench report"
        ENABLE_COMMAND_PALETTE = False

        def on_mount(self) -> None:
            self.push_screen(ReportScreen(rows=rows, traces=traces, group_by=group_by),
                             callback=lambda _: self.exit())

    return ReportApp()


def _show_in_app(rows: list[dict[str, Any]], traces: list[dict[str, Any]], group_by: str) -> None:
    report_app(rows, traces, group_by).run()


def _print_report(report: dict[str, Any], written: list[str], path: str, tasks: str | None) -> None:
    from rich.console import Console

    from calbench_tui import report_view
    from calbench_tui.safe_text import markup

    console = Console()
    if not console.is_terminal:  # piped or redirected: do not squeeze the tables into 80 columns
        console = Console(width=max(console.width, 150))
    scope = f" (tasks {markup(tasks)})" if tasks else ""
    console.print(f"[bold]CalBench report[/] — {markup(path)}{scope}", highlight=False)
    for part in report_view.report_renderables(report):
        console.print(part)
        console.print()
    if report.get("llm"):
        console.print(llm_table(report["llm"]))
        console.print()
    if report.get("llm_calls"):
        console.print(llm_calls_table(report["llm_calls"]))
        console.print()
    for f in written:
        console.print(f"wrote {markup(f)}", highlight=False)
