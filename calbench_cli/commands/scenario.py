"""``calbench scenario``: generate (or look up) one task row and show it."""

from __future__ import annotations

import argparse
import json
import sys

from . import UserError


def _number_or_list(kind):
    def parse(text: str):
        try:
            vals = [kind(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__} or a comma list, got {text!r}") from None
        return vals[0] if len(vals) == 1 else vals
    return parse


def register(sub) -> None:
    p = sub.add_parser(
        "scenario",
        help="generate one scenario (or show a task) as a task row",
        description="Generate one scenario from a seed (SPEC §2), or look up a task by reference, "
                    "and print its task row: a readable summary, or the JSON row with --json.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--seed", type=int, default=None, help="generate from this seed (default 0)")
    src.add_argument("--task", metavar="REF", help="show an existing task: canonical:7, seed:7, FILE.jsonl:ID, ...")
    p.add_argument("--agents", type=int, default=5, help="number of agents N (default 5)")
    p.add_argument("--slots", type=int, default=16, help="calendar slots S (default 16)")
    p.add_argument("--meetings", type=int, default=5, help="incoming meetings M (default 5)")
    p.add_argument("--participants", type=int, default=3, help="participants per meeting (default 3)")
    p.add_argument("--density", type=_number_or_list(float), default=0.8,
                   help="errand density, one value or a comma list per agent (default 0.8)")
    p.add_argument("--blocked", type=_number_or_list(int), default=4,
                   help="blocked errands per agent, one value or a comma list (default 4)")
    p.add_argument("--cost", choices=["uniform", "varied"], default="uniform", help="cost setting (default uniform)")
    p.add_argument("--json", action="store_true", help="print the task row as one JSON line")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                   help="longest the oracle may take to solve a generated scenario (default 60); large "
                        "scenarios (many slots and meetings) can take far longer to solve exactly")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from engine import oracle
    from engine.model import TaskError

    if not args.time_limit > 0:
        raise UserError("--time-limit must be a positive number of seconds")
    old = oracle.set_time_limit(args.time_limit)
    try:
        return _handle(args)
    except oracle.OracleTimeout:
        raise UserError(f"the oracle did not solve this scenario within {args.time_limit:g} s "
                        f"({args.agents} agents, {args.slots} slots, {args.meetings} meetings); try a smaller "
                        "scenario or a longer --time-limit") from None
    except TaskError as exc:
        raise UserError(str(exc)) from None
    finally:
        oracle.set_time_limit(old)


def _handle(args) -> int:
    from engine.model import TaskError

    try:
        if args.task is not None:
            if not args.task.strip():
                raise UserError("--task needs a reference, e.g. canonical:7, seed:7 or FILE.jsonl:ID")
            from engine.taskref import TaskRefError, resolve_tasks

            try:
                tasks = resolve_tasks(args.task)
            except TaskRefError as exc:
                raise UserError(str(exc)) from None
            if len(tasks) != 1:
                raise UserError(f"--task {args.task!r} names {len(tasks)} tasks; name exactly one (e.g. canonical:7)")
            task = tasks[0]
        else:
            from engine.generate import generate_scenario

            task = generate_scenario(
                args.seed if args.seed is not None else 0, num_agents=args.agents, num_slots=args.slots,
                num_meetings=args.meetings, density=args.density, blocked=args.blocked, cost_mode=args.cost,
                participants_per_meeting=args.participants)
    except TaskError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(task.to_row()) + "\n")
        return 0
    print_summary(task)
    return 0


def print_summary(task) -> None:
    from rich.console import Console
    from rich.table import Table

    from engine.render import render_item

    row = task.row
    con = Console()
    cb = row.get("calbench") or {}
    opt = (row.get("optimal") or {}).get("cost")
    con.print(f"[bold]{task.task_id}[/]  seed={task.seed}  agents={task.num_agents}  slots={task.num_slots}  "
              f"meetings={len(task.meetings)}  cost={task.cost_mode} {list(task.cost_values)}")
    ff = (cb.get("oracle") or {}).get("feasible_fraction", row.get("difficulty_score"))
    ff_text = f"{ff:.4g}" if isinstance(ff, float) else ff  # the --json row keeps every digit
    con.print(f"difficulty={row.get('difficulty')}  feasible fraction={ff_text}  "
              f"optimal cost={opt}  greedy cost={(row.get('greedy') or {}).get('cost')}  "
              f"witness cost={(row.get('witness_solution') or {}).get('cost')}")
    mt = Table(title="Meetings", show_lines=False)
    for col in ("meeting", "participants", "speaker order", "optimal slot"):
        mt.add_column(col)
    assign = (row.get("optimal") or {}).get("assignments") or {}
    for m in task.meetings:
        mt.add_row(f"M{m.id}", str(list(m.participants)), str(list(m.speaker_order)), str(assign.get(str(m.id), "-")))
    con.print(mt)
    ct = Table(title="Calendars (initial)")
    ct.add_column("slot", justify="right")
    for a in range(task.num_agents):
        ct.add_column(f"agent {a}")
    for s in range(task.num_slots):
        ct.add_row(str(s), *[render_item(task.calendars[a][s]).replace("[FREE]", "·") for a in range(task.num_agents)])
    con.print(ct)
