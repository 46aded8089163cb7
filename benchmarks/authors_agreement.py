"""Measure: do our scripted protocols play the authors' 108 tasks as the authors' harness does?

Run:  .venv/bin/python benchmarks/authors_agreement.py HARNESS [--only imap,sdmap@3] [--limit N]
                                                               [--json OUT] [--diff]

``HARNESS`` is an unpacked copy of the paper authors' harness with its own virtual
environment (the folder holding ``games/calendar`` and ``.venv``).  Nothing of it is
imported here: its own interpreter plays their games in a child process (a short driver
that calls their ``CalendarGame``), and the task rows both sides play are read from the
harness's own ``games/calendar/tasks/uniform_full.jsonl`` (``--tasks`` to change).

The cases (one protocol on every seat, the harness's settings of its DSM experiment file:
15 turns per round, 3 decision retries, DMs, no fallback):

=================  ====================================  ===========================
case               ours                                  theirs (agent type)
=================  ====================================  ===========================
imap               ``imap``                              ``imap``
sdmap@2/3/5/15     ``sdmap --fidelity paper --max-turns N``  ``sd``, ``max_turns_per_round`` N
dsm-welfare        ``dsm-welfare --fidelity paper``      ``paper_dsm``
dsm-private        ``dsm-private --fidelity paper``      ``private_dsm``
=================  ====================================  ===========================

For every task it compares, round by round, what both traces record: the outcome
(coordinated or not), each participant's slot (``per_agent_slot``), the number of
messages, the speaking order (and so the first speaker), the rejected batches; and the
final calendars.  It prints one line per case: how many of the tasks agree in each
column, coordination on both sides, and the first speakers over the five-agent rounds;
``--diff`` lists the tasks that differ.  Exit status 1 if any task differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.events import MESSAGE_EVENTS  # noqa: E402
from engine.game import GameConfig, run_game  # noqa: E402
from engine.model import Task  # noqa: E402
from personas.registry import make_personas  # noqa: E402

#: case name -> (our persona, our fidelity, their agent type, turns per round)
CASES: dict[str, tuple[str, str, str, int]] = {
    "imap": ("imap", "ours", "imap", 15),
    "sdmap@2": ("sdmap", "paper", "sd", 2),
    "sdmap@3": ("sdmap", "paper", "sd", 3),
    "sdmap@5": ("sdmap", "paper", "sd", 5),
    "sdmap@15": ("sdmap", "paper", "sd", 15),
    "dsm-welfare": ("dsm-welfare", "paper", "paper_dsm", 15),
    "dsm-private": ("dsm-private", "paper", "private_dsm", 15),
}

#: the event types both traces share that the comparison reads
KEPT = ("round_start", "resolution", "batch_rejected", *MESSAGE_EVENTS,
        "participant_groupchat_sent", "all_groupchat_sent")

#: The child's program, run by the harness's interpreter in its ``games/calendar`` folder:
#: argv = tasks file, agent type, turns per round, task ids...; one JSON line per game
#: (the kept events, the final calendars).  The settings are those of the harness's DSM
#: experiment file.
DRIVER = r"""
import json, sys
import calendar_game  # registers the game
from calendar_game.game import CalendarGame
tasks_path, agent, turns, kept = sys.argv[1], sys.argv[2], int(sys.argv[3]), set(sys.argv[4].split(","))
rows = {}
with open(tasks_path) as fh:
    for line in fh:
        if line.strip():
            row = json.loads(line)
            rows[row["task_id"]] = row
