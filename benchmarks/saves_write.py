"""Benchmark: how fast games and their events reach the save database.

Run:  .venv/bin/python benchmarks/saves_write.py [--games N] [--db PATH]

Plays real games (generated 5-seat scenarios, plan-following test personas, as in the
tests) three ways, in one run, and prints games/s and events/s for each:

* no store at all (the game loop alone, the ceiling);
* through ``durable=False`` sinks (headless suites: one commit per phase);
* through ``durable=True`` sinks (interactive games: one commit per event);
* both again with 8 games at a time sharing the store;
* the store alone: a recorded game's events written again and again (its own capacity).

Each stored game is created, streamed and finished exactly as a runner does it. The
machine is shared and noisy: read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests" / "engine"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from doubles import PlanPersona  # noqa: E402
from engine.events import ListSink  # noqa: E402
from engine.game import GameConfig, run_game  # noqa: E402
from engine.generate import generate_scenario  # noqa: E402
from engine.oracle import solve  # noqa: E402
from saves.store import Store  # noqa: E402


async def store_only(n_games: int, db: str, durable: bool, trace) -> tuple[float, int]:
    """The store's own capacity: one recorded game's events written again and again, no game loop."""
    store = await Store.open(db)
    t0 = time.perf_counter()
    for i in range(n_games):
        gid = f"replay-{durable}-{i}"
        await store.create_game(gid, task_row=trace["task"], config={}, agents="x", settings_key="bench",
                                started_at="")
        sink = store.sink(gid, durable=durable)
        for ev in trace["events"]:
            await sink.emit(ev)
        await sink.aclose()
        await store.finish_game(gid, trace)
    dt = time.perf_counter() - t0
    await store.close()
    return dt, n_games * len(trace["events"])


async def bench(n_games: int, db: str | None, durable: bool | None, tasks, plans, concurrency: int = 1):
    store = await Store.open(db) if durable is not None else None
    events = 0
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        nonlocal events
        task, plan = tasks[i % len(tasks)], plans[i % len(tasks)]
        seats = [PlanPersona(plan) for _ in range(task.num_agents)]
        gid = f"bench-{durable}-{concurrency}-{i}"
        async with sem:
            if store is None:
                res = await run_game(task, seats, GameConfig(), ListSink(), game_id=gid)
            else:
                await store.create_game(gid, task_row=task.row, config={},
                                        agents=",".join(["test"] * task.num_agents), settings_key="bench",
                                        started_at="")
                sink = store.sink(gid, durable=durable)
                res = await run_game(task, seats, GameConfig(), sink, game_id=gid)
                await sink.aclose()
                await store.finish_game(gid, res.trace)
        events += len(res.trace["events"])

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n_games)))
    dt = time.perf_counter() - t0
    if store is not None:
        assert await store.integrity_check() == "ok"
        await store.close()
    return dt, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=400, help="games per measurement (durable: a quarter)")
    ap.add_argument("--db", default=None, help="database file (default: a fresh temporary file)")
    args = ap.parse_args()
    tasks = [generate_scenario(seed) for seed in range(1, 41)]
    plans = [solve(t).assignments for t in tasks]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or os.path.join(tmp, "bench.db")
        asyncio.run(bench(len(tasks), None, None, tasks, plans))  # warm the per-task caches
        rows = []
        for label, durable, n, conc in (("no store (game loop only)", None, args.games, 1),
                                        ("durable=False (bulk)", False, args.games, 1),
                                        ("durable=False, 8 at a time", False, args.games, 8),
                                        ("durable=True (per event)", True, max(1, args.games // 4), 1),
                                        ("durable=True, 8 at a time", True, max(1, args.games // 4), 8)):
            dt, ev = asyncio.run(bench(n, db, durable, tasks, plans, conc))
            rows.append((label, n / dt, ev / dt, ev / n))
        seats = [PlanPersona(plans[0]) for _ in range(tasks[0].num_agents)]
        trace = asyncio.run(run_game(tasks[0], seats, GameConfig())).trace
        for label, durable, n in (("store only, durable=False", False, args.games),
                                  ("store only, durable=True", True, max(1, args.games // 4))):
            dt, ev = asyncio.run(store_only(n, db, durable, trace))
            rows.append((label, n / dt, ev / dt, ev / n))
    base = rows[0][1]
    print(f"{'mode':28} {'games/s':>9} {'events/s':>10} {'events/game':>12} {'vs loop':>8}")
    for label, gps, eps, epg in rows:
        print(f"{label:28} {gps:9.0f} {eps:10.0f} {epg:12.0f} {gps / base:8.2f}")


if __name__ == "__main__":
    main()
