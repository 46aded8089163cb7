"""Benchmark: where a scripted suite's CPU goes, stage by stage (issue 33's shares).

Run:  .venv/bin/python benchmarks/stages.py [--tasks FILE.jsonl] [--agents imap] [--rounds 3]

Plays every task of the file in this process through the same calls ``calbench run`` makes
for a batch game, in the same order, and charges the process CPU time (user + system, the
database thread included) of each call to its stage:

* ``start-up`` — a fresh interpreter importing every module a ``calbench run`` of the
  file had loaded by its end (listed once by an untimed run; a child process, its CPU from
  ``getrusage``);
* ``tasks`` — reading the task file (``engine.taskref.resolve_tasks``);
* ``seats + oracle`` — making the seats and putting the task's oracle answers in place
  (``lab.runner.make_seats``, ``prime_oracle``: a primed cache, as a rerun has);
* ``game`` — ``engine.game.play_game`` (renders left unwritten, as a batch save plays it);
* ``scoring`` — ``engine.scoring.score_played``; ``end`` — ``engine.game.end_game``;
* ``packing`` — ``lab.runner.prepared`` (checked, slimmed, compressed rows);
* ``saving`` — ``Store.write_games`` in bursts of 8, as the suite runner's saver does.

Then it runs ``calbench run --concurrency 1`` on the same file as a child process and
prints its CPU beside the sum: what the stages leave out (the session, the runner, the
progress and summary) is the difference.  One untimed round first; the collector set as
the suite runner sets it (``lab.runner.settled_gc``); medians of ``--rounds`` rounds.  Run it with
``PYTHONPATH`` set to another checkout to measure that one (before → after).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there is the one measured

from benchmarks.side_by_side import timed  # noqa: E402
from benchmarks.suite import AUTHORS_FILE  # noqa: E402

STAGES = ("start-up", "tasks", "seats + oracle", "game", "scoring", "end", "packing", "saving")
#: run as ``python -c``: ``calbench run ARGS``, then the names of the modules it loaded, to FILE
LIST_MODULES = ("import sys, json; from calbench_cli.cli import main; args = json.loads(sys.argv[1]); "
                "sys.argv = ['calbench', *args['run']]; code = main()\n"
                "open(args['out'], 'w').write('\\n'.join(sorted(sys.modules)))")
#: run as ``python -c``: import the modules named in FILE (``sys.argv[1]``), in their order
IMPORT_MODULES = ("import sys, importlib\n"
                  "for name in open(sys.argv[1]).read().split():\n"
                  "    try: importlib.import_module(name)\n"
                  "    except Exception: pass")


def _child_cpu(cmd: list[str], env: dict[str, str]) -> float:
    cpu, _, proc = timed(cmd, Path.cwd(), env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return cpu


async def _one_round(tasks_file: str, agents: str, db: str) -> dict[str, float]:
    from engine.game import end_game, play_game
    from engine.scoring import score_played
    from engine.taskref import resolve_tasks
    from lab.runner import RunSettings, make_seats, prepared, prime_oracle
    from lab.session import Session, saved_trace
    from saves.store import Store

    cpu = dict.fromkeys(STAGES[1:], 0.0)
    clock = time.process_time
    t = clock()
    tasks = resolve_tasks(tasks_file)
    cpu["tasks"] += clock() - t
    settings = RunSettings()
    config = settings.game_config()
    lazy = {"renders": False} if "renders" in inspect.signature(play_game).parameters else {}
    burst: list = []
    async with await Store.open(db) as store:
        for i, task in enumerate(tasks):
            t0 = clock()
            seats = make_seats(agents, task, settings)
            prime_oracle(task)
            t1 = clock()
            played = await play_game(task, seats, config, None, game_id=f"g{i}", **lazy)
            t2 = clock()
            scores = score_played(played)
            t3 = clock()
            result = await end_game(played, scores.final_state, scores.metrics, scores.versions)
            t4 = clock()
            session = Session(task, seats, config, f"g{i}", agents, "stages", {})
            burst.append(prepared(saved_trace(session, result.trace, "completed"), task))
            t5 = clock()
            if len(burst) == 8 or i == len(tasks) - 1:
                await store.write_games(burst)
                burst = []
            t6 = clock()
            for stage, dt in zip(STAGES[2:], (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
                cpu[stage] += dt
    cpu["games"] = len(tasks)
    return cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=str(AUTHORS_FILE))
    ap.add_argument("--agents", default="imap")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not Path(args.tasks).is_file() and ":" not in args.tasks and args.tasks != "canonical":
        raise SystemExit(f"no task file at {args.tasks}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rounds: list[dict[str, float]] = []
    whole: list[float] = []
    with tempfile.TemporaryDirectory(prefix="calbench-stages-") as tmp:
        env["CALBENCH_CACHE"] = os.environ.get("CALBENCH_CACHE") or os.path.join(tmp, "cache")
        os.environ["CALBENCH_CACHE"] = env["CALBENCH_CACHE"]
        run = [sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", args.tasks, "--agents", args.agents,
               "--concurrency", "1", "--json"]
        mods = os.path.join(tmp, "modules.txt")
        # untimed: primes the oracle cache and lists the modules a run loads
        _child_cpu([sys.executable, "-c", LIST_MODULES, json.dumps(
            {"run": run[3:] + ["--db", os.path.join(tmp, "warm.db")], "out": mods})], env)
        from lab.runner import settled_gc

        asyncio.run(_one_round(args.tasks, args.agents, os.path.join(tmp, "w.db")))  # untimed: lazy imports
        for k in range(args.rounds):
            with settled_gc():  # the collector as the suite runner sets it
                cpu = asyncio.run(_one_round(args.tasks, args.agents, os.path.join(tmp, f"s{k}.db")))
            cpu["start-up"] = _child_cpu([sys.executable, "-c", IMPORT_MODULES, mods], env)
            rounds.append(cpu)
            whole.append(_child_cpu(run + ["--db", os.path.join(tmp, f"r{k}.db")], env))
    games = int(rounds[0]["games"])
    med = {s: statistics.median(r[s] for r in rounds) for s in STAGES}
    total = sum(med.values())
    print(f"{args.agents} on {args.tasks}: {games} games, medians of {args.rounds} rounds, CPU seconds")
    print(f"{'stage':<16}{'CPU s':>8}{'ms/game':>9}{'share':>8}")
    for s in STAGES:
        per = "" if s == "start-up" else f"{1000 * med[s] / games:9.2f}"
        print(f"{s:<16}{med[s]:8.3f}{per:>9}{100 * med[s] / total:7.1f}%")
    run_cpu = statistics.median(whole)
    print(f"{'sum of stages':<16}{total:8.3f}")
    print(f"{'calbench run':<16}{run_cpu:8.3f}   (the runner, session and summary: {run_cpu - total:+.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
