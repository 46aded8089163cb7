"""Benchmark: whole-process suite throughput of ``calbench run`` (games per second).

Run:  .venv/bin/python benchmarks/suite.py [--agents imap,sdmap] [--repeat 3] [--profile]
                                             [--concurrency K] [--tasks FILE.jsonl]

For each protocol this starts ``calbench run --tasks ../shared/compat/authors_uniform_full.jsonl
--agents X --json`` as a separate process with a fresh temporary database (so start-up,
task loading, the oracle, metrics and saving every trace to SQLite are all counted), checks
that every game was saved ``completed``, and prints games/s — wall clock and per CPU
second of the child — and the ratio to the authors' own harness on this machine
(IMAP ≈ 26, SD-MAP ≈ 27, DSM-Welfare ≈ 20, DSM-Private ≈ 25 games/s, start-up included).
The machine is shared and noisy: each figure is the best of ``--repeat`` runs.

``--profile`` also plays the suite in this process under cProfile (first protocol, one
process, its own temporary database) and prints the top 15 functions by own time and by
cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AUTHORS_FILE = ROOT.parent / "shared" / "compat" / "authors_uniform_full.jsonl"
# The authors' harness, whole process, 108 uniform tasks, this machine (games/s).
AUTHORS_RATE = {"imap": 26.0, "sdmap": 27.0, "dsm-welfare": 20.0, "dsm-private": 25.0}
GOAL_RATIO = 4.0  # and >= 100 games/s for IMAP


def run_once(tasks: Path, agents: str, concurrency: int | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="calbench-bench-") as tmp:
        db = os.path.join(tmp, "suite.db")
        cmd = [sys.executable, "-m", "calbench_tui.cli", "run", "--tasks", str(tasks), "--agents", agents,
               "--db", db, "--json"]
        if concurrency:
            cmd += ["--concurrency", str(concurrency)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"calbench run --agents {agents} failed ({proc.returncode}):\n{proc.stderr}")
        doc = json.loads(proc.stdout)
        con = sqlite3.connect(db)
        try:
            saved = dict(con.execute("SELECT status, COUNT(*) FROM games GROUP BY status").fetchall())
            events = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        finally:
            con.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    games = len(doc["games"])
    if saved.get("completed", 0) != games:
        raise SystemExit(f"{agents}: {games} games reported but the database holds {saved}")
    return {"games": games, "wall": wall, "cpu": cpu, "events": events, "summary": doc["summary"]}


def profile(tasks_path: Path, agents: str) -> None:
    import cProfile
    import pstats

    from lab import runner
    from engine.taskref import resolve_tasks

    tasks = resolve_tasks(str(tasks_path))
    with tempfile.TemporaryDirectory(prefix="calbench-prof-") as tmp:
        prof = cProfile.Profile()
        prof.enable()
        runner.run_cli_suite(tasks, agents, db=os.path.join(tmp, "p.db"), settings=runner.RunSettings())
        prof.disable()
    st = pstats.Stats(prof)
    print(f"\ncProfile, {agents}, {len(tasks)} games in one process — top 15 by own time:")
    st.sort_stats("tottime").print_stats(15)
    print("top 15 by cumulative time:")
    st.sort_stats("cumulative").print_stats(15)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default="imap,sdmap,dsm-welfare,dsm-private",
                    help="comma list of protocols to time (each runs as its own suite)")
    ap.add_argument("--tasks", type=Path, default=AUTHORS_FILE)
    ap.add_argument("--repeat", type=int, default=3, help="runs per protocol; the best is reported")
    ap.add_argument("--concurrency", type=int, default=None, help="passed to calbench run")
    ap.add_argument("--profile", action="store_true", help="also profile one in-process run")
    args = ap.parse_args()
    if not args.tasks.exists():
        print(f"task file {args.tasks} not found", file=sys.stderr)
        return 1
    print(f"calbench run, whole process, fresh SQLite database, {args.tasks.name}, "
          f"{os.cpu_count()} CPUs, best of {args.repeat}"
          + (f", --concurrency {args.concurrency}" if args.concurrency else ""))
    print(f"{'agents':<12} {'games':>5} {'wall s':>7} {'games/s':>8} {'cpu s':>6} {'games/cpu-s':>11} "
          f"{'authors':>7} {'ratio':>6}  ok?")
    ok_all = True
    for agents in [a.strip() for a in args.agents.split(",") if a.strip()]:
        runs = [run_once(args.tasks, agents, args.concurrency) for _ in range(max(1, args.repeat))]
        best = min(runs, key=lambda r: r["wall"])
        rate = best["games"] / best["wall"]
        cpu_rate = best["games"] / best["cpu"] if best["cpu"] else float("nan")
        ref = AUTHORS_RATE.get(agents)
        ratio = rate / ref if ref else float("nan")
        ok = ref is not None and ratio >= GOAL_RATIO and (agents != "imap" or rate >= 100)
        ok_all &= ok
        print(f"{agents:<12} {best['games']:>5} {best['wall']:>7.2f} {rate:>8.1f} {best['cpu']:>6.2f} "
              f"{cpu_rate:>11.1f} {ref or float('nan'):>7.0f} {ratio:>5.1f}x  {'yes' if ok else 'NO'}"
              f"   (all runs: {', '.join('%.2fs' % r['wall'] for r in runs)})")
    print(f"goal: >= {GOAL_RATIO:.0f}x the authors' rate for every protocol, and >= 100 games/s for IMAP: "
          + ("met" if ok_all else "not met"))
    if args.profile:
        profile(args.tasks, args.agents.split(",")[0].strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
