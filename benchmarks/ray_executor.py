"""Benchmark: the Ray executor's steady-state overhead against the local executor (games/s).

Run:  .venv/bin/python benchmarks/ray_executor.py [--agents imap] [--games 1000] [--cpus 2]

``benchmarks/suite.py --run-args "--executor ray"`` times the whole command, which starts a
Ray instance each time (several seconds on this machine).  A cluster is started once and
serves many runs, so this script starts one local Ray instance (``--cpus`` CPUs, no
dashboard), plays one untimed warm-up suite (Ray starts its worker processes), then times
the same suites through ``lab.runner.run_cli_suite`` with the local executor (one process
per CPU, as ``calbench run`` does) and with the Ray executor, each into a fresh database,
the oracle cache cold (a fresh folder per run).  It checks that both saved the same games
and prints games/s and the ratio.  Ray is shut down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AUTHORS_FILE = ROOT.parent / "shared" / "compat" / "authors_uniform_full.jsonl"


def suite_rows(path: Path, games: int | None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not games:
        return rows
    out = []
    for i in range(games):
        row = dict(rows[i % len(rows)])
        if i >= len(rows):
            row["task_id"] = f"{row.get('task_id', i % len(rows))}~{i // len(rows)}"
        out.append(row)
    return out


def timed(tasks, agents: str, executor) -> tuple[float, list[tuple]]:
    from lab import runner

    with tempfile.TemporaryDirectory(prefix="calbench-raybench-") as tmp:
        os.environ["CALBENCH_CACHE"] = os.path.join(tmp, "cache")
        db = os.path.join(tmp, "s.db")
        settings = runner.RunSettings(deterministic=True)
        t0 = time.perf_counter()
        runner.run_cli_suite(tasks, agents, db=db, settings=settings, executor=executor)
        wall = time.perf_counter() - t0
        con = sqlite3.connect(db)
        rows = con.execute("SELECT game_id, status, coordination, excess_cost FROM games ORDER BY game_id").fetchall()
        con.close()
    return wall, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="imap")
    ap.add_argument("--tasks", type=Path, default=AUTHORS_FILE)
    ap.add_argument("--games", type=int, nargs="*", default=[0, 1000], help="suite sizes (0: the file as it is)")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    try:
        import ray
    except ImportError:
        print("Ray is not installed: pip install 'calbench[ray]'", file=sys.stderr)
        return 1
    from engine.model import Task
    from lab.executors import RayOptions, process_executor, ray_executor

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        executor = ray_executor(RayOptions())
        warm = [Task.from_row(r) for r in suite_rows(args.tasks, None)][:32]
        timed(warm, args.agents, executor)  # untimed: Ray starts its worker processes
        print(f"{args.agents}, {args.cpus} CPUs, deterministic, oracle cache cold, best of {args.repeat}")
        print(f"{'games':>6} {'local s':>8} {'local g/s':>10} {'ray s':>7} {'ray g/s':>8} {'ray/local':>9}  same games?")
        for n in args.games:
            tasks = [Task.from_row(r) for r in suite_rows(args.tasks, n or None)]
            local = [timed(tasks, args.agents, process_executor(args.cpus)) for _ in range(args.repeat)]
            remote = [timed(tasks, args.agents, executor) for _ in range(args.repeat)]
            lw, rw = min(w for w, _ in local), min(w for w, _ in remote)
            same = local[0][1] == remote[0][1]
            print(f"{len(tasks):>6} {lw:>8.2f} {len(tasks) / lw:>10.1f} {rw:>7.2f} {len(tasks) / rw:>8.1f} "
                  f"{lw / rw:>8.2f}x  {'yes' if same else 'NO'}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
