"""``calbench scenario``: generate (or look up) one task row and show it (the task comes
from one call to :func:`lab.scenario.scenario_task`)."""

from __future__ import annotations

import argparse
import json
import sys

from ..lab_errors import one_line
from . import seed_arg


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
    src.add_argument("--seed", type=seed_arg, default=None, help="generate from this seed (default 0)")
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
    from lab.scenario import ScenarioError, scenario_task

    with one_line(ScenarioError):
        task = scenario_task(task=args.task, seed=args.seed, agents=args.agents, slots=args.slots,
                             meetings=args.meetings, participants=args.participants, density=args.density,
                             blocked=args.blocked, cost=args.cost, time_limit=args.time_limit)
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
    ff = (cb.get("oracle") or {}).get("feasible_fraction")
    scorer = row.get("difficulty_scorer")
    score = ""
    if ff is None and scorer in (None, "feasible_fraction"):
        ff = row.get("difficulty_score")
    elif ff is None:  # the row's difficulty_score is another scorer's (the authors': optimal_cost_per_participant_slot)
        score = f"  difficulty score={row.get('difficulty_score')} ({scorer})"
    if ff is None:
        from engine.oracle import feasible_fraction

        ff = feasible_fraction(task).value  # SPEC §3, on the initial calendars
    ff_text = f"{ff:.4g}" if isinstance(ff, float) else ff  # the --json row keeps every digit
    con.print(f"difficulty={row.get('difficulty')}{score}  feasible fraction={ff_text}  "
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
