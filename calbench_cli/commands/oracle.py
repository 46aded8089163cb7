"""``calbench oracle``: solve every task of a file and compare with the file's optimum."""

from __future__ import annotations

import json
import sys
import time

from . import UserError


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


def check_task(task) -> dict:
    from engine.oracle import difficulty_from_fraction, feasible_fraction, solve

    t0 = time.perf_counter()
    res = solve(task)
    frac = feasible_fraction(task)
    seconds = time.perf_counter() - t0
    file_cost = (task.row.get("optimal") or {}).get("cost")
    if file_cost is None:
        status, reason = "unknown", "the file records no optimal.cost"
    elif not res.feasible:
        status = "disagree"
        reason = ("no schedule fits every agent's errands (our exact errand-capacity constraint binds; "
                  f"the relaxation without it costs {res.relaxed_cost})" if res.capacity_binds
                  else "no feasible schedule exists")
    elif res.cost == file_cost:
        status, reason = "agree", ""
    elif res.capacity_binds:
        status = "disagree"
        reason = (f"our exact errand-capacity constraint binds: without it the optimum is {res.relaxed_cost}, "
                  "but that schedule leaves some displaced errand nowhere to go")
    else:
        status = "disagree"
        reason = ("our optimum is lower than the file's" if res.cost < file_cost else "our optimum is higher than the file's")
    return {
        "task_id": task.task_id,
        "optimal_cost": res.cost if res.feasible else None,
        "file_optimal_cost": file_cost,
        "agent_costs": list(res.agent_costs) if res.feasible else None,
        "feasible_fraction": frac.value,
        "feasible_fraction_exact": frac.exact,
        "feasible_fraction_interval": [frac.low, frac.high],
        "difficulty": difficulty_from_fraction(frac.value),
        "seconds": round(seconds, 4),
        "status": status,
        "reason": reason,
    }


def handle(args) -> int:
    from engine.model import TaskError
    from engine.taskref import TaskRefError, resolve_tasks

    try:
        tasks = resolve_tasks(args.tasks)
    except (TaskRefError, TaskError, OSError) as exc:
        raise UserError(str(exc)) from None
    rows = []
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("solving"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True, disable=len(tasks) < 5 or not sys.stderr.isatty()) as progress:
        bar = progress.add_task("oracle", total=len(tasks))
        from engine import oracle

        if not args.time_limit > 0:
            raise UserError("--time-limit must be a positive number of seconds")
        old = oracle.set_time_limit(args.time_limit)
        try:
            for task in tasks:
                try:
                    rows.append(check_task(task))
                except oracle.OracleTimeout:
                    raise UserError(f"task {task.task_id}: the oracle did not solve it within "
                                    f"{args.time_limit:g} s; give a longer --time-limit") from None
                progress.advance(bar)
        finally:
            oracle.set_time_limit(old)
    agree = sum(r["status"] == "agree" for r in rows)
    disagree = sum(r["status"] == "disagree" for r in rows)
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
