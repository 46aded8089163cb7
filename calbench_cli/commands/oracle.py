"""``calbench oracle``: solve every task of a file and compare with the file's optimum
(the work is :mod:`lab.oracle_check`; this parses, shows a progress bar and prints)."""

from __future__ import annotations

import json
import sys

from ..lab_errors import one_line


def register(sub) -> None:
    p = sub.add_parser(
        "oracle",
        help="solve tasks with the CP-SAT oracle and compare with the file's optimal cost",
        description="Solve every task of a reference (a .jsonl file, canonical, seed:N, ...) with the "
                    "full-information oracle (SPEC §3) and compare with the optimal.cost the file "
                    "records. Every disagreement is listed with its reason.",
    )
    p.add_argument("tasks", metavar="REF", help="tasks to solve: PATH.jsonl, PATH.jsonl:ID, canonical, seed:7, ...")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                   help="longest the solver may take on one task (default 60)")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from lab.oracle_check import OracleCheckError, check_tasks, load_tasks

    with one_line(OracleCheckError):
        tasks = load_tasks(args.tasks)
        with Progress(TextColumn("solving"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      transient=True, disable=len(tasks) < 5 or not sys.stderr.isatty()) as progress:
            bar = progress.add_task("oracle", total=len(tasks))
            done = check_tasks(tasks, time_limit=args.time_limit, advance=lambda: progress.advance(bar))
    rows, agree, disagree = done.rows, done.agree, done.disagree
    if args.json:
        json.dump({"tasks": rows, "agree": agree, "disagree": disagree}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console

    from calbench_tui.safe_text import safe_table

    table = safe_table(title=f"Oracle vs file: {agree} agree, {disagree} disagree, {len(rows) - agree - disagree} unknown")
    for col in ("task", "ours", "file", "agent costs", "feasible fraction", "difficulty", "seconds", "note"):
        table.add_column(col)
    for r in rows:
        style = "red" if r["status"] == "disagree" else None
        table.add_row(r["task_id"], str(r["optimal_cost"]), str(r["file_optimal_cost"]), str(r["agent_costs"]),
                      f"{r['feasible_fraction']:.4g}", r["difficulty"], f"{r['seconds']:.3f}", r["reason"], style=style)
    Console().print(table)
    return 0
