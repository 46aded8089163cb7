"""Benchmark: oracle solve time and feasible-fraction time per task.

Run:  .venv/bin/python benchmarks/oracle.py [--quick]

Scenarios:
* the authors' 108 uniform task rows (``../shared/compat/authors_uniform_full.jsonl``),
  if present — also reports how many optimal costs agree with theirs;
* randomly generated bigger tasks at N=20/S=48/M=20 and N=50/S=96/M=50 (density 0.6,
  3 participants per meeting, witness slots kept feasible, varied costs), built here by
  a small seeded generator so the benchmark does not depend on ``engine.generate``.

Prints, per scenario: oracle solve time per task (mean/median ms, and which exact
solver ran), the rate in tasks per second, the feasible-fraction time, and ratios
(CP-SAT reference vs the default path).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine import oracle
from engine.model import Task

AUTHORS_FILE = ROOT.parent / "shared" / "compat" / "authors_uniform_full.jsonl"


def make_row(seed: int, n: int, s: int, m: int, *, density: float = 0.6, p: int = 3,
             blocked: int | None = None, cost_values: tuple[int, ...] = (1, 10, 100)) -> dict:
    """A task row built backward from a witness schedule (SPEC §2, simplified)."""
    rng = random.Random(seed)
    blocked = max(1, s // 8) if blocked is None else blocked
    meetings, witness = [], {}
    busy = [set() for _ in range(n)]  # witness slots per agent
    for k in range(m):
        parts = sorted(rng.sample(range(n), p))
        choices = [t for t in range(s) if all(t not in busy[a] for a in parts)]
        t = rng.choice(choices)
        for a in parts:
            busy[a].add(t)
        witness[k + 1] = t
        meetings.append({"id": k + 1, "participants": parts, "cost": 1, "duration": 1})
    cals, eid = [], 0
    for a in range(n):
        cal: list = [None] * s
        wslots = sorted(busy[a])
        others = [t for t in range(s) if t not in busy[a]]
        rng.shuffle(others)
        n_err = int(s * density)
        on_witness = wslots[:n_err]
        # one absorbing free slot per errand on a witness slot
        n_free_needed = len(on_witness)
        rest = others[n_free_needed:]
        extra = rest[: max(0, n_err - len(on_witness))]
        for t in on_witness + extra:
            eid += 1
            cal[t] = {"errand_id": eid, "cost": rng.choice(cost_values)}
        for t in extra[:blocked]:
            cal[t]["blocked"] = True
        cals.append(cal)
    return {
        "task_id": f"bench-{n}a-{s}s-{m}m-{seed}",
        "seed": seed,
        "params": {"total_agents": n, "subset_size": p, "num_slots": s, "num_meetings": m,
                   "density": density, "cost_values": list(cost_values), "duration": 1},
        "calendars": cals,
        "meetings": meetings,
        "witness_solution": {"assignments": {str(k): t for k, t in witness.items()}},
    }


def _timeit(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t0, out


def _ms(xs: list[float]) -> str:
    return f"mean {1000 * statistics.mean(xs):8.2f} ms  median {1000 * statistics.median(xs):8.2f} ms  max {1000 * max(xs):8.2f} ms"


def bench(name: str, tasks: list[Task], rows: list[dict] | None = None, *, reference: bool = True) -> None:
    print(f"\n== {name}: {len(tasks)} tasks ==")
    solve_t, ref_t, ff_t, solvers = [], [], [], {}
    agree = binds = disagree = 0
    ff_methods = {}
    for i, t in enumerate(tasks):
        dt, res = _timeit(oracle.solve, t)
        solve_t.append(dt)
        solvers[res.solver] = solvers.get(res.solver, 0) + 1
        if reference:
            dt_ref, ref = _timeit(oracle.solve, t, method="cpsat")
            ref_t.append(dt_ref)
            assert (ref.cost, ref.agent_costs, ref.assignments) == (res.cost, res.agent_costs, res.assignments), t.task_id
        dt, ff = _timeit(oracle.feasible_fraction, t)
        ff_t.append(dt)
        ff_methods[ff.method] = ff_methods.get(ff.method, 0) + 1
        if rows is not None:
            theirs = rows[i]["optimal"]["cost"]
            if res.cost == theirs:
                agree += 1
            elif res.capacity_binds:
                binds += 1
            else:
                disagree += 1
                print(f"  DISAGREE {t.task_id}: ours {res.cost} theirs {theirs}")
    print(f"  solve (default path, solvers {solvers}): {_ms(solve_t)}  -> {len(tasks) / sum(solve_t):8.1f} tasks/s")
    if ref_t:
        print(f"  solve (CP-SAT reference):               {_ms(ref_t)}  -> {len(tasks) / sum(ref_t):8.1f} tasks/s")
        print(f"  ratio CP-SAT / default (mean): {statistics.mean(ref_t) / statistics.mean(solve_t):6.2f}x")
    print(f"  feasible_fraction ({ff_methods}):     {_ms(ff_t)}  -> {len(tasks) / sum(ff_t):8.1f} tasks/s")
    if rows is not None:
        print(f"  authors' optimal.cost: agree {agree}, capacity binds {binds}, disagree {disagree}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer random tasks")
    args = ap.parse_args(argv)
    # warm up the lazy OR-Tools import so it is not charged to the first task
    warm = Task.from_row(make_row(0, 3, 8, 2))
    oracle.solve(warm, method="cpsat")

    if AUTHORS_FILE.exists():
        rows = [json.loads(line) for line in AUTHORS_FILE.read_text().splitlines() if line.strip()]
        bench("authors' uniform rows (N=2/5, S=16, M=5)", [Task.from_row(r) for r in rows], rows)
    else:
        print(f"(authors' file not found at {AUTHORS_FILE}; skipped)")

    n_small = 20 if args.quick else 50
    gen = [Task.from_row(make_row(1000 + i, 5, 16, 5, density=0.8)) for i in range(n_small)]
    bench("generated N=5/S=16/M=5 varied, density 0.8", gen)
    n_mid = 5 if args.quick else 20
    gen = [Task.from_row(make_row(2000 + i, 20, 48, 20)) for i in range(n_mid)]
    bench("generated N=20/S=48/M=20 varied, density 0.6", gen)
    n_big = 3 if args.quick else 10
    gen = [Task.from_row(make_row(3000 + i, 50, 96, 50)) for i in range(n_big)]
    bench("generated N=50/S=96/M=50 varied, density 0.6", gen)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
