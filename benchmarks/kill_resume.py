"""Kill a suite run and resume it at once; count the tasks completed more than once.

Issue 15 (1) and (2).  Reproduces, with real processes and a real SQLite file:

* ``kill``: ``calbench run --tasks BIG --agents imap --db X &``, SIGKILL (or SIGTERM) the
  parent after ``--after`` seconds, then ``calbench run ... --resume`` at once;
* ``twice``: two ``calbench run ... --concurrency 1 --resume`` of the same suite into the
  same database at the same time.

Prints the completed games, the distinct tasks among them and the tasks completed twice
or more (what ``report`` would count twice), and whether any worker outlived its parent.
Usage::

    python benchmarks/kill_resume.py kill  --tasks 720 --after 2 [--signal KILL|TERM]
    python benchmarks/kill_resume.py twice --tasks 90
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time


def big_suite(path: str, n: int) -> None:
    """``n`` tasks: the canonical suite's rows repeated under new task ids."""
    from engine.suite import canonical_task

    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            row = dict(canonical_task(i % 90).to_row())
            row["task_id"] = f"big-{i:04d}"
            fh.write(json.dumps(row) + "\n")


def run_cmd(tasks: str, db: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "calbench_cli.cli", "run", "--tasks", tasks, "--agents", "imap", "--db", db,
            *extra]


def children_of(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    stat = fh.read()
                if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        return stat[stat.rfind(")") + 2:].split()[0] not in ("Z", "X")
    except OSError:
        return False


def counts(db: str) -> dict[str, int]:
    con = sqlite3.connect(db, timeout=30)
    try:
        rows = con.execute("SELECT task_id, COUNT(*) FROM games WHERE status = 'completed' GROUP BY task_id").fetchall()
    finally:
        con.close()
    return {"completed_games": sum(c for _, c in rows), "distinct_tasks": len(rows),
            "tasks_completed_twice": sum(1 for _, c in rows if c > 1)}


def kill_and_resume(n: int, after: float, sig: str, workdir: str) -> dict:
    tasks, db = os.path.join(workdir, "big.jsonl"), os.path.join(workdir, "x.db")
    big_suite(tasks, n)
    first = subprocess.Popen(run_cmd(tasks, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(after)
    workers = children_of(first.pid)
    first.send_signal(getattr(signal, f"SIG{sig}"))
    first.wait()
    t_kill = time.monotonic()
    time.sleep(0.3)  # what a user typing the next command gives them at most
    orphans_after_kill = [w for w in workers if alive(w)]
    resume = subprocess.run(run_cmd(tasks, db, "--resume"), capture_output=True, text=True)
    # wait for any orphan of the first run to finish (they hang for a while on main)
    deadline = time.monotonic() + 120
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [w for w in workers if alive(w)]
    for w in left:  # our own processes, by id
        os.kill(w, signal.SIGKILL)
    return {"tasks": n, "killed_after_s": after, "signal": sig, "workers": len(workers),
            "workers_alive_0.3s_after_parent_died": len(orphans_after_kill),
            "orphans_lived_s": round(time.monotonic() - t_kill, 1) if orphans_after_kill else 0.0,
            "resume_exit": resume.returncode, "resume_said": [line for line in resume.stderr.splitlines()
                                                              if "resume" in line.lower()][:3],
            **counts(db)}


def twice(n: int, workdir: str) -> dict:
    tasks, db = os.path.join(workdir, "big.jsonl"), os.path.join(workdir, "x.db")
    big_suite(tasks, n)
    cmd = run_cmd(tasks, db, "--concurrency", "1", "--resume")
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ea, eb = a.communicate()[1], b.communicate()[1]
    return {"tasks": n, "exit_codes": [a.returncode, b.returncode],
            "said": [line for line in (ea + eb).splitlines() if "another run" in line or "resume" in line][:4],
            **counts(db)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("kill", "twice"))
    ap.add_argument("--tasks", type=int, default=720)
    ap.add_argument("--after", type=float, default=2.0)
    ap.add_argument("--signal", default="KILL", choices=("KILL", "TERM"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = kill_and_resume(args.tasks, args.after, args.signal, d) if args.mode == "kill" else twice(args.tasks, d)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