for task_id in sys.argv[5:]:
    row = rows[task_id]
    p = row["params"]
    n = len(row["calendars"])
    config = dict(num_agents=n, seed=row["seed"], num_slots=len(row["calendars"][0]),
                  num_meetings=len(row["meetings"]), num_participants=p.get("subset_size"),
                  max_turns_per_round=turns, dm_cap=1000000, decision_retries=3, enable_fallback=False,
                  task_path=tasks_path, task_id=task_id, dsm_num_proposals=12, dsm_cascade_depth=2,
                  dsm_displacement_targets=4, dsm_exhaustive_search=True, dsm_stop_on_perfect=True,
                  agents=[{"type": agent} for _ in range(n)])
    trace = CalendarGame(config).run().model_dump(mode="json")
    events = [{"type": e["type"], "data": {k: v for k, v in e["data"].items() if k != "content"}}
              for e in trace["events"] if e["type"] in kept]
    print(json.dumps({"task_id": task_id, "events": events,
                      "calendars": trace["final_state"]["calendars"]}), flush=True)
"""


class HarnessMissing(Exception):
    pass


def harness_paths(harness: Path) -> tuple[Path, Path]:
    """(their interpreter, their ``games/calendar`` folder), or HarnessMissing saying what is absent."""
    game_dir = harness / "games" / "calendar"
    python = harness / ".venv" / "bin" / "python"
    if not (game_dir / "calendar_game").is_dir():
        raise HarnessMissing(f"no authors' harness at {harness} (expected games/calendar/calendar_game in it)")
    if not python.exists():
        raise HarnessMissing(f"the authors' harness at {harness} has no virtual environment (.venv/bin/python)")
    return python, game_dir


def summary(task_id: str, events: list[dict], calendars: list) -> dict:
    """What the comparison reads of one game, from either side's trace."""
    rounds: list[dict] = []
    for e in events:
        t, d = e["type"], e["data"]
        if t == "round_start":
            rounds.append({"meeting": d["meeting"]["id"], "order": list(d["meeting"]["speaker_order"]),
                           "messages": 0, "rejected": 0})
        elif not rounds:
            continue
        elif t == "resolution":
            rounds[-1]["slots"] = {str(k): v for k, v in d["per_agent_slot"].items()}
            rounds[-1]["coordinated"] = bool(d["coordinated"])
        elif t == "batch_rejected":
            rounds[-1]["rejected"] += 1
        elif t.endswith("_sent"):
            rounds[-1]["messages"] += 1
    return {"task_id": task_id, "rounds": rounds, "calendars": calendars}


def run_theirs(python: Path, game_dir: Path, tasks_path: Path, agent: str, turns: int,
               task_ids: list[str]) -> dict[str, dict]:
    proc = subprocess.run([str(python), "-c", DRIVER, str(tasks_path.resolve()), agent, str(turns), ",".join(KEPT),
                           *task_ids], cwd=game_dir, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise SystemExit(f"the authors' harness failed on {agent}: {tail[0]}")
    out = {}
    for line in proc.stdout.splitlines():
        g = json.loads(line)
        out[g["task_id"]] = summary(g["task_id"], g["events"], g["calendars"])
    return out


def run_ours(tasks: list[Task], persona: str, fidelity: str, turns: int) -> dict[str, dict]:
    cfg = GameConfig(max_turns_per_round=turns, deterministic=True)

    async def play() -> dict[str, dict]:
        out = {}
        for t in tasks:
            tr = (await run_game(t, make_personas(persona, t.num_agents, fidelity=fidelity), cfg)).trace
            out[t.task_id] = summary(t.task_id, tr["events"], tr["final_state"]["calendars"])
        return out

    return asyncio.run(play())


#: column -> what of a game it compares
COLUMNS = {
    "outcomes": lambda g: [r.get("coordinated") for r in g["rounds"]],
    "slots": lambda g: [r.get("slots") for r in g["rounds"]],
    "calendars": lambda g: g["calendars"],
    "messages": lambda g: [r["messages"] for r in g["rounds"]],
    "orders": lambda g: [r["order"] for r in g["rounds"]],
    "rejected": lambda g: [r["rejected"] for r in g["rounds"]],
}


def compare(case: str, ours: dict[str, dict], theirs: dict[str, dict]) -> dict:
    ids = list(ours)
    differ = {col: [t for t in ids if f(ours[t]) != f(theirs[t])] for col, f in COLUMNS.items()}

    def coord(side: dict[str, dict]) -> float:
        rs = [r for g in side.values() for r in g["rounds"]]
        return 100.0 * sum(1 for r in rs if r.get("coordinated")) / max(1, len(rs))

    def firsts(side: dict[str, dict]) -> list[int]:
        c = Counter(r["order"][0] for g in side.values() for r in g["rounds"]
                    if len(g["calendars"]) == 5)
        return [c.get(a, 0) for a in range(5)]

    return {"case": case, "tasks": len(ids), "differ": differ,
            "coord_ours": coord(ours), "coord_theirs": coord(theirs),
            "messages_ours": sum(r["messages"] for g in ours.values() for r in g["rounds"]),
            "messages_theirs": sum(r["messages"] for g in theirs.values() for r in g["rounds"]),
            "rejected_ours": sum(r["rejected"] for g in ours.values() for r in g["rounds"]),
            "rejected_theirs": sum(r["rejected"] for g in theirs.values() for r in g["rounds"]),
            "first_ours": firsts(ours), "first_theirs": firsts(theirs)}


def table(results: list[dict]) -> str:
    head = ("| case | tasks identical: outcomes / slots / calendars / messages / orders / rejected "
            "| coord. ours / theirs | messages ours / theirs | rejected batches ours / theirs "
            "| first speakers (5-agent rounds) ours ; theirs |")
    lines = [head, "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        n = r["tasks"]
        same = " / ".join(f"{n - len(r['differ'][c])}" for c in COLUMNS)
        lines.append(f"| {r['case']} | {same} (of {n}) | {r['coord_ours']:.1f} / {r['coord_theirs']:.1f} "
                     f"| {r['messages_ours']} / {r['messages_theirs']} "
                     f"| {r['rejected_ours']} / {r['rejected_theirs']} "
                     f"| {'/'.join(map(str, r['first_ours']))} ; {'/'.join(map(str, r['first_theirs']))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("harness", type=Path, help="the authors' unpacked harness (holding games/calendar and .venv)")
    ap.add_argument("--tasks", type=Path, default=None,
                    help="task rows (default: the harness's games/calendar/tasks/uniform_full.jsonl)")
    ap.add_argument("--only", default=",".join(CASES), help=f"comma list of cases (default all: {', '.join(CASES)})")
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    ap.add_argument("--json", type=Path, default=None, help="also write the per-case results (with the differing "
                                                          "task ids) to this file")
    ap.add_argument("--diff", action="store_true", help="list the tasks that differ, per case and column")
    args = ap.parse_args(argv)
    try:
        python, game_dir = harness_paths(args.harness)
    except HarnessMissing as exc:
        print(f"authors_agreement: {exc}", file=sys.stderr)
        return 2
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"authors_agreement: unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}",
              file=sys.stderr)
        return 2
    tasks_path = args.tasks or game_dir / "tasks" / "uniform_full.jsonl"
    if not tasks_path.is_file():
        print(f"authors_agreement: no task file at {tasks_path}", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in tasks_path.read_text().splitlines() if line.strip()]
    tasks = [Task.from_row(r) for r in rows][: args.limit]
    results = []
    for case in cases:
        persona, fidelity, agent, turns = CASES[case]
        theirs = run_theirs(python, game_dir, tasks_path, agent, turns, [t.task_id for t in tasks])
        ours = run_ours(tasks, persona, fidelity, turns)
        res = compare(case, ours, theirs)
        results.append(res)
        print(f"{case}: done", file=sys.stderr, flush=True)
        if args.diff:
            for col, ids in res["differ"].items():
                if ids:
                    shown = " ".join(i.split("_")[0] for i in ids[:20]) + (" ..." if len(ids) > 20 else "")
                    print(f"  {case} {col} differ on {len(ids)}: {shown}", file=sys.stderr)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if any(ids for r in results for ids in r["differ"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
